"""How the ledger shows its books: the JSON (dict) and text shapes of balances, statements, bets,
movements and reports, shared by the ``ledger`` command and the operator API.

Every amount is rendered here, by :func:`amount_text`: a plain decimal string carrying exactly the
digits of its currency's scale (``"0.00000001"`` and ``"0.00000000"`` for an 8-decimal coin,
never ``"1E-8"`` or ``"0E-8"``). Every timestamp is ISO 8601 in UTC.

Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .deliveries import DeliveryRecord
    from .stores import CheckReport

__all__ = [
    "BET_COLUMNS",
    "DELIVERY_COLUMNS",
    "HOLD_COLUMNS",
    "HOUSE_FIELDS",
    "STATEMENT_COLUMNS",
    "TOURNAMENT_COLUMNS",
    "USER_COLUMNS",
    "Balance",
    "BetPosting",
    "BetView",
    "HoldView",
    "HourActivity",
    "HouseReport",
    "Movement",
    "PoolReport",
    "StatementLine",
    "TournamentView",
    "UserView",
    "amount_text",
    "balance_lines",
    "balances_at_dict",
    "balances_dict",
    "bet_row_text",
    "bet_text",
    "check_dict",
    "check_lines",
    "deliveries_dict",
    "delivery_dict",
    "delivery_text",
    "hold_text",
    "holds_dict",
    "house_lines",
    "movement_text",
    "statement_dict",
    "statement_line_text",
    "timestamp_text",
    "tournament_lines",
    "tournament_row_text",
    "user_lines",
    "user_row_text",
]


def amount_text(amount: Decimal) -> str:
    """A plain decimal string of exactly the digits ``amount`` holds: never an exponent.

    The ``f`` format without a precision neither rounds nor pads: it writes the coefficient at the
    decimal's own exponent, and every amount the ledger answers is built by
    :func:`ledger.money.from_minor` with its currency's scale as that exponent (``str()`` would
    switch to scientific notation from 7 decimals on).
    """
    return format(amount, "f")


def timestamp_text(stamp: datetime) -> str:
    """ISO 8601 with the zone; SQLite hands timestamps back without one, written in UTC."""
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).isoformat()


# --- the values the ledger answers with --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Balance:
    """A user's money in one currency: ``available`` to spend, ``held`` for open entries."""

    currency: str
    available: Decimal
    held: Decimal

    def to_dict(self) -> dict[str, str]:
        return {
            "currency": self.currency,
            "available": amount_text(self.available),
            "held": amount_text(self.held),
        }


@dataclass(frozen=True, slots=True)
class StatementLine:
    """One movement on a user's available or held balance."""

    id: int
    created_at: datetime
    account: str
    currency: str
    amount: Decimal
    kind: str
    bet_uid: int | None
    reference: str | None
    transaction_id: int
    # The account's (available or held) balance after this line; pool of the line's bet.
    balance_after: Decimal | None = None
    pool_uid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": timestamp_text(self.created_at),
            "account": self.account,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "kind": self.kind,
            "bet_uid": self.bet_uid,
            "reference": self.reference,
            "transaction_id": self.transaction_id,
            "balance_after": None
            if self.balance_after is None
            else amount_text(self.balance_after),
            "pool_uid": self.pool_uid,
        }


STATEMENT_COLUMNS = (
    "id",
    "created_at",
    "account",
    "currency",
    "amount",
    "balance_after",
    "kind",
    "bet_uid",
    "pool_uid",
    "reference",
    "transaction_id",
)
"""The columns of a statement's CSV export, in order."""


@dataclass(frozen=True, slots=True)
class HoldView:
    """An open hold: a placed bet not yet settled or refunded, and whether it is stale."""

    uid: int
    user: str
    pool_uid: int
    currency: str
    amount: Decimal
    rake: Decimal
    funding: str
    placed_at: datetime
    stale: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "user": self.user,
            "pool_uid": self.pool_uid,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "rake": amount_text(self.rake),
            "funding": self.funding,
            "placed_at": timestamp_text(self.placed_at),
            "stale": self.stale,
        }


