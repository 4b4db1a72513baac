"""Each performance mechanism lives in a module of its own whose docstring states the invariant
it keeps and names the tests that prove it (docs/performance.md lists what each one is for)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ROOMS = [
    "src/ledger/writer/process.py",
    "src/ledger/writer/child.py",
    "src/ledger/writer/batches.py",
    "src/ledger/writer/pipe.py",
    "src/ledger/writer/group_commit.py",
    "src/ledger/stores/sqlite/checkpointer.py",
    "src/ledger/stores/sqlite/bulk.py",
    "src/ledger/stores/sqlite/writer_lock.py",
    "src/ledger/stores/sqlite/exact_sum.py",
    "src/ledger/stores/postgres/pipeline.py",
    "src/ledger/stores/postgres/arrays.py",
    "src/ledger/stores/postgres/locked.py",
    "src/ledger/stores/postgres/ids.py",
    "src/ledger/stores/postgres/pool.py",
    "src/ledger/stores/postgres/temp_buffers.py",
    "src/ledger/stores/closing/__init__.py",
    "src/ledger/service/payloads.py",
    "src/ledger/http/asgi_request.py",
    "src/ledger/http/protocol.py",
    "src/ledger/_process.py",
]


@pytest.mark.parametrize("room", ROOMS)
def test_a_mechanisms_module_states_its_invariant_and_names_its_tests(room: str) -> None:
    docstring = ast.get_docstring(ast.parse((ROOT / room).read_text())) or ""
    assert "Invariant:" in docstring, f"{room}: no 'Invariant:' in its docstring"
    tests = re.findall(r"tests/[\w/]+\.py", docstring)
    assert tests, f"{room}: its docstring names no test"
    missing = [test for test in tests if not (ROOT / test).exists()]
    assert missing == [], f"{room} names tests that do not exist: {missing}"
