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
5xx); currencies are short codes; lists of entries are non-empty. Amounts (:class:`Amount`) are
JSON numbers or plain decimal strings, bounded to :data:`ledger.money.MAX_AMOUNT_CHARS` before
anything converts them; their sign and precision are checked per currency later, by
:func:`ledger.money.to_minor`.

This module is the one home of those rules: the same constants build the msgspec types and the
``check_*`` functions that values arriving by other roads (library arguments, the operator API,
the CLI) pass through. It also names the four callbacks and the platform's timeouts, for the
server and the conformance kit alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any, Final, TypeVar

import msgspec
from msgspec import Meta, Struct

from .domain import HELD_SUFFIX
from .errors import InvalidAmount, InvalidRequest
from .money import is_plain_decimal, non_negative, parse_decimal, parse_number

__all__ = [
    "AMOUNT_JSON_SCHEMA",
    "EVENTS",
    "INT64_MAX",
    "PLACE_BET",
    "PLATFORM_TIMEOUTS",
    "REFUND_BET",
    "REFUND_TOURNAMENT",
    "SETTLE_BET",
    "Amount",
    "AmountField",
    "PlaceBetEntry",
    "PlaceBetsRequest",
    "RefundRequest",
    "SettleRequest",
    "check_currency",
    "check_id",
    "check_text",
    "check_user",
    "parse_json",
    "validate",
]

# --- the callbacks (contract sections 4.1 and 6) -----------------------------------------------

# Each callback is named by the ``X-Callback-Event`` value the platform sends with it.
PLACE_BET: Final = "create:fantasy_team"
REFUND_BET: Final = "destroy:fantasy_team"
REFUND_TOURNAMENT: Final = "cancel:tournament"
SETTLE_BET: Final = "winners:tournament"
EVENTS: Final = (PLACE_BET, REFUND_BET, REFUND_TOURNAMENT, SETTLE_BET)

PLATFORM_TIMEOUTS: Mapping[str, float] = {
    PLACE_BET: 120.0,
    REFUND_BET: 120.0,
    REFUND_TOURNAMENT: 300.0,
    SETTLE_BET: 300.0,
}
"""Seconds the platform waits for an answer before it counts a delivery as failed (section 8)."""

# --- ids, texts, user uids, currency codes ------------------------------------------------------

INT64_MAX = 2**63 - 1

AMOUNT_FIELDS = frozenset({"amount", "rake", "payout"})

Id = Annotated[int, Meta(ge=-INT64_MAX, le=INT64_MAX)]
"""A JSON integer (never a boolean, float or string) that fits the database's 64-bit column."""

TEXT_MAX_LENGTH = 255

_NO_NUL = r"^[^\x00]*$"

# The very end of the text. Python's ``$`` (msgspec matches patterns with ``re.search``) also
# matches before a final newline, and ``.`` stops at any newline: with them "EUR\n" passed as a
# currency code and "a\nb:held" as a user uid (user a\nb's held account).
_END = r"(?![\s\S])"

Text = Annotated[str, Meta(min_length=1, max_length=TEXT_MAX_LENGTH, pattern=_NO_NUL)]

_USER_UID = re.compile(rf"^(?![\s\S]*{re.escape(HELD_SUFFIX)}{_END})[^\x00]+$")

# The user uid and currency patterns are not msgspec's to check: msgspec calls the regular
# expression through Python once per value, 0.45 us each, and a settle of a million participants
# carries a million user uids and as many currency codes (0.8 s of its 1.7 s decode). validate()
# checks them afterwards over the whole request (_check_texts): one pass over the joined uids,
# the pattern once per distinct currency. The JSON Schema still states them.
UserUid = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=TEXT_MAX_LENGTH,
        extra_json_schema={"pattern": _USER_UID.pattern},
    ),
]
"""A user id; one ending in ``:held`` would name another user's held account (see the domain)."""

_CURRENCY = re.compile(rf"^[A-Za-z0-9_]{{1,16}}{_END}")

Currency = Annotated[str, Meta(extra_json_schema={"pattern": _CURRENCY.pattern})]
"""A currency code: ISO 4217 or a platform coin; case-insensitive, stored upper-case."""

Ticket = Annotated[str, Meta(max_length=16384, pattern=_NO_NUL)]

RequestUuid = Annotated[str, Meta(max_length=TEXT_MAX_LENGTH, pattern=_NO_NUL)]
"""``bet.uuid``: stored with the bet, so bounded and NUL-free like every other stored text."""


def check_id(value: object, name: str) -> int:
    """``value`` as an id: an integer (not a boolean) that fits the database's 64-bit column.

    Raises :class:`InvalidRequest` (400): an id beyond 64 bits must be bad input, never a driver
    error on the column (an ``OverflowError`` on SQLite, a 503 on Postgres).
    """
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > INT64_MAX:
        raise InvalidRequest(f"{name}: expected a 64-bit integer")
    return value


