"""The house's report, a tournament's, the hourly activity and the journal's check."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .amounts import amount_text, timestamp_text

if TYPE_CHECKING:
    from ..stores import CheckReport


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
class PoolReport:
    """A tournament's entries by currency: stakes, rake, payouts and what is still held."""

    pool_uid: int
    currencies: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"pool_uid": self.pool_uid, "currencies": self.currencies}


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


def check_lines(report: CheckReport) -> list[str]:
    verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
    return [
        *(f"FAIL {problem}" for problem in report.problems),
        f"{verdict}: {report.transactions} transactions, {report.postings} postings, "
        f"{report.accounts} accounts, {report.bets} bets",
    ]


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
