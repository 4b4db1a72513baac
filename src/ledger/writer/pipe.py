"""What crosses the pipe between the server and its writer process, and how it is pickled.

Invariant: a value unpickled on the other side equals the one pickled (same class, same fields);
only the route differs. Each Place Bet crosses twice (its command one way, its answer the
other), so its values are reduced to plain tuples, which ``pickle`` writes and reads in C: the
named tuples' and slots dataclasses' own pickling goes through Python-level ``__reduce_ex__``
and ``__getstate__``/``__setstate__``, about three times the cost per Place Bet.

The reducers are this pipe's alone (a :class:`pickle.Pickler` with its own ``dispatch_table``):
the domain's values know nothing of the process they may cross. A batched command's module
registers the reducer of its class (:func:`register`; the Place Bet's is in
:mod:`ledger.commands.places`). Proved by ``tests/service/test_writer_process.py`` (every value
crosses unchanged); used by the writer process only (:mod:`.child`, :mod:`.child_link`).
"""

from __future__ import annotations

import copyreg
import io
import operator
import pickle
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from ..deliveries import Delivery
from ..domain import PlacedBets

__all__ = ["dumps", "loads", "register"]


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


_DISPATCH: dict[type[Any], Callable[[Any], Any]] = {
    **copyreg.dispatch_table,
    Delivery: _reduce_delivery,
    PlacedBets: _reduce_placed,
}


def register(cls: type[Any], reduce: Callable[[Any], tuple[Any, ...]]) -> None:
    """Have a command of class ``cls`` cross the pipe as ``reduce`` gives it: ``(rebuild,
    arguments)``, as :func:`copyreg.pickle` takes. Called by the module of the command."""
    _DISPATCH[cls] = reduce


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
