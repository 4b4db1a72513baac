"""The platform's callback payloads (contract section 2 and 4.1) as pydantic models.

Unknown fields are ignored at every level, as the contract requires. Only the fields the wallet
acts on are declared; everything else in a payload is accepted and dropped.

Money fields are ``Decimal`` and never pass through ``float``: :func:`parse_json` parses JSON
numbers straight to ``Decimal`` (pydantic's own JSON parser goes through float and would turn
``1.0000000000000000000001`` into ``1``), and :data:`Amount` refuses booleans, NaN and infinities.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from .domain import HELD_SUFFIX, is_valid_user_uid
from .errors import InvalidAmount, InvalidRequest
from .money import parse_decimal

__all__ = [
    "Amount",
    "PlaceBetEntry",
    "PlaceBetsRequest",
    "RefundRequest",
    "SettleRequest",
    "parse_json",
    "validate",
]

INT64_MAX = 2**63 - 1


def _amount(value: object) -> Decimal:
    try:
        amount = parse_decimal(value)
    except InvalidAmount as exc:
        raise PydanticCustomError("amount_invalid", exc.message) from None
    if amount < 0:
        raise PydanticCustomError("amount_invalid", "amount: {value} is negative", {"value": value})
    return amount


def _no_nul(value: str) -> str:
    # Postgres refuses NUL in text; refusing it here keeps bad input a 400, never a 5xx.
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


Amount = Annotated[Decimal, BeforeValidator(_amount)]
"""A non-negative, finite decimal amount from a JSON number or a decimal string."""

Id = Annotated[int, Strict(), Field(ge=-INT64_MAX, le=INT64_MAX)]
"""A JSON integer (never a boolean, float or string) that fits the database's 64-bit column."""

Text = Annotated[
    str, Strict(), StringConstraints(min_length=1, max_length=255), AfterValidator(_no_nul)
]


def _user_uid(value: str) -> str:
    if not is_valid_user_uid(value):
        raise ValueError(f"a user uid must not end in {HELD_SUFFIX!r}")
    return value


UserUid = Annotated[Text, AfterValidator(_user_uid)]
"""A user id whose account names cannot collide with another user's (see the domain)."""

Currency = Annotated[
    str,
    Strict(),
    StringConstraints(pattern=r"^[A-Za-z0-9_]{1,16}$", to_upper=True),
]
"""A currency code: ISO 4217 or a platform coin; case-insensitive, stored upper-case."""

Ticket = Annotated[str, Strict(), StringConstraints(max_length=16384), AfterValidator(_no_nul)]

RequestUuid = Annotated[str, Strict(), StringConstraints(max_length=255), AfterValidator(_no_nul)]
"""``bet.uuid``: stored with the bet (``request_uuid``, 255 characters), so bounded and NUL-free
like every other stored text; otherwise Postgres refuses the row and bad input becomes a 503."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class User(_Model):
    uid: UserUid
    client: str | None = None
    name: str | None = None


class Pool(_Model):
    uid: Id
    currency: Currency | None = None
    status: str | None = None


class PlaceBet(_Model):
    uid: Id
    uuid: RequestUuid | None = None
    amount: Amount
    rake: Amount = Decimal(0)
    currency: Currency
    ticket: Ticket | None = None


class PlaceBetEntry(_Model):
    user: User
    pool: Pool
    bet: PlaceBet


class PlaceBetsRequest(_Model):
    """Place Bet: ``{bets: [{user, pool, bet}]}``, one or more entries."""

    bets: Annotated[list[PlaceBetEntry], Field(min_length=1)]


class RefundBet(_Model):
    uid: Id
    uuid: str | None = None
    # The refund's own amounts are informational: the ledger reverses what it recorded.
    amount: Amount | None = None
    rake: Amount | None = None
    currency: Currency | None = None
    secrets: dict[str, Any] | None = None


class RefundParticipant(_Model):
    user: User
    bet: RefundBet


class RefundPool(_Model):
    pool: Pool
    bets: list[RefundParticipant]


class RefundRequest(_Model):
    """Refund Bet and Refund Tournament: ``{pools: [{pool, bets: [{user, bet}]}]}``."""

    pools: Annotated[list[RefundPool], Field(min_length=1)]


class SettleBet(_Model):
    uid: Id
    uuid: str | None = None
    payout: Amount
    # The payout currency; when absent the bet's own currency is meant.
    currency: Currency | None = None
    secrets: dict[str, Any] | None = None


class SettleParticipant(_Model):
    user: User
    bet: SettleBet


class SettlePool(_Model):
    pool: Pool
    bets: list[SettleParticipant]


class SettleRequest(_Model):
    """Settle Bet: ``{pools: [{pool, bets: [{user, bet}]}]}``, winners and zero payouts alike."""

    pools: Annotated[list[SettlePool], Field(min_length=1)]


def _reject_constant(name: str) -> Any:
    raise InvalidRequest(f"{name} is not a JSON number", key="request.malformed_json")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A duplicated key makes a payload ambiguous (which amount did the platform mean?): refuse it.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidRequest(f"duplicate key {key!r}", key="request.malformed_json")
        result[key] = value
    return result


def parse_json(body: bytes | str) -> Any:
    """Parse a JSON body exactly: numbers with a fraction or exponent become ``Decimal``.

    Raises :class:`InvalidRequest` (``request.malformed_json``) for anything that is not one
    well-formed UTF-8 JSON document without duplicate keys, NaN or Infinity.
    """
    try:
        text = body.decode("utf-8") if isinstance(body, bytes | bytearray) else body
        return json.loads(
            text,
            parse_float=Decimal,
            parse_constant=_reject_constant,
            object_pairs_hook=_unique_keys,
        )
    except InvalidRequest:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError too
        raise InvalidRequest(f"malformed JSON: {exc}", key="request.malformed_json") from None


M = TypeVar("M", bound=BaseModel)


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False)[:5]:
        location = ".".join(str(part) for part in item["loc"]) or "body"
        parts.append(f"{location}: {item['msg']}")
    return "; ".join(parts)


def validate(model: type[M], payload: M | Mapping[str, Any] | bytes | str) -> M:
    """Validate a request body given as a model, a parsed dict, or raw JSON bytes or text.

    Raises :class:`InvalidAmount` for a bad amount and :class:`InvalidRequest` for anything else
    that does not fit the contract; the error message names the offending fields.
    """
    if isinstance(payload, model):
        return payload
    if isinstance(payload, bytes | bytearray | str):
        payload = parse_json(payload)
    if not isinstance(payload, Mapping):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        if any(item["type"] == "amount_invalid" for item in exc.errors()):
            raise InvalidAmount(_describe(exc)) from None
        raise InvalidRequest(_describe(exc)) from None
