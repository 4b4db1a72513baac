"""``ledger serve`` refuses what cannot work before its slow start-up, warns about unknown
variables, and ends on Ctrl-C with exit 0 after a graceful shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trustme
from click.testing import CliRunner

from ledger.cli import main
from ledger.settings import Settings
from ledger.variables import RecordingEnviron, unknown_variable_warnings
from support.httpkit import SECRET, free_port, ledger_command, run_server
from support.processes import end_group, ready_deadline


@contextmanager
def listening() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        yield int(other.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("LEDGER_")}
    return {**env, "LEDGER_JWT_SECRET": SECRET, **extra}


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``ledger serve`` in process: every refusal here happens before the app is imported."""
    result = CliRunner().invoke(
        main, ["serve", "--db", f"sqlite:///{tmp_path / 'l.db'}", *args], env=env or {}
    )
    return result.exit_code, result.output


def test_a_second_server_on_a_busy_port_exits_1_naming_the_port_before_its_slow_start(
    tmp_path: Path,
) -> None:
    first = tmp_path / "first"
    first.mkdir()
    with run_server(first, {"LEDGER_JWT_SECRET": SECRET}) as server:
        port = server.url.rsplit(":", 1)[1]
        second = subprocess.run(
            [*ledger_command(), "serve", "--port", port, "--db", f"sqlite:///{tmp_path}/b.db"],
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=ready_deadline(),
        )
    assert second.returncode == 1, second.stderr
    assert second.stderr.strip() == (
        f"error: server.port_in_use: 127.0.0.1:{port} is already in use (another ledger serve?)"
    )
    assert not (tmp_path / "b.db").exists()  # refused before the store was opened


def test_a_busy_operator_listener_is_refused_like_the_main_port(tmp_path: Path) -> None:
    with listening() as port:
        code, output = serve(
            tmp_path,
            "--port",
            str(free_port()),
            env={"LEDGER_OPERATOR_LISTEN": f"127.0.0.1:{port}", "LEDGER_JWT_SECRET": SECRET},
        )
    assert code == 1
    assert f"error: server.port_in_use: 127.0.0.1:{port} is already in use" in output
    assert not (tmp_path / "l.db").exists()


def test_an_address_the_machine_does_not_have_is_refused_at_once(tmp_path: Path) -> None:
    code, output = serve(
        tmp_path, "--host", "192.0.2.1", "--port", "8000", env={"LEDGER_JWT_SECRET": SECRET}
    )
    assert code == 1
    assert "error: server.cannot_listen: cannot listen on 192.0.2.1:8000" in output


def test_tls_files_that_do_not_load_are_refused_before_start_up(tmp_path: Path) -> None:
    authority = trustme.CA()
    cert = tmp_path / "cert.pem"
    authority.issue_cert("127.0.0.1").cert_chain_pems[0].write_to_path(str(cert))
    other_key = tmp_path / "other-key.pem"
    authority.issue_cert("127.0.0.1").private_key_pem.write_to_path(str(other_key))
    code, output = serve(
        tmp_path,
        "--port",
        str(free_port()),
        "--ssl-certfile",
        str(cert),
        "--ssl-keyfile",
        str(other_key),
        env={"LEDGER_JWT_SECRET": SECRET},
    )
    assert code == 1
    assert f"error: server.tls_invalid: cannot load the certificate {cert}" in output
    assert not (tmp_path / "l.db").exists()


def test_a_sqlite_file_in_a_missing_directory_is_refused_before_start_up(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["serve", "--port", str(free_port()), "--db", f"sqlite:///{tmp_path}/nowhere/l.db"],
        env={"LEDGER_JWT_SECRET": SECRET},
    )
    assert result.exit_code == 1
    assert f"error: config.invalid: LEDGER_DATABASE_URL='sqlite:///{tmp_path}/nowhere/l.db'" in (
        result.output
    )
    assert "does not exist" in result.output


def test_an_unknown_ledger_variable_is_warned_about_naming_the_closest_known_one(
    tmp_path: Path,
) -> None:
    with listening() as port:  # stops right after the warnings
        code, output = serve(
            tmp_path,
            "--port",
            str(port),
            env={
                "LEDGER_JWT_SECRET": SECRET,
                "LEDGER_OPERATORTOKEN": "operator-token-0123456789",
                "LEDGER_NOTHING_LIKE_IT": "1",
            },
        )
    assert code == 1
    assert (
        "warning: config.unknown_variable: LEDGER_OPERATORTOKEN is not a ledger setting and is "
        "ignored; did you mean LEDGER_OPERATOR_TOKEN?"
    ) in output
    assert (
        "warning: config.unknown_variable: LEDGER_NOTHING_LIKE_IT is not a ledger setting and is "
        "ignored\n"
    ) in output


def test_a_variable_a_webhook_names_as_its_secret_is_not_unknown() -> None:
    hooks = [{"name": "crm", "url": "https://crm.example/hook", "secret_env": "LEDGER_HOOK_SECRET"}]
    env = {"LEDGER_WEBHOOKS": json.dumps({"endpoints": hooks}), "LEDGER_HOOK_SECRET": "s" * 32}
    environ = RecordingEnviron(env)
    Settings.from_env(environ)
    assert unknown_variable_warnings(environ, also_read=environ.read) == []
    assert unknown_variable_warnings(env) != []


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_shuts_the_server_down_gracefully_and_exits_0(tmp_path: Path, workers: int) -> None:
    env = {"LEDGER_JWT_SECRET": SECRET}
    with run_server(tmp_path, env, "--workers", str(workers)) as server:
        os.kill(server.process.pid, signal.SIGINT)  # what Ctrl-C sends the foreground process
        try:
            code = server.process.wait(timeout=ready_deadline())
        finally:
            end_group(server.process)
        output = server.output()
    assert code == 0, output
    assert "Aborted!" not in output
    assert "interrupted" not in output
    assert "Application shutdown complete" in output
