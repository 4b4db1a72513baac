"""``POST /admin/reconciliations``: the platform's file of bets against the books."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, post
from litestar.handlers import HTTPRouteHandler
from litestar.params import QueryParameter

from ...service import Ledger
from ..openapi import operator_docs
from ..runtime import Runtime
from .trail import note

__all__ = ["reconciliations_handler"]


def reconciliations_handler(runtime: Runtime) -> HTTPRouteHandler:
    """``POST /admin/reconciliations``: the platform's file as the body, the report back."""

    @post(
        "/reconciliations",
        status_code=200,
        summary="Compare a platform file of bets with the books (reads only)",
        **operator_docs("request.invalid", "request.too_large", "reconcile.unreadable_file"),
    )
    async def reconciliations(
        request: Request[Any, Any, Any],
        pools_only: Annotated[
            bool, QueryParameter(description="Compare with the file's pools only")
        ] = False,
        limit: Annotated[
            int, QueryParameter(description="Differing bets listed at most", ge=1, le=100_000)
        ] = 1000,
    ) -> dict[str, Any]:
        """The body is the platform's record of its bets, CSV, TSV, a JSON array or JSON lines
        (detected); the answer is the report, 200 whether or not the books agree (``ok``)."""
        body = await request.body()

        def work(ledger: Ledger) -> dict[str, Any]:
            with ledger.reconcile(body, pools_only=pools_only) as found:
                return found.to_dict(limit)

        report = await runtime.call(work)
        note(request, ok=report["ok"], differing=report["differing"])
        return report

    return reconciliations
