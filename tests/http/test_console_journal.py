"""The console's bet page says where the bet stands in the journal's newest signed checkpoint:
included and verified against the server's own key, not verified when the checkpoint does not
prove it, not yet in one, or no checkpoint at all."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

import ledger
import ledger.operators
from ledger.integrity.checkpoints import NoteError, generate_key, open_checkpoint
from ledger.operators import Operators
from ledger.service.journal import publish_checkpoint
from ledger.stores.chain_tables import journal_checkpoints
from support.console import PASSWORD, sign_in
from support.httpkit import Wallet, serve
from support.payloads import entry, place, settle


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    # See tests/service/test_operators.py: the rules do not depend on scrypt's cost.
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


def journal_line(page: str) -> str:
    found = re.search(r'<p id="bet-inclusion">(.*?)</p>', page, re.S)
    assert found is not None
    return " ".join(unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())


def test_the_bet_page_shows_its_commits_in_the_newest_checkpoint_verified(
    tmp_path: Path, store_url: str
) -> None:
    signer, _ = generate_key("ledger-test")
    key = tmp_path / "signing.key"
    key.write_text(signer + "\n")
    with serve(tmp_path, database_url=store_url, signing_key=str(key)) as client:
        with ledger.open_ledger(store_url) as book:
            Operators(book.store).add("viewer", "viewer", PASSWORD)
        wallet = Wallet(client)
        wallet.deposit("u1", "100.00")
        wallet.place(place(entry(1)))
        assert sign_in(client, "viewer").status_code in (302, 303)
        line = journal_line(client.get("/console/bets?uid=1").text)
        assert line.startswith("No signed checkpoint yet")

        with ledger.open_ledger(store_url) as book:
            publish_checkpoint(book.store, signer)
            wallet.settle(settle(7, (1, "30.00")))  # after the checkpoint
        line = journal_line(client.get("/console/bets?uid=1").text)
        assert re.search(r"Included in checkpoint 2 \(signed .*\), commit #2: verified", line)

        with ledger.open_ledger(store_url) as book:
            publish_checkpoint(book.store, signer)
            wallet.place(place(entry(2)))
        assert "commits #2, #3: verified" in journal_line(client.get("/console/bets?uid=1").text)
        assert journal_line(client.get("/console/bets?uid=2").text).startswith(
            "Not in a signed checkpoint yet"
        )

        # A checkpoint signed by another key: the page says so.
        other, _ = generate_key("someone-else")
        with ledger.open_ledger(store_url) as book:
            with book.store.engine.begin() as connection:  # type: ignore[attr-defined]
                connection.execute(journal_checkpoints.delete())
            publish_checkpoint(book.store, other)
        line = journal_line(client.get("/console/bets?uid=1").text)
        assert "NOT verified" in line


def test_without_a_signing_key_the_page_shows_the_inclusion_unchecked(
    tmp_path: Path, store_url: str
) -> None:
    signer, _ = generate_key("ledger-test")
    with serve(tmp_path, database_url=store_url) as client:
        with ledger.open_ledger(store_url) as book:
            Operators(book.store).add("viewer", "viewer", PASSWORD)
        wallet = Wallet(client)
        wallet.deposit("u1", "100.00")
        wallet.place(place(entry(1)))
        with ledger.open_ledger(store_url) as book:
            publish_checkpoint(book.store, signer)
        assert sign_in(client, "viewer").status_code in (302, 303)
        line = journal_line(client.get("/console/bets?uid=1").text)
    assert "commit #2: the signature is not checked here" in line


def test_a_kept_checkpoint_is_an_event_carrying_its_signed_note(
    tmp_path: Path, store_url: str
) -> None:
    signer, verifier = generate_key("ledger-test")
    with ledger.open_ledger(store_url, migrate=True) as book:
        book.deposit("u1", "EUR", "10.00", reference="first")
        published = publish_checkpoint(book.store, signer)
        assert published is not None
        # Nothing new: the same checkpoint is not kept (nor announced) twice.
        assert publish_checkpoint(book.store, signer, unless_size=published[0].size) is None
        found = book.events(after=0).events
    assert [event.type for event in found] == ["deposit", "journal.checkpoint"]
    event = found[-1]
    assert (event.user, event.currency, event.amount) == ("", "", "0.00")
    assert event.reference == published[1]
    assert open_checkpoint(event.reference, verifier).size == published[0].size


def test_a_checkpoint_whose_note_would_not_fit_an_event_is_refused(
    tmp_path: Path, store_url: str
) -> None:
    signer, _ = generate_key("k" * 90)
    with ledger.open_ledger(store_url, migrate=True) as book:
        book.deposit("u1", "EUR", "10.00", reference="first")
        with pytest.raises(NoteError, match="300 characters"):
            publish_checkpoint(book.store, signer, origin="o" * 100)
        assert [event.type for event in book.events(after=0).events] == ["deposit"]
