"""What a benchmark reads of the machine and of its processes: the CPU of a process tree (those
it has reaped included), a peak RSS, the machine's idle and stolen shares between two moments,
and what machine it is."""

from __future__ import annotations

import contextlib
import os
import platform
import re
from pathlib import Path
from typing import Any


def stat_ticks(stat: Path, *, reaped: bool = False) -> tuple[int, int]:
    """(parent pid, user + system clock ticks) from a ``/proc/.../stat`` file; with ``reaped``,
    the ticks of the children it has waited for are included."""
    # The command name (field 2) may hold spaces and parentheses: split after it.
    fields = stat.read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return int(fields[1]), ticks


def under(pid: int, parents: dict[int, int]) -> set[int]:
    """``pid`` and every process under it, from each process's parent (``/proc/<pid>/stat``)."""
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        tree.update(children)
        frontier += children
    return tree


def tree_cpu_seconds(pid: int, *, reaped: bool = False) -> tuple[float, float]:
    """CPU seconds (user + system) used so far by ``pid`` and every process under it (workers):
    in all their threads, and in their main threads only (where the event loop runs).

    Far less noisy than requests per second on a shared machine: what a request costs the
    server, whoever else competes for the cores meanwhile. The event loop's share does not
    depend on how large the writer's batches grow under the load, the rest does. ``reaped``
    adds the CPU of children that have exited (a database server's short-lived workers).
    """
    parents: dict[int, int] = {}
    times: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            process = int(stat.parent.name)
            parents[process], times[process] = stat_ticks(stat, reaped=reaped)
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    tree = under(pid, parents)
    main = 0
    for process in tree:
        with contextlib.suppress(OSError, IndexError, ValueError):
            if b"multiprocessing" in Path(f"/proc/{process}/cmdline").read_bytes():
                continue  # the writer process (and its resource tracker): no event loop there
            main += stat_ticks(Path(f"/proc/{process}/task/{process}/stat"))[1]
    tick = os.sysconf("SC_CLK_TCK")
    return sum(times.get(process, 0) for process in tree) / tick, main / tick


def database_pid(url: str) -> int | None:
    """The postmaster's pid of the Postgres server holding ``url``, when it runs on this machine
    and its data directory is readable here (an embedded server); else None."""
    if not url.startswith("postgresql"):
        return None
    import psycopg

    with contextlib.suppress(psycopg.Error, OSError, ValueError, IndexError):
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        if row is not None:
            return int((Path(row[0]) / "postmaster.pid").read_text().split()[0])
    return None


def peak_rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


Ticks = tuple[int, int, int, int]  # all, idle, stolen, idle waiting for the disk


def machine_ticks() -> Ticks:
    """The machine's CPU ticks since boot from ``/proc/stat``: all, idle (idle and waiting for
    I/O), stolen (the hypervisor ran something else on this machine's cores), and the part of
    idle spent waiting for I/O."""
    fields = [int(field) for field in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return sum(fields), fields[3] + fields[4], fields[7], fields[4]


def _part(before: Ticks, after: Ticks, index: int) -> float:
    """Field ``index`` of two :func:`machine_ticks` as a share of all cores' time between them
    (0 when no tick passed)."""
    return (after[index] - before[index]) / max(1, after[0] - before[0])


def idle_share(before: Ticks, after: Ticks) -> float:
    """The share of all cores' time left idle between two :func:`machine_ticks`: when it is
    large, a closed-loop load (64 connections, each waiting for its answer) is bound by a
    request's latency, not by the cores."""
    return _part(before, after, 1)


def steal_share(before: Ticks, after: Ticks) -> float:
    """The share of all cores' time stolen by the hypervisor between two :func:`machine_ticks`:
    on a shared virtual machine the same code measured 27 and 37 s for one settle of a million
    within minutes; a figure taken while a few percent was stolen is not comparable with one
    taken at none."""
    return _part(before, after, 2)


def disk_wait_share(before: Ticks, after: Ticks) -> float:
    """The share of all cores' time left idle while some process waited for the disk, between
    two :func:`machine_ticks` (part of :func:`idle_share`): after a few settles of a million had
    written several GB, SQLite's (a) wrote 60 to 87 MB/s, waited up to 13% of the time, and its
    p99 went from 25-40 ms to 78-942 ms with the same code; a figure taken so is not the code's."""
    return _part(before, after, 3)


def disk_wait(figure: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    """The text ", disk wait 9% (echo 0%)" of a figure measured with it."""
    return _share("disk wait", "machine_disk_wait_share", figure, baseline)


def stolen(figure: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    """The text ", stolen 11% (echo 17%)" of a figure measured with the steal."""
    return _share("stolen", "machine_steal_share", figure, baseline)


def _share(label: str, key: str, figure: dict[str, Any], baseline: dict[str, Any] | None) -> str:
    """ ", <label> <share> (echo <share>)" from ``key`` of a figure and of its baseline; nothing
    for a results file written before that share was measured."""
    if key not in figure:
        return ""
    text = f", {label} {figure[key]:.0%}"
    if baseline is not None and key in baseline:
        text += f" (echo {baseline[key]:.0%})"
    return text


def machine() -> dict[str, Any]:
    memory = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(int(memory) / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        ),
    }
