"""Target (c) alone: one Settle of N participants over HTTP, seconds and the server's peak RSS.

    .venv/bin/python benchmarks/settle_http.py --store sqlite --participants 100000
    .venv/bin/python benchmarks/settle_http.py --store postgres --participants 1000000

The same measurement as ``run.py``'s (c) (same book, same body, same server), without the rest
of the suite: a before/after of the settle path takes minutes instead of the whole run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from run import bench_settle, one_settle


def main() -> None:
    figures = one_settle(__doc__.split("\n\n")[0], bench_settle)
    json.dump(figures, sys.stdout)
    print()


if __name__ == "__main__":
    main()
