"""Bulk arrays of a known element type, dumped in binary without psycopg looking at each element.

Invariant: every value reaches Postgres as it would bound one row at a time (text with NULL
and non-ASCII, empty arrays, bigint extremes, 38-digit numerics, timestamps). Tested by
tests/stores/test_postgres_batching.py."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.array import ListBinaryDumper
from sqlalchemy import (
    BigInteger,
    DateTime,
    Integer,
)

from ..schema import Amount

# Rows per statement of a bulk write or read by arrays (a larger one is sent in several).
BULK_ROWS = 20_000


def array_type(column_type: Any) -> str:
    if isinstance(column_type, Amount):
        return "numeric"
    if isinstance(column_type, BigInteger | Integer):
        return "bigint"
    if isinstance(column_type, DateTime):
        return "timestamptz"
    return "text"  # strings, and JSON sent as text and cast per row


class Array(list[Any]):
    """A bulk column sent as a Postgres array whose element type the class says.

    For a plain list psycopg finds the element type by looking at every element, twice per
    list (the dumper's key, then its upgrade), and for integers at the largest and smallest
    too: a fifth of the group-commit writer's CPU under (a), more than dumping the values. A
    list of one of these classes has its array type registered (below): nothing is looked at.
    """


class Bigints(Array):
    pass


class Texts(Array):
    pass


class Numerics(Array):
    """Python ints (or Decimals) as ``numeric``: exact at any size the store holds."""


class Times(Array):
    pass


ARRAYS: dict[str, type[Array]] = {
    "bigint": Bigints,
    "text": Texts,
    "numeric": Numerics,
    "timestamptz": Times,
}


for _name, _class in ARRAYS.items():
    _info = psycopg.postgres.types["int8" if _name == "bigint" else _name]
    psycopg.adapters.register_dumper(
        _class,
        type(
            f"{_class.__name__}Dumper",
            (ListBinaryDumper,),
            {"oid": _info.array_oid, "element_oid": _info.oid},
        ),
    )
