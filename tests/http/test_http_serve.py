"""Configuration (``Settings.from_env``) and the ``ledger serve`` / ``ledger token`` commands."""

from __future__ import annotations

import gc
import io
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from ipaddress import ip_network
from pathlib import Path

import jwt
import pytest
from click.testing import CliRunner
from litestar.testing import TestClient

from ledger.cli import main
from ledger.http.launch import served_app
from ledger.http.logs import JSON_LOGGERS
from ledger.settings import DEFAULT_MAX_BODY_BYTES, Settings, SettingsError
from support.httpkit import SECRET
from support.logs import served_logging

# --- Settings ---------------------------------------------------------------------------------


def test_defaults_need_no_environment() -> None:
    settings = Settings.from_env({})
    assert settings.database_url == "sqlite:///ledger.db"
    assert settings.jwt_secrets == ()
    assert settings.jwt_algorithms == ("HS256",)
    assert settings.operator_token is None
    assert settings.max_body_bytes == DEFAULT_MAX_BODY_BYTES
    assert settings.refund_tournament_path is None
    assert settings.allowed_ips == ()


def test_every_variable_is_read() -> None:
    settings = Settings.from_env(
        {
            "LEDGER_DATABASE_URL": "postgresql+psycopg://u@db/ledger",
            "LEDGER_CLIENT_NAME": "acme",
            "LEDGER_JWT_SECRET": "new-secret, old-secret",
            "LEDGER_JWT_ALGORITHMS": "hs256,HS512",
            "LEDGER_JWT_LEEWAY": "5",
            "LEDGER_OPERATOR_TOKEN": "operator-token-0123456789",
            "LEDGER_MAX_BODY_BYTES": "1048576",
            "LEDGER_REFUND_TOURNAMENT_PATH": "/tournaments/cancel",
            "LEDGER_ALLOWED_IPS": "203.0.113.0/24, 2001:db8::1",
            "LEDGER_TRUSTED_PROXIES": "10.0.0.1",
            "LEDGER_CURRENCY_SCALES": "FUN=0,BTC=8",
            "LEDGER_DEFAULT_SCALE": "none",
            "LEDGER_DB_TIMEOUT": "2.5",
            "LEDGER_DB_STATEMENT_TIMEOUT": "30",
            "LEDGER_DB_POOL_SIZE": "4",
            "LEDGER_WORKER_THREADS": "8",
            "LEDGER_TLS_MIN_VERSION": "1.2",
            "LEDGER_LOG_LEVEL": "debug",
        }
    )
    assert settings.database_url == "postgresql+psycopg://u@db/ledger"
    assert settings.client_name == "acme"
    assert settings.jwt_secrets == ("new-secret", "old-secret")
    assert settings.jwt_algorithms == ("HS256", "HS512")
    assert settings.jwt_leeway == 5
    assert settings.max_body_bytes == 1048576
    assert settings.refund_tournament_path == "/tournaments/cancel"
    assert settings.allowed_ips == (ip_network("203.0.113.0/24"), ip_network("2001:db8::1"))
    assert settings.trusted_proxies == (ip_network("10.0.0.1/32"),)
    assert settings.currencies.scale("BTC") == 8
    assert settings.currencies.default_scale is None
    assert settings.db_timeout == Decimal("2.5")
    assert settings.store_options() == {
        "lock_timeout": 2.5,
        "statement_timeout": 30.0,
        "connect_timeout": 2.5,
        "pool_size": 4,
    }
    assert (settings.worker_threads, settings.tls_min_version, settings.log_level) == (
        8,
        "1.2",
        "DEBUG",
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LEDGER_DATABASE_URL", "mysql://x"),
        ("LEDGER_JWT_ALGORITHMS", "none"),
        ("LEDGER_JWT_ALGORITHMS", "RS256"),
        ("LEDGER_OPERATOR_TOKEN", "short"),
        ("LEDGER_MAX_BODY_BYTES", "lots"),
        ("LEDGER_REFUND_TOURNAMENT_PATH", "/winners"),
        ("LEDGER_REFUND_TOURNAMENT_PATH", "no-slash"),
        ("LEDGER_ALLOWED_IPS", "10.0.0.300"),
        ("LEDGER_TRUSTED_PROXIES", "proxy.example"),
        ("LEDGER_CURRENCY_SCALES", "EUR"),
        ("LEDGER_TLS_MIN_VERSION", "1.1"),
        ("LEDGER_DB_TIMEOUT", "0"),
    ],
)
def test_malformed_variable_is_refused_naming_it(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name.split("_", 1)[1].split("_")[0]):
        Settings.from_env({name: value})


