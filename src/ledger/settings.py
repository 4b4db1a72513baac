"""Configuration of the callback server, read once from the environment (DESIGN section 7).

:class:`Settings` is a frozen value: the app factory takes one and never looks at ``os.environ``
itself, so tests build as many differently configured apps as they like. Every variable is
validated here, at start-up, so that a typo stops the server with a clear message instead of
turning into 5xx answers later.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .currencies import CurrencyTable
from .deliveries import DEFAULT_RETENTION_DAYS
from .events import DEFAULT_RETENTION_DAYS as DEFAULT_EVENT_RETENTION_DAYS
from .webhooks import WebhookConfig, WebhookConfigError, parse_config

__all__ = [
    "DEFAULT_LIMIT_COOLING_OFF",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_STALE_HOLD_DAYS",
    "DEFAULT_STALE_HOLD_GRACE",
    "HMAC_ALGORITHMS",
    "Network",
    "Settings",
    "SettingsError",
    "limit_options",
    "parse_duration",
    "stale_hold_options",
]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# A settle of a million participants is a few hundred bytes each: about 300 MB of JSON.
DEFAULT_MAX_BODY_BYTES = 512 * 1024 * 1024

# The contract signs callbacks with a *shared secret*, which means an HMAC algorithm. Asymmetric
# algorithms would need public keys, and ``none`` is never acceptable.
HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")

MIN_OPERATOR_TOKEN_LENGTH = 16

DEFAULT_STALE_HOLD_GRACE = timedelta(hours=6)
DEFAULT_STALE_HOLD_DAYS = 7.0
# How long a higher responsible-gambling limit, or a limit's removal, waits (UKGC RTS 12).
DEFAULT_LIMIT_COOLING_OFF = timedelta(hours=24)


class SettingsError(ValueError):
    """A configuration value is missing or malformed; the message names the variable."""


@dataclass(frozen=True)
class Settings:
    """Everything the callback server is configured with. Build it with :meth:`from_env`."""

    database_url: str = "sqlite:///ledger.db"
    # A streaming standby that reports read from (statements, bets, pool reports); never money
    # decisions, which read the primary inside the writer's transaction.
    read_database_url: str | None = None
    # psycopg's prepare_threshold: "none" behind pgbouncer in transaction mode, where a
    # server-side prepared statement would be missing on the next transaction's connection.
    db_prepare_threshold: str | None = None
    client_name: str | None = None
    jwt_secrets: tuple[str, ...] = ()
    jwt_algorithms: tuple[str, ...] = ("HS256",)
    jwt_leeway: int = 30
    operator_token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    refund_tournament_path: str | None = None
    allowed_ips: tuple[Network, ...] = ()
    trusted_proxies: tuple[Network, ...] = ()
    currencies: CurrencyTable = field(default_factory=CurrencyTable)
    db_timeout: float = 10.0
    # Postgres statement_timeout: bounds a query that runs (or waits) too long, so that the
    # platform hears 503 before its own 2-minute timeout. Configurable so that an operator can
    # lower it, and so that the reliability tests can prove it maps to 503.
    db_statement_timeout: float = 110.0
    db_pool_size: int = 10
    worker_threads: int = 16
    # The writer's bounds (ledger.writer): past this many queued writes, or while the writer has
    # been stuck on one batch this many seconds, a delivery is answered 503 store.busy at once.
    writer_max_queue: int = 10_000
    writer_max_wait: float = 10.0
    # SIGTERM: stop accepting, finish and answer what is in flight, exit within this many seconds.
    shutdown_timeout: float = 30.0
    tls_min_version: str = "1.3"
    log_level: str = "INFO"
    dev_mode: bool = False
    # The delivery journal (ledger.deliveries). Off only to measure what it costs.
    delivery_journal: bool = True
    # Place Bets applied in a child process (ledger.writer.process). from_env() turns it on
    # unless LEDGER_WRITER_PROCESS=off, so `ledger serve` has it; an app built in process from
    # Settings(...) (the tests') does not start one unless asked.
    writer_process: bool = False
    delivery_retention_days: int = DEFAULT_RETENTION_DAYS
    # The event feed (ledger.events): `ledger events prune` deletes events older than this.
    event_retention_days: int = DEFAULT_EVENT_RETENTION_DAYS
    # Open holds to chase with the platform (`ledger holds --stale`, the ledger_stale_holds
    # gauge): see stale_hold_options().
    stale_hold_grace: timedelta = DEFAULT_STALE_HOLD_GRACE
    stale_hold_days: float = DEFAULT_STALE_HOLD_DAYS
    # Responsible-gambling limits: how long an increase or a removal waits (limit_options()).
    limit_cooling_off: timedelta = DEFAULT_LIMIT_COOLING_OFF
    # Signed webhooks (ledger.webhooks): LEDGER_WEBHOOKS, JSON inline or a file's path.
    webhooks: WebhookConfig | None = None
    # Signed checkpoints of the journal (docs/integrity.md): the signing key file's path; a
    # checkpoint every interval (seconds) when something was committed, appended to the file.
    signing_key: str | None = None
    checkpoint_interval: float = 60.0
    checkpoint_file: str | None = None
    # What this deployment is (development, staging, production), reported by /health so that
    # tools which write test data (the conformance kit) can refuse to run against production.
    environment: str | None = None
    # Console sign-in (ledger.http.limits): attempts per client address and overall (moving
    # windows, "N/second|minute|hour"), and the threads that run the password hash.
    # The console's cookies: Secure when the request came over TLS (directly, or per a trusted
    # proxy's X-Forwarded-Proto) with "auto", always with "always" (ledger.http.secure).
    secure_cookies: str = "auto"
    sign_in_rate: str = "10/minute"
    sign_in_rate_total: str = "60/minute"
    hash_threads: int = 2
    # The operator's side (console, /admin, /metrics) on a listener of its own, (host, port),
    # and the addresses allowed to reach it (ledger.http.surfaces).
    operator_listen: tuple[str, int] | None = None
    operator_allowed_ips: tuple[Network, ...] = ()
    # Long-polls of GET /admin/events waiting at once (ledger.http.notifier); more get 503.
    event_waiters: int = 200

    def __post_init__(self) -> None:
        if not self.database_url.startswith(("sqlite", "postgres")):
            raise SettingsError(
                f"LEDGER_DATABASE_URL={self.database_url!r}: expected sqlite:///path.db or "
                "postgresql+psycopg://user:password@host/database"
            )
        if self.read_database_url is not None and not self.read_database_url.startswith("postgres"):
            raise SettingsError(
                "LEDGER_READ_DATABASE_URL: a read replica is a Postgres standby "
                "(postgresql+psycopg://user@host/database)"
            )
        if self.db_prepare_threshold is not None:
            from .stores.postgres import parse_prepare_threshold

            try:
                parse_prepare_threshold(self.db_prepare_threshold)
            except ValueError:
                raise SettingsError(
                    f"LEDGER_PG_PREPARE_THRESHOLD={self.db_prepare_threshold!r}: "
                    "expected none or a number >= 0"
                ) from None
        unknown = [name for name in self.jwt_algorithms if name not in HMAC_ALGORITHMS]
        if unknown or not self.jwt_algorithms:
            raise SettingsError(
                f"LEDGER_JWT_ALGORITHMS: {', '.join(unknown) or 'empty'} not allowed; "
                f"choose from {', '.join(HMAC_ALGORITHMS)}"
            )
        if any(not secret for secret in self.jwt_secrets):
            raise SettingsError("LEDGER_JWT_SECRET: empty secret in the list")
        if self.operator_token is not None:
            if len(self.operator_token) < MIN_OPERATOR_TOKEN_LENGTH:
                raise SettingsError(
                    f"LEDGER_OPERATOR_TOKEN: use at least {MIN_OPERATOR_TOKEN_LENGTH} characters"
                )
            # One credential must never open both doors: platform tokens stay off /admin.
            if self.operator_token in self.jwt_secrets:
                raise SettingsError("LEDGER_OPERATOR_TOKEN must differ from LEDGER_JWT_SECRET")
        if self.max_body_bytes < 1024:
            raise SettingsError("LEDGER_MAX_BODY_BYTES: must be at least 1024")
        path = self.refund_tournament_path
        if path is not None and (
            not path.startswith("/")
            or path.rstrip("/") in ("", "/bets", "/winners", "/bets/cancel")
        ):
            raise SettingsError(
                f"LEDGER_REFUND_TOURNAMENT_PATH={path!r}: expected a path such as "
                "/tournaments/cancel that no other callback uses"
            )
        if self.tls_min_version not in ("1.2", "1.3"):
            raise SettingsError("LEDGER_TLS_MIN_VERSION: expected 1.2 or 1.3")
        if self.db_timeout <= 0 or self.db_pool_size < 1 or self.worker_threads < 1:
            raise SettingsError("LEDGER_DB_TIMEOUT, LEDGER_DB_POOL_SIZE, LEDGER_WORKER_THREADS > 0")
        if self.db_statement_timeout <= 0:
            raise SettingsError("LEDGER_DB_STATEMENT_TIMEOUT: must be > 0")
        if self.writer_max_queue < 1 or self.writer_max_wait <= 0:
            raise SettingsError("LEDGER_WRITER_MAX_QUEUE and LEDGER_WRITER_MAX_WAIT: must be > 0")
        if self.delivery_retention_days < 1:
            raise SettingsError("LEDGER_DELIVERY_RETENTION_DAYS: must be at least 1")
        if not self.checkpoint_interval > 0:
            raise SettingsError("LEDGER_CHECKPOINT_INTERVAL: must be above 0 seconds")
        if self.event_retention_days < 1:
            raise SettingsError("LEDGER_EVENT_RETENTION_DAYS: must be at least 1")
        if self.shutdown_timeout <= 0:
            raise SettingsError("LEDGER_SHUTDOWN_TIMEOUT: must be > 0")
        if self.stale_hold_grace < timedelta(0) or self.stale_hold_days <= 0:
            raise SettingsError("LEDGER_STALE_HOLD_GRACE >= 0 and LEDGER_STALE_HOLD_DAYS > 0")
        for name, rate in (
            ("LEDGER_SIGN_IN_RATE", self.sign_in_rate),
            ("LEDGER_SIGN_IN_RATE_TOTAL", self.sign_in_rate_total),
        ):
            if not _RATE.fullmatch(rate.strip().lower()):
                raise SettingsError(f"{name}={rate!r}: expected a rate such as 10/minute")
        if self.secure_cookies not in ("auto", "always"):
            raise SettingsError("LEDGER_SECURE_COOKIES: expected auto or always")
        if self.event_waiters < 1:
            raise SettingsError("LEDGER_EVENT_WAITERS: must be at least 1")
        if self.hash_threads < 1:
            raise SettingsError("LEDGER_HASH_THREADS: must be at least 1")

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read every ``LEDGER_*`` variable; unset or empty ones take their defaults."""

        def get(name: str) -> str | None:
            value = environ.get(name, "").strip()
            return value or None

        options: dict[str, Any] = {}
        if (url := get("LEDGER_DATABASE_URL")) is not None:
            options["database_url"] = url
        options["read_database_url"] = get("LEDGER_READ_DATABASE_URL")
        options["db_prepare_threshold"] = get("LEDGER_PG_PREPARE_THRESHOLD")
        options["client_name"] = get("LEDGER_CLIENT_NAME")
        options["environment"] = get("LEDGER_ENVIRONMENT")
        options["jwt_secrets"] = _split(get("LEDGER_JWT_SECRET"))
        if (algorithms := get("LEDGER_JWT_ALGORITHMS")) is not None:
            options["jwt_algorithms"] = tuple(name.upper() for name in _split(algorithms))
        options["operator_token"] = get("LEDGER_OPERATOR_TOKEN")
        options["refund_tournament_path"] = get("LEDGER_REFUND_TOURNAMENT_PATH")
        options["allowed_ips"] = _networks("LEDGER_ALLOWED_IPS", get("LEDGER_ALLOWED_IPS"))
        options["trusted_proxies"] = _networks(
            "LEDGER_TRUSTED_PROXIES", get("LEDGER_TRUSTED_PROXIES")
        )
        options["operator_allowed_ips"] = _networks(
            "LEDGER_OPERATOR_ALLOWED_IPS", get("LEDGER_OPERATOR_ALLOWED_IPS")
        )
        if (listen := get("LEDGER_OPERATOR_LISTEN")) is not None:
            options["operator_listen"] = _listen("LEDGER_OPERATOR_LISTEN", listen)
        for name, key, kind in (
            ("LEDGER_JWT_LEEWAY", "jwt_leeway", int),
            ("LEDGER_MAX_BODY_BYTES", "max_body_bytes", int),
            ("LEDGER_DB_TIMEOUT", "db_timeout", float),
            ("LEDGER_DB_STATEMENT_TIMEOUT", "db_statement_timeout", float),
            ("LEDGER_DB_POOL_SIZE", "db_pool_size", int),
            ("LEDGER_WORKER_THREADS", "worker_threads", int),
            ("LEDGER_WRITER_MAX_QUEUE", "writer_max_queue", int),
            ("LEDGER_WRITER_MAX_WAIT", "writer_max_wait", float),
            ("LEDGER_SHUTDOWN_TIMEOUT", "shutdown_timeout", float),
            ("LEDGER_DELIVERY_RETENTION_DAYS", "delivery_retention_days", int),
            ("LEDGER_EVENT_RETENTION_DAYS", "event_retention_days", int),
            ("LEDGER_HASH_THREADS", "hash_threads", int),
            ("LEDGER_EVENT_WAITERS", "event_waiters", int),
            ("LEDGER_CHECKPOINT_INTERVAL", "checkpoint_interval", float),
        ):
            if (raw := get(name)) is not None:
                try:
                    options[key] = kind(raw)
                except ValueError:
                    raise SettingsError(f"{name}={raw!r}: expected a number") from None
        for name, key in (
            ("LEDGER_SIGNING_KEY", "signing_key"),
            ("LEDGER_CHECKPOINT_FILE", "checkpoint_file"),
        ):
            if raw := get(name):
                options[key] = raw
        if (journal := get("LEDGER_DELIVERY_JOURNAL")) is not None:
            if journal.lower() not in ("on", "off"):
                raise SettingsError(f"LEDGER_DELIVERY_JOURNAL={journal!r}: expected on or off")
            options["delivery_journal"] = journal.lower() == "on"
        process = (get("LEDGER_WRITER_PROCESS") or "on").lower()
        if process not in ("on", "off"):
            raise SettingsError(f"LEDGER_WRITER_PROCESS={process!r}: expected on or off")
        options["writer_process"] = process == "on"
        if (secure := get("LEDGER_SECURE_COOKIES")) is not None:
            options["secure_cookies"] = secure.lower()
        if (rate := get("LEDGER_SIGN_IN_RATE")) is not None:
            options["sign_in_rate"] = rate
        if (rate := get("LEDGER_SIGN_IN_RATE_TOTAL")) is not None:
            options["sign_in_rate_total"] = rate
        if (tls := get("LEDGER_TLS_MIN_VERSION")) is not None:
            options["tls_min_version"] = tls
        if (level := get("LEDGER_LOG_LEVEL")) is not None:
            options["log_level"] = level.upper()
        options.update(stale_hold_options(environ))
        options.update(limit_options(environ))
        if (hooks := get("LEDGER_WEBHOOKS")) is not None:
            try:
                options["webhooks"] = parse_config(hooks, environ)
            except WebhookConfigError as exc:
                raise SettingsError(str(exc)) from None
        try:
            options["currencies"] = CurrencyTable.from_env(environ)
        except ValueError as exc:
            raise SettingsError(f"LEDGER_CURRENCY_SCALES / LEDGER_DEFAULT_SCALE: {exc}") from None
        return cls(**options)

    def ledger_options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`ledger.open_ledger`: the writer's bounds and the store's."""
        return {
            "max_queue": self.writer_max_queue,
            "max_wait": self.writer_max_wait,
            "threads": self.worker_threads,
            "stale_hold_grace": self.stale_hold_grace,
            "stale_hold_days": self.stale_hold_days,
            "limit_cooling_off": self.limit_cooling_off,
            "read_url": self.read_database_url,
            "writer_process": self.writer_process,
            **self.store_options(),
        }

    def store_options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`ledger.open_ledger` that bound every database wait."""
        if self.database_url.startswith("sqlite"):
            return {"busy_timeout": self.db_timeout}
        options: dict[str, Any] = {
            "lock_timeout": self.db_timeout,
            "statement_timeout": self.db_statement_timeout,
            "connect_timeout": min(self.db_timeout, 5.0),
            "pool_size": self.db_pool_size,
        }
        if self.db_prepare_threshold is not None:
            options["prepare_threshold"] = self.db_prepare_threshold
        return options


