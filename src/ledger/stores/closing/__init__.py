"""Huge refunds and settles, set-based: staged once, validated and written by a few statements.

The domain (``refund_many``/``settle_many``) decides a request bet by bet in Python, at 40 to 70
µs a bet. Above a threshold (:data:`ledger.commands.closes.SET_BASED_FROM`) the writer stages the
request's items into a temporary table instead (one ``executemany`` on SQLite, ``COPY`` on
Postgres) and this module finds the first item the domain would refuse, and else writes what
the domain would have written, with ``INSERT ... SELECT`` and ``UPDATE ... FROM``:

- the bet states (each bet closed by its first mention; a later one is the replay or conflict
  it would be in the domain), and the closed bets out of ``open_bets``;
- the postings, per chunk of :data:`ledger.commands.chunks.CHUNK` items a transaction of its own
  with the same key, the same per-bet user legs in item order and the same summed house legs
  after them;
- the balances and every posting's running balance.

The domain stays the specification: the writer asks it for the error of the first refused item
(so every error is the domain's own), and a property test runs random requests through both
paths (``tests/stores/test_set_based.py``).

Invariant: a set-based close answers, refuses and writes exactly what the domain would, or
declines and leaves the request to the domain.

Money stays exact on SQLite, whose ``+`` turns a sum past 64 bits into an inexact REAL: every
amount and balance the statements add is checked first to lie within a bound that no sum of the
request can pass (:func:`within_bounds`); a request beyond it is decided by the domain, in
Python integers. House legs are summed per chunk in SQL (within that bound), across chunks in
Python.

On Postgres every statement is set-based at any size: no ``NOT IN (subquery)``, which the
planner hashes only while the hash fits ``work_mem`` and otherwise runs once per item (a
million items: past the statement timeout, a 503); the close runs with a larger ``work_mem``
(:data:`ledger.stores.postgres.CLOSE_WORK_MEM`) and its temporary tables analysed.
"""

from __future__ import annotations

from .collecting import Collected, collect, one_item_per_user, within_bounds
from .staging import STAGE_COLUMNS, bet_currencies, bound, discard, may_note, stage, staged_within
from .writing import write

__all__ = [
    "STAGE_COLUMNS",
    "Collected",
    "bet_currencies",
    "bound",
    "collect",
    "discard",
    "may_note",
    "one_item_per_user",
    "stage",
    "staged_within",
    "within_bounds",
    "write",
]
