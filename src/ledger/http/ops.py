"""Probes and metrics: ``GET /health``, ``GET /ready``, ``GET /metrics``.

``/health`` says the process answers (a liveness probe must not depend on the database, or a
database outage would restart every replica), and names the deployment's ``LEDGER_ENVIRONMENT``
when one is set. ``/ready`` says a database host that accepts writes
answers too, so that a load balancer stops sending callbacks that could only get 503; across a
failover it is 503 until the standby is promoted and 200 again after, with no restart. With a
read replica configured it also says how far behind reports may be (``replica_lag_seconds``).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from litestar import Response, get
from litestar.handlers import HTTPRouteHandler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..errors import LedgerError, StoreUnavailable
from .error_docs import error_responses
from .runtime import Runtime

__all__ = ["ops_handlers"]

log = logging.getLogger("ledger.server")

# Seconds a scrape waits for the stale-holds count (one index range: milliseconds when healthy).
STALE_GAUGE_TIMEOUT = 2.0

# Litestar appends "; charset=utf-8" to every text/* type, and prometheus_client's type already
# carries one: hand Litestar the type without it, so that the answer names its charset once.
_METRICS_MEDIA_TYPE = "; ".join(
    part.strip()
    for part in CONTENT_TYPE_LATEST.split(";")
    if not part.strip().lower().startswith("charset=")
)


def _unready(error: StoreUnavailable) -> dict[str, str]:
    return {"error": error.key, "message": "the database is not available"}


def ops_handlers(runtime: Runtime) -> list[HTTPRouteHandler]:
    """The probe and metrics handlers, bound to ``runtime``."""

    @get("/health", summary="Liveness: the process answers", tags=["operations"])
    async def health() -> dict[str, str]:
        # The deployment's LEDGER_ENVIRONMENT, when set: the conformance kit reads it to refuse
        # writing test data into production unless told to.
        environment = runtime.settings.environment
        return (
            {"status": "ok"}
            if environment is None
            else {"status": "ok", "environment": environment}
        )

    @get(
        "/ready",
        summary="Readiness: the database answers (503 when not)",
        tags=["operations"],
        responses=error_responses(["store.unavailable"]),
    )
    async def ready() -> Response[dict[str, Any]]:
        try:
            await runtime.call(lambda ledger: ledger.ping())
        except StoreUnavailable as exc:
            # The driver's message names hosts and ports: logged, never answered (anyone can
            # ask /ready).
            log.warning("not ready: %s", exc.message)
            return Response(_unready(exc), status_code=503)
        body: dict[str, Any] = {"status": "ready"}
        try:
            lag = await runtime.call(lambda ledger: ledger.replica_lag())
        except StoreUnavailable as exc:
            # Callbacks never read the replica: its loss makes reports fail, not the server.
            log.warning("replica not available: %s", exc.message)
            body["replica"] = _unready(exc)
        else:
            if lag is not None:
                body["replica_lag_seconds"] = lag
        return Response(body, status_code=200)

    @get("/metrics", summary="Prometheus metrics", tags=["operations"], include_in_schema=False)
    async def metrics() -> Response[bytes]:
        # Bounded: a frozen database must not cost the scrape every other metric. On failure
        # or timeout the gauge keeps its last value, and /ready says what is wrong.
        stale: int | None = None
        with anyio.move_on_after(STALE_GAUGE_TIMEOUT):
            try:
                stale = await runtime.offload(
                    lambda: runtime.ledger().count_stale_holds(), abandon_on_cancel=True
                )
            except LedgerError as exc:
                log.warning("ledger_stale_holds not updated: %s", exc.message)
        if stale is not None:
            runtime.metrics.stale_holds.set(stale)
        return Response(generate_latest(runtime.metrics.registry), media_type=_METRICS_MEDIA_TYPE)

    return [health, ready, metrics]
