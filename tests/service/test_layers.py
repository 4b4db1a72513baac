"""One Place Bet, and one settle, pass each layer once, downward: service -> writer -> command
-> domain and store.

Every call between the ledger's own modules is recorded while one write is applied, on the
direct writer and on group commit (whose writer thread is traced too), and no call may climb
back up a layer: the writer never calls the service, a command never calls the writer, the store
never calls a command.
"""

from __future__ import annotations

import inspect
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
    "ledger.commands": 3,
    "ledger.stores": 4,
    "ledger.currencies": 5,
    "ledger.domain": 5,
    "ledger.directory": 5,
    "ledger.deliveries": 5,
    "ledger.events": 5,
    "ledger.integrity": 5,
    "ledger.money": 6,
    "ledger.errors": 6,
    "ledger._process": 6,
}


def _handed(name: str) -> bool:
    return name.startswith("<") or (name.startswith("__") and name != "__init__")


def rank(module: str) -> int:
    for prefix, value in RANK.items():
        if module == prefix or module.startswith(prefix + "."):
            return value
    raise AssertionError(f"a Place Bet entered {module}, which no layer owns")


PLACE = {
    "bets": [
        {
            "user": {"uid": "u1"},
            "pool": {"uid": 7},
            "bet": {"uid": 1, "amount": "10.00", "currency": "EUR"},
        }
    ]
}
SETTLE = {
    "pools": [
        {
            "pool": {"uid": 7},
            "bets": [{"user": {"uid": "u1"}, "bet": {"uid": 1, "payout": "25.00"}}],
        }
    ]
}


@pytest.mark.parametrize("write", ["place", "settle"])
@pytest.mark.parametrize("grouped", [False, True], ids=["direct", "group-commit"])
def test_one_write_calls_only_downward_through_the_layers(
    tmp_path: Path, grouped: bool, write: str
) -> None:
    edges: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        if frame.f_code.co_flags & inspect.CO_GENERATOR or _handed(frame.f_code.co_name):
            return  # a value handed down and used there (a generator, a lambda, a sequence)
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if callee.startswith("ledger") and caller.startswith("ledger") and callee != caller:
            edges.add((caller, callee))

    threading.setprofile(profile)  # the group-commit writer thread starts on the first write
    try:
        with ledger.open_ledger(f"sqlite:///{tmp_path}/l.db", group_commit=grouped) as book:
            book.deposit("u1", "EUR", "100.00", reference="seed")
            if write == "settle":
                book.place_bets(json.dumps(PLACE).encode())
            edges.clear()
            sys.setprofile(profile)
            try:
                if write == "place":
                    book.place_bets(json.dumps(PLACE).encode())
                else:
                    book.settle(json.dumps(SETTLE).encode())
            finally:
                sys.setprofile(None)
    finally:
        threading.setprofile(None)

    def called(caller: str, callee: str) -> bool:
        return any(rank(a) == rank(caller) and b.startswith(callee) for a, b in edges)

    assert called("ledger.service", "ledger.writer")
    assert called("ledger.writer", "ledger.commands")
    assert called("ledger.commands", "ledger.domain")
    assert called("ledger.commands", "ledger.stores")
    upward = sorted((a, b) for a, b in edges if rank(a) > rank(b))
    assert upward == [], upward