HOLD_COLUMNS = (
    "uid",
    "user",
    "pool_uid",
    "currency",
    "amount",
    "rake",
    "funding",
    "placed_at",
    "stale",
)
"""The columns of the holds' CSV export, in order."""


@dataclass(frozen=True, slots=True)
class HouseReport:
    """The house per currency: its accounts' balances now, and a period's totals.

    ``currencies`` items: ``{"currency", "balances": {account: amount}, "deposits",
    "withdrawals", "stakes_captured", "rake_earned", "prizes_paid", "ticket_funded",
    "refunds", "entries", "ticket_entries", "unique_players"}``, amounts as decimal strings.
    """

    since: datetime | None
    until: datetime | None
    currencies: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": None if self.since is None else timestamp_text(self.since),
            "until": None if self.until is None else timestamp_text(self.until),
            "currencies": self.currencies,
        }


@dataclass(frozen=True, slots=True)
class BetView:
    """A bet as the ledger recorded it, amounts as exact decimals, with when it was placed and
    closed (refunded or settled; ``None`` while it is open)."""

    uid: int
    user: str
    pool_uid: int
    currency: str
    amount: Decimal
    rake: Decimal
    funding: str
    state: str
    payout: Decimal | None
    payout_currency: str | None
    secrets: Mapping[str, Any]
    placed_at: datetime | None = None
    closed_at: datetime | None = None
    # The deliveries that named the bet (journal rows), newest first.
    deliveries: Sequence[DeliveryRecord] = ()
    # The names the platform gave the user and the tournament (ledger.directory), and the
    # bet's legs on the user's accounts: filled by the single-bet view, not by lists.
    user_name: str | None = None
    pool_name: str | None = None
    postings: Sequence[BetPosting] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "user": self.user,
            "pool_uid": self.pool_uid,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "rake": amount_text(self.rake),
            "funding": self.funding,
            "state": self.state,
            "payout": None if self.payout is None else amount_text(self.payout),
            "payout_currency": self.payout_currency,
            "secrets": dict(self.secrets),
            "placed_at": None if self.placed_at is None else timestamp_text(self.placed_at),
            "closed_at": None if self.closed_at is None else timestamp_text(self.closed_at),
            "deliveries": [
                {
                    "request_id": item.request_id,
                    "event": item.event,
                    "status": item.status,
                    "error": item.error,
                    "received_at": timestamp_text(item.received_at),
                }
                for item in self.deliveries
            ],
            "user_name": self.user_name,
            "pool_name": self.pool_name,
            **(
                {}
                if self.postings is None
                else {"postings": [posting.to_dict() for posting in self.postings]}
            ),
        }


@dataclass(frozen=True, slots=True)
class BetPosting:
    """One leg of a bet on its user's available or held balance."""

    id: int
    created_at: datetime
    account: str
    currency: str
    amount: Decimal
    kind: str
    reference: str | None
    transaction_id: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": timestamp_text(self.created_at),
            "account": self.account,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "kind": self.kind,
            "reference": self.reference,
            "transaction_id": self.transaction_id,
        }


@dataclass(frozen=True, slots=True)
class Movement:
    """A deposit or withdrawal; ``applied`` is false for an idempotent re-send."""

    reference: str
    user: str
    currency: str
    amount: Decimal
    applied: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "user": self.user,
            "currency": self.currency,
            "amount": amount_text(self.amount),
            "applied": self.applied,
        }


@dataclass(frozen=True, slots=True)
class PoolReport:
    """A tournament's entries by currency: stakes, rake, payouts and what is still held."""

    pool_uid: int
    currencies: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"pool_uid": self.pool_uid, "currencies": self.currencies}


# --- JSON shapes of whole answers --------------------------------------------------------------


def balances_dict(user: str, balances: Sequence[Balance]) -> dict[str, Any]:
    """``{"user", "balances": [{"currency", "available", "held"}]}``."""
    return {"user": user, "balances": [balance.to_dict() for balance in balances]}