def check_text(value: object, name: str) -> str:
    """``value`` as a stored text: non-empty, at most 255 characters, no NUL (Postgres refuses
    NUL, which would turn bad input into a 5xx)."""
    if not isinstance(value, str) or not value or len(value) > TEXT_MAX_LENGTH or "\x00" in value:
        raise InvalidRequest(
            f"{name}: expected a non-empty string of at most {TEXT_MAX_LENGTH} characters"
        )
    return value


def check_user(value: object) -> str:
    """``value`` as a user uid: a text that does not end in ``:held`` (the :data:`UserUid` rule)."""
    user = check_text(value, "user")
    if not _USER_UID.search(user):
        raise InvalidRequest(f"user: a user uid must not end in {HELD_SUFFIX!r}")
    return user


def check_currency(value: object) -> str:
    """``value`` as a currency code (the :data:`Currency` rule), upper-case as it is stored."""
    if not isinstance(value, str) or not _CURRENCY.search(value):
        raise InvalidRequest("currency: expected a currency code such as EUR")
    return value.upper()


class Amount(Decimal):
    """An amount as a payload carries it: a ``Decimal`` whose text was bounded and checked first.

    msgspec would read a ``Decimal`` field itself, from any number of digits and from strings
    such as ``"1_000"`` or ``" 5 "``. Declared as this type instead, every amount passes through
    :func:`_amount_hook` (strings, integers, and values given in code) or :func:`_number_hook`
    (JSON numbers with a fraction or exponent, as their text), which apply the rules of
    :func:`ledger.money.parse_decimal` before converting. Everything else treats it as the
    ``Decimal`` it is.
    """

    __slots__ = ()


def _number_hook(text: str) -> Amount:
    # msgspec's float_hook: a JSON number with a fraction or exponent, still as its text.
    try:
        return Amount(non_negative(parse_number(text)))
    except InvalidAmount as error:
        raise ValueError(error.message) from None  # msgspec adds where: "- at `$...amount`"


# Amount strings already read, each once: a settle of a million repeats a few payouts ("0.00"
# above all), a tournament's entries one fee. An Amount is immutable, so one object may stand
# for every copy; bounded, so that a hostile variety of strings cannot grow it.
_READ: dict[str, Amount] = {}
_READ_MAX = 4096


def _amount_hook(kind: type[Any], value: Any) -> Any:
    # msgspec's dec_hook: a JSON string or integer in an Amount field, or a Python value given
    # to validate() in a dict (str, int, Decimal, or a float from json.loads).
    if kind is not Amount:
        raise NotImplementedError(kind)
    if isinstance(value, Amount):
        return value  # from _number_hook: already checked
    if isinstance(value, str):
        known = _READ.get(value)
        if known is not None:
            return known
        if is_plain_decimal(value):
            amount = Amount(value)  # the common case, without building a Decimal twice
            if len(_READ) < _READ_MAX:
                _READ[value] = amount
            return amount
    try:
        return Amount(non_negative(parse_decimal(value, field="amount")))
    except InvalidAmount as error:
        raise ValueError(error.message) from None


