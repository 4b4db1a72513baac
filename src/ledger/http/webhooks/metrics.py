"""The webhook sender's Prometheus metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["WebhookMetrics"]


class WebhookMetrics:
    """The sender's Prometheus metrics, in the server's registry (``GET /metrics``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry or CollectorRegistry(auto_describe=True)
        self.deliveries = Counter(
            "ledger_webhook_deliveries",
            "Webhook batch posts by endpoint and outcome (ok: a 2xx; failed: anything else).",
            ["endpoint", "outcome"],
            registry=registry,
        )
        self.lag_events = Gauge(
            "ledger_webhook_lag_events",
            "Events committed but not yet delivered to the endpoint (reported by the replica "
            "holding its lease).",
            ["endpoint"],
            registry=registry,
        )
        self.lag_seconds = Gauge(
            "ledger_webhook_lag_seconds",
            "Age of the oldest event not yet delivered to the endpoint (0 when none waits).",
            ["endpoint"],
            registry=registry,
        )
        self.missed = Counter(
            "ledger_webhook_missed_events",
            "Events pruned by retention before the endpoint received them (should stay 0: "
            "keep the retention longer than any receiver's outage).",
            ["endpoint"],
            registry=registry,
        )
        self.holding = Gauge(
            "ledger_webhook_holding",
            "1 while this process holds the endpoint's lease (is its one active sender).",
            ["endpoint"],
            registry=registry,
        )