def test_operator_token_equal_to_the_jwt_secret_is_refused() -> None:
    same = "the-same-credential-0123456789"
    with pytest.raises(SettingsError, match="must differ"):
        Settings.from_env({"LEDGER_JWT_SECRET": same, "LEDGER_OPERATOR_TOKEN": same})


# --- ledger token --------------------------------------------------------------------------------


def test_token_prints_bearer_client_and_a_verifiable_admin_jwt() -> None:
    result = CliRunner().invoke(
        main, ["token", "--secret", SECRET, "--client", "acme", "--sub", "42"]
    )
    assert result.exit_code == 0, result.output
    scheme, client, value = result.output.split()
    assert (scheme, client) == ("Bearer", "acme")
    claims = jwt.decode(value, SECRET, algorithms=["HS256"])
    assert claims["role"] == "admin"
    assert claims["sub"] == "42"
    assert claims["exp"] - claims["iat"] == 3600


def test_token_jwt_only_with_user_role_and_ttl() -> None:
    result = CliRunner().invoke(
        main,
        ["token", "--role", "user", "--ttl", "60", "--jwt-only"],
        env={"LEDGER_JWT_SECRET": f"{SECRET},older-secret"},
    )
    assert result.exit_code == 0, result.output
    claims = jwt.decode(result.output.strip(), SECRET, algorithms=["HS256"])
    assert claims["role"] == "user"
    assert claims["exp"] - claims["iat"] == 60


def test_token_without_a_secret_fails() -> None:
    result = CliRunner().invoke(main, ["token"], env={"LEDGER_JWT_SECRET": ""})
    assert result.exit_code != 0
    assert "LEDGER_JWT_SECRET" in result.output


# --- ledger serve (refusals; the running server is covered in test_e2e_server) ----------------


def test_serve_refuses_a_non_loopback_host_without_a_jwt_secret(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["serve", "--host", "0.0.0.0", "--db", f"sqlite:///{tmp_path}/l.db"],
        env={"LEDGER_JWT_SECRET": ""},
    )
    assert result.exit_code != 0
    assert "refusing to listen on 0.0.0.0 without LEDGER_JWT_SECRET" in result.output
    assert not (tmp_path / "l.db").exists()


def test_serve_refuses_malformed_configuration() -> None:
    result = CliRunner().invoke(main, ["serve"], env={"LEDGER_JWT_ALGORITHMS": "none"})
    assert result.exit_code != 0
    assert "LEDGER_JWT_ALGORITHMS" in result.output


def test_serve_needs_both_certificate_and_key(tmp_path: Path) -> None:
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    result = CliRunner().invoke(main, ["serve", "--ssl-certfile", str(cert)])
    assert result.exit_code != 0
    assert "--ssl-keyfile" in result.output


# --- the server's log lines -----------------------------------------------------------------------

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


@pytest.fixture
def served_log() -> Iterator[io.StringIO]:
    """Logging as ``ledger serve`` configures it, written to a buffer; put back afterwards."""
    with served_logging(io.StringIO()) as buffer:
        yield buffer


def test_plain_log_lines_start_with_an_iso_8601_utc_timestamp(served_log: io.StringIO) -> None:
    before = datetime.now(UTC)
    logging.getLogger("ledger.server").warning("database unreachable")
    (line,) = served_log.getvalue().splitlines()
    assert ISO_UTC.match(line), line
    stamp = datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00"))
    assert stamp.utcoffset() == timedelta(0)
    assert abs(stamp - before) < timedelta(minutes=1)
    assert line.endswith(" WARNING ledger.server: database unreachable")


@pytest.mark.parametrize("name", JSON_LOGGERS)
def test_json_log_lines_are_printed_bare(served_log: io.StringIO, name: str) -> None:
    logging.getLogger(name).info('{"msg":"x"}')
    assert served_log.getvalue() == '{"msg":"x"}\n'


def test_the_served_app_freezes_its_heap_once_started_and_still_answers(tmp_path: Path) -> None:
    # The collector then walks only what was made since start-up (ledger._process.freeze_heap).
    settings = Settings.from_env(
        {"LEDGER_DATABASE_URL": f"sqlite:///{tmp_path / 'ledger.db'}", "LEDGER_JWT_SECRET": SECRET}
    )
    app = served_app(settings)
    assert gc.get_freeze_count() == 0
    try:
        with TestClient(app) as client:
            assert gc.get_freeze_count() > 0
            assert client.get("/health").status_code == 200
    finally:
        gc.unfreeze()
