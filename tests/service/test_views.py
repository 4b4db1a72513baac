"""Every amount the ledger shows is a plain decimal string with its currency's scale.

Currencies of 7 or more decimals used to come back as ``"1E-8"`` and ``"0E-8"`` (``str()`` of a
Decimal switches to scientific notation): in balances, statements, bet views, movements and
reports, over the library, HTTP and the command line alike. ``ledger.views`` renders them all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ledger
from ledger import views
from ledger.cli import main
from ledger.money import from_minor
from support.httpkit import OPERATOR_HEADERS, Wallet, serve
from support.payloads import entry, place, settle

D = Decimal
COINS = ledger.CurrencyTable(overrides={"BTC": 8, "ETH": 18})
SATOSHI = "0.00000001"
WEI = "0.000000000000000001"

# Any amount written with an exponent, or an 8- or 18-decimal amount without its full scale.
EXPONENT = re.compile(r"\d[eE][+-]?\d")


def amounts_in(data: Any) -> Iterator[str]:
    """Every string value under a key that names an amount, anywhere in ``data``."""
    names = {"amount", "rake", "payout", "available", "held", "stakes", "payouts", "open_holds"}
    if isinstance(data, dict):
        for key, value in data.items():
            if key in names and isinstance(value, str):
                yield value
            else:
                yield from amounts_in(value)
    elif isinstance(data, list):
        for item in data:
            yield from amounts_in(item)


def assert_plain(data: Any) -> None:
    found = list(amounts_in(data))
    assert found, data
    for text in found:
        assert not EXPONENT.search(text), (text, data)
        assert re.fullmatch(r"-?[0-9]+\.[0-9]{8}|-?[0-9]+\.[0-9]{18}", text), (text, data)


def play_in_coins(book: ledger.Ledger) -> None:
    """A satoshi and a wei deposited, a satoshi bet placed and settled, a zero-payout bet."""
    book.deposit("u1", "BTC", "0.00000003", reference="btc-1")
    book.deposit("u1", "ETH", WEI, reference="eth-1")
    book.withdraw("u1", "ETH", WEI, reference="eth-2")
    book.place_bets(place(entry(1, amount=SATOSHI, rake="0", currency="BTC")))
    book.place_bets(place(entry(2, amount=SATOSHI, rake=SATOSHI, currency="BTC")))
    book.settle(settle(7, (1, "0.00000000"), currency="BTC"))


@pytest.fixture
def coin_book(store_url: str) -> Iterator[ledger.Ledger]:
    with ledger.open_ledger(store_url, currencies=COINS) as book:
        play_in_coins(book)
        yield book


def test_library_views_render_amounts_of_8_and_18_decimals_plainly(
    coin_book: ledger.Ledger,
) -> None:
    balances = [balance.to_dict() for balance in coin_book.balance("u1")]
    assert balances == [
        {"currency": "BTC", "available": "0.00000000", "held": "0.00000002"},
        {"currency": "ETH", "available": "0.000000000000000000", "held": WEI.replace("1", "0")},
    ]
    movement = coin_book.deposit("u2", "ETH", WEI, reference="eth-3")
    assert movement.to_dict()["amount"] == WEI
    assert_plain([line.to_dict() for line in coin_book.statement("u1")])
    bet = coin_book.bet(1)
    assert bet is not None
    assert (bet.to_dict()["amount"], bet.to_dict()["rake"], bet.to_dict()["payout"]) == (
        SATOSHI,
        "0.00000000",
        "0.00000000",
    )
    assert_plain(coin_book.pool_report(7).to_dict())


def test_from_minor_is_exact_beyond_28_digits() -> None:
    # Decimal.scaleb rounds to the context's 28 digits: an 18-decimal house total would not.
    assert from_minor(10**30 + 1, 18) == D("1000000000000.000000000000000001")
    assert views.amount_text(from_minor(10**30 + 1, 18)) == "1000000000000.000000000000000001"
    assert views.amount_text(from_minor(-1, 8)) == "-0.00000001"
    assert views.amount_text(from_minor(0, 8)) == "0.00000000"
    assert views.amount_text(from_minor(1500, 0)) == "1500"


def test_operator_api_renders_amounts_of_8_and_18_decimals_plainly(tmp_path: Path) -> None:
    with serve(tmp_path, currencies=COINS) as client:
        wallet = Wallet(client)
        deposit = wallet.deposit("u1", "0.00000003", currency="BTC")
        assert deposit.json()["amount"] == "0.00000003"
        wallet.deposit("u1", WEI, currency="ETH")
        assert wallet.place(place(entry(1, amount=SATOSHI, rake="0", currency="BTC"))).is_success
        assert wallet.settle(settle(7, (1, "0.00000000"), currency="BTC")).is_success
        for path in (
            "/admin/users/u1/balances",
            "/admin/users/u1/statement",
            "/admin/bets/1",
            "/admin/tournaments/7/report",
        ):
            response = client.get(path, headers=OPERATOR_HEADERS)
            assert response.status_code == 200, response.text
            assert_plain(response.json())


def test_command_line_renders_amounts_of_8_and_18_decimals_plainly(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/coins.db"
    with ledger.open_ledger(db, currencies=COINS) as book:
        play_in_coins(book)
    env = {"LEDGER_CURRENCY_SCALES": "BTC=8,ETH=18"}
    runner = CliRunner()
    for args in (["balance", "u1"], ["statement", "u1"], ["bet", "1"]):
        text = runner.invoke(main, [*args, "--db", db], env=env)
        assert text.exit_code == 0, text.output
        assert not EXPONENT.search(text.output), text.output
        assert SATOSHI in text.output or "0.00000000" in text.output
        as_json = runner.invoke(main, [*args, "--db", db, "--json"], env=env)
        assert as_json.exit_code == 0, as_json.output
        assert_plain(json.loads(as_json.output))
    deposit = runner.invoke(
        main, ["deposit", "u3", "ETH", WEI, "--db", db, "--reference", "d"], env=env
    )
    assert deposit.exit_code == 0, deposit.output
    assert f": {WEI} ETH for u3 applied" in deposit.output


def test_bet_view_shows_when_the_bet_was_placed_and_closed(store_url: str) -> None:
    with ledger.open_ledger(store_url) as book:
        before = datetime.now(UTC).replace(microsecond=0)
        book.deposit("u1", "EUR", "100.00", reference="seed")
        book.place_bets(place(entry(1), entry(2)))
        book.settle(settle(7, (1, "5.00")))
        settled, open_bet = book.bet(1), book.bet(2)
    assert settled is not None
    assert open_bet is not None
    placed_at = datetime.fromisoformat(settled.to_dict()["placed_at"])
    closed_at = datetime.fromisoformat(settled.to_dict()["closed_at"])
    assert before <= placed_at <= closed_at <= datetime.now(UTC)
    assert open_bet.to_dict()["placed_at"] is not None
    assert open_bet.to_dict()["closed_at"] is None
