"""``GET /admin/audit``: the console operators' audit log, for scripts (the answer itself is the
console's, :mod:`ledger.http.console.audit`)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.handlers import HTTPRouteHandler
from litestar.params import QueryParameter

from ..console.audit import audit_answer
from ..openapi import operator_docs
from ..runtime import Runtime

__all__ = ["audit_handler"]


def audit_handler(runtime: Runtime) -> HTTPRouteHandler:
    """The audit log's route, bound to ``runtime``."""

    @get(
        "/audit",
        summary="The console operators' audit log, newest first, paged; CSV with format=csv",
        **operator_docs("request.invalid"),
    )
    async def audit(
        request: Request[Any, Any, Any],
        action: Annotated[str | None, QueryParameter(description="Only this action")] = None,
        limit: Annotated[int, QueryParameter(description="Page size", ge=1, le=1000)] = 50,
        after: Annotated[str | None, QueryParameter(description="The previous page's next")] = None,
        format: Annotated[str, QueryParameter(description="json or csv (every entry)")] = "json",
    ) -> Response[Any]:
        """Who (operator), when, from where (ip), what (action, target, detail), outcome."""
        return await audit_answer(request, runtime, action, limit, after, format)

    return audit
