"""The README's Quickstart, run as a newcomer would run it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from support.httpkit import free_port, ledger_command
from support.processes import end_group, waited_too_long
from support.readme import ROOT, clean_environment, marked_block, run_block


def block(name: str, language: str = "sh") -> str:
    return marked_block(f"<!-- tested by tests/e2e/test_readme.py: {name} -->", language)


def lines_of(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.strip()]


def test_the_library_example_runs_as_written_and_again(tmp_path: Path) -> None:
    (tmp_path / "example.py").write_text(block("the library", "python"))
    for _run in range(2):  # its wallet.db is left behind: a second run starts it afresh
        done = subprocess.run(
            [sys.executable, "example.py"],
            cwd=tmp_path,
            env=clean_environment(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        secrets, balance, refused = done.stdout.splitlines()
        assert secrets.startswith("{'ledger_ref': '"), done.stdout
        assert balance == "{'currency': 'EUR', 'available': '114.00', 'held': '0.00'}"
        assert refused == "409 bet.already_settled"


def test_development_mode_prints_a_curl_that_places_a_free_entry(tmp_path: Path) -> None:
    code, stdout, stderr = run_block(block("development mode"), tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    assert lines_of(stdout)[-1] == "HTTP 200", report
    assert '"secrets"' in stdout, report
    log = (tmp_path / "serve.log").read_text()
    assert "Development mode: LEDGER_JWT_SECRET is not set" in log
    # The banner also leads to the console and to making its first operator.
    assert "/console" in log
    assert "ledger operators add admin --role admin" in log


def test_the_three_commands_deposit_show_and_check(tmp_path: Path) -> None:
    for _run in range(2):  # the deposit is idempotent by its reference
        code, stdout, stderr = run_block(block("three commands"), tmp_path)
        assert code == 0, stdout + stderr
        applied, balance, check = lines_of(stdout)
        assert applied.startswith("deposit topup-1: 100.00 EUR for u1 "), stdout
        assert balance == "EUR  available 100.00  held 0.00"
        assert check.startswith("ok: "), stdout


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_console_block_adds_the_first_admin_and_serves_the_sign_in_page(
    tmp_path: Path,
) -> None:
    code, stdout, stderr = run_block(block("the console"), tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    assert "added alice (admin)" in stdout, report
    assert "200" in lines_of(stdout), report


def ignored_by_git(name: str) -> bool:
    """Whether the checkout's .gitignore hides a file called ``name`` at its root."""
    found = subprocess.run(["git", "check-ignore", "--no-index", "-q", name], cwd=ROOT)
    assert found.returncode in (0, 1), found
    return found.returncode == 0


def test_the_quickstart_server_leaves_no_file_git_would_list_as_untracked(
    tmp_path: Path,
) -> None:
    # `ledger serve` from a checkout, as the Quickstart runs it, and a first write: ./ledger.db
    # and its side files (the WAL, its index, the writer's lock file) land in the checkout.
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    port = free_port()
    operator = "operator-token-0123456789"
    process = subprocess.Popen(
        [*ledger_command(), "serve", "--port", str(port)],
        cwd=checkout,
        env={**clean_environment(tmp_path), "LEDGER_OPERATOR_TOKEN": operator},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        started = time.monotonic()
        while True:
            assert process.poll() is None, "ledger serve exited early"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            assert not waited_too_long(started), "ledger serve did not answer"
            time.sleep(0.1)
        deposit = {"user": "u1", "currency": "EUR", "amount": "1.00", "reference": "r1"}
        answer = httpx.post(
            f"http://127.0.0.1:{port}/admin/deposits",
            json=deposit,
            headers={"Authorization": f"Bearer {operator}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        left_while_running = {path.name for path in checkout.iterdir()}
    finally:
        end_group(process)
    left = left_while_running | {path.name for path in checkout.iterdir()}
    assert "ledger.db-writer" in left
    assert sorted(name for name in left if not ignored_by_git(name)) == []


def test_the_ci_blocks_are_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for name in ("the tests, run by .ci/run", "browser and alert rules, run by .ci/run"):
        for line in block(name).splitlines():
            assert line in ci, line


def test_the_server_block_is_the_install_and_ledger_serve() -> None:
    assert block("the server") == (
        'python3 -m venv .venv && .venv/bin/pip install -q -e ".[server]" && .venv/bin/ledger serve'
    )


@pytest.mark.slow
def test_the_server_block_installs_and_serves_from_a_fresh_checkout(tmp_path: Path) -> None:
    """The first Quickstart command in a copy of the checkout: a new virtualenv with the
    ``[server]`` extra, then ``ledger serve`` (on a free port instead of 8000)."""
    checkout = tmp_path / "ledger"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, tracked):
        source = ROOT / name.decode()
        if source.is_file():
            (checkout / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name.decode())
    install, _, serve = block("the server").rpartition(" && ")
    port = free_port()
    script = f"{install} && exec {serve} --port {port}"
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=checkout,
        env=clean_environment(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 900
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "the server did not answer"
            time.sleep(0.5)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    assert (checkout / "ledger.db").is_file()
