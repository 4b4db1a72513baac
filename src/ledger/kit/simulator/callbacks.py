"""The day's callbacks: Place Bets, Refund Bets, cancelled tournaments and settles with normal and
mixed payout tables, each applied to the platform's own books only once the wallet accepted it.

Invariant: the platform's books move exactly as the wallet's must: a cash stake from available
to held, a ticket's stake held for the house, a refund back, a payout to available; a Place Bet
the user cannot afford must be refused with 402. Proved by ``tests/kit/test_simulator.py``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from decimal import ROUND_DOWN
from functools import partial
from typing import Any

from .. import payloads
from ..admin_client import Books
from ..payloads import Result, Tournament
from ..platform import CallbackEvent
from .deliveries import Deliveries
from .model import CENT, D, SimBet, convert

__all__ = ["Callbacks"]


class Callbacks(Deliveries):
    """Place, refund, cancel and settle, with the platform's books kept."""

    def _affordable(self, request: Sequence[SimBet]) -> bool:
        needed: Counter[tuple[str, str]] = Counter()
        for sim in request:
            if sim.funding == "cash":
                needed[(sim.entry.player.uid, sim.entry.currency)] += sim.entry.total  # type: ignore[assignment]
        return all(
            self.books.get(key, Books(D(0), D(0))).available >= amount
            for key, amount in needed.items()
        )

    def _place(self, request: list[SimBet]) -> None:
        entries = [sim.entry for sim in request]
        expect_ok = self._affordable(request)
        what = f"Place Bet {[entry.bet_uid for entry in entries]}"
        delivery = self._deliver(
            CallbackEvent.PLACE_BET, payloads.place_bet(self.platform.client_name, entries), what
        )
        self._tick()
        if delivery.passed != expect_ok or (not expect_ok and delivery.status != 402):
            expected = "200" if expect_ok else "402"
            self.report.mismatches.append(
                f"{what}: expected {expected}, got {delivery.describe(160)}"
            )
        if not delivery.passed:
            for sim in request:
                sim.state = "rejected"
            self.report.entries["refused"] += len(request)
            return
        data = delivery.data
        secrets = data.get("secrets") if isinstance(data, dict) else None
        for sim in request:
            sim.state = "placed"
            entry = sim.entry
            if isinstance(secrets, dict):
                self.secrets[entry.bet_uid] = secrets
            self.report.entries[f"placed {sim.funding}"] += 1
            if sim.funding == "cash":
                self._move(entry.player, available=-entry.total, held=entry.total)
                self._moved(entry.currency, "staked", entry.total)
            elif sim.funding == "ticket":
                self._move(entry.player, held=entry.total)
                self._moved(entry.currency, "ticket stakes", entry.total)
            if sim.ticket_id is not None:
                # The platform marks the ticket used by this fantasy team (contract section 3).
                self.ticket_store.use(sim.ticket_id, entry.bet_uid)
                self.report.tickets["used"] += 1

    def _open(self, tournament: Tournament) -> list[SimBet]:
        return [
            sim
            for sim in self.bets.values()
            if sim.state == "placed" and sim.entry.tournament.uid == tournament.uid
        ]

    def _release(self, sim: SimBet) -> None:
        entry = sim.entry
        sim.state = "refunded"
        if sim.funding == "cash":
            self._move(entry.player, available=entry.total, held=-entry.total)
            self._moved(entry.currency, "refunded", entry.total)
        elif sim.funding == "ticket":
            self._move(entry.player, held=-entry.total)

    def _release_all(self, bets: Iterable[SimBet]) -> None:
        for sim in bets:
            self._release(sim)

    def _refund_some(self, tournaments: Sequence[tuple[Tournament, str]]) -> None:
        """Refund Bet for about a tenth of the open bets, several pools per request."""
        placed = [sim for sim in self.bets.values() if sim.state == "placed"]
        chosen = [sim for sim in placed if self.rng.random() < 0.1]
        for start in range(0, len(chosen), 6):
            batch = chosen[start : start + 6]
            by_pool: dict[int, list[SimBet]] = defaultdict(list)
            for sim in batch:
                by_pool[sim.entry.tournament.uid].append(sim)
            groups = [
                (
                    sims[0].entry.tournament,
                    self.rng.choice(("waiting", "in_progress")),
                    [sim.entry for sim in sims],
                )
                for sims in by_pool.values()
            ]
            payload = payloads.refund_bet(self.platform.client_name, groups, self.secrets)
            what = f"Refund Bet {[sim.entry.bet_uid for sim in batch]}"
            self._close(CallbackEvent.REFUND_BET, payload, what, partial(self._release_all, batch))

    def _cancel(self, tournament: Tournament) -> None:
        open_bets = self._open(tournament)
        self._tick()
        if not open_bets:
            return
        payload = payloads.refund_tournament(
            self.platform.client_name, tournament, [sim.entry for sim in open_bets], self.secrets
        )
        what = f"Refund Tournament {tournament.uid}"
        self.report.entries["cancelled tournaments"] += 1
        self._close(
            CallbackEvent.REFUND_TOURNAMENT, payload, what, partial(self._release_all, open_bets)
        )

    def _close(
        self, event: CallbackEvent, payload: Any, what: str, apply: Callable[[], None]
    ) -> None:
        delivery = self._deliver(event, payload, what)
        if delivery.passed:
            apply()
        else:
            self.report.mismatches.append(f"{what}: expected 200, got {delivery.describe(160)}")

    def _settle(self, tournament: Tournament) -> None:
        open_bets = self._open(tournament)
        self._tick()
        if not open_bets:
            return
        results = self._results(tournament, open_bets)
        payload = payloads.settle_bet(self.platform.client_name, tournament, results, self.secrets)

        def apply() -> None:
            for result in results:
                sim = self.bets[result.entry.bet_uid]
                entry = sim.entry
                sim.state, sim.payout = "settled", result.payout
                if sim.funding != "free":
                    self._move(entry.player, held=-entry.total)
                self._move(entry.player, available=result.payout)
                self._moved(entry.currency, "paid out", result.payout)
                self.report.entries["settled"] += 1

        self._close(CallbackEvent.SETTLE_BET, payload, f"Settle {tournament.uid}", apply)

    def _results(self, tournament: Tournament, open_bets: list[SimBet]) -> list[Result]:
        """A payout table: normal pays the top ranks cash; mixed mixes cash, seats and prizes."""
        ranked = list(open_bets)
        self.rng.shuffle(ranked)
        collected = sum((sim.entry.base_amount for sim in ranked), D(0))
        pool = max(collected, tournament.overdraw)
        winners = max(1, len(ranked) * 3 // 10)
        weights = list(range(winners, 0, -1))
        results = []
        for rank, sim in enumerate(ranked, start=1):
            score = D(self.rng.randrange(0, 20_000)) / 100
            base = D("0.00")
            text: str | None = None
            qualifier: dict[str, Any] | None = None
            if rank <= winners:
                base = (pool * weights[rank - 1] / sum(weights)).quantize(CENT, ROUND_DOWN)
            if tournament.distribution == "mixed":
                if sim.funding == "ticket" or (rank > 1 and rank <= winners):
                    # Ticket and manual prizes, and seats in a qualifier, pay no cash (2.5.5).
                    base = D("0.00")
                    if rank <= winners:
                        text = f"Seat in Sim Final {tournament.uid}"
                        qualifier = {
                            "tournamentId": tournament.uid + 5000,
                            "currency": tournament.currency,
                        }
                    else:
                        text = "Manual prize: team jersey"
                else:
                    text = f"{base} {tournament.currency}"
            payout = convert(base, tournament.currency, sim.entry.currency, ROUND_DOWN)
            results.append(
                Result(
                    sim.entry,
                    payout,
                    base,
                    rank,
                    score,
                    odds=D(self.rng.randrange(100, 1000)) / 100,
                    payout_text=text,
                    qualifier_ticket=qualifier,
                )
            )
        return results
