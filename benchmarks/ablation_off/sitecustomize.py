"""Switch one of the ledger's performance mechanisms off, for ``benchmarks/ablation.py``.

Python imports ``sitecustomize`` at the start of every interpreter that has this directory on
its path: the server, and the writer process it spawns. With ``ABLATE_MECHANISM`` naming a
mechanism, the mechanism is replaced by the plain code it stands for before the ledger runs,
so the same benchmark measures the ledger with and without it. Without the variable it does
nothing. Never on a production path: only the ablation benchmark puts this directory on
``PYTHONPATH``. Each replaced name must exist (``_replace``), so that a mechanism moved in the
code fails the switch instead of leaving it on unnoticed (tests/e2e/test_benchmark_tools.py).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any


def _replace(where: str, name: str, value: Any) -> Any:
    """Replace ``name`` in ``where`` (a module, or ``module:Class``) with ``value``; the old."""
    module, _, cls = where.partition(":")
    target: Any = importlib.import_module(module)
    if cls:
        target = getattr(target, cls)
    old = getattr(target, name)  # AttributeError: the mechanism moved
    setattr(target, name, value)
    return old


def _even_batches() -> None:
    def take(self: Any, received: list[Any], stopping: bool) -> list[Any]:
        waiting: list[Any] = self._held + received
        self._held = []
        return waiting

    _replace("ledger.writer.batches:Batches", "take", take)


def _group_commit() -> None:
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.max_batch = 1  # one commit (one fsync) per command

    original = _replace("ledger.writer.group_commit:GroupCommit", "__init__", init)


def _held_writes() -> None:
    # Every first run of a batch flushes its writes before the COMMIT, as a savepoint would.
    module = importlib.import_module("ledger.writer.group_commit")
    _replace("ledger.writer.group_commit", "_held", module._flushed)


def _binary_arrays() -> None:
    # Bulk columns dumped as psycopg dumps any list: in text, each element looked at.
    import psycopg
    from psycopg.types.array import ListDumper

    arrays = importlib.import_module("ledger.stores.postgres.arrays")
    for cls in arrays.ARRAYS.values():
        psycopg.adapters.register_dumper(cls, ListDumper)


def _balance_memo() -> None:
    def balances(connection: Any, keys: Any, memo: Any) -> Any:
        return original(connection, keys, None)  # read every time

    original = _replace("ledger.stores.sqlite.dialect", "balances", balances)


def _multi_row() -> None:
    _replace("ledger.stores.sqlite.bulk", "MULTI_ROW", 1)


def _temp_store() -> None:
    def on_begin(connection: Any) -> None:
        options = connection.get_execution_options()
        connection.exec_driver_sql(f"BEGIN {options.get('ledger_begin', 'IMMEDIATE')}")

    _replace("ledger.stores.sqlite.store:SqliteStore", "_on_begin", staticmethod(on_begin))


def _checkpointer() -> None:
    # SQLite's own automatic checkpoint, every 1,000 pages, in the commit: set on every
    # connection (the store's) and after a huge close (the dialect's). Without the first, the
    # log grew to the 200,000-page backstop and no run checkpointed at all.
    _replace("ledger.stores.sqlite.store", "AUTOCHECKPOINT_PAGES", 1_000)
    _replace("ledger.stores.sqlite.dialect", "AUTOCHECKPOINT_PAGES", 1_000)
    _replace("ledger.stores.sqlite.checkpointer:Checkpointer", "request", lambda self: None)


def _time_ordered_references() -> None:
    _replace("ledger.service.writes", "new_reference", lambda: uuid.uuid4().hex)


def _gc_freeze() -> None:
    _replace("ledger.http.launch", "freeze_heap", lambda: None)
    _replace("ledger.writer.child", "freeze_heap", lambda: None)


def _gc_pause() -> None:
    @contextlib.contextmanager
    def not_paused(size: int) -> Iterator[None]:
        yield

    _replace("ledger.service.payloads", "paused_gc", not_paused)
    _replace("ledger.writer.group_commit", "paused_gc", not_paused)
    _replace("ledger.writer.direct", "paused_gc", not_paused)


def _fast_path() -> None:
    class Hidden(dict[str, Any]):
        """The callbacks' paths still listed, never served before the router."""

        def get(self, key: str, default: Any = None) -> Any:
            return default

    def routes(runtime: Any) -> Hidden:
        return Hidden(original(runtime))

    original = _replace("ledger.http.app", "callback_routes", routes)


def _jwt_memo() -> None:
    class Forgetful(dict[Any, Any]):
        def __setitem__(self, key: Any, value: Any) -> None:
            pass

    _replace("ledger.http.auth", "_VERIFIED", Forgetful())


def _set_based_close() -> None:
    _replace("ledger.commands.closes", "SET_BASED_FROM", 1 << 62)  # every close bet by bet


SWITCHES: dict[str, Callable[[], None]] = {
    "even_batches": _even_batches,
    "group_commit": _group_commit,
    "held_writes": _held_writes,
    "binary_arrays": _binary_arrays,
    "balance_memo": _balance_memo,
    "multi_row": _multi_row,
    "temp_store": _temp_store,
    "checkpointer": _checkpointer,
    "time_ordered_references": _time_ordered_references,
    "gc_freeze": _gc_freeze,
    "gc_pause": _gc_pause,
    "fast_path": _fast_path,
    "jwt_memo": _jwt_memo,
    "set_based_close": _set_based_close,
}

_name = os.environ.get("ABLATE_MECHANISM")
if _name:
    SWITCHES[_name]()
