"""HTTPS served directly by ``ledger serve``: TLS 1.3 (contract 1.5, the latest stable TLS)."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import trustme

from support.httpkit import SECRET, run_server


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def certificate(ca: trustme.CA, tmp_path: Path) -> tuple[str, str]:
    issued = ca.issue_cert("127.0.0.1", "localhost")
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    certfile.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(keyfile))
    return str(certfile), str(keyfile)


def client_context(
    ca: trustme.CA, minimum: ssl.TLSVersion, maximum: ssl.TLSVersion
) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    context.minimum_version = minimum
    context.maximum_version = maximum
    return context


def handshake(url: str, context: ssl.SSLContext) -> str | None:
    """The negotiated TLS version."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    assert parts.port is not None
    with (
        socket.create_connection((parts.hostname, parts.port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=parts.hostname) as tls,
    ):
        return tls.version()


def test_tls13_only_client_connects_and_a_tls12_client_is_refused(
    ca: trustme.CA, certificate: tuple[str, str], tmp_path: Path
) -> None:
    certfile, keyfile = certificate
    tls13 = client_context(ca, ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    env = {"LEDGER_DATABASE_URL": f"sqlite:///{tmp_path}/l.db", "LEDGER_JWT_SECRET": SECRET}
    args = ("--ssl-certfile", certfile, "--ssl-keyfile", keyfile)
    with run_server(tmp_path, env, *args, scheme="https", verify=tls13) as server:
        assert handshake(server.url, tls13) == "TLSv1.3"
        assert httpx.get(f"{server.url}/health", verify=tls13).json() == {"status": "ok"}
        tls12 = client_context(ca, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
        with pytest.raises(ssl.SSLError):
            handshake(server.url, tls12)


def test_tls12_can_be_allowed_by_configuration(
    ca: trustme.CA, certificate: tuple[str, str], tmp_path: Path
) -> None:
    certfile, keyfile = certificate
    tls12 = client_context(ca, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
    env = {
        "LEDGER_DATABASE_URL": f"sqlite:///{tmp_path}/l.db",
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_TLS_MIN_VERSION": "1.2",
    }
    args = ("--ssl-certfile", certfile, "--ssl-keyfile", keyfile)
    with run_server(tmp_path, env, *args, scheme="https", verify=tls12) as server:
        assert handshake(server.url, tls12) == "TLSv1.2"
