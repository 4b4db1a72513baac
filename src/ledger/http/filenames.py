"""Downloads: the CSV media type, and the ``Content-Disposition`` of a download whose name holds
text from outside (a user's uid).

RFC 6266: ``filename`` is an ASCII fallback (every other character, and ``"`` and ``\\``,
replaced by ``_``, so nothing can close the quoted string); ``filename*`` (RFC 8187) carries the
exact name, UTF-8 and percent-encoded. A header must be Latin-1: a non-Latin-1 uid written as
it is failed the statement export with a 500.
"""

from __future__ import annotations

import re
from urllib.parse import quote

__all__ = ["CSV", "attachment"]

# Every CSV export's media type. Litestar appends "; charset=utf-8" to every text/* type itself:
# naming the charset here too sent it twice.
CSV = "text/csv"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def attachment(filename: str) -> str:
    """The ``Content-Disposition`` value of a download saved as ``filename``."""
    fallback = _UNSAFE.sub("_", filename)
    exact = quote(filename, safe="")
    if exact == fallback:
        return f'attachment; filename="{fallback}"'
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{exact}"
