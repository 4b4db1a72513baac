"""Parameters of the operator API's paths and queries, read as the contract reads them."""

from __future__ import annotations

from ..contract import check_id
from ..errors import InvalidRequest

__all__ = ["parse_id"]


def parse_id(text: str, name: str) -> int:
    # A path segment is text; the id rule itself (64 bits, a 400 beyond) is the contract's.
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequest(f"{name}: expected an integer, got {text!r}") from None
    return check_id(value, name)
