"""The writes, each a command applied in one unit of work: read what it names, ask the domain
(:mod:`ledger.domain`) what to do, write the decision. A writer (:mod:`ledger.writer`) runs
them; :class:`ledger.service.Ledger` builds them from requests.
"""

from __future__ import annotations

from .chunks import CHUNK
from .closes import SET_BASED_FROM, RefundBets, SettleBets, closes_set_based
from .limit_changes import (
    CancelPendingLimit,
    Exclude,
    LiftExclusion,
    PruneLimitActivity,
    SetLimit,
)
from .movements import Move
from .places import PlaceBets
from .upkeep import PruneDeliveries, PruneEvents, RecordDelivery

__all__ = [
    "CHUNK",
    "SET_BASED_FROM",
    "CancelPendingLimit",
    "Exclude",
    "LiftExclusion",
    "Move",
    "PlaceBets",
    "PruneDeliveries",
    "PruneEvents",
    "PruneLimitActivity",
    "RecordDelivery",
    "RefundBets",
    "SetLimit",
    "SettleBets",
    "closes_set_based",
]
