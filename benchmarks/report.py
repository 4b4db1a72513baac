"""The table of a ``run.py`` run: every figure against its target, as aligned text or Markdown.

Not run on its own: ``run.py`` prints it after a run, and ``run.py --report FILE`` from a results
file. A figure measured in alternated rounds is the round with the median ratio, and the line
gives every round's ratio after it; a file written before rounds existed reads as one round.
"""

from __future__ import annotations

import statistics
from typing import Any

from accounting import disk_wait, stolen
from servers import USERS


def median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run whose ``key`` is the median of the runs' (the lower middle one of an even count):
    a whole run, so that the figures reported beside that ratio are the ones that made it."""
    return sorted(runs, key=lambda run: run[key])[(len(runs) - 1) // 2]


def _rounds(figure: dict[str, Any], key: str) -> str:
    runs = figure.get("runs", [])
    if len(runs) < 2:
        return ""
    return f" (median of {len(runs)} rounds: {', '.join(f'{run[key]:.2f}' for run in runs)})"


def _echo_row(results: dict[str, Any]) -> tuple[str, str, str] | None:
    echoes = [
        run["echo"]
        for figures in results["stores"].values()
        for key, figure in figures.items()
        if key.startswith("a_http_")
        for run in figure.get("runs", [])
    ]
    if not echoes:
        echo = results.get("echo")
        if not echo:
            return None
        return (
            "echo baseline",
            f"{echo['rps']:,.0f} req/s, p99 {echo['p99_us'] / 1000:.1f} ms, "
            f"{echo['server_cpu_us_per_request']:.0f} CPU us/req",
            "",
        )
    rps = [echo["rps"] for echo in echoes]
    cpu = [echo["server_cpu_us_per_request"] for echo in echoes]
    return (
        "echo baseline",
        f"{statistics.median(rps):,.0f} req/s ({min(rps):,.0f} to {max(rps):,.0f}), "
        f"{statistics.median(cpu):.0f} CPU us/req; {len(echoes)} runs, each beside a Place Bet run",
        "",
    )


def _http_rows(store: str, http: dict[str, Any]) -> list[tuple[str, str, str]]:
    rows = []
    bet, count = http["place_bet"], http["workers"]
    echo_idle = http["echo"].get("machine_idle_share", float("nan"))
    name = f"(a) {store}, {count} worker{'s' if count > 1 else ''}"
    # A file written before rounds had one echo for the whole run, named on the echo's own row.
    beside = f" vs {http['echo']['rps']:,.0f}" if "runs" in http else ""
    rows.append(
        (
            f"{name}: throughput vs echo",
            f"{bet['rps']:,.0f}{beside} req/s = {http['ratio_throughput']:.2f}"
            + _rounds(http, "ratio_throughput"),
            ">= 0.5" if store == "postgres" else ">= 0.75" if count == 1 else "",
        )
    )
    rows.append(
        (
            f"{name}: p99 vs echo",
            f"{bet['p50_us'] / 1000:.1f} / {bet['p99_us'] / 1000:.1f} ms (p50 / p99) "
            f"= {http['ratio_p99']:.2f}",
            "<= 1.5" if store == "sqlite" and count == 1 else "",
        )
    )
    rows.append(
        (
            f"{name}: server CPU per request",
            f"{bet['server_cpu_us_per_request']:.0f} us = {http['ratio_cpu']:.2f} x echo "
            f"(event loop {bet['loop_cpu_us_per_request']:.0f} us); "
            f"machine idle {bet['machine_idle_share']:.0%} (echo {echo_idle:.0%})"
            + disk_wait(bet, http["echo"])
            + stolen(bet, http["echo"]),
            "",
        )
    )
    if "database_cpu_us_per_request" in bet:
        rows.append(
            (
                f"{name}: database server CPU per request",
                f"{bet['database_cpu_us_per_request']:.0f} us (every Postgres process)",
                "",
            )
        )
    if "ratio_hot" in http:
        hot = median_run(http["runs"], "ratio_hot") if "runs" in http else http
        rows.append(
            (
                f"(d) {store}: one hot user vs {USERS} users",
                f"{hot['place_bet_hot']['rps']:,.0f} vs {hot['place_bet']['rps']:,.0f} req/s "
                f"= {hot['ratio_hot']:.2f}" + _rounds(http, "ratio_hot"),
                ">= 0.8",
            )
        )
    return rows


def report(results: dict[str, Any], *, markdown: bool = False) -> None:
    """Print the run's figures against their targets: aligned text, or a Markdown table."""
    rows: list[tuple[str, str, str]] = []
    echo_row = _echo_row(results)
    if echo_row:
        rows.append(echo_row)
    for store, figures in results["stores"].items():
        for key, http in figures.items():
            if key.startswith("a_http_"):
                rows += _http_rows(store, http)
        if "b_embedded" in figures:
            b = figures["b_embedded"]
            rows.append(
                (
                    f"(b) {store}: embedded place_bets vs raw sqlite3",
                    f"{b['embedded_bets_per_s']:,.0f} vs {b['raw_bets_per_s']:,.0f} bets/s "
                    f"= {b['ratio']:.2f}" + _rounds(b, "ratio"),
                    ">= 0.5",
                )
            )
        for key, value in figures.items():
            if key.startswith("c_settle_"):
                size = value["participants"]
                rows.append(
                    (
                        f"(c) {store}: settle of {size:,} over HTTP",
                        f"{value['seconds']:.1f} s, server peak RSS "
                        f"{value['server_peak_rss_mib']:,.0f} MiB "
                        f"({value['body_mb']:.0f} MB body)" + disk_wait(value) + stolen(value),
                        "<= 3 s" if size == 100_000 else "<= 30 s, <= 2048 MiB",
                    )
                )
    if markdown:
        print("| figure | measured | target |")
        print("|---|---|---|")
        for name, measured, target in rows:
            print(f"| {name} | {measured} | {target} |")
        return
    width = max(len(row[0]) for row in rows)
    print()
    load = results["load_before"]
    print(f"load average before the run: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'figure':<{width}}  {'measured':<60}  target")
    for name, measured, target in rows:
        print(f"{name:<{width}}  {measured:<60}  {target}")
