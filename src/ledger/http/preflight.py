"""What ``ledger serve`` checks before its slow start-up: the ports, the TLS files, the database.

Importing the app, opening the store, migrating it and starting the writer process take seconds
(tens of seconds on a loaded machine); a server that could never have listened should say so at
once, in the project's words, not after all that with uvicorn's ``[Errno 98]``. Each check
raises :class:`~ledger.errors.LedgerError`, which the ``ledger`` group prints as
``error: <key>: <message>`` (exit 1). Standard library only: this runs before the slow imports.
"""

from __future__ import annotations

import errno
import socket
import ssl
from pathlib import Path

from ..errors import LedgerError

__all__ = ["check_database_url", "check_listen", "check_tls"]


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check_listen(host: str, port: int, *, server: str = "ledger serve") -> None:
    """Bind and listen on ``host:port`` for a moment, as the server will, then let it go.
    ``server``: what the message guesses may hold the port already.

    The socket is made as uvicorn makes its own (IPv6 when the host has a colon, else IPv4, with
    ``SO_REUSEADDR``): connections of a server just stopped (TIME_WAIT) do not count as the port
    being in use, a socket listening on it does.
    """
    if port == 0:
        return  # any free port: nothing to collide with
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
            probe.listen(1)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise LedgerError(
                    f"{_address(host, port)} is already in use (another {server}?)",
                    key="server.port_in_use",
                ) from None
            raise LedgerError(
                f"cannot listen on {_address(host, port)}: {exc.strerror or exc}",
                key="server.cannot_listen",
            ) from None


def check_tls(certfile: str | None, keyfile: str | None) -> None:
    """Both files or neither, and they load as a certificate and its private key."""
    if not certfile and not keyfile:
        return
    if not certfile or not keyfile:
        raise LedgerError("HTTPS needs both --ssl-certfile and --ssl-keyfile", key="config.invalid")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "reason", None) or exc.strerror or str(exc)
        raise LedgerError(
            f"cannot load the certificate {certfile} with the key {keyfile}: {reason}",
            key="server.tls_invalid",
        ) from None


def check_database_url(url: str) -> None:
    """A URL of the form ``scheme://...``, and a SQLite file's directory that exists (the server
    creates the file, not its directory). What a Postgres URL names is for the database to say:
    libpq has defaults for every part of it."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise LedgerError(
            f"LEDGER_DATABASE_URL={url!r}: expected sqlite:///path.db or "
            "postgresql+psycopg://user:password@host/database",
            key="config.invalid",
        )
    if not scheme.startswith("sqlite"):
        return
    path = rest[1:].split("?", 1)[0]  # sqlite:///relative.db, sqlite:////absolute.db
    if path in ("", ":memory:"):
        return
    folder = Path(path).parent
    if not folder.is_dir():
        raise LedgerError(
            f"LEDGER_DATABASE_URL={url!r}: the directory {folder} does not exist",
            key="config.invalid",
        )
