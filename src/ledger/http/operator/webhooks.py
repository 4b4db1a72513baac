"""``GET /admin/webhooks``: where each configured webhook endpoint's delivery stands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from litestar import get
from litestar.handlers import HTTPRouteHandler

from ...service import Ledger
from ...webhooks import EventSource, WebhookConfig, ledger_feed, statuses
from ..openapi import operator_docs
from ..runtime import Runtime

__all__ = ["webhook_handlers"]


def webhook_handlers(
    runtime: Runtime, source: Callable[[Ledger], EventSource] = ledger_feed
) -> list[HTTPRouteHandler]:
    """``GET /admin/webhooks``, bound to ``runtime`` (joins the operator router)."""

    @get(
        "/webhooks",
        summary="Each webhook endpoint's cursor, lag, last error and sender",
        **operator_docs(),
    )
    async def webhooks() -> dict[str, Any]:
        config = runtime.settings.webhooks or WebhookConfig()

        found = await runtime.call(lambda ledger: statuses(ledger, config, source(ledger)))
        return {"endpoints": [item.to_dict() for item in found]}

    return [webhooks]
