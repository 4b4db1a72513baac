"""The platform's callback payloads (contract sections 2 and 4.1) as typed, validated structures.

Only the fields the wallet acts on are declared; every other field, at every level, is skipped
while parsing (the contract says unknown fields must be ignored), so a payload of a million
settle participants never materialises the fields we do not need.

The models are msgspec structs rather than pydantic models, measured on a settle of 1,000,000
participants (309 MB): msgspec decodes it in 1.6 s into exact ``Decimal`` amounts, where
``json.loads`` plus model validation took 22.5 s and 2.5 GB, and pydantic's own JSON parser
reads numbers as binary floats (``1.0000000000000000000001`` became ``1``): a rounded amount.

Rules enforced while decoding: ids are JSON integers (never booleans, floats or strings) that
fit 64 bits; texts are bounded and NUL-free (Postgres refuses NUL, which would make bad input a
5xx); currencies are short codes; lists of entries are non-empty. Amounts are decimals from
JSON numbers or decimal strings; their sign and precision are checked per currency later, by
:func:`ledger.money.to_minor`.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import Meta, Struct

from .errors import InvalidAmount, InvalidRequest

__all__ = [
    "INT64_MAX",
    "PlaceBetEntry",
    "PlaceBetsRequest",
    "RefundRequest",
    "SettleRequest",
    "parse_json",
    "validate",
]

INT64_MAX = 2**63 - 1

AMOUNT_FIELDS = frozenset({"amount", "rake", "payout"})

Id = Annotated[int, Meta(ge=-INT64_MAX, le=INT64_MAX)]
"""A JSON integer (never a boolean, float or string) that fits the database's 64-bit column."""

_NO_NUL = r"^[^\x00]*$"

Text = Annotated[str, Meta(min_length=1, max_length=255, pattern=_NO_NUL)]

# "(?![\s\S])" is the very end of the text, in Python's re (which msgspec uses) and in the JSON
# Schema the OpenAPI document publishes alike; "$" would also match before a final newline, and
# "." would stop at any newline, so "a\nb:held" slipped through "(?!.*:held$)" and spent user
# a\nb's held money.
_END = r"(?![\s\S])"

UserUid = Annotated[
    str, Meta(min_length=1, max_length=255, pattern=rf"^(?![\s\S]*:held{_END})[^\x00]+$")
]
"""A user id; one ending in ``:held`` would name another user's held account (see the domain)."""

Currency = Annotated[str, Meta(pattern=rf"^[A-Za-z0-9_]{{1,16}}{_END}")]
"""A currency code: ISO 4217 or a platform coin; case-insensitive, stored upper-case."""

Ticket = Annotated[str, Meta(max_length=16384, pattern=_NO_NUL)]

RequestUuid = Annotated[str, Meta(max_length=255, pattern=_NO_NUL)]
"""``bet.uuid``: stored with the bet, so bounded and NUL-free like every other stored text."""


class _Model(Struct, frozen=True, gc=False):
    pass


class User(_Model, frozen=True):
    uid: UserUid


class Pool(_Model, frozen=True):
    uid: Id


class PlaceBet(_Model, frozen=True):
    uid: Id
    amount: Decimal
    currency: Currency
    rake: Decimal = Decimal(0)
    uuid: RequestUuid | None = None
    ticket: Ticket | None = None


class PlaceBetEntry(_Model, frozen=True):
    user: User
    pool: Pool
    bet: PlaceBet


class PlaceBetsRequest(_Model, frozen=True):
    """Place Bet: ``{bets: [{user, pool, bet}]}``, one or more entries."""

    bets: Annotated[list[PlaceBetEntry], Meta(min_length=1)]


class RefundBet(_Model, frozen=True):
    uid: Id
    # The refund's own amounts are informational: the ledger reverses what it recorded.
    amount: Decimal | None = None
    rake: Decimal | None = None


class RefundParticipant(_Model, frozen=True):
    user: User
    bet: RefundBet


class RefundPool(_Model, frozen=True):
    pool: Pool
    bets: list[RefundParticipant]


class RefundRequest(_Model, frozen=True):
    """Refund Bet and Refund Tournament: ``{pools: [{pool, bets: [{user, bet}]}]}``."""

    pools: Annotated[list[RefundPool], Meta(min_length=1)]


class SettleBet(_Model, frozen=True):
    uid: Id
    payout: Decimal
    # The payout currency; when absent the bet's own currency is meant.
    currency: Currency | None = None


class SettleParticipant(_Model, frozen=True):
    user: User
    bet: SettleBet


class SettlePool(_Model, frozen=True):
    pool: Pool
    bets: list[SettleParticipant]


class SettleRequest(_Model, frozen=True):
    """Settle Bet: ``{pools: [{pool, bets: [{user, bet}]}]}``, winners and zero payouts alike."""

    pools: Annotated[list[SettlePool], Meta(min_length=1)]


M = TypeVar("M", bound=Struct)

_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def _decoder(model: type[M]) -> msgspec.json.Decoder[M]:
    decoder = _decoders.get(model)
    if decoder is None:
        decoder = _decoders[model] = msgspec.json.Decoder(model)
    return decoder


_EXACT: msgspec.json.Decoder[Any] = msgspec.json.Decoder(float_hook=Decimal)


def parse_json(body: bytes | str) -> Any:
    """Parse a JSON document exactly: numbers with a fraction or exponent become ``Decimal``.

    Raises :class:`InvalidRequest` (``request.malformed_json``) for anything that is not one
    well-formed UTF-8 JSON document (NaN and Infinity are not JSON).
    """
    try:
        return _EXACT.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise InvalidRequest(f"malformed JSON: {exc}", key="request.malformed_json") from None
    except RecursionError:
        raise _too_deep() from None


def _too_deep() -> InvalidRequest:
    # msgspec raises RecursionError (not DecodeError) for JSON nested past the interpreter's
    # recursion limit, e.g. 100,000 nested objects in an ignored field: bad input, not a 500.
    return InvalidRequest("malformed JSON: nested too deeply", key="request.malformed_json")


def validate(model: type[M], payload: M | Mapping[str, Any] | bytes | str) -> M:
    """Validate a request body given as a model, a parsed dict, or raw JSON bytes or text.

    Raises :class:`InvalidRequest`: ``request.malformed_json`` for a body that is not JSON,
    ``request.invalid`` (naming the field) for one that does not fit the contract.
    """
    if isinstance(payload, model):
        return payload
    try:
        if isinstance(payload, bytes | bytearray | memoryview | str):
            return _decoder(model).decode(payload)
        if isinstance(payload, Mapping):
            # A caller that parsed JSON with the standard library hands us binary floats;
            # msgspec turns each into the Decimal of its shortest round-trip repr, which
            # reproduces the digits the JSON text held for amounts of up to 15 significant
            # digits (for exactness beyond that, pass the raw bytes).
            return msgspec.convert(payload, model, strict=True)
    except msgspec.ValidationError as exc:
        # "Expected `decimal`, got `bool` - at `$.bets[0].bet.amount`": name a bad amount as one.
        if str(exc).rsplit(".", 1)[-1].rstrip("`") in AMOUNT_FIELDS:
            raise InvalidAmount(str(exc)) from None
        raise InvalidRequest(str(exc)) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        # msgspec reports bad UTF-8 inside a string it keeps as a UnicodeDecodeError.
        raise InvalidRequest(f"malformed JSON: {exc}", key="request.malformed_json") from None
    except RecursionError:
        raise _too_deep() from None
    raise InvalidRequest("the request body must be a JSON object")
