"""Postgres URLs: libpq's host lists, the primary or any host, and psycopg's prepare threshold."""

from __future__ import annotations

import re
from urllib.parse import quote

from sqlalchemy.engine import URL, make_url

# libpq's own host list, ``postgresql://user@h1:5432,h2:5432/db``: SQLAlchemy's URL parser reads
# one host and one port, so the list becomes its multi-host form (``?host=h1:5432&host=h2:5432``).
_HOST_LIST = re.compile(
    r"^(?P<scheme>[^:/?#]+)://(?P<user>[^@/?#]*@)?(?P<hosts>[^/?#]*,[^/?#]*)(?P<rest>[/?].*)?$"
)


# What psycopg does with a statement it has run this many times on one connection: prepare it
# server-side. ``None`` never prepares, which pgbouncer in transaction mode needs (a prepared
# statement lives on one server connection, the next transaction may get another).
DEFAULT_PREPARE_THRESHOLD = 5


def normalize_url(url: str) -> str:
    """One SQLAlchemy URL for psycopg 3 from any of the forms an operator may write.

    ``postgres://`` and ``postgresql://`` mean psycopg 3; libpq's host list
    (``postgresql://user@h1:5432,h2:5432/db``) becomes SQLAlchemy's multi-host form
    (``postgresql+psycopg://user@/db?host=h1:5432&host=h2:5432``); libpq's own comma-separated
    ``?host=h1,h2&port=5432,5433`` passes through unchanged, as psycopg reads it directly.
    """
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            url = "postgresql+psycopg://" + url[len(prefix) :]
    found = _HOST_LIST.match(url)
    if found is None:
        return url
    path, _, query = (found["rest"] or "/").partition("?")
    hosts = [f"host={quote(host, safe=':[]')}" for host in found["hosts"].split(",") if host]
    return f"{found['scheme']}://{found['user'] or ''}{path or '/'}?" + "&".join(
        [*hosts, *([query] if query else [])]
    )


def host_count(url: URL) -> int:
    """How many hosts the URL names (SQLAlchemy's repeated ``host=`` or libpq's ``h1,h2``)."""
    named = url.query.get("host", ())
    hosts = [named] if isinstance(named, str) else list(named)
    if url.host:
        hosts.append(url.host)
    return sum(len([part for part in host.split(",") if part]) for host in hosts)


def parse_prepare_threshold(text: str | None) -> int | None:
    """``none`` (never prepare server-side, for pgbouncer in transaction mode) or a count."""
    if text is None:
        return DEFAULT_PREPARE_THRESHOLD
    if text.strip().lower() in ("none", "off", "never"):
        return None
    count = int(text)
    if count < 0:
        raise ValueError("prepare_threshold must be >= 0 or none")
    return count


def connection_url(url: str, *, primary: bool) -> tuple[URL, int | str | None]:
    """The engine's URL and the URL's ``prepare_threshold`` (taken out of its query), if any.

    ``?prepare_threshold=none`` in the URL itself lets one URL carry everything a connection
    through pgbouncer needs (libpq would refuse the parameter, so it never reaches libpq).

    A primary URL that names several hosts and no ``target_session_attrs`` gets ``read-write``:
    libpq then tries the hosts in turn and keeps only the one that accepts writes, so that after
    a failover every new connection lands on the promoted standby, never on a read-only host.
    """
    parsed = make_url(normalize_url(url))
    given = _single(parsed.query.get("prepare_threshold"))
    threshold: int | str | None = "default" if given is None else parse_prepare_threshold(given)
    parsed = parsed.difference_update_query(["prepare_threshold"])
    if primary and host_count(parsed) > 1 and "target_session_attrs" not in parsed.query:
        parsed = parsed.update_query_dict({"target_session_attrs": "read-write"})
    return parsed, threshold


def _single(value: str | tuple[str, ...] | None) -> str | None:
    if isinstance(value, tuple):
        return value[-1] if value else None
    return value