def stale_hold_options(environ: Mapping[str, str]) -> dict[str, Any]:
    """``stale_hold_grace`` and ``stale_hold_days`` from ``LEDGER_STALE_HOLD_GRACE`` (a duration:
    ``6h``, ``90m``, ``30s``, ``1d``; a bare number is hours) and ``LEDGER_STALE_HOLD_DAYS`` (a
    number of days), where set. The server and the ``ledger`` command read the same variables."""
    options: dict[str, Any] = {}
    grace = environ.get("LEDGER_STALE_HOLD_GRACE", "").strip()
    if grace:
        options["stale_hold_grace"] = parse_duration(grace, "LEDGER_STALE_HOLD_GRACE")
    days = environ.get("LEDGER_STALE_HOLD_DAYS", "").strip()
    if days:
        try:
            options["stale_hold_days"] = float(days)
        except ValueError:
            raise SettingsError(f"LEDGER_STALE_HOLD_DAYS={days!r}: expected a number") from None
        if not 0 < options["stale_hold_days"] < 100_000:
            raise SettingsError(f"LEDGER_STALE_HOLD_DAYS={days!r}: expected days > 0")
    return options


def limit_options(environ: Mapping[str, str]) -> dict[str, Any]:
    """``limit_cooling_off`` from ``LEDGER_LIMIT_COOLING_OFF`` where set: a bare number of
    seconds, or a duration (``24h``, ``7d``, ``90m``, ``30s``). The server and the ``ledger``
    command read the same variable."""
    text = environ.get("LEDGER_LIMIT_COOLING_OFF", "").strip()
    if not text:
        return {}
    name = "LEDGER_LIMIT_COOLING_OFF"
    return {"limit_cooling_off": parse_duration(text if text[-1:].isalpha() else f"{text}s", name)}


# What ledger.http.limits reads (the limits library's notation, one rate).
_RATE = re.compile(r"[1-9][0-9]{0,8}\s*(/|per)\s*(second|minute|hour|day)")

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, name: str) -> timedelta:
    """``6h``, ``90m``, ``30s``, ``1d``, or a bare number of hours, as a duration >= 0."""
    text = text.strip().lower()
    unit = _UNITS.get(text[-1:])
    number = text[:-1] if unit is not None else text
    try:
        value = float(number) * (unit or 3600)
    except ValueError:
        value = -1.0
    if not 0 <= value < 10**9:  # also refuses nan and inf
        raise SettingsError(f"{name}={text!r}: expected a duration such as 6h, 90m or 1d")
    return timedelta(seconds=value)


def _split(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _listen(name: str, text: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8001`` for IPv6) as ``(host, port)``."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingsError(f"{name}={text!r}: expected host:port, such as 10.0.0.5:8001")
    return host, int(port)


def _networks(name: str, text: str | None) -> tuple[Network, ...]:
    networks = []
    for item in _split(text):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise SettingsError(f"{name}: {item!r} is not an IP address or CIDR") from None
    return tuple(networks)
