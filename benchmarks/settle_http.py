"""Target (c) alone: one Settle of N participants over HTTP, seconds and the server's peak RSS.

    .venv/bin/python benchmarks/settle_http.py --store sqlite --participants 100000
    .venv/bin/python benchmarks/settle_http.py --store postgres --participants 1000000

The same measurement as ``run.py``'s (c) (same book, same body, same server), without the rest
of the suite: a before/after of the settle path takes minutes instead of the whole run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from run import bench_settle, store_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--participants", type=int, default=100_000)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="ledger-settle-http-") as tmp,
        store_url(args.store, Path(tmp), "settle") as url,
    ):
        figures = bench_settle(url, args.participants)
    json.dump({"store": args.store, **figures}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
