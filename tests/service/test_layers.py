"""One Place Bet passes each layer once, downward: service -> writer -> domain and store.

Every call between the ledger's own modules is recorded while one Place Bet is applied, on the
direct writer and on group commit (whose writer thread is traced too), and no call may climb
back up a layer: the writer never calls the service, the store never calls the writer.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import ledger

# Lower numbers call higher ones, never the other way round.
RANK = {
    "ledger.service": 1,
    "ledger.contract": 1,
    "ledger.writer": 2,
    "ledger.stores": 3,
    "ledger.currencies": 4,
    "ledger.domain": 4,
    "ledger.directory": 4,
    "ledger.deliveries": 4,
    "ledger.events": 4,
    "ledger.money": 5,
    "ledger.errors": 5,
    "ledger._process": 5,
}


def rank(module: str) -> int:
    for prefix, value in RANK.items():
        if module == prefix or module.startswith(prefix + "."):
            return value
    raise AssertionError(f"a Place Bet entered {module}, which no layer owns")


@pytest.mark.parametrize("grouped", [False, True], ids=["direct", "group-commit"])
def test_one_place_bet_calls_only_downward_through_the_layers(
    tmp_path: Path, grouped: bool
) -> None:
    edges: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if callee.startswith("ledger") and caller.startswith("ledger") and callee != caller:
            edges.add((caller, callee))

    threading.setprofile(profile)  # the group-commit writer thread starts on the first write
    try:
        with ledger.open_ledger(f"sqlite:///{tmp_path}/l.db", group_commit=grouped) as book:
            book.deposit("u1", "EUR", "100.00", reference="seed")
            bet = {"uid": 1, "amount": "10.00", "currency": "EUR"}
            body = {"user": {"uid": "u1"}, "pool": {"uid": 7}, "bet": bet}
            edges.clear()
            sys.setprofile(profile)
            try:
                book.place_bets(json.dumps({"bets": [body]}).encode())
            finally:
                sys.setprofile(None)
    finally:
        threading.setprofile(None)
    assert ("ledger.service", "ledger.writer") in edges
    assert ("ledger.writer", "ledger.domain") in edges
    assert any(
        caller == "ledger.writer" and callee.startswith("ledger.stores") for caller, callee in edges
    )
    upward = sorted((a, b) for a, b in edges if rank(a) > rank(b))
    assert upward == [], upward
