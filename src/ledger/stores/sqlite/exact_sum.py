"""``ledger_sum`` and ``ledger_add``: the exact aggregate and addition every SQLite connection
gets, for amounts beyond 64 bits.

Invariant: the sum of any stored amounts is exact, never a REAL. Tested by
tests/stores/test_capacity.py."""

from __future__ import annotations

from ..schema import to_stored


class ExactSum:
    """``ledger_sum(amount)``: SQL's ``SUM`` over stored amounts, exact at any size.

    SQLite's ``SUM`` raises on 64-bit overflow and reads wide text as a REAL. This one adds
    Python integers and answers in the stored form (an INTEGER, or text beyond 64 bits), so its
    result compares equal to a stored balance exactly when the values are equal. Anything but
    an integer or such text is an error, never a guess.
    """

    __slots__ = ("total",)

    def __init__(self) -> None:
        self.total: int | None = None

    def step(self, value: int | str | None) -> None:
        if value is None:
            return
        if value.__class__ is not int:
            if value.__class__ is not str:
                raise TypeError(f"ledger_sum: {value!r} is not an exact amount")
            value = int(value)
        self.total = (self.total or 0) + value

    def finalize(self) -> int | str | None:
        return None if self.total is None else to_stored(self.total)


def exact_add(left: int | str | None, right: int | str | None) -> int | str | None:
    """``ledger_add(a, b)``: ``a + b`` over stored amounts, exact at any size (SQLite's ``+``
    turns a 64-bit overflow into a REAL)."""
    if left is None or right is None:
        return None
    return to_stored(int(left) + int(right))
