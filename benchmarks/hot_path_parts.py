"""CPU microseconds per delivery of each part of the callback hot path, old way against new.

    python benchmarks/hot_path_parts.py [--rounds 20000]

Each part runs in process on uvloop with no network and no database, so the figure is the part's
own cost, undisturbed by other load on a shared machine (CPU time, not wall-clock):

- waiting for the writer: ``anyio.fail_after`` + ``asyncio.shield(asyncio.wrap_future(...))``
  against ``asyncio.timeout`` + :class:`ledger.http.runtime.LoopFutures`, 64 deliveries at a
  time answered by another thread the way the group-commit writer answers a batch;
- its deadline: ``asyncio.timeout`` around that wait against the deadline
  :class:`~ledger.http.runtime.LoopFutures` keeps itself (one timer for every wait);
- the delivery log line: ``json.dumps`` through ``logging`` (``ledger serve``'s old bare
  handler) against :func:`ledger.http.logs.log_json` into :class:`JsonLinesHandler`;
- the metrics: ``labels(...).inc()`` and ``labels(...).observe()`` against
  :meth:`ledger.http.runtime.Metrics.delivered`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from pathlib import Path

import anyio
import uvloop

from ledger.http.logs import JsonLinesHandler, log_json
from ledger.http.runtime import LoopFutures, Metrics

BATCH = 64


def cpu_us(rounds: int, run: Callable[[], None]) -> float:
    started = time.process_time()
    run()
    return (time.process_time() - started) * 1e6 / rounds


def waiting(rounds: int) -> dict[str, float]:
    async def old_wait(future: Future[int]) -> int:
        with anyio.fail_after(290):
            return await asyncio.shield(asyncio.wrap_future(future))

    def timeout(bridge: LoopFutures) -> Callable[[Future[int]], Awaitable[int]]:
        async def timeout_wait(future: Future[int]) -> int:
            async with asyncio.timeout(290):
                return await bridge.wrap(future)

        return timeout_wait

    def new(bridge: LoopFutures) -> Callable[[Future[int]], Awaitable[int]]:
        async def new_wait(future: Future[int]) -> int:
            return await bridge.wrap(future, 290)

        return new_wait

    def measure(make: Callable[[LoopFutures], Callable[[Future[int]], Awaitable[int]]]) -> float:
        async def main() -> None:
            wait = make(LoopFutures(asyncio.get_running_loop()))
            for _ in range(rounds // BATCH):
                futures: list[Future[int]] = [Future() for _ in range(BATCH)]
                tasks = [asyncio.ensure_future(wait(future)) for future in futures]
                await asyncio.sleep(0)  # every delivery is waiting now

                def writer(batch: list[Future[int]] = futures) -> None:
                    for number, future in enumerate(batch):
                        future.set_result(number)

                thread = threading.Thread(target=writer)
                thread.start()
                thread.join()
                await asyncio.gather(*tasks)

        return cpu_us(rounds, lambda: uvloop.run(main()))

    return {
        "old": measure(lambda _: old_wait),
        "timeout": measure(timeout),
        "new": measure(new),
    }


def logging_line(rounds: int) -> dict[str, float]:
    line = {
        "msg": "callback",
        "ts": "",
        "request_id": "7f0c2d1e-aaaa-bbbb-cccc-0123456789ab",
        "event": "create:fantasy_team",
        "path": "/bets",
        "ip": "127.0.0.1",
        "status": 200,
        "outcome": "ok",
        "duration_ms": 1.234,
        "bet_count": 1,
        "bet_uids": [123456789],
    }
    sink = Path("/dev/null").open("w")  # noqa: SIM115 - closed below
    logger = logging.getLogger("bench.delivery")
    logger.propagate = False
    logger.setLevel(logging.INFO)

    def old() -> None:
        handler = logging.StreamHandler(sink)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.handlers[:] = [handler]
        for _ in range(rounds):
            line["ts"] = datetime.now(UTC).isoformat(timespec="milliseconds")
            logger.log(logging.INFO, json.dumps(line, separators=(",", ":")))

    def new() -> None:
        handler = JsonLinesHandler()
        handler.setStream(sink)
        logger.handlers[:] = [handler]

        async def main() -> None:
            for number in range(rounds):
                line["ts"] = datetime.now(UTC).isoformat(timespec="milliseconds")
                log_json(logger, logging.INFO, line)
                if number % BATCH == 0:
                    await asyncio.sleep(0)  # a loop turn: the buffered lines are written

        uvloop.run(main())
        handler.flush()

    try:
        return {"old": cpu_us(rounds, old), "new": cpu_us(rounds, new)}
    finally:
        sink.close()


def metrics(rounds: int) -> dict[str, float]:
    registry = Metrics()

    def old() -> None:
        for _ in range(rounds):
            registry.deliveries.labels("create:fantasy_team", "ok", "200").inc()
            registry.latency.labels("create:fantasy_team").observe(0.0123)

    def new() -> None:
        for _ in range(rounds):
            registry.delivered("create:fantasy_team", "ok", 200, 0.0123)

    return {"old": cpu_us(rounds, old), "new": cpu_us(rounds, new)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    args = parser.parse_args()
    wait = waiting(args.rounds)
    parts = {
        "wait for the writer": {"old": wait["old"], "new": wait["timeout"]},
        "its deadline": {"old": wait["timeout"], "new": wait["new"]},
        "delivery log line": logging_line(args.rounds),
        "metrics": metrics(args.rounds),
    }
    print(f"{'part':<22} {'old us':>8} {'new us':>8}  (CPU per delivery)")
    for name, figures in parts.items():
        print(f"{name:<22} {figures['old']:8.1f} {figures['new']:8.1f}")


if __name__ == "__main__":
    main()
