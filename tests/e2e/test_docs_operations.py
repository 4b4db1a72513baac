"""The blocks of docs/operations/, run as a reader would run them."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.readme import ROOT, marked_block, run_block


def block(page: str, name: str) -> str:
    marker = f"<!-- tested by tests/e2e/test_docs_operations.py: {name} -->"
    return marked_block(marker, path=f"docs/operations/{page}")


def lines_of(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.strip()]


def test_the_token_block_exports_its_secret_and_mints_three_tokens(tmp_path: Path) -> None:
    code, stdout, stderr = run_block(block("connect-the-platform.md", "ledger token"), tmp_path)
    assert code == 0, stderr
    admin, user, bare = lines_of(stdout)
    assert admin.startswith("Bearer dev "), stdout
    assert user.startswith("Bearer dev "), stdout
    assert bare.count(".") == 2, stdout  # a bare JWT
    assert " " not in bare, stdout
    assert "warning" not in stderr, stderr  # a secret of 32 bytes: no short-secret warning


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_backup_block_copies_checks_and_refuses_to_overwrite(tmp_path: Path) -> None:
    for _run in range(2):  # it can be run again in the same directory
        code, stdout, stderr = run_block(block("backup-and-restore.md", "backup"), tmp_path)
        assert code == 0, stdout + stderr
        assert "copied wallet-demo.db to copy.db (" in stdout, stdout
        assert "check: ok: 1 transactions, 2 postings, 2 accounts, 0 bets" in stdout, stdout
        assert "exit 1" in stdout, stdout
        assert "error: backup.exists: 'copy.db' exists" in stderr, stderr
        assert lines_of(stdout)[-1] == "ok: 1 transactions, 2 postings, 2 accounts, 0 bets"


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_restore_rehearsal_loses_only_what_came_after_the_copy(tmp_path: Path) -> None:
    for _run in range(2):
        code, stdout, stderr = run_block(block("backup-and-restore.md", "restore"), tmp_path)
        report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
        assert code == 0, report
        assert "check: ok: 1 transactions" in stdout, report  # the copy, checked
        assert "ok: 1 transactions, 2 postings, 2 accounts, 0 bets" in stdout, report
        assert "EUR  available 100.00  held 0.00" in stdout, report
        assert (tmp_path / "wallet-demo.db.before-restore").is_file()


def test_the_upgrade_block_creates_then_finds_nothing_to_do(tmp_path: Path) -> None:
    code, stdout, stderr = run_block(block("upgrading.md", "db upgrade"), tmp_path)
    assert code == 0, stderr
    assert lines_of(stdout) == [
        "schema is up to date",
        "schema is up to date",
        "ok: 0 transactions, 0 postings, 0 accounts, 0 bets",
    ]


def test_the_textfile_block_writes_the_check_and_the_lag(tmp_path: Path) -> None:
    code, stdout, stderr = run_block(block("monitoring.md", "textfile"), tmp_path)
    assert code == 0, stdout + stderr
    written = (tmp_path / "ledger.prom").read_text().splitlines()
    assert written[0] == "ledger_check_ok 1", written
    assert written[1].startswith("ledger_check_last_run_timestamp_seconds "), written
    assert written[2] == "ledger_replica_lag_seconds 0", written  # no read replica here


def test_the_promtool_block_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for line in block("monitoring.md", "run by .ci/run").splitlines():
        assert line in ci, line
    assert (ROOT / "docs" / "operations" / "alerts.yml").is_file()