AMOUNT_JSON_SCHEMA: Mapping[str, Any] = {
    "description": (
        "An exact decimal: a JSON number or a plain decimal string (ASCII digits, at most one "
        "point), at most 40 characters, never rounded. Negative, not finite, or finer than the "
        "currency's scale is refused (400 amount.invalid)."
    ),
    "anyOf": [
        {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?$", "maxLength": 40},
        {"type": "number", "minimum": 0},
    ],
}
"""How an amount is written, for the published JSON Schema (the parser's rules in words)."""

AmountField = Annotated[Amount, Meta(extra_json_schema=dict(AMOUNT_JSON_SCHEMA))]
"""An :class:`Amount` field, described for JSON Schema (msgspec cannot guess a custom type)."""


class _Model(Struct, frozen=True, gc=False):
    pass


Label = Annotated[
    Any,
    Meta(
        description=(
            "Informational text, recorded for the operator (ledger.directory): stored when a "
            "NUL-free string, cut to 255 characters; never a reason to refuse the request."
        )
    ),
]
"""A descriptive field the money never depends on: any JSON value is accepted here, and
:func:`ledger.directory.label` keeps only a usable string (a malformed name must not block a
payout)."""


class User(_Model, frozen=True):
    uid: UserUid
    name: Label = None
    client: Label = None


class Pool(_Model, frozen=True):
    uid: Id
    # What the platform says of the tournament (contract section 2.3), for the directory.
    name: Label = None
    currency: Label = None
    category: Label = None
    game_type: Label = msgspec.field(default=None, name="gameType")
    status: Label = None
    estimated_end_time: Label = msgspec.field(default=None, name="estimatedEndTime")


class PlaceBet(_Model, frozen=True):
    uid: Id
    amount: AmountField
    currency: Currency
    # A factory rather than a default: JSON Schema cannot encode a default of a custom type.
    rake: AmountField = msgspec.field(default_factory=Amount)
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
    # The refund's own amounts and the echoed secrets are informational: the ledger reverses
    # what it recorded, and notes a difference.
    amount: AmountField | None = None
    rake: AmountField | None = None
    secrets: dict[str, Any] | None = None


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
    payout: AmountField
    # The payout currency; when absent the bet's own currency is meant.
    currency: Currency | None = None
    secrets: dict[str, Any] | None = None  # echoed from Place Bet: compared, never enforced


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
        decoder = _decoders[model] = msgspec.json.Decoder(
            model, dec_hook=_amount_hook, float_hook=_number_hook
        )
    return decoder


def _exact_number(text: str) -> Decimal:
    return parse_number(text, field="number")


_EXACT: msgspec.json.Decoder[Any] = msgspec.json.Decoder(float_hook=_exact_number)


def parse_json(body: bytes | str) -> Any:
    """Parse a JSON document exactly: numbers with a fraction or exponent become ``Decimal``.

    Raises :class:`InvalidRequest` (``request.malformed_json``) for anything that is not one
    well-formed UTF-8 JSON document (NaN and Infinity are not JSON), and
    :class:`InvalidAmount` for such a number longer than
    :data:`ledger.money.MAX_AMOUNT_CHARS` characters, refused before it is converted (integers
    are bounded by the parser itself, at 4,300 digits, and then by
    :func:`ledger.money.parse_decimal`).
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


def validate(
    model: type[M], payload: M | Mapping[str, Any] | bytes | bytearray | memoryview | str
) -> M:
    """Validate a request body given as a model, a parsed dict, or raw JSON bytes or text.

    Raises :class:`InvalidRequest`: ``request.malformed_json`` for a body that is not JSON,
    ``request.invalid`` (naming the field) for one that does not fit the contract.
    """
    if isinstance(payload, model):
        return _check_texts(payload)
    try:
        if isinstance(payload, bytes | bytearray | memoryview | str):
            return _check_texts(_decoder(model).decode(payload))
        if isinstance(payload, Mapping):
            # A caller that parsed JSON with the standard library hands us binary floats;
            # msgspec turns each into the Decimal of its shortest round-trip repr, which
            # reproduces the digits the JSON text held for amounts of up to 15 significant
            # digits (for exactness beyond that, pass the raw bytes).
            return _check_texts(msgspec.convert(payload, model, strict=True, dec_hook=_amount_hook))
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


def _check_texts(request: M) -> M:
    """``request`` once every user uid matches :data:`UserUid`'s pattern and every currency code
    :data:`Currency`'s; else :class:`InvalidRequest` naming the first that does not, in the
    words msgspec uses for a pattern (see :data:`UserUid` for why msgspec does not check them)."""
    # Where each entry is: None for Place Bet's one list, else the sizes of the pools.
    sizes: list[int] | None = None
    codes: list[str | None] = []
    if isinstance(request, PlaceBetsRequest):
        uids = [entry.user.uid for entry in request.bets]
        codes = [entry.bet.currency for entry in request.bets]
    elif isinstance(request, SettleRequest):
        parts = [part for pool in request.pools for part in pool.bets]
        uids = [part.user.uid for part in parts]
        codes = [part.bet.currency for part in parts]
        sizes = [len(pool.bets) for pool in request.pools]
    elif isinstance(request, RefundRequest):
        uids = [part.user.uid for pool in request.pools for part in pool.bets]
        sizes = [len(pool.bets) for pool in request.pools]
    else:
        return request
    try:
        bad = _first_bad_uid(uids)
        if bad is not None:
            raise InvalidRequest(_mismatch(_USER_UID, _path(sizes, bad, "user.uid")))
        # Few distinct codes in any request: the pattern once for each.
        for code in set(codes):
            if code is not None and not _CURRENCY.search(code):
                where = _path(sizes, codes.index(code), "bet.currency")
                raise InvalidRequest(_mismatch(_CURRENCY, where))
    except TypeError:
        # Only a model built in code can get here (msgspec decodes these fields as strings).
        raise InvalidRequest("a user uid or a currency code is not a string") from None
    return request


def _first_bad_uid(uids: list[str]) -> int | None:
    """The position of the first of ``uids`` (each a non-empty string, as msgspec checked) that
    does not match :data:`UserUid`'s pattern (one that ends in ``:held`` or holds a NUL).

    Joined with NULs, the uids are all good when the only NULs are the separators and none of
    them follows ``:held``: only otherwise is the pattern run on each."""
    joined = "\x00".join(uids) + "\x00"
    if joined.count("\x00") == len(uids) and HELD_SUFFIX + "\x00" not in joined:
        return None
    return next((n for n, uid in enumerate(uids) if not _USER_UID.search(uid)), None)


def _path(sizes: list[int] | None, n: int, field: str) -> str:
    """Where the ``n``-th entry is: in Place Bet's list (``sizes`` None), else counted across
    pools of these sizes."""
    if sizes is None:
        return f"$.bets[{n}].{field}"
    for number, size in enumerate(sizes):
        if n < size:
            return f"$.pools[{number}].bets[{n}].{field}"
        n -= size
    raise IndexError(n)


def _mismatch(pattern: re.Pattern[str], path: str) -> str:
    return f"Expected `str` matching regex {pattern.pattern!r} - at `{path}`"
