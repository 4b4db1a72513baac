"""The auditor's routine of docs/integrity.md, run as written, and its standalone verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledger
from support import payloads as P
from support.readme import marked_block, run_block

PAGE = "docs/integrity.md"
MARKER = "<!-- tested by tests/e2e/test_docs_integrity.py"


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_auditors_routine_works_as_written_and_the_standalone_verifier_agrees(
    tmp_path: Path,
) -> None:
    with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
        book.deposit("u1", "EUR", "100.00", "dep-1")
        book.place_bets(P.place(P.entry(1), P.entry(2)))
        book.settle(P.settle(7, (1, "30.00"), (2, "0")))
    (tmp_path / "verify_proof.py").write_text(marked_block("## A verifier", "python", PAGE))
    code, stdout, stderr = run_block(marked_block(MARKER, path=PAGE), tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    assert "intact: 3 commits" in stdout, report
    assert "extends the checkpoint of 3" in stdout, report
    assert "verified: bet 1's 2 commit(s) are in checkpoint 3 of ledger" in stdout, report
    assert "bet 1: included in checkpoint 3 of ledger, verified" in stdout, report
    assert "verified: checkpoint 3 of ledger extends checkpoint 3" in stdout, report
    # The bet's rows, shown from the contents the records seal: placed, then settled for 30.00.
    assert "  commit 3: its content holds the bet's rows" in stdout, report
    assert "  C ['1', 'settled', '3000', 'EUR'," in stdout, report
    assert (tmp_path / "keys" / "signing.key").stat().st_mode & 0o777 == 0o600


def test_the_standalone_verifier_refuses_a_proof_whose_checkpoint_was_forged(
    tmp_path: Path,
) -> None:
    with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
        book.place_bets(P.place(P.entry(1, amount=0, rake=0)))
    (tmp_path / "verify_proof.py").write_text(marked_block("## A verifier", "python", PAGE))
    script = (
        ".venv/bin/ledger keys generate --out keys && "
        ".venv/bin/ledger checkpoint --key keys/signing.key > /dev/null && "
        ".venv/bin/ledger prove 1 --json > proof.json && "
        "sed -i 's/\\\\n1\\\\n/\\\\n2\\\\n/' proof.json && "
        "python3 verify_proof.py proof.json keys/signing.pub"
    )
    code, stdout, stderr = run_block(script, tmp_path)
    assert code != 0, stdout
    assert "InvalidSignature" in stderr, stderr[-2000:]


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_a_newer_checkpoint_is_proved_to_extend_a_saved_one_and_another_history_is_refused(
    tmp_path: Path,
) -> None:
    """Without the database: the proof joins a saved checkpoint to the newest; a checkpoint of
    another history of the same size, signed by the same key, is joined by no proof."""
    with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
        book.place_bets(P.place(P.entry(1, amount=0, rake=0)))
    with ledger.open_ledger(f"sqlite:///{tmp_path}/other.db") as book:
        book.place_bets(P.place(P.entry(9, amount=0, rake=0)))
    script = (
        "set -e\n"
        ".venv/bin/ledger keys generate --out keys > /dev/null\n"
        ".venv/bin/ledger checkpoint --db sqlite:///ledger.db --key keys/signing.key "
        "--out saved.txt > /dev/null\n"
        ".venv/bin/ledger checkpoint --db sqlite:///other.db --key keys/signing.key "
        "--out forked.txt > /dev/null\n"
        ".venv/bin/ledger deposit --db sqlite:///ledger.db u1 EUR 5.00 --reference d1 > /dev/null\n"
        ".venv/bin/ledger checkpoint --db sqlite:///ledger.db --key keys/signing.key > /dev/null\n"
        ".venv/bin/ledger prove-consistency --db sqlite:///ledger.db 1\n"
        ".venv/bin/ledger prove-consistency --db sqlite:///ledger.db 1 --json > c.json\n"
        ".venv/bin/ledger verify-consistency c.json --public-key keys/signing.pub "
        "--checkpoint saved.txt\n"
        ".venv/bin/ledger verify-consistency c.json --public-key keys/signing.pub "
        "--checkpoint forked.txt || echo exit $?\n"
    )
    code, stdout, stderr = run_block(script, tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    assert "the checkpoint of 2 extends the tree of 1: a proof of 1 hash(es)" in stdout, report
    assert "verified: checkpoint 2 of ledger extends checkpoint 1" in stdout, report
    assert "FAILED: the checkpoint of 2 does not extend the checkpoint of 1" in stdout, report
    assert "exit 1" in stdout, report