def statement_dict(
    user: str, lines: Sequence[StatementLine], next_cursor: str | None
) -> dict[str, Any]:
    """``{"user", "lines": [...], "next", "next_before"}``: pass ``next`` (the opaque cursor) or
    ``next_before`` (the last line's id, the older form) as ``before`` for the next page; both
    are ``null`` on the last page."""
    return {
        "user": user,
        "lines": [line.to_dict() for line in lines],
        "next": next_cursor,
        "next_before": lines[-1].id if next_cursor is not None and lines else None,
    }


def holds_dict(holds: Sequence[HoldView], next_cursor: str | None) -> dict[str, Any]:
    """``{"holds": [...], "next"}``: pass ``next`` as ``before`` for the next page."""
    return {"holds": [hold.to_dict() for hold in holds], "next": next_cursor}


def balances_at_dict(user: str, at: datetime, balances: Sequence[Balance]) -> dict[str, Any]:
    """``{"user", "at", "balances": [...]}``: the balances at that moment."""
    return {
        "user": user,
        "at": timestamp_text(at),
        "balances": [balance.to_dict() for balance in balances],
    }


def check_dict(report: CheckReport) -> dict[str, Any]:
    """The journal check: ``{"ok", "problems", "transactions", "postings", "accounts", "bets"}``."""
    return {
        "ok": report.ok,
        "problems": list(report.problems),
        "transactions": report.transactions,
        "postings": report.postings,
        "accounts": report.accounts,
        "bets": report.bets,
    }


DELIVERY_COLUMNS = (
    "id",
    "received_at",
    "request_id",
    "event",
    "path",
    "client",
    "subject",
    "address",
    "status",
    "error",
    "bet_count",
    "bet_uids",
    "duration_ms",
)
"""The fields of a delivery journal row, in order: its JSON keys and its CSV columns."""


def delivery_dict(item: DeliveryRecord) -> dict[str, Any]:
    """One journal row; ``duration_ms`` (microsecond precision) of a 2xx row runs up to the
    moment its row was written, just before the commit."""
    return {
        "id": item.id,
        "received_at": timestamp_text(item.received_at),
        "request_id": item.request_id,
        "event": item.event,
        "path": item.path,
        "client": item.client,
        "subject": item.subject,
        "address": item.address,
        "status": item.status,
        "error": item.error,
        "bet_count": item.bet_count,
        "bet_uids": list(item.bet_uids),
        "duration_ms": str(Decimal(item.duration_us).scaleb(-3)),
    }


def deliveries_dict(items: Sequence[DeliveryRecord], next_page: str | None) -> dict[str, Any]:
    """``{"deliveries": [...], "next"}``: pass ``next`` as ``before`` for the next page."""
    return {"deliveries": [delivery_dict(item) for item in items], "next": next_page}


# --- text shapes (the command line) ------------------------------------------------------------


def movement_text(kind: str, movement: Movement) -> str:
    state = "applied" if movement.applied else "already applied (nothing done)"
    return (
        f"{kind} {movement.reference}: {amount_text(movement.amount)} {movement.currency} "
        f"for {movement.user} {state}"
    )


def balance_lines(user: str, balances: Sequence[Balance]) -> list[str]:
    if not balances:
        return [f"{user} has no balances"]
    return [
        f"{item.currency}  available {amount_text(item.available)}  held {amount_text(item.held)}"
        for item in balances
    ]


def statement_line_text(line: StatementLine) -> str:
    subject = f"bet {line.bet_uid}" if line.bet_uid is not None else line.reference or ""
    if line.pool_uid is not None:
        subject += f" pool {line.pool_uid}"
    after = "" if line.balance_after is None else f" -> {amount_text(line.balance_after):>14}"
    return (
        f"{line.created_at:%Y-%m-%d %H:%M:%S}  {line.kind:<10} {line.account:<9} "
        f"{amount_text(line.amount):>14}{after} {line.currency}  {subject}"
    )


def hold_text(hold: HoldView) -> str:
    stale = "  STALE" if hold.stale else ""
    return (
        f"{timestamp_text(hold.placed_at)}  bet {hold.uid}  user {hold.user}  pool "
        f"{hold.pool_uid}  {amount_text(hold.amount)} + rake {amount_text(hold.rake)} "
        f"{hold.currency} ({hold.funding}){stale}"
    )


