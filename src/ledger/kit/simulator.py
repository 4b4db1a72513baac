"""``ledger simulate``: a whole fantasy platform played against a wallet, then the books checked.

The simulator creates users (funded through the operator API), tournaments in two currencies
with paid, ticket and free entries, refunds some bets, cancels some tournaments (Refund
Tournament) and settles the rest with normal and mixed payout tables. It keeps its own books of
what every user must hold, and at the end reconciles them against the wallet's balances, every
bet's state and the journal check.

With ``faults`` it behaves like a platform on a bad day: it re-sends deliveries, sends
concurrent duplicates from several threads, and treats some answers as lost (a timeout or 5xx
seen by the platform) or gives up waiting after a few milliseconds, then re-sends as contract
section 7.2 says.

Everything random comes from ``random.Random(seed)``, ids included, so that a seed replays the
same platform day against a correct wallet.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from functools import partial
from pathlib import Path
from typing import Any, Final

from tqdm import tqdm

from ..errors import LedgerError
from ..testdata import KIT_PREFIX
from . import payloads
from .admin_client import Books, Operator
from .cleanup import Cleaner
from .payloads import Entry, Player, Result, Tournament
from .platform import CallbackEvent, Delivery, Platform
from .ticket_api import TicketStore
from .tickets import TicketClient, TicketError

__all__ = ["SimulationConfig", "SimulationReport", "Simulator", "write_platform_record"]

D = Decimal
ZERO: Final = D(0)
ZERO_BOOKS: Final = Books(ZERO, ZERO)
CENT: Final = D("0.01")
# Units of the user's currency per unit of the tournament's: a fixed table keeps runs exact.
RATES: Final[dict[tuple[str, str], Decimal]] = {
    ("EUR", "USD"): D("1.08"),
    ("USD", "EUR"): D("0.93"),
}
BUY_INS: Final = (D("1.00"), D("2.00"), D("5.00"), D("10.00"), D("20.00"), D("50.00"))
GAME_TYPES: Final = ("football", "hockey", "basket")
MAX_ATTEMPTS: Final = 6
# Faults per logical delivery, drawn from the seeded generator in a fixed order.
FAULTS: Final = (("resend", 0.15), ("concurrent", 0.10), ("lost", 0.10), ("short_timeout", 0.05))


@dataclass(frozen=True, slots=True)
class SimulationConfig:
    users: int = 20
    tournaments: int = 10
    seed: int = 1
    faults: bool = False
    currencies: tuple[str, str] = ("EUR", "USD")
    concurrency: int = 4
    progress: bool = True
    # Leave the day's users, balances and holds in the wallet for inspection.
    keep: bool = False


@dataclass
class SimBet:
    """The platform's record of one entry and what the wallet must have done with it."""

    entry: Entry
    funding: str  # cash, ticket or free
    state: str = "pending"  # pending, placed, rejected, refunded, settled
    payout: Decimal = ZERO
    ticket_id: int | None = None


@dataclass
class SimulationReport:
    """What happened, what moved, and where the wallet disagreed with the platform's books."""

    seed: int
    deliveries: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    entries: Counter[str] = field(default_factory=Counter)
    money: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    tickets: Counter[str] = field(default_factory=Counter)
    reconciled: Counter[str] = field(default_factory=Counter)
    mismatches: list[str] = field(default_factory=list)
    # The bets behind balance mismatches, when the wallet's statement can tell.
    diagnosis: list[str] = field(default_factory=list)
    check_ok: bool | None = None
    elapsed: float = 0.0
    # What the clean-ups did: an earlier run's leftovers, then this run's.
    cleaned: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.check_ok is True

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "ok": self.ok,
            "deliveries": dict(self.deliveries),
            "statuses": dict(self.statuses),
            "faults": dict(self.faults),
            "entries": dict(self.entries),
            "money": {
                currency: {name: str(amount) for name, amount in moved.items()}
                for currency, moved in sorted(self.money.items())
            },
            "tickets": dict(self.tickets),
            "reconciled": dict(self.reconciled),
            "check_ok": self.check_ok,
            "mismatches": self.mismatches,
            "diagnosis": self.diagnosis,
            "cleaned": self.cleaned,
            "elapsed_s": round(self.elapsed, 2),
        }

    def render(self) -> str:
        def counts(counter: Counter[str]) -> str:
            return ", ".join(f"{name} {count}" for name, count in sorted(counter.items())) or "none"

        lines = [
            f"simulation seed {self.seed} in {self.elapsed:.1f} s",
            f"deliveries: {sum(self.deliveries.values())} ({counts(self.deliveries)})",
            f"answers:    {counts(self.statuses)}",
            f"faults:     {counts(self.faults)}",
            f"entries:    {counts(self.entries)}",
        ]
        for currency, moved in sorted(self.money.items()):
            amounts = ", ".join(f"{name} {amount}" for name, amount in sorted(moved.items()))
            lines.append(f"money {currency}:  {amounts}")
        lines.append(f"tickets:    {counts(self.tickets)}")
        lines.append(f"reconciled: {counts(self.reconciled)}")
        lines.append(f"journal check: {'ok' if self.check_ok else 'FAILED'}")
        lines.extend(self.cleaned)
        lines.append(f"mismatches: {len(self.mismatches)}")
        lines.extend(f"  - {mismatch}" for mismatch in self.mismatches[:50])
        if len(self.mismatches) > 50:
            lines.append(f"  ... and {len(self.mismatches) - 50} more")
        if self.diagnosis:
            lines.append("bets behind the balance mismatches (from the wallet's statement):")
            lines.extend(f"  - {line}" for line in self.diagnosis[:50])
        return "\n".join(lines)


