"""One seeded platform day played against a wallet, in order: an earlier run swept, users funded,
tournaments and tickets created, entries planned and placed, some refunded, tournaments
cancelled or settled, then the books compared and this day's test data taken back out.

Invariant: the clean-up runs even when the day aborted or was interrupted, unless ``keep``.
Proved by ``tests/kit/test_simulator.py``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from tqdm import tqdm

from ...errors import LedgerError
from ...testdata import KIT_PREFIX
from ..cleanup import Cleaner
from ..payloads import Entry, Player, Tournament
from .callbacks import Callbacks
from .checks import Checks
from .model import BUY_INS, CENT, GAME_TYPES, ZERO_BOOKS, D, SimBet, convert
from .report import SimulationReport

__all__ = ["Simulator"]


class Simulator(Callbacks, Checks):
    """Plays one seeded platform day against a wallet; :meth:`run` returns the report."""

    def run(self) -> SimulationReport:
        started = time.monotonic()
        cleaner = Cleaner(self.platform, self.operator)
        try:
            self.report.cleaned.append(f"before: {cleaner.sweep().render()}")
            self._create_users()
            tournaments = self._create_tournaments()
            ticketed = self._create_tickets(tournaments)
            plan = self._plan_entries(tournaments, ticketed)
            self._bar = tqdm(
                total=len(plan) + len(tournaments),
                unit="callback",
                disable=not self.config.progress,
                desc="simulate",
                leave=False,
            )
            for entries in plan:
                self._place(entries)
            self._refund_some(tournaments)
            for tournament, fate in tournaments:
                if fate == "cancel":
                    self._cancel(tournament)
                else:
                    self._settle(tournament)
            self._exercise_ticket_api()
            self._reconcile()
        except LedgerError as exc:  # the operator API or ticket API failed: cannot reconcile
            self.report.mismatches.append(f"aborted: {exc.key}: {exc.message}")
        finally:
            if self._bar is not None:
                self._bar.close()
            # Also after an exception or Ctrl-C: what is left otherwise waits for the next run.
            self._clean_up(cleaner)
        self.report.elapsed = time.monotonic() - started
        return self.report

    def _clean_up(self, cleaner: Cleaner) -> None:
        if self.config.keep:
            self.report.cleaned.append(
                "kept: this day's users, balances and holds stay for inspection; "
                "`ledger validate --clean-up` (or the next run) removes them"
            )
            return
        try:
            users = [player.uid for player in self.players]
            summary = cleaner.close(hold for uid in users for hold in self.operator.holds(user=uid))
            for uid in users:
                summary.add(cleaner.empty(uid))
            self.report.cleaned.append(f"after: {summary.render()}")
            for uid in users:
                left = {cur: b for cur, b in self.operator.balances(uid).items() if b != ZERO_BOOKS}
                if left:
                    self.report.mismatches.append(f"clean-up: user {uid} still holds {left}")
        except LedgerError as exc:
            self.report.mismatches.append(f"clean-up failed: {exc.key}: {exc.message}")

    def _create_users(self) -> None:
        first, second = self.config.currencies
        for index in range(self.config.users):
            currency = first if self.rng.random() < 0.7 else second
            player = Player(
                # Marked as test data: the directory and the reports can leave it out.
                uid=f"{KIT_PREFIX}sim-{self.config.seed}-u{index}",
                name=f"player{index}",
                currency=currency,
                ip=f"198.51.100.{index % 250 + 1}",
            )
            self.players.append(player)
            self.ticket_store.register_user(player.uid, player.name)
            # Some users get little money, so that entries are refused for insufficient funds.
            amount = D(self.rng.randrange(1_000, 30_000)) / 100
            start = self.operator.balance(player.uid, currency)
            self.books[(player.uid, currency)] = start
            self.operator.deposit(player.uid, currency, amount, f"{player.uid}-deposit")
            self._move(player, available=amount)
            self._moved(currency, "deposited", amount)

    def _create_tournaments(self) -> list[tuple[Tournament, str]]:
        created = []
        now = datetime.now(UTC)
        for index in range(self.config.tournaments):
            free = self.rng.random() < 0.2
            buy_in = D("0.00") if free else self.rng.choice(BUY_INS)
            rake = (buy_in * D("0.10")).quantize(CENT)
            guaranteed = not free and self.rng.random() < 0.4
            tournament = Tournament(
                uid=self.prefix * 10**4 + index,
                name=f"{KIT_PREFIX}sim {self.config.seed} #{index}",
                currency=self.rng.choice(self.config.currencies),
                buy_in=buy_in,
                rake=rake,
                game_type=self.rng.choice(GAME_TYPES),
                category=self.rng.choice(("admin_created", "hidden")),
                distribution="mixed" if self.rng.random() < 0.3 else "normal",
                guaranteed=guaranteed or free,
                overdraw=D(self.rng.choice((25, 50, 100, 200))) if guaranteed or free else D(0),
                end_time=now + timedelta(hours=self.rng.randrange(1, 48)),
            )
            created.append((tournament, "cancel" if self.rng.random() < 0.2 else "settle"))
        return created

    def _create_tickets(
        self, tournaments: Sequence[tuple[Tournament, str]]
    ) -> dict[tuple[str, int], int]:
        """Tickets for some users in some paid tournaments, created through the ticket API."""
        ticketed: dict[tuple[str, int], int] = {}
        due = datetime.now(UTC) + timedelta(days=7)
        for tournament, _ in tournaments:
            if tournament.free:
                continue
            chosen = [player for player in self.players if self.rng.random() < 0.15]
            if not chosen:
                continue
            created = self.tickets.create(
                uids=[player.uid for player in chosen],
                due_at=due,
                currency=tournament.currency,
                buy_in=tournament.cost,
                type=self.rng.choice(("marketing", "godwill", "satellite")),
                tournament_id=tournament.uid,
                comment=f"simulation {self.config.seed}",
                ref=str(self._uuid()),
            )
            self.report.tickets["created"] += created.total
            for item in created.tickets:
                ticketed[(item.uid, tournament.uid)] = item.id
        # Open tickets nobody uses, for the delete rules at the end.
        spare = self.tickets.create(
            uids=[self.players[0].uid], due_at=due, currency="EUR", buy_in=D("5.00"), type="test"
        )
        self.report.tickets["created"] += spare.total
        return ticketed

    def _plan_entries(
        self, tournaments: Sequence[tuple[Tournament, str]], ticketed: dict[tuple[str, int], int]
    ) -> list[list[SimBet]]:
        """Place Bet requests in a shuffled order: one to three teams per user and tournament."""
        requests: list[list[SimBet]] = []
        for tournament, _ in tournaments:
            share = self.rng.uniform(0.3, 0.8)
            for player in self.players:
                if self.rng.random() > share:
                    continue
                teams = self.rng.choice((1, 1, 1, 2, 3))
                request: list[SimBet] = []
                for team in range(teams):
                    ticket_id = (
                        ticketed.pop((player.uid, tournament.uid), None) if team == 0 else None
                    )
                    request.append(self._bet(player, tournament, ticket_id))
                # Several teams go either in one Place Bet (all or nothing) or one by one.
                if self.rng.random() < 0.5:
                    requests.append(request)
                else:
                    requests.extend([bet] for bet in request)
        self.rng.shuffle(requests)
        return requests

    def _bet(self, player: Player, tournament: Tournament, ticket_id: int | None) -> SimBet:
        amount = convert(tournament.buy_in, tournament.currency, player.currency)
        rake = convert(tournament.rake, tournament.currency, player.currency)
        token = self.ticket_store.token(ticket_id) if ticket_id is not None else None
        entry = Entry(
            bet_uid=self._bet_uid(),
            player=player,
            tournament=tournament,
            amount=amount,
            rake=rake,
            base_amount=tournament.buy_in,
            base_rake=tournament.rake,
            uuid=str(self._uuid()),
            ticket=token,
        )
        funding = "free" if tournament.free else "ticket" if token else "cash"
        sim = SimBet(entry, funding, ticket_id=ticket_id)
        self.bets[entry.bet_uid] = sim
        return sim
