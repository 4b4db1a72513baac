"""The one write path's infrastructure: writers that apply commands (:mod:`ledger.commands`)
and answer each with a future, resolved after the commit.

- :mod:`.port`: what a command is to a writer (:class:`Command`) and what a writer is.
- :mod:`.direct`: each command in a unit of work of its own, and the one retry loop.
- :mod:`.group_commit`: one writer thread, many commands per transaction.
- :mod:`.process`: Place Bets applied in a child process, with its pipe (:mod:`.pipe`).
"""

from __future__ import annotations

from .direct import DirectWriter
from .group_commit import GroupCommit
from .port import Command, Single, Writer

__all__ = ["Command", "DirectWriter", "GroupCommit", "Single", "Writer"]
