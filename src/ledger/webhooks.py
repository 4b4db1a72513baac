"""Signed webhooks: their configuration, signatures, retry schedule and status.

A sender (:mod:`ledger.http.webhooks`, started by ``ledger serve``) posts the event feed to each
configured endpoint in batches, in commit order, at least once, signed with the endpoint's
secret. This module holds what the sender, the operator API, the CLI and a *receiver* share,
over the standard library and the library's own pure modules (the store is imported only by
:func:`statuses`), so that a receiver can ``from ledger.webhooks import verify`` with the
library alone, without the server's extra:

- :func:`parse_config`: ``LEDGER_WEBHOOKS``, JSON inline or the path of a JSON file, validated
  at start-up with messages that name the field;
- :func:`sign` and :func:`verify`: ``X-Ledger-Signature: t=<unix>,v1=<hex HMAC-SHA256 of
  "<t>.<body>">``;
- :func:`backoff`: exponential, with jitter, capped;
- :class:`EventSource`: what the sender reads (the feed); :class:`EndpointStatus`: what
  ``GET /admin/webhooks`` and ``ledger webhooks status`` answer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .events import TYPES, Event, EventPage, event_dict

if TYPE_CHECKING:
    from .stores.port import Store
    from .stores.webhooks import CursorRow as CursorRow
    from .stores.webhooks import WebhookTables as WebhookTables

__all__ = [
    "BATCH_HEADER",
    "EVENT_TYPES",
    "LEASE_MARGIN",
    "SIGNATURE_HEADER",
    "EndpointStatus",
    "EventSource",
    "FeedEvent",
    "WebhookConfig",
    "WebhookConfigError",
    "WebhookEndpoint",
    "backoff",
    "ledger_feed",
    "masked_url",
    "parse_config",
    "sign",
    "statuses",
    "verify",
]

SIGNATURE_HEADER = "X-Ledger-Signature"
# The batch's first and last event ids, "<first>-<last>": the same batch re-sent carries the
# same key, so that a receiver can drop a repeat before it parses the body.
BATCH_HEADER = "Idempotency-Key"

# The feed's event types (ledger.events), any of which an endpoint may want.
EVENT_TYPES = TYPES

# Seconds of a lease a sender leaves unused at its end: the database round trip that renewed
# it, and a little clock drift between replicas.
LEASE_MARGIN = 1.0

# A receiver refuses a signature older (or newer) than this many seconds: a captured request
# cannot be replayed later.
DEFAULT_TOLERANCE = 300

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
# Below this a secret is guessable; 32 random bytes as hex is what docs/webhooks.md suggests.
MIN_SECRET_LENGTH = 16


class WebhookConfigError(ValueError):
    """``LEDGER_WEBHOOKS`` is malformed; the message names the endpoint and the field."""


class FeedEvent(Protocol):
    """One event of the feed, as the sender needs it."""

    @property
    def id(self) -> int: ...

    @property
    def type(self) -> str: ...

    @property
    def committed_at(self) -> datetime: ...


class EventSource(Protocol):
    """The event feed, read in commit order. Blocking: the sender calls it on a worker thread."""

    def read(self, after: int, limit: int) -> Sequence[FeedEvent]:
        """Up to ``limit`` events with ids above ``after``, in id order. A reader that has seen
        id N never later meets an event below N (the feed's commit-order guarantee)."""

    def head(self) -> int:
        """The newest event's id (0 when there is none)."""

    def body(self, event: FeedEvent) -> Mapping[str, Any]:
        """The event's JSON object, as the feed publishes it."""


@dataclass(frozen=True, slots=True)
class WebhookEndpoint:
    """One receiver: where to post, how to sign, which events it wants, in what batches."""

    name: str
    url: str
    secret: str
    events: frozenset[str] = frozenset(EVENT_TYPES)
    batch_size: int = 100
    timeout: float = 10.0

    def wants(self, event_type: str) -> bool:
        return event_type in self.events

    def __repr__(self) -> str:
        # Never the secret: this lands in logs and tracebacks.
        return f"WebhookEndpoint(name={self.name!r}, url={masked_url(self.url)!r})"


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Every endpoint, and the timing the senders share.

    ``lease`` is how long a sender's claim on an endpoint lasts without renewal: a sender that
    dies is replaced by another replica's after at most that long. A batch is only posted while
    the claim has more than the endpoint's timeout (plus :data:`LEASE_MARGIN`) left, so two
    senders never post at once (as long as the replicas' clocks agree to within that margin
    plus what the lease has beyond it).
    """

    endpoints: tuple[WebhookEndpoint, ...] = ()
    lease: float = 30.0
    poll: float = 1.0
    retry_base: float = 1.0
    retry_cap: float = 60.0

    def endpoint(self, name: str) -> WebhookEndpoint | None:
        return next((item for item in self.endpoints if item.name == name), None)


def backoff(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before re-sending after ``attempt`` consecutive failures (1, 2, ...).

    Doubles from ``base`` up to ``cap``, with "equal jitter": a uniform draw from the upper half
    of that step, so that replicas and endpoints recovering together spread out, yet a retry
    never comes sooner than half its step.
    """
    step = min(cap, base * 2 ** min(max(attempt, 1) - 1, 32))
    return (rng or random).uniform(step / 2, step)


# --- signatures ---------------------------------------------------------------------------------


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``X-Ledger-Signature`` value of ``body``: ``t=<unix>,v1=<hex HMAC-SHA256>``."""
    moment = int(time.time()) if timestamp is None else timestamp
    return f"t={moment},v1={_mac(secret, moment, body)}"


def verify(
    secret: str,
    body: bytes,
    header: str | None,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> bool:
    """Whether ``header`` signs ``body`` with ``secret``, within ``tolerance`` seconds of now.

    ``body`` is the request body exactly as received (bytes, before any JSON parsing). Several
    ``v1=`` values are accepted (one of them must match), so that a sender may sign with an old
    and a new secret while a receiver rotates.
    """
    if not header:
        return False
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isascii() and value.isdigit() and len(value) <= 12:
            timestamp = int(value)
        elif key == "v1":
            candidates.append(value)
    if timestamp is None or not candidates:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    expected = _mac(secret, timestamp, body)
    # Every candidate is compared, in constant time, whatever the first one's outcome.
    return any([hmac.compare_digest(expected, given) for given in candidates])


# --- configuration ------------------------------------------------------------------------------

_TOP = {"endpoints", "lease_seconds", "poll_seconds", "retry_base_seconds", "retry_cap_seconds"}
_FIELDS = {"name", "url", "secret", "secret_env", "events", "batch_size", "timeout"}


def parse_config(text: str, environ: Mapping[str, str] | None = None) -> WebhookConfig:
    """``LEDGER_WEBHOOKS``: inline JSON (it starts with ``{``) or the path of a JSON file.

    ``environ`` is where ``secret_env`` names are looked up (default ``os.environ``).
    """
    environ = os.environ if environ is None else environ
    text = text.strip()
    source = "LEDGER_WEBHOOKS"
    if not text.startswith(("{", "[")):
        path = Path(text).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise WebhookConfigError(
                f"LEDGER_WEBHOOKS={str(path)[:200]!r}: expected inline JSON or a readable JSON "
                f"file ({exc.__class__.__name__})"
            ) from None
        source = f"LEDGER_WEBHOOKS file {path}"
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise WebhookConfigError(f"{source}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise WebhookConfigError(f'{source}: expected an object {{"endpoints": [...]}}')
    if unknown := sorted(set(document) - _TOP):
        raise WebhookConfigError(f"{source}: unknown field(s) {', '.join(unknown)}")
    items = document.get("endpoints")
    if not isinstance(items, list) or not items:
        raise WebhookConfigError(f"{source}: endpoints must be a non-empty list")
    endpoints = tuple(_endpoint(source, index, item, environ) for index, item in enumerate(items))
    names = [item.name for item in endpoints]
    if duplicate := sorted({name for name in names if names.count(name) > 1}):
        raise WebhookConfigError(f"{source}: endpoint name(s) used twice: {', '.join(duplicate)}")
    lease = _number(source, document, "lease_seconds", 30.0, low=1.0, high=3600.0)
    config = WebhookConfig(
        endpoints=endpoints,
        lease=lease,
        poll=_number(source, document, "poll_seconds", 1.0, low=0.01, high=60.0),
        retry_base=_number(source, document, "retry_base_seconds", 1.0, low=0.01, high=60.0),
        retry_cap=_number(source, document, "retry_cap_seconds", 60.0, low=0.01, high=3600.0),
    )
    # A batch is only posted while the claim has more than the timeout plus LEASE_MARGIN left
    # (see WebhookConfig): a shorter lease would leave a sender no time to post in.
    for endpoint in endpoints:
        if lease < 2 * (endpoint.timeout + LEASE_MARGIN):
            raise WebhookConfigError(
                f"{source}: lease_seconds ({lease:g}) must be at least twice endpoint "
                f"{endpoint.name!r}'s timeout plus {LEASE_MARGIN:g} s "
                f"({2 * (endpoint.timeout + LEASE_MARGIN):g})"
            )
    return config


def _endpoint(source: str, index: int, item: Any, environ: Mapping[str, str]) -> WebhookEndpoint:
    where = f"{source}: endpoints[{index}]"
    if not isinstance(item, dict):
        raise WebhookConfigError(f"{where}: expected an object")
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise WebhookConfigError(
            f"{where}.name: expected 1 to 64 of a-z, 0-9, '_', '.', '-' (starting with a letter "
            "or digit)"
        )
    where = f"{source}: endpoint {name!r}"
    if unknown := sorted(set(item) - _FIELDS):
        raise WebhookConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
    url = item.get("url")
    if not isinstance(url, str) or not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", url):
        raise WebhookConfigError(f"{where}.url: expected an http:// or https:// URL")
    secret = _secret(where, item, environ)
    events = item.get("events", list(EVENT_TYPES))
    if (
        not isinstance(events, list)
        or not events
        or not all(isinstance(event, str) for event in events)
    ):
        raise WebhookConfigError(f"{where}.events: expected a non-empty list of event types")
    if unknown_events := sorted(set(events) - set(EVENT_TYPES)):
        raise WebhookConfigError(
            f"{where}.events: unknown {', '.join(unknown_events)}; "
            f"choose from {', '.join(EVENT_TYPES)}"
        )
    batch = item.get("batch_size", 100)
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 1000:
        raise WebhookConfigError(f"{where}.batch_size: expected a whole number from 1 to 1000")
    timeout = _number(where, item, "timeout", 10.0, low=0.05, high=600.0)
    return WebhookEndpoint(name, url, secret, frozenset(events), batch, timeout)


def _secret(where: str, item: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    if ("secret" in item) == ("secret_env" in item):
        raise WebhookConfigError(f"{where}: give exactly one of secret and secret_env")
    if "secret_env" in item:
        variable = item["secret_env"]
        if not isinstance(variable, str) or not variable:
            raise WebhookConfigError(f"{where}.secret_env: expected an environment variable name")
        secret = environ.get(variable, "")
        if not secret:
            raise WebhookConfigError(f"{where}.secret_env: {variable} is not set")
    else:
        secret = item["secret"]
        if not isinstance(secret, str):
            raise WebhookConfigError(f"{where}.secret: expected a string")
    if len(secret) < MIN_SECRET_LENGTH:
        raise WebhookConfigError(
            f"{where}: the secret needs at least {MIN_SECRET_LENGTH} characters"
        )
    return secret


def _number(
    where: str, item: Mapping[str, Any], key: str, default: float, *, low: float, high: float
) -> float:
    value = item.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise WebhookConfigError(
            f"{where}.{key}: expected a number of seconds from {low:g} to {high:g}"
        )
    return float(value)


# --- status -------------------------------------------------------------------------------------


def masked_url(url: str) -> str:
    """``url`` with the password of its credentials (``https://user:secret@host/``) shown as
    ``***``: a status or a log line names the endpoint, never its secret."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if not sep or not at:
        return url
    user = userinfo.partition(":")[0]
    return f"{scheme}://{user}:***@{host}{slash}{path}"


@dataclass(frozen=True, slots=True)
class EndpointStatus:
    """Where one endpoint's delivery stands (``GET /admin/webhooks``, ``ledger webhooks status``).

    ``lag_events`` counts the feed's events past the cursor (filtered-out types included: they
    are passed over only when a sender reaches them); ``lag_seconds`` is the age of the oldest of
    them (0 when none waits). ``attempts`` counts the failed posts of the batch now in flight.
    """

    name: str
    url: str
    cursor: int
    head: int
    lag_events: int
    lag_seconds: float
    last_success_at: datetime | None
    last_error: str | None
    last_error_at: datetime | None
    attempts: int
    holder: str | None
    lease_until: datetime | None

    def to_dict(self) -> dict[str, Any]:
        def moment(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat().replace("+00:00", "Z")

        return {
            "name": self.name,
            "url": self.url,
            "cursor": self.cursor,
            "head": self.head,
            "lag_events": self.lag_events,
            "lag_seconds": round(self.lag_seconds, 3),
            "last_success_at": moment(self.last_success_at),
            "last_error": self.last_error,
            "last_error_at": moment(self.last_error_at),
            "attempts": self.attempts,
            "holder": self.holder,
            "lease_until": moment(self.lease_until),
        }


class Feed(Protocol):
    """What the sender and the statuses read of a ledger (:class:`ledger.service.Ledger`)."""

    @property
    def store(self) -> Store: ...

    def events(self, after: int, *, limit: int) -> EventPage: ...

    def last_event_id(self) -> int: ...


class _LedgerFeed:
    """:class:`EventSource` over a ledger's own feed (:meth:`ledger.service.Ledger.events`).

    Every type is read, wanted or not: the sender filters, so that it can move an endpoint's
    cursor past events it does not want (a feed filtered in SQL would not say how far it read).
    """

    def __init__(self, ledger: Feed) -> None:
        self._ledger = ledger

    def read(self, after: int, limit: int) -> Sequence[Event]:
        return self._ledger.events(after, limit=limit).events

    def head(self) -> int:
        return self._ledger.last_event_id()

    def body(self, event: FeedEvent) -> Mapping[str, Any]:
        assert isinstance(event, Event)
        return event_dict(event)


def ledger_feed(ledger: Feed) -> EventSource:
    """The ledger's own event feed, as the sender reads it."""
    return _LedgerFeed(ledger)


def cursors(ledger: Feed) -> WebhookTables:
    """The webhook endpoints' cursors, leases and last outcomes, in ``ledger``'s own store: what
    the sender claims and moves, and what ``ledger webhooks`` reports and forgets."""
    # Imported here: a receiver imports this module for verify() without any database.
    from .stores.webhooks import WebhookTables

    return WebhookTables(ledger.store)


def statuses(
    ledger: Feed, config: WebhookConfig, source: EventSource, now: datetime | None = None
) -> list[EndpointStatus]:
    """Every configured endpoint's status, read from ``ledger``'s store and ``source``.

    Blocking (a few short reads). An endpoint no sender has started yet stands at cursor 0.
    """
    now = now or datetime.now(UTC)
    rows = {row.endpoint: row for row in cursors(ledger).rows()}
    head = source.head()
    found = []
    for endpoint in config.endpoints:
        row = rows.get(endpoint.name)
        cursor = row.position if row else 0
        waiting = list(source.read(cursor, 1)) if head > cursor else []
        age = (now - waiting[0].committed_at).total_seconds() if waiting else 0.0
        found.append(
            EndpointStatus(
                name=endpoint.name,
                url=masked_url(endpoint.url),
                cursor=cursor,
                head=head,
                lag_events=max(0, head - cursor),
                lag_seconds=max(0.0, age),
                last_success_at=row.last_success_at if row else None,
                last_error=row.last_error if row else None,
                last_error_at=row.last_error_at if row else None,
                attempts=row.attempts if row else 0,
                # A lapsed lease names nobody: its holder may be gone.
                holder=row.holder if row and row.lease_until and row.lease_until > now else None,
                lease_until=row.lease_until if row else None,
            )
        )
    return found
