"""Every ``LEDGER_*`` environment variable the project reads, and the warning about the others.

:data:`KNOWN` is the one list: ``ledger serve`` warns about any other ``LEDGER_*`` variable it
finds (a misspelt ``LEDGER_OPERATORTOKEN`` would otherwise leave ``/admin`` off in silence), and
the README's configuration table must name exactly these (tests/unit/test_docs_blocks.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator, Mapping

__all__ = ["KNOWN", "RecordingEnviron", "unknown_variable_warnings"]

PREFIX = "LEDGER_"

KNOWN: tuple[str, ...] = (
    # The server's settings (ledger.settings) and `ledger serve`'s own options.
    "LEDGER_DATABASE_URL",
    "LEDGER_READ_DATABASE_URL",
    "LEDGER_PG_PREPARE_THRESHOLD",
    "LEDGER_JWT_SECRET",
    "LEDGER_JWT_ALGORITHMS",
    "LEDGER_JWT_LEEWAY",
    "LEDGER_CLIENT_NAME",
    "LEDGER_OPERATOR_TOKEN",
    "LEDGER_OPERATOR_LISTEN",
    "LEDGER_OPERATOR_ALLOWED_IPS",
    "LEDGER_SECURE_COOKIES",
    "LEDGER_SIGN_IN_RATE",
    "LEDGER_SIGN_IN_RATE_TOTAL",
    "LEDGER_HASH_THREADS",
    "LEDGER_EVENT_WAITERS",
    "LEDGER_ENVIRONMENT",
    "LEDGER_MAX_BODY_BYTES",
    "LEDGER_REFUND_TOURNAMENT_PATH",
    "LEDGER_ALLOWED_IPS",
    "LEDGER_TRUSTED_PROXIES",
    "LEDGER_CURRENCY_SCALES",
    "LEDGER_DEFAULT_SCALE",
    "LEDGER_DB_TIMEOUT",
    "LEDGER_DB_STATEMENT_TIMEOUT",
    "LEDGER_DB_POOL_SIZE",
    "LEDGER_WORKER_THREADS",
    "LEDGER_WORKERS",
    "LEDGER_WRITER_MAX_QUEUE",
    "LEDGER_WRITER_MAX_WAIT",
    "LEDGER_SHUTDOWN_TIMEOUT",
    "LEDGER_TLS_MIN_VERSION",
    "LEDGER_SSL_CERTFILE",
    "LEDGER_SSL_KEYFILE",
    "LEDGER_LOG_LEVEL",
    "LEDGER_DELIVERY_RETENTION_DAYS",
    "LEDGER_EVENT_RETENTION_DAYS",
    "LEDGER_WRITER_PROCESS",
    "LEDGER_DELIVERY_JOURNAL",
    "LEDGER_STALE_HOLD_GRACE",
    "LEDGER_STALE_HOLD_DAYS",
    "LEDGER_LIMIT_COOLING_OFF",
    "LEDGER_WEBHOOKS",
    "LEDGER_SIGNING_KEY",
    "LEDGER_CHECKPOINT_INTERVAL",
    "LEDGER_CHECKPOINT_FILE",
    # The conformance kit's.
    "LEDGER_TICKETS_URL",
    # The tests' and benchmarks' own: set on a developer's machine, so not unknown there either.
    "LEDGER_TEST_POSTGRES_URL",
    "LEDGER_TEST_PG_PREPARE_THRESHOLD",
    "LEDGER_CRASH_KILLS",
    "LEDGER_SOAK_SECONDS",
    "LEDGER_HYPOTHESIS_PROFILE",
    "LEDGER_SCREENSHOTS",
)


class RecordingEnviron(Mapping[str, str]):
    """An environment that remembers every name looked up in it.

    What the settings read besides :data:`KNOWN` is no typo either: a webhook endpoint's
    ``secret_env`` may name any variable, ``LEDGER_``-prefixed or not.
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.read.add(name)
        return self._environ[name]

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self.read.add(name)
        return name in self._environ

    def __iter__(self) -> Iterator[str]:
        return iter(self._environ)

    def __len__(self) -> int:
        return len(self._environ)


def unknown_variable_warnings(
    environ: Mapping[str, str], also_read: Collection[str] = ()
) -> list[str]:
    """A ``warning: config.unknown_variable: ...`` line per ``LEDGER_*`` variable of
    ``environ`` that is neither in :data:`KNOWN` nor in ``also_read``, with the closest known
    name when one is close enough to be the intended one."""
    lines = []
    for name in sorted(environ):
        if not name.startswith(PREFIX) or name in KNOWN or name in also_read:
            continue
        close = difflib.get_close_matches(name, KNOWN, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]}?" if close else ""
        lines.append(
            f"warning: config.unknown_variable: {name} is not a ledger setting and is ignored{hint}"
        )
    return lines
