"""Reconciliation: a platform file of bets against the books, on every store."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from typing import Any

import pytest

import ledger
from ledger.reconcile import COUNTS, UnreadableFile
from support.books import balance
from support.payloads import entry, place, refund, settle

HEADER = ("uid", "user", "pool", "amount", "rake", "currency", "payout", "payout_currency")

# The books every test starts from: bet 1 placed, 2 refunded, 3 settled paying 15.00, all in
# pool 7 for u1; bet 4 placed in pool 8 for u2.
AGREED: list[dict[str, Any]] = [
    {"uid": 1, "user": "u1", "pool": 7, "amount": "10.00", "rake": "1.00", "status": "placed"},
    {"uid": 2, "user": "u1", "pool": 7, "amount": "10.00", "rake": "1.00", "status": "refunded"},
    {
        "uid": 3,
        "user": "u1",
        "pool": 7,
        "amount": "10.00",
        "rake": "1.00",
        "status": "settled",
        "payout": "15.00",
        "payout_currency": "EUR",
    },
    {"uid": 4, "user": "u2", "pool": 8, "amount": "5.00", "rake": "0.50", "status": "placed"},
]


@pytest.fixture
def books(book: ledger.Ledger) -> ledger.Ledger:
    book.deposit("u1", "EUR", "100", "dep-u1")
    book.deposit("u2", "EUR", "100", "dep-u2")
    book.place_bets(place(entry(1), entry(2), entry(3)))
    book.place_bets(place(entry(4, user="u2", pool=8, amount=Decimal("5.00"), rake="0.50")))
    book.refund(refund(7, 2))
    book.settle(settle(7, (3, "15.00")))
    return book


def rows(*changes: dict[str, Any], drop: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """The agreed rows with ``changes`` applied by uid (a new uid is added), ``drop`` removed."""
    by_uid = {row["uid"]: {"currency": "EUR", **row} for row in AGREED}
    for change in changes:
        by_uid[change["uid"]] = {**by_uid.get(change["uid"], {"currency": "EUR"}), **change}
    return [row for uid, row in sorted(by_uid.items()) if uid not in drop]


def as_csv(items: list[dict[str, Any]], delimiter: str = ",") -> bytes:
    out = io.StringIO()
    columns = list(dict.fromkeys(name for row in items for name in row))
    writer = csv.DictWriter(out, columns, delimiter=delimiter)
    writer.writeheader()
    writer.writerows(items)
    return out.getvalue().encode()


def counts(found: ledger.Ledger, data: bytes, **options: Any) -> dict[str, int]:
    with found.reconcile(data, **options) as report:
        return report.counts


def nonzero(found: dict[str, int]) -> dict[str, int]:
    return {name: count for name, count in found.items() if count}


def test_a_file_that_agrees_with_the_books_is_clean(books: ledger.Ledger) -> None:
    with books.reconcile(as_csv(rows())) as report:
        assert report.ok
        assert report.counts == {name: 4 if name == "matched" else 0 for name in COUNTS}
        assert report.platform_rows == 4
        assert report.wallet_bets == 4
        assert list(report.differences()) == []


def _aliased(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The contract's other names for the columns and states, and a column nobody asked for.
    states = {"placed": "active", "refunded": "cancelled", "settled": "closed"}
    return [
        {
            "uid": row["uid"],
            "user_uid": row["user"],
            "pool_uid": row["pool"],
            "amount": row["amount"],
            "rake": row["rake"],
            "currency": row["currency"],
            "payout": row.get("payout", ""),
            "status": states[row["status"]].upper(),
            "team_name": "Dream Team",
        }
        for row in items
    ]


FORMATS = {
    "csv": lambda items: as_csv(items),
    "tsv": lambda items: as_csv(items, "\t"),
    "json": lambda items: json.dumps(items, default=str).replace('"10.00"', "10.00").encode(),
    "jsonl": lambda items: "\n".join(json.dumps(row) for row in items).encode() + b"\n",
}


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_with_the_contracts_column_names_and_state_words_is_read_alike(
    books: ledger.Ledger, name: str
) -> None:
    data = FORMATS[name](_aliased(rows()))

    with books.reconcile(data) as report:
        assert report.format == name
        assert report.ok, list(report.differences())
        assert report.counts["matched"] == 4


def test_each_kind_of_difference_is_counted_and_listed_with_both_sides(
    books: ledger.Ledger,
) -> None:
    books.place_bets(place(entry(5)))  # recorded by the wallet, unknown to the platform
    data = as_csv(
        rows(
            {"uid": 1, "status": "settled", "payout": "0.00"},  # the wallet has it placed
            {"uid": 3, "payout": "14.00"},
            {"uid": 4, "rake": "0.60"},
            {"uid": 2, "user": "u9"},
            {"uid": 99, "user": "u1", "pool": 7, "amount": "1.00", "status": "placed"},
        )
    )

    with books.reconcile(data) as report:
        assert not report.ok
        assert nonzero(report.counts) == {
            "missing_in_wallet": 1,
            "missing_on_platform": 1,
            "state_mismatch": 1,
            "amount_mismatch": 1,
            "payout_mismatch": 1,
            "owner_mismatch": 1,
        }
        listed = {row["uid"]: row for row in report.differences()}

    assert {uid: row["differences"] for uid, row in listed.items()} == {
        1: ["state_mismatch"],
        2: ["owner_mismatch"],
        3: ["payout_mismatch"],
        4: ["amount_mismatch"],
        5: ["missing_on_platform"],
        99: ["missing_in_wallet"],
    }
    assert listed[3]["platform"]["payout"] == "14.00"
    assert listed[3]["wallet"]["payout"] == "15.00"
    assert listed[4]["wallet"] == {
        "user": "u2",
        "pool": 8,
        "status": "placed",
        "amount": "5.00",
        "rake": "0.50",
        "currency": "EUR",
        "payout": None,
        "payout_currency": None,
    }
    assert listed[5]["platform"] is None
    assert listed[99]["wallet"] is None


def test_amounts_compare_exactly_even_as_json_numbers(books: ledger.Ledger) -> None:
    # Through a float, 10.000000000000000001 would be 10.0: equal to the wallet's 10.00.
    data = json.dumps(rows()).replace('"10.00"', "10.000000000000000001", 1).encode()
    trailing_zeros = json.dumps(rows()).replace('"10.00"', "10.0000", 1).encode()

    assert nonzero(counts(books, data)) == {"matched": 3, "amount_mismatch": 1}
    assert nonzero(counts(books, trailing_zeros)) == {"matched": 4}


def test_pools_only_leaves_the_books_of_other_pools_out(books: ledger.Ledger) -> None:
    books.place_bets(place(entry(6, pool=9)))
    only_pool_7 = as_csv(rows(drop=(4,)))

    assert nonzero(counts(books, only_pool_7)) == {"matched": 3, "missing_on_platform": 2}
    assert nonzero(counts(books, only_pool_7, pools_only=True)) == {"matched": 3}


def test_pools_only_still_finds_a_bet_the_wallet_holds_in_another_pool(
    books: ledger.Ledger,
) -> None:
    data = as_csv(rows({"uid": 4, "pool": 7}))

    assert nonzero(counts(books, data, pools_only=True)) == {"matched": 3, "owner_mismatch": 1}


def test_missing_columns_are_not_compared_but_a_uid_is_required(books: ledger.Ledger) -> None:
    assert nonzero(counts(books, b"uid,status\n1,placed\n2,refunded\n3,settled\n4,placed\n")) == {
        "matched": 4
    }
    with pytest.raises(UnreadableFile, match="no bet uid"):
        counts(books, b"bet,status\n1,placed\n")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"uid,status\n1,won\n", "status 'won' is not one of"),
        (b"uid,status\n1,placed\n1,placed\n", "more than once in the file: 1"),
        (b"uid,status\nabc,placed\n", "uid: expected a 64-bit integer"),
        (b"uid,amount,currency\n1,ten,EUR\n", "row 1: amount"),
        (b"uid,amount\n1,10.00\n", "amount without a currency"),
        (b'[{"uid": 1,', "malformed JSON"),
        (b'{"uid": 1}\n{"uid": \n', "line 2: malformed JSON"),
        (b'{"rows": []}', "no bet uid"),
        (b"[1, 2]", "expected an object"),
    ],
    ids=["status", "duplicate", "uid", "amount", "currency", "json", "jsonl", "object", "array"],
)
def test_a_file_that_is_not_a_record_of_bets_is_refused_with_the_row(
    books: ledger.Ledger, data: bytes, message: str
) -> None:
    with pytest.raises(UnreadableFile, match=message) as refused:
        counts(books, data)
    assert refused.value.status == 400
    assert refused.value.key == "reconcile.unreadable_file"


def test_an_empty_file_finds_every_bet_missing_on_the_platform(books: ledger.Ledger) -> None:
    assert nonzero(counts(books, b"")) == {"missing_on_platform": 4}


def test_reconciling_changes_nothing_in_the_books(books: ledger.Ledger) -> None:
    before = (balance(books, "u1"), balance(books, "u2"), books.check())

    counts(books, as_csv(rows({"uid": 1, "status": "settled"}, {"uid": 77, "user": "u1"})))

    assert (balance(books, "u1"), balance(books, "u2"), books.check()) == before
    bet = books.bet(1)
    assert bet is not None
    assert bet.state == "placed"


def test_the_csv_and_json_reports_list_the_same_differences(books: ledger.Ledger) -> None:
    data = as_csv(rows({"uid": 3, "payout": "14.00"}))

    with books.reconcile(data) as report:
        table = list(csv.DictReader(io.StringIO("".join(report.csv_chunks()))))
        whole = json.loads("".join(report.json_chunks()))
        text = list(report.text_lines())

    assert [(row["uid"], row["differences"]) for row in table] == [("3", "payout_mismatch")]
    assert table[0]["platform_payout"] == "14.00"
    assert table[0]["wallet_payout"] == "15.00"
    assert whole["counts"]["payout_mismatch"] == 1
    assert [row["uid"] for row in whole["differences"]] == [3]
    assert text[0].startswith("DIFFERENCES: 4 platform bets (csv) against 4 wallet bets")
    assert any("bet 3: payout_mismatch: payout 14.00 vs 15.00" in line for line in text)
