"""The blocks of docs/kit.md, run as a reader would run them: each starts what it needs (a
wallet, the simulated ticket API) and stops it."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.httpkit import free_port
from support.readme import marked_block, run_block

PAGE = "docs/kit.md"


def block(name: str) -> str:
    return marked_block(f"<!-- tested by tests/e2e/test_docs_kit.py: {name} -->", path=PAGE)


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_validate_block_passes_every_check_against_this_wallet(tmp_path: Path) -> None:
    code, stdout, stderr = run_block(block("validate"), tmp_path)
    report = f"stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    assert "validate exit 0" in stdout, report
    assert "PASS  resend.place_bet" in stdout, report
    assert "FAIL" not in stdout, report


def test_the_validate_token_block_accepts_both_tokens(tmp_path: Path) -> None:
    code, stdout, stderr = run_block(block("validate-token"), tmp_path)
    assert code == 0, stdout + stderr
    assert "FAIL" not in stdout, stdout


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_simulate_block_reconciles_a_platform_day_and_the_books_check(
    tmp_path: Path,
) -> None:
    code, stdout, stderr = run_block(block("simulate"), tmp_path)
    report = f"stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report  # the last command, `ledger check`
    assert "simulate exit 0" in stdout, report
    assert stdout.splitlines()[-1].startswith("ok: "), report


def test_the_tickets_block_creates_lists_and_deletes_and_stops_its_server(tmp_path: Path) -> None:
    script = block("tickets").replace("8100", str(free_port()))
    code, stdout, stderr = run_block(script, tmp_path)  # fails if the ticket API still runs
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    assert '"total": 1' in stdout, report  # the list: u1's one ticket
    assert '"id": 2' in stdout, report  # the deleted ticket


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_clean_up_block_keeps_a_run_then_takes_it_out_and_the_books_check(
    tmp_path: Path,
) -> None:
    code, stdout, stderr = run_block(block("clean-up"), tmp_path)
    report = f"stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report  # the last command, `ledger check`
    assert '"user":"kit-validate-' in stdout.replace(" ", ""), report  # the kept free entry
    assert "clean-up: 1 open hold(s) refunded" in stdout, report
    assert stdout.splitlines()[-1].startswith("ok: "), report
