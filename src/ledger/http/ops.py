"""Probes and metrics: ``GET /health``, ``GET /ready``, ``GET /metrics``.

``/health`` says the process answers (a liveness probe must not depend on the database, or a
database outage would restart every replica). ``/ready`` says a database host that accepts writes
answers too, so that a load balancer stops sending callbacks that could only get 503; across a
failover it is 503 until the standby is promoted and 200 again after, with no restart. With a
read replica configured it also says how far behind reports may be (``replica_lag_seconds``).
"""

from __future__ import annotations

from typing import Any

from litestar import Response, get
from litestar.handlers import HTTPRouteHandler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..errors import StoreUnavailable
from .openapi import error_responses
from .runtime import Runtime

__all__ = ["ops_handlers"]

# Litestar appends "; charset=utf-8" to every text/* type, and prometheus_client's type already
# carries one: hand Litestar the type without it, so that the answer names its charset once.
_METRICS_MEDIA_TYPE = "; ".join(
    part.strip()
    for part in CONTENT_TYPE_LATEST.split(";")
    if not part.strip().lower().startswith("charset=")
)


def ops_handlers(runtime: Runtime) -> list[HTTPRouteHandler]:
    """The probe and metrics handlers, bound to ``runtime``."""

    @get("/health", summary="Liveness: the process answers", tags=["operations"])
    async def health() -> dict[str, str]:
        return {"status": "ok"}

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
            return Response(exc.to_dict(), status_code=503)
        body: dict[str, Any] = {"status": "ready"}
        try:
            lag = await runtime.call(lambda ledger: ledger.replica_lag())
        except StoreUnavailable as exc:
            # Callbacks never read the replica: its loss makes reports fail, not the server.
            body["replica"] = exc.to_dict()
        else:
            if lag is not None:
                body["replica_lag_seconds"] = lag
        return Response(body, status_code=200)

    @get("/metrics", summary="Prometheus metrics", tags=["operations"], include_in_schema=False)
    async def metrics() -> Response[bytes]:
        return Response(generate_latest(runtime.metrics.registry), media_type=_METRICS_MEDIA_TYPE)

    return [health, ready, metrics]
