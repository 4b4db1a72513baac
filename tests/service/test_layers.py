"""One Place Bet, and one settle, pass each layer once, downward: service -> writer -> command
-> domain and store.

Every call between the ledger's own modules is recorded while one write is applied, on the
direct writer, on group commit (whose writer thread is traced too) and, for a Place Bet, on the
writer process (the server's default: the child is traced by a ``sitecustomize`` put on its path,
from its first command on), and no call may climb back up a layer: the writer never calls the
service, a command never calls the writer, the store never calls a command.
"""

from __future__ import annotations

import inspect
import json
import os
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


# Put on the writer child's path: its calls between ledger modules from its first command on,
# written as JSON pairs to TRACE_EDGES_TO when it exits.
CHILD_TRACER = """
import atexit, inspect, json, os, sys, threading

_edges = set()
_started = []

def _profile(frame, event, _arg):
    if event != "call" or frame.f_back is None:
        return
    code = frame.f_code
    if code.co_flags & inspect.CO_GENERATOR or code.co_name.startswith("<") or (
        code.co_name.startswith("__") and code.co_name != "__init__"
    ):
        return
    if frame.f_back.f_code.co_name == "<module>":
        return  # a module registering itself as it is imported (a command with the pipe)
    callee = frame.f_globals.get("__name__", "")
    caller = frame.f_back.f_globals.get("__name__", "")
    if not _started and callee.startswith("ledger.commands"):
        _started.append(True)
    ours = caller.startswith("ledger") and callee.startswith("ledger")
    if _started and ours and callee != caller:
        _edges.add((caller, callee))

@atexit.register
def _dump():
    with open(os.environ["TRACE_EDGES_TO"], "w") as out:
        json.dump(sorted(_edges), out)

if os.environ.get("TRACE_EDGES_TO"):
    sys.setprofile(_profile)
    threading.setprofile(_profile)
"""


# Only Place Bets cross to the writer process; a settle is applied by the server's own writer.
WRITES = [
    ("place", "direct"),
    ("place", "group-commit"),
    ("place", "process"),
    ("settle", "direct"),
    ("settle", "group-commit"),
]


@pytest.mark.parametrize(("write", "writer"), WRITES)
def test_one_write_calls_only_downward_through_the_layers(
    tmp_path: Path, write: str, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    edges: set[tuple[str, str]] = set()
    child_edges = tmp_path / "child-edges.json"
    if writer == "process":
        (tmp_path / "tracer").mkdir()
        (tmp_path / "tracer" / "sitecustomize.py").write_text(CHILD_TRACER)
        path = os.pathsep.join(
            filter(None, [str(tmp_path / "tracer"), os.environ.get("PYTHONPATH")])
        )
        monkeypatch.setenv("PYTHONPATH", path)
        monkeypatch.setenv("TRACE_EDGES_TO", str(child_edges))

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        if frame.f_code.co_flags & inspect.CO_GENERATOR or _handed(frame.f_code.co_name):
            return  # a value handed down and used there (a generator, a lambda, a sequence)
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if callee.startswith("ledger") and caller.startswith("ledger") and callee != caller:
            edges.add((caller, callee))

    url = f"sqlite:///{tmp_path}/l.db"
    threading.setprofile(profile)  # the group-commit writer thread starts on the first write
    try:
        with ledger.open_ledger(
            url, group_commit=writer == "group-commit", writer_process=writer == "process"
        ) as book:
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
    if writer == "process":  # the child has exited with the ledger's close
        in_child = {(a, b) for a, b in json.loads(child_edges.read_text())}
        assert any(
            a.startswith("ledger.writer") and b == "ledger.commands.places" for a, b in in_child
        )
        edges |= in_child

    def called(caller: str, callee: str) -> bool:
        return any(rank(a) == rank(caller) and b.startswith(callee) for a, b in edges)

    assert called("ledger.service", "ledger.writer")
    assert called("ledger.writer", "ledger.commands")
    assert called("ledger.commands", "ledger.domain")
    assert called("ledger.commands", "ledger.stores")
    upward = sorted((a, b) for a, b in edges if rank(a) > rank(b))
    assert upward == [], upward
