"""Profile the server under benchmark (a)'s load: py-spy on the GIL holder, and CPU per request.

    python benchmarks/profile_place_bet.py [--db URL] [--seconds 10] [--out profile]

Starts ``ledger serve`` (SQLite in a temporary directory unless ``--db``), loads it with wrk as
``run.py`` does (one new Place Bet per request, 64 connections), and meanwhile samples only the
thread that holds the GIL (``py-spy record --gil``: what the event loop and the writer cost). Writes
``<out>.txt`` (collapsed stacks, for any flame graph tool), and prints the frames that appear in the
largest share of samples, with the server's CPU microseconds per request. With ``--writer``, the
writer process is sampled instead (the server's child, where the database work runs), whether or
not it holds the GIL: it has one thread, and ``sqlite3`` lets the GIL go while SQLite runs a
statement, so ``--gil`` there would leave most of the database's own time out (its statements and
commit: half of the writer's samples under (a)).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import servers


def top_frames(collapsed: Path, count: int = 30) -> list[tuple[float, float, str]]:
    """Each function's share of the samples whose stack holds it (inclusive) and of those where
    it runs itself (self), largest inclusive first, below the event loop and the writer thread's
    roots (which hold most samples and say nothing)."""
    total = 0
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        weight = int(samples)
        total += weight
        # Per function, not per line: "_deliver (ledger/http/callbacks.py:240)" -> "_deliver
        # (ledger/http/callbacks.py)".
        frames = [frame.rsplit(":", 1)[0] + ")" for frame in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] += weight
        own[frames[-1]] += weight
    ranked = [
        (weight / total, own[frame] / total, frame)
        for frame, weight in inclusive.most_common()
        if weight / total < 0.55
    ]
    return ranked[:count]


def writer_pid(server: int) -> int:
    """The writer process (``LEDGER_WRITER_PROCESS``, on by default): after the warm-up, the
    server's child that has used the most CPU (multiprocessing's resource tracker is the other)."""
    children = [
        int(child)
        for task in Path(f"/proc/{server}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]
    if not children:
        raise SystemExit(f"no writer process under {server}")

    def cpu(pid: int) -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return int(fields[11]) + int(fields[12])  # utime + stime

    return max(children, key=cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="database URL (default: a new SQLite file)")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("profile"))
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument(
        "--writer",
        action="store_true",
        help="sample the writer process (the server's child) instead of the server's",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-profile-") as tmp:
        db = args.db or f"sqlite:///{Path(tmp) / 'profile.db'}"
        port = servers.free_port()
        with servers.ledger_server(db, port) as process:
            servers.fund(port, [f"u{n}" for n in range(servers.USERS)])
            servers.wrk(port, "/bets", servers.USERS, 2)  # warm-up
            holder = [] if args.writer else ["--gil"]
            spy_args = [*holder, "--rate", "250", "--duration", str(args.seconds)]
            py_spy = Path(sys.executable).with_name("py-spy")
            collapsed = args.out.with_suffix(".txt")
            pid = writer_pid(process.pid) if args.writer else process.pid
            target = ["--pid", str(pid), "--nonblocking", "-f", "raw", "-o", str(collapsed)]
            recorder = subprocess.Popen([str(py_spy), "record", *spy_args, *target])
            figures: dict[str, float] = {}

            def load() -> None:
                figures.update(
                    servers.wrk(port, "/bets", servers.USERS, args.seconds, pid=process.pid)
                )

            loader = threading.Thread(target=load)
            loader.start()
            loader.join()
            recorder.wait()
    print(
        f"{figures['rps']:,.0f} req/s, p99 {figures['p99_us'] / 1000:.1f} ms, "
        f"server CPU {figures['server_cpu_us_per_request']:.0f} us/request "
        f"(event loop {figures['loop_cpu_us_per_request']:.0f} us)"
    )
    held = "samples" if args.writer else "GIL-holding samples"
    print(f"inclusive   self  function (share of {held})")
    for share, itself, frame in top_frames(collapsed, args.top):
        print(f"{share:8.1%} {itself:6.1%}  {frame}")


if __name__ == "__main__":
    main()