HOUSE_FIELDS = (
    "deposits",
    "withdrawals",
    "stakes_captured",
    "rake_earned",
    "prizes_paid",
    "ticket_funded",
    "refunds",
    "entries",
    "ticket_entries",
    "unique_players",
)


def house_lines(report: HouseReport) -> list[str]:
    since = "the beginning" if report.since is None else timestamp_text(report.since)
    until = "now" if report.until is None else timestamp_text(report.until)
    lines = [f"house from {since} until {until}"]
    if not report.currencies:
        lines.append("no house accounts")
    for item in report.currencies:
        lines.append(item["currency"])
        lines.extend(f"  {name:<16} {amount}" for name, amount in item["balances"].items())
        lines.extend(f"  {name:<16} {item[name]}" for name in HOUSE_FIELDS)
    return lines


def bet_text(bet: BetView) -> str:
    payout = (
        f", payout {amount_text(bet.payout)} {bet.payout_currency}"
        if bet.payout is not None
        else ""
    )
    placed = f", placed {timestamp_text(bet.placed_at)}" if bet.placed_at is not None else ""
    closed = f", closed {timestamp_text(bet.closed_at)}" if bet.closed_at is not None else ""
    user = f"{bet.user} ({bet.user_name})" if bet.user_name else bet.user
    pool = f"{bet.pool_uid} ({bet.pool_name})" if bet.pool_name else str(bet.pool_uid)
    text = (
        f"bet {bet.uid}: {bet.state}, user {user}, pool {pool}, "
        f"{amount_text(bet.amount)} + rake {amount_text(bet.rake)} {bet.currency} "
        f"({bet.funding}){payout}{placed}{closed}"
    )
    legs = [
        f"\n  {timestamp_text(leg.created_at)}  {leg.kind:<10} {leg.account:<9} "
        f"{amount_text(leg.amount):>14} {leg.currency}"
        for leg in bet.postings or []
    ]
    named = [
        f"\n  delivery {item.request_id or '-'} {item.event} {item.status}"
        f"{' ' + item.error if item.error else ''} at {timestamp_text(item.received_at)}"
        for item in bet.deliveries
    ]
    return text + "".join(legs) + "".join(named)


def delivery_text(item: DeliveryRecord) -> str:
    more = "..." if item.bet_count > len(item.bet_uids) else ""
    uids = ",".join(map(str, item.bet_uids)) + more
    return (
        f"{timestamp_text(item.received_at)}  {item.status} {item.error or 'ok':<28} "
        f"{item.event:<18} {item.request_id or '-'}  bets {item.bet_count} [{uids}]  "
        f"{Decimal(item.duration_us).scaleb(-3)} ms  {item.client or '-'}/{item.subject or '-'} "
        f"{item.address or '-'}"
    )


def check_lines(report: CheckReport) -> list[str]:
    verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
    return [
        *(f"FAIL {problem}" for problem in report.problems),
        f"{verdict}: {report.transactions} transactions, {report.postings} postings, "
        f"{report.accounts} accounts, {report.bets} bets",
    ]


# --- the directory: tournaments, users and bet lists (ledger.directory) --------------------------


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else timestamp_text(moment)


@dataclass(frozen=True, slots=True)
class TournamentView:
    """A tournament as the platform described it, with its entries per state; the single view
    adds the report per currency (:class:`PoolReport`)."""

    uid: int
    name: str | None
    currency: str | None
    category: str | None
    game_type: str | None
    status: str | None
    estimated_end_time: datetime | None
    first_seen: datetime
    last_seen: datetime
    entries: Mapping[str, int]
    report: PoolReport | None = None

    def to_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "uid": self.uid,
            "name": self.name,
            "currency": self.currency,
            "category": self.category,
            "game_type": self.game_type,
            "status": self.status,
            "estimated_end_time": _stamp(self.estimated_end_time),
            "first_seen": timestamp_text(self.first_seen),
            "last_seen": timestamp_text(self.last_seen),
            "entries": dict(self.entries),
        }
        if self.report is not None:
            answer["currencies"] = self.report.currencies
        return answer


