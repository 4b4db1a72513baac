"""Test data: what the conformance kit (``ledger validate``, ``ledger simulate``) writes.

The kit's users have uids, and its tournaments names, that start with :data:`KIT_PREFIX`, so that
the directory, the reports and the console can tell them from the platform's own and leave them
out, and so that the kit can find its own leftovers after an interrupted run. Real users must not
use the prefix.
"""

from __future__ import annotations

__all__ = ["KIT_PREFIX", "is_kit_data"]

KIT_PREFIX = "kit-"


def is_kit_data(uid_or_name: str | None) -> bool:
    """Whether a user uid or a tournament name marks the conformance kit's test data."""
    return uid_or_name is not None and uid_or_name.startswith(KIT_PREFIX)
