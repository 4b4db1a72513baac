"""What crosses the pipe between the server and its writer process, and how it is pickled.

Invariant: a value unpickled on the other side equals the one pickled (same class, same fields);
only the route differs. Each Place Bet crosses twice (its command one way, its answer the
other), so its values are reduced to plain tuples, which ``pickle`` writes and reads in C: the
named tuples' and slots dataclasses' own pickling goes through Python-level ``__reduce_ex__``
and ``__getstate__``/``__setstate__``, about three times the cost per Place Bet.

The reducers are this pipe's alone (a :class:`pickle.Pickler` with its own ``dispatch_table``):
the domain's values know nothing of the process they may cross. Proved by
``tests/service/test_writer_process.py`` (every value crosses unchanged) and used by
:mod:`ledger.writer_process` only.
"""

from __future__ import annotations

import copyreg
import io
import operator
import pickle
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from .deliveries import Delivery
from .directory import Seen, TournamentSeen, UserSeen
from .domain import Entry, PlacedBets, PlaceRequest
from .writer import PlaceBets

__all__ = ["dumps", "loads"]


def _fields_reader(cls: type[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """A reader of a dataclass's fields as a tuple, in declaration order (the arguments that
    rebuild it): one ``attrgetter``, in C, derived from the class so that no field is left out."""
    return operator.attrgetter(*(item.name for item in fields(cls)))


_delivery_fields = _fields_reader(Delivery)
_placed_fields = _fields_reader(PlacedBets)


def _reduce_delivery(delivery: Delivery) -> tuple[type[Delivery], tuple[Any, ...]]:
    return Delivery, _delivery_fields(delivery)


def _reduce_placed(placed: PlacedBets) -> tuple[type[PlacedBets], tuple[Any, ...]]:
    return PlacedBets, _placed_fields(placed)


def _reduce_place_bets(command: PlaceBets) -> tuple[Callable[..., PlaceBets], tuple[Any, ...]]:
    request, seen = command.request, command.seen
    return _place_bets, (
        [tuple(entry) for entry in request.entries],
        request.reference,
        request.part,
        command.delivery,
        [tuple(tournament) for tournament in seen.tournaments],
        [tuple(user) for user in seen.users],
    )


def _place_bets(
    entries: list[tuple[Any, ...]],
    reference: str,
    part: int | None,
    delivery: Delivery | None,
    tournaments: list[tuple[Any, ...]],
    users: list[tuple[Any, ...]],
) -> PlaceBets:
    """A :class:`PlaceBets` from what :func:`_reduce_place_bets` gave."""
    return PlaceBets(
        PlaceRequest([Entry(*entry) for entry in entries], reference, part),
        delivery,
        Seen(
            tuple([TournamentSeen(*tournament) for tournament in tournaments]),
            tuple([UserSeen(*user) for user in users]),
        ),
    )


_DISPATCH: dict[type[Any], Callable[[Any], Any]] = {
    **copyreg.dispatch_table,
    Delivery: _reduce_delivery,
    PlacedBets: _reduce_placed,
    PlaceBets: _reduce_place_bets,
}


def dumps(value: Any) -> bytes:
    """``value`` as bytes for the pipe."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(value)
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    """What :func:`dumps` made, on the other side of the pipe."""
    # Only this process and its own child hold the two ends of the (anonymous) pipe.
    return pickle.loads(data)  # noqa: S301
