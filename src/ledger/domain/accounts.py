"""Account naming, in one home: the house's accounts, a user's available and held accounts."""

from __future__ import annotations

# Account names. ``user:<uid>`` is what the operator owes the user; ``user:<uid>:held`` is money
# reserved for entries not yet settled or refunded; the house accounts are the other legs.
HOUSE_PREFIX = "house:"


HOUSE_CASH = f"{HOUSE_PREFIX}cash"


HOUSE_TICKETS = f"{HOUSE_PREFIX}tickets"


HOUSE_ENTRIES = f"{HOUSE_PREFIX}entries"


HOUSE_RAKE = f"{HOUSE_PREFIX}rake"


HOUSE_PRIZES = f"{HOUSE_PREFIX}prizes"


def is_house(name: str) -> bool:
    """True for the house's accounts: they may go negative, and a request's legs on them sum."""
    return name.startswith(HOUSE_PREFIX)


# ``user_account("u1:held")`` would be ``held_account("u1")``: a user with such a uid would spend,
# and see, u1's held money. The contract refuses these uids (``ledger.contract.check_user``), so
# that every account name stays unambiguous.
HELD_SUFFIX = ":held"


def user_account(uid: str) -> str:
    """The user's available balance."""
    return f"user:{uid}"


def held_account(uid: str) -> str:
    """The user's money held for open entries."""
    return f"user:{uid}{HELD_SUFFIX}"


def account_kind(name: str) -> str:
    """``available``, ``held`` or ``house``: the kinds the store's no-overdraft rule keys on."""
    if is_house(name):
        return "house"
    return "held" if name.endswith(HELD_SUFFIX) else "available"