def _convert(amount: Decimal, source: str, target: str, rounding: str = ROUND_HALF_UP) -> Decimal:
    if source == target:
        return amount
    return (amount * RATES[(source, target)]).quantize(CENT, rounding=rounding)


class Simulator:
    """Plays one seeded platform day against a wallet; :meth:`run` returns the report."""

    def __init__(
        self,
        platform: Platform,
        operator: Operator,
        config: SimulationConfig,
        *,
        tickets: TicketClient,
        ticket_store: TicketStore,
    ) -> None:
        self.platform = platform
        self.operator = operator
        self.config = config
        self.tickets = tickets
        self.ticket_store = ticket_store
        self.rng = random.Random(config.seed)
        # Ids derive from the seed: another seed never collides, the same seed replays itself.
        digest = hashlib.sha256(f"ledger-simulate:{config.seed}".encode()).digest()
        self.prefix = int.from_bytes(digest[:4], "big")
        self._next_bet = 0
        self.report = SimulationReport(config.seed)
        self.books: dict[tuple[str, str], Books] = {}
        self.bets: dict[int, SimBet] = {}
        self.secrets: dict[int, dict[str, Any]] = {}
        self.players: list[Player] = []
        self._bar: tqdm[Any] | None = None

    # --- ids and money -----------------------------------------------------------------------

    def _bet_uid(self) -> int:
        self._next_bet += 1
        return self.prefix * 10**8 + self._next_bet

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def _move(self, player: Player, available: Decimal = ZERO, held: Decimal = ZERO) -> None:
        key = (player.uid, player.currency)
        books = self.books.get(key, Books(D(0), D(0)))
        self.books[key] = Books(books.available + available, books.held + held)

    def _moved(self, currency: str, what: str, amount: Decimal) -> None:
        if amount:
            self.report.money[currency][what] += amount  # type: ignore[assignment]

    # --- the day ------------------------------------------------------------------------------

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
        amount = _convert(tournament.buy_in, tournament.currency, player.currency)
        rake = _convert(tournament.rake, tournament.currency, player.currency)
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

    # --- deliveries ---------------------------------------------------------------------------

    def _fault(self) -> str | None:
        if not self.config.faults:
            return None
        draw = self.rng.random()
        for name, probability in FAULTS:
            if draw < probability:
                return name
            draw -= probability
        return None

    def _send(
        self, event: CallbackEvent, payload: Any, *, timeout: float | None = None
    ) -> Delivery:
        delivery = self.platform.deliver(event, payload, timeout=timeout)
        self.report.deliveries[event.name.lower()] += 1
        self.report.statuses[str(delivery.status) if delivery.status else "no answer"] += 1
        return delivery

    def _deliver(self, event: CallbackEvent, payload: Any, what: str) -> Delivery:
        """Deliver until the answer is definitive, with this delivery's fault (if any)."""
        fault = self._fault()
        if fault:
            self.report.faults[fault] += 1
        if fault == "concurrent":
            copies = self.config.concurrency
            with ThreadPoolExecutor(copies) as pool:
                answers = list(pool.map(lambda _: self._retrying(event, payload), range(copies)))
            verdicts = {(answer.passed, answer.status) for answer in answers}
            if len(verdicts) > 1:
                described = "; ".join(answer.describe(80) for answer in answers)
                self.report.mismatches.append(
                    f"{what}: concurrent copies were answered differently: {described}"
                )
            # The platform keeps a success if any copy succeeded.
            return next((answer for answer in answers if answer.passed), answers[0])
        first_timeout = 0.002 if fault == "short_timeout" else None
        delivery = self._retrying(event, payload, first_timeout=first_timeout, lose=fault == "lost")
        if fault == "resend" and delivery.passed:
            again = self._retrying(event, payload)
            if not again.passed:
                self.report.mismatches.append(
                    f"{what}: an identical re-send after success answered {again.describe(120)}"
                )
        return delivery

    def _retrying(
        self,
        event: CallbackEvent,
        payload: Any,
        *,
        first_timeout: float | None = None,
        lose: bool = False,
    ) -> Delivery:
        delivery = self._send(event, payload, timeout=first_timeout)
        if lose:
            # The wallet answered, but the platform never saw it: to the platform this is a
            # timeout with the outcome unknown, and the same payload goes out again.
            delivery = Delivery(event, delivery.request_id, None, "", delivery.elapsed, "lost")
        for attempt in range(1, MAX_ATTEMPTS):
            if not delivery.outcome_unknown:
                break
            self.report.faults["retries"] += 1
            time.sleep(min(0.5, 0.01 * 2**attempt))
            delivery = self._send(event, payload)
        return delivery

    def _tick(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    # --- Place Bet ------------------------------------------------------------------------------

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

    # --- refunds and settlement ---------------------------------------------------------------

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
            payout = _convert(base, tournament.currency, sim.entry.currency, ROUND_DOWN)
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

    # --- tickets and reconciliation ------------------------------------------------------------

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
