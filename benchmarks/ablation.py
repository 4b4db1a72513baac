"""What each performance mechanism is worth today: the headline benchmark with it and without it.

For every mechanism, ``benchmarks/run.py`` runs twice in a row, once as the ledger is and once
with that one mechanism switched off (``benchmarks/ablation_off/sitecustomize.py``, or a
setting where the ledger has one), on the figure the mechanism is for: (a) Place Bet over HTTP
against the echo on each store it serves, or (c) one settle of 100,000 participants. Rounds
alternate which goes first. The table gives each figure with and without, and the change.

    python benchmarks/ablation.py --rounds 2 --seconds 10 --json benchmarks/results/ablation.json
    python benchmarks/ablation.py --report benchmarks/results/ablation.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
HOOKS = HERE / "ablation_off"

# (mechanism, how it is switched off, stores, part)
MECHANISMS: list[tuple[str, dict[str, str], tuple[str, ...], str]] = [
    ("writer_process", {"LEDGER_WRITER_PROCESS": "off"}, ("sqlite", "postgres"), "a"),
    ("group_commit", {"ABLATE_MECHANISM": "group_commit"}, ("sqlite", "postgres"), "a"),
    ("even_batches", {"ABLATE_MECHANISM": "even_batches"}, ("sqlite", "postgres"), "a"),
    ("held_writes", {"ABLATE_MECHANISM": "held_writes"}, ("postgres",), "a"),
    ("binary_arrays", {"ABLATE_MECHANISM": "binary_arrays"}, ("postgres",), "a"),
    ("fast_path", {"ABLATE_MECHANISM": "fast_path"}, ("sqlite", "postgres"), "a"),
    ("jwt_memo", {"ABLATE_MECHANISM": "jwt_memo"}, ("sqlite", "postgres"), "a"),
    ("gc_freeze", {"ABLATE_MECHANISM": "gc_freeze"}, ("sqlite", "postgres"), "a"),
    ("balance_memo", {"ABLATE_MECHANISM": "balance_memo"}, ("sqlite",), "a"),
    ("multi_row", {"ABLATE_MECHANISM": "multi_row"}, ("sqlite",), "a"),
    ("temp_store", {"ABLATE_MECHANISM": "temp_store"}, ("sqlite",), "a"),
    ("checkpointer", {"ABLATE_MECHANISM": "checkpointer"}, ("sqlite",), "a"),
    ("time_ordered_references", {"ABLATE_MECHANISM": "time_ordered_references"}, ("sqlite",), "a"),
    ("set_based_close", {"ABLATE_MECHANISM": "set_based_close"}, ("sqlite", "postgres"), "c"),
    ("gc_pause", {"ABLATE_MECHANISM": "gc_pause"}, ("sqlite", "postgres"), "c"),
]


def figure(part: str, store_figures: dict[str, Any]) -> dict[str, float]:
    """The numbers compared: (a) throughput, CPU per request and p99 latency as ratios to the
    echo's; (c) the settle's seconds and server CPU seconds."""
    if part == "a":
        a = store_figures["a_http_1"]
        return {"ratio": a["ratio_throughput"], "cpu_ratio": a["ratio_cpu"], "p99": a["ratio_p99"]}
    c = store_figures["c_settle_100000"]
    return {"seconds": c["seconds"], "cpu_seconds": c["server_cpu_seconds"]}


def measure(store: str, part: str, seconds: int, env: dict[str, str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ledger-ablation-") as tmp:
        out = Path(tmp) / "run.json"
        command = [sys.executable, str(HERE / "run.py"), "--store", store, "--parts", part]
        # One round a run: the rounds, and which goes first, are this script's own.
        command += ["--workers", "1", "--seconds", str(seconds), "--rounds", "1"]
        command += ["--json", str(out)]
        path = os.pathsep.join(filter(None, [str(HOOKS), os.environ.get("PYTHONPATH")]))
        subprocess.run(
            command, env={**os.environ, **env, "PYTHONPATH": path}, check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        results = json.loads(out.read_text())
    return {**figure(part, results["stores"][store]), "load": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--only", help="comma-separated mechanisms (default: all)")
    parser.add_argument("--store", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--json", type=Path, help="write (and extend) the results here")
    parser.add_argument("--report", type=Path, help="print a results file as Markdown, and exit")
    args = parser.parse_args()
    if args.report:
        report(json.loads(args.report.read_text()))
        return
    chosen = set(args.only.split(",")) if args.only else None
    results: dict[str, Any] = (
        json.loads(args.json.read_text()) if args.json and args.json.exists() else {}
    )
    for name, off, stores, part in MECHANISMS:
        if chosen is not None and name not in chosen:
            continue
        for store in stores:
            if args.store not in ("all", store):
                continue
            key = f"{name}/{store}/{part}"
            runs = results.setdefault(key, {"with": [], "without": []})
            for round_ in range(args.rounds):
                order = [("with", {}), ("without", off)]
                for label, env in order if round_ % 2 == 0 else order[::-1]:
                    print(f"{key}: {label} ...", flush=True)
                    runs[label].append(measure(store, part, args.seconds, env))
            if args.json:
                args.json.parent.mkdir(parents=True, exist_ok=True)
                args.json.write_text(json.dumps(results, indent=2) + "\n")
            print(line(key, runs), flush=True)
    report(results)


def line(key: str, runs: dict[str, list[dict[str, float]]]) -> str:
    name, store, part = key.split("/")
    first = "ratio" if part == "a" else "seconds"
    second = "cpu_ratio" if part == "a" else "cpu_seconds"
    on = [run[first] for run in runs["with"]]
    off = [run[first] for run in runs["without"]]
    cpu_on = statistics.median(run[second] for run in runs["with"])
    cpu_off = statistics.median(run[second] for run in runs["without"])
    change = statistics.median(off) / statistics.median(on) - 1
    cpu_change = cpu_off / cpu_on - 1
    shown = ", ".join(f"{value:.2f}" for value in on)
    shown_off = ", ".join(f"{value:.2f}" for value in off)
    loads = [run["load"] for run in runs["with"] + runs["without"]]
    p99 = "-"
    if all("p99" in run for run in runs["with"] + runs["without"]):
        p99_on = statistics.median(run["p99"] for run in runs["with"])
        p99 = f"{statistics.median(run['p99'] for run in runs['without']) / p99_on - 1:+.0%}"
    return (
        f"| {name} | {store} ({part}) | {shown} | {shown_off} | {change:+.0%} | {cpu_change:+.0%} "
        f"| {p99} | {min(loads):.1f}-{max(loads):.1f} |"
    )


def report(results: dict[str, Any]) -> None:
    print(
        "| Mechanism | Figure | With it | Without it | Change without | CPU change without "
        "| p99 change without | Load |\n|---|---|---|---|---|---|---|---|"
    )
    for key, runs in results.items():
        if runs["with"] and runs["without"]:
            print(line(key, runs))


if __name__ == "__main__":
    main()