@dataclass(frozen=True, slots=True)
class UserView:
    """A user as the platform described it (nothing, for one known by a deposit only); the
    single view adds the balances."""

    uid: str
    name: str | None
    client: str | None
    first_seen: datetime | None
    last_seen: datetime | None
    balances: Sequence[Balance] | None = None

    def to_dict(self) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "uid": self.uid,
            "name": self.name,
            "client": self.client,
            "first_seen": _stamp(self.first_seen),
            "last_seen": _stamp(self.last_seen),
        }
        if self.balances is not None:
            answer["balances"] = [balance.to_dict() for balance in self.balances]
        return answer


# CSV columns of each export: the list item's JSON keys, nested values as JSON text.
TOURNAMENT_COLUMNS = (
    "uid",
    "name",
    "currency",
    "category",
    "game_type",
    "status",
    "estimated_end_time",
    "first_seen",
    "last_seen",
    "entries",
)
USER_COLUMNS = ("uid", "name", "client", "first_seen", "last_seen")
BET_COLUMNS = (
    "uid",
    "user",
    "user_name",
    "pool_uid",
    "pool_name",
    "currency",
    "amount",
    "rake",
    "funding",
    "state",
    "payout",
    "payout_currency",
    "placed_at",
    "closed_at",
)


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def tournament_row_text(item: TournamentView) -> str:
    entries = ", ".join(f"{state} {count}" for state, count in item.entries.items()) or "none"
    return (
        f"{item.uid}  {_or_dash(item.name)}  {_or_dash(item.currency)}  "
        f"status {_or_dash(item.status)}  entries: {entries}"
    )


def tournament_lines(item: TournamentView) -> list[str]:
    lines = [
        f"tournament {item.uid}: {_or_dash(item.name)}",
        f"  currency {_or_dash(item.currency)}, category {_or_dash(item.category)}, "
        f"game type {_or_dash(item.game_type)}, status {_or_dash(item.status)}",
        f"  estimated end {_or_dash(_stamp(item.estimated_end_time))}",
        f"  first seen {timestamp_text(item.first_seen)}, "
        f"last seen {timestamp_text(item.last_seen)}",
    ]
    for found in item.report.currencies if item.report is not None else []:
        states = ", ".join(f"{state} {count}" for state, count in found["by_state"].items())
        payouts = ", ".join(f"{amount} {cur}" for cur, amount in found["payouts"].items())
        lines.append(
            f"  {found['currency']}: {found['entries']} entries ({states}), stakes "
            f"{found['stakes']}, rake {found['rake']}, payouts {payouts or 'none'}, "
            f"open holds {found['open_holds']}"
        )
    return lines


def user_row_text(item: UserView) -> str:
    return (
        f"{item.uid}  {_or_dash(item.name)}  client {_or_dash(item.client)}  "
        f"last seen {_or_dash(_stamp(item.last_seen))}"
    )


def user_lines(item: UserView) -> list[str]:
    lines = [
        f"user {item.uid}: {_or_dash(item.name)}, client {_or_dash(item.client)}",
        f"  first seen {_or_dash(_stamp(item.first_seen))}, "
        f"last seen {_or_dash(_stamp(item.last_seen))}",
    ]
    lines += [f"  {line}" for line in balance_lines(item.uid, item.balances or [])]
    return lines


def bet_row_text(bet: BetView) -> str:
    payout = "" if bet.payout is None else f"  payout {amount_text(bet.payout)}"
    return (
        f"{bet.uid}  {bet.state:<8}  user {bet.user}  pool {bet.pool_uid}  "
        f"{amount_text(bet.amount)} + {amount_text(bet.rake)} {bet.currency}{payout}"
    )


@dataclass(frozen=True, slots=True)
class HourActivity:
    """One hour in one currency: entries placed, their stakes, and the payouts paid in this
    currency by that hour's settles; amounts as exact decimals."""

    hour: datetime  # its start, UTC
    currency: str
    entries: int
    stakes: Decimal
    payouts: Decimal

    def to_dict(self) -> dict[str, Any]:
        return {
            "hour": timestamp_text(self.hour),
            "currency": self.currency,
            "entries": self.entries,
            "stakes": amount_text(self.stakes),
            "payouts": amount_text(self.payouts),
        }
