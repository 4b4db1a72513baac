"""``ledger serve`` with a signing key signs checkpoints of the journal when it grew, keeps and
publishes them, and answers a bet's proof of inclusion and the proof that its newest checkpoint
extends an older one, both checking against the public key."""

from __future__ import annotations

import base64
import copy
import time
from pathlib import Path
from typing import Any

import pytest

from ledger.integrity import merkle
from ledger.integrity.checkpoints import NoteError, generate_key, open_checkpoint
from ledger.integrity.proofs import bet_rows, check_consistency, check_proof
from support.httpkit import OPERATOR_HEADERS, Wallet, serve
from support.payloads import entry, place, settle


def latest(wallet: Wallet, size: int) -> dict[str, Any]:
    """The newest checkpoint once it covers ``size`` commits (the signer runs every 0.1 s)."""
    for _ in range(200):
        answer = wallet.client.get("/admin/checkpoints/latest", headers=OPERATOR_HEADERS)
        if answer.status_code == 200 and answer.json()["size"] >= size:
            return dict(answer.json())
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint of {size} commits was signed")


def test_the_server_signs_publishes_and_proves_a_bet_against_its_checkpoint(
    tmp_path: Path,
) -> None:
    signer, verifier = generate_key("ledger-test")
    key = tmp_path / "signing.key"
    key.write_text(signer + "\n")
    published = tmp_path / "checkpoints.txt"
    with serve(
        tmp_path,
        signing_key=str(key),
        checkpoint_interval=0.1,
        checkpoint_file=str(published),
    ) as client:
        wallet = Wallet(client)
        assert wallet.deposit("u1", "100.00").status_code == 200
        assert wallet.place(place(entry(1))).status_code == 200
        assert wallet.settle(settle(7, (1, "30.00"))).status_code == 200
        body = latest(wallet, 3)
        checkpoint = open_checkpoint(body["note"], verifier)
        assert (checkpoint.size, body["size"]) == (3, 3)
        # Nothing committed since: no new checkpoint, however many intervals pass.
        time.sleep(0.5)
        assert published.read_text().count("\n\u2014 ledger-test ") == 1
        proof = client.get("/admin/bets/1/proof", headers=OPERATOR_HEADERS).json()
        unknown = client.get("/admin/bets/999/proof", headers=OPERATOR_HEADERS)
        # A later checkpoint, proved to extend the one of 3 that a party saved.
        assert wallet.deposit("u2", "5.00").status_code == 200
        newer = latest(wallet, 4)
        joined = client.get("/admin/checkpoints/3/consistency", headers=OPERATOR_HEADERS)
        beyond = client.get("/admin/checkpoints/5/consistency", headers=OPERATOR_HEADERS)
    assert joined.status_code == 200, joined.text
    assert joined.json()["checkpoint"] == newer["note"]
    older, newest = check_consistency(joined.json(), verifier, saved=body["note"])
    assert (older.size, newest.size) == (3, 4)
    assert beyond.status_code == 404
    assert beyond.json()["error"] == "checkpoint.not_found"
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "bet.not_found"
    assert [commit["seq"] for commit in proof["commits"]] == [2, 3]  # placed, settled
    for commit in proof["commits"]:
        leaf = merkle.leaf_hash(base64.b64decode(commit["record"]))
        path = [base64.b64decode(step) for step in commit["path"]]
        assert merkle.verify_inclusion(
            leaf, commit["seq"] - 1, checkpoint.size, path, checkpoint.root
        )


def test_without_a_checkpoint_the_latest_and_a_proof_are_404(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        wallet = Wallet(client)
        wallet.place(place(entry(1)))
        for path in (
            "/admin/checkpoints/latest",
            "/admin/bets/1/proof",
            "/admin/checkpoints/1/consistency",
        ):
            answer = client.get(path, headers=OPERATOR_HEADERS)
            assert answer.status_code == 404
            assert answer.json()["error"] == "checkpoint.not_found"


def test_a_proof_with_content_shows_the_bets_rows_and_refuses_a_changed_payout(
    tmp_path: Path,
) -> None:
    signer, verifier = generate_key("ledger-test")
    key = tmp_path / "signing.key"
    key.write_text(signer + "\n")
    with serve(tmp_path, signing_key=str(key), checkpoint_interval=0.1) as client:
        wallet = Wallet(client)
        assert wallet.deposit("u1", "100.00").status_code == 200
        assert wallet.place(place(entry(1))).status_code == 200
        assert wallet.settle(settle(7, (1, "30.00"))).status_code == 200
        latest(wallet, 3)
        shown = client.get("/admin/bets/1/proof?content=true", headers=OPERATOR_HEADERS).json()
        bare = client.get("/admin/bets/1/proof", headers=OPERATOR_HEADERS).json()
    assert all("content" not in commit for commit in bare["commits"])
    assert check_proof(shown, verifier).size == 3
    placed, closed = (bet_rows(commit["content"], 1) for commit in shown["commits"])
    assert [tag for tag, _ in placed] == ["P", "P", "B"]  # its stake held, the bet
    assert [tag for tag, _ in closed] == ["P", "P", "C"]  # stake released, prize, the bet
    assert closed[-1][1][:4] == ["1", "settled", "3000", "EUR"]
    forged = copy.deepcopy(shown)
    forged["commits"][1]["content"] = closed_content = shown["commits"][1]["content"].replace(
        '"3000"', '"9000"'
    )
    assert closed_content != shown["commits"][1]["content"]
    with pytest.raises(NoteError, match="not the one its record seals"):
        check_proof(forged, verifier)
    garbled = copy.deepcopy(shown)
    garbled["commits"][1]["content"] = 5
    with pytest.raises(NoteError, match="not a proof document"):
        check_proof(garbled, verifier)
    other = {**shown, "bet_uid": 2}
    with pytest.raises(NoteError, match="has no row of the bet"):
        check_proof(other, verifier)
