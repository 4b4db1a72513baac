"""The end of the day: the ticket API exercised, then the wallet's balances, every bet's state and
the journal check compared with the platform's books, and the platform's record of its bets.

Invariant: every user's balance in every currency and every bet is compared once; a mismatch
names the user or bet, and, where the wallet's statement can tell, the bets behind it. Proved by
``tests/kit/test_simulator.py`` and ``tests/kit/test_simulate_reconcile.py``.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from ...errors import LedgerError
from ..admin_client import Books
from ..payloads import Player
from ..tickets import TicketError
from .model import ZERO, D, SimBet
from .state import DayState

__all__ = ["RECORD_COLUMNS", "Checks", "write_platform_record"]


class Checks(DayState):
    """Comparing the wallet with the platform's books."""

    def _exercise_ticket_api(self) -> None:
        """List every ticket, check used ones carry their team, delete one unused and one used."""
        listed = list(self.tickets.iter_all(limit=25))
        self.report.tickets["listed"] = len(listed)
        ids = [ticket.id for ticket in listed]
        if ids != sorted(ids, reverse=True):
            self.report.mismatches.append("ticket list is not sorted by id descending")
        for ticket in listed:
            stored = self.ticket_store.get(ticket.id)
            if stored is not None and stored.fantasy_team_id != ticket.fantasy_team_id:
                self.report.mismatches.append(f"ticket {ticket.id}: fantasyTeamId differs")
        unused = next((ticket for ticket in listed if not ticket.used), None)
        if unused is not None:
            self.tickets.delete(unused.id)
            self.report.tickets["deleted"] += 1
        used = next((ticket for ticket in listed if ticket.used), None)
        if used is not None:
            try:
                self.tickets.delete(used.id)
                self.report.mismatches.append(f"used ticket {used.id} was deleted")
            except TicketError as exc:
                if exc.status != 403:
                    self.report.mismatches.append(f"deleting used ticket {used.id}: {exc}")
                self.report.tickets["used ticket delete refused"] += 1

    def _reconcile(self) -> None:
        for player in self.players:
            actual = self.operator.balances(player.uid)
            currencies = {player.currency, *actual}
            for currency in sorted(currencies):
                expected = self.books.get((player.uid, currency), Books(D(0), D(0)))
                found = actual.get(currency, Books(D(0), D(0)))
                self.report.reconciled["balances"] += 1
                if found != expected:
                    self.report.mismatches.append(
                        f"user {player.uid} {currency}: wallet {found}, expected {expected}"
                    )
                    self._diagnose(player, currency)
        for uid, sim in self.bets.items():
            recorded = self.operator.bet(uid)
            self.report.reconciled["bets"] += 1
            self._reconcile_bet(uid, sim, recorded)
        ok, report = self.operator.check()
        self.report.check_ok = ok
        if not ok:
            self.report.mismatches.append(f"journal check failed: {report}")

    def platform_record(self) -> list[dict[str, Any]]:
        """The platform's record of its bets, in the columns ``ledger reconcile`` reads: every
        entry the wallet accepted, in its state as the platform knows it (refused entries are
        not bets). Amounts are decimal strings in the bet's currency."""
        record = []
        for uid, sim in sorted(self.bets.items()):
            if sim.state not in ("placed", "refunded", "settled"):
                continue
            entry = sim.entry
            settled = sim.state == "settled"
            record.append(
                {
                    "uid": uid,
                    "user": entry.player.uid,
                    "pool": entry.tournament.uid,
                    "amount": str(entry.amount),
                    "rake": str(entry.rake),
                    "currency": entry.currency,
                    "status": sim.state,
                    "payout": str(sim.payout) if settled else "",
                    "payout_currency": entry.currency if settled else "",
                    "funding": sim.funding,
                }
            )
        return record

    def _expected_effect(self, sim: SimBet) -> Books:
        """What one bet should have done to its user's balances, net, by now."""
        total = sim.entry.total
        if sim.state == "placed":
            return Books(
                -total if sim.funding == "cash" else ZERO, ZERO if sim.funding == "free" else total
            )
        if sim.state == "settled":
            return Books(sim.payout - (total if sim.funding == "cash" else ZERO), ZERO)
        return Books(ZERO, ZERO)

    def _diagnose(self, player: Player, currency: str) -> None:
        """Name the bets behind a balance mismatch, from the statement of our server's API."""
        try:
            lines = self.operator.statement(player.uid)
        except LedgerError:
            return  # another wallet without a statement: the balance mismatch stands alone
        moved: dict[int, Books] = defaultdict(lambda: Books(ZERO, ZERO))
        for line in lines:
            if line.get("currency") != currency or line.get("bet_uid") is None:
                continue
            amount = D(str(line["amount"]))
            uid = int(line["bet_uid"])
            books = moved[uid]
            if line.get("account") == "held":
                moved[uid] = Books(books.available, books.held + amount)
            else:
                moved[uid] = Books(books.available + amount, books.held)
        for uid, sim in self.bets.items():
            if sim.entry.player.uid != player.uid or sim.entry.currency != currency:
                continue
            expected = self._expected_effect(sim)
            found = moved.get(uid, Books(ZERO, ZERO))
            if found != expected:
                self.report.diagnosis.append(
                    f"bet {uid} ({sim.funding}, {sim.state}, payout {sim.payout}): moved "
                    f"{found}, expected {expected}"
                )

    def _reconcile_bet(self, uid: int, sim: SimBet, recorded: dict[str, Any] | None) -> None:
        if sim.state in ("rejected", "pending"):
            if recorded is not None:
                self.report.mismatches.append(f"bet {uid}: refused, but the wallet recorded it")
            return
        if recorded is None:
            self.report.mismatches.append(
                f"bet {uid}: {sim.state}, but the wallet does not know it"
            )
            return
        if recorded.get("state") != sim.state:
            self.report.mismatches.append(
                f"bet {uid}: wallet says {recorded.get('state')}, expected {sim.state}"
            )
        if sim.state == "settled" and D(str(recorded.get("payout") or 0)) != sim.payout:
            self.report.mismatches.append(
                f"bet {uid}: wallet paid {recorded.get('payout')}, expected {sim.payout}"
            )


RECORD_COLUMNS: Final = (
    "uid",
    "user",
    "pool",
    "amount",
    "rake",
    "currency",
    "status",
    "payout",
    "payout_currency",
    "funding",
)


def write_platform_record(rows: Iterable[dict[str, Any]], path: Path) -> None:
    """Write the platform's record: JSON lines for ``.jsonl``/``.ndjson``, a JSON array for
    ``.json``, TSV for ``.tsv``, else CSV (``funding`` is an extra column the reader ignores)."""
    suffix = path.suffix.lower()
    with path.open("w", newline="") as out:
        if suffix in (".jsonl", ".ndjson"):
            out.writelines(json.dumps(row) + "\n" for row in rows)
        elif suffix == ".json":
            json.dump(list(rows), out, indent=1)
        else:
            writer = csv.DictWriter(
                out, RECORD_COLUMNS, delimiter="\t" if suffix == ".tsv" else ","
            )
            writer.writeheader()
            writer.writerows(rows)
