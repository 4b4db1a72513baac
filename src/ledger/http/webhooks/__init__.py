"""The webhook sender: the event feed posted, signed, to each endpoint of ``LEDGER_WEBHOOKS``.

:class:`WebhookSender` (:mod:`.sender`) runs one loop per configured endpoint
(:mod:`ledger.webhooks`); :mod:`.endpoint` is that loop, :mod:`.metrics` its Prometheus metrics.
The database is touched only in short transactions on worker threads (through ``offload``);
no connection is held while a receiver is waited on, and the event loop never blocks.

``ledger serve`` starts it when ``LEDGER_WEBHOOKS`` is set; an embedding process can run it
in its own event loop: ``async with WebhookSender(config, book, source=...): ...``.
``GET /admin/webhooks``, each endpoint's status, is the operator API's
(:mod:`ledger.http.operator.webhooks`).
"""

from .metrics import WebhookMetrics
from .sender import WebhookSender, server_sender

__all__ = ["WebhookMetrics", "WebhookSender", "server_sender"]
