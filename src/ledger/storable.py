"""Text from outside, made storable on every store before it is written as a record of what
happened (the audit log, a request id).

Postgres' text cannot hold NUL, and UTF-8 cannot hold a lone surrogate: written as they came,
a sign-in name or an X-Request-Id carrying one was a 503 "the database is unreachable" (which a
caller retries) for bad input, and the failed sign-in left no audit entry. Values the ledger acts
on (user uids, references, amounts) are refused with a 400 instead (:mod:`ledger.contract`);
what is only recorded is kept, with each such character replaced by U+FFFD.
"""

from __future__ import annotations

__all__ = ["storable"]


def storable(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text
