"""The books: balances, statements, open holds, the house's report, a bet, a tournament's
report, and reconciliation. Reads only, each in a read unit of work of its own (on the read
replica when there is one: :meth:`~ledger.service.core.LedgerCore._read`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .. import domain
from ..contract import (
    check_currency,
    check_id,
    check_user,
)
from ..deliveries import DeliveryFilter, DeliveryRecord
from ..errors import InvalidRequest
from ..money import render
from ..paging import EXPORT_PAGE, Page, check_limit, every, page_of, position
from ..stores import (
    AccountBalance,
    BetRecord,
    DeliveryCount,
    PostingRecord,
    Reads,
    StaleRule,
)
from ..views import (
    HOUSE_FIELDS,
    Balance,
    BetPosting,
    BetView,
    HoldView,
    HourActivity,
    HouseReport,
    PoolReport,
    StatementLine,
    timestamp_text,
)

if TYPE_CHECKING:
    from ..reconcile import Reconciliation, Source
from .core import LedgerCore
from .params import duration, parse_instant, statement_position

__all__ = ["Books"]

# The house summary's fields that count entries rather than amounts.
HOUSE_COUNTS = frozenset({"entries", "ticket_entries", "unique_players"})

# The bet view lists at most this many of the deliveries that named the bet, newest first
# (a bet is named by its Place Bet, the re-sends and its refund or settle: a handful).
BET_DELIVERIES = 100


class Books(LedgerCore):
    """What the operator reads of the money."""

    def balance(self, user: str, currency: str | None = None) -> list[Balance]:
        """The user's balances, one per currency (or only ``currency``)."""
        user = check_user(user)
        wanted = check_currency(currency) if currency else None
        rows = self._read(lambda reads: reads.balances(user))
        return self._balances(rows, wanted)

    def _balances(self, rows: list[AccountBalance], wanted: str | None) -> list[Balance]:
        result = [
            Balance(
                row.currency,
                self._decimal(row.available, row.currency),
                self._decimal(row.held, row.currency),
            )
            for row in rows
            if wanted is None or row.currency == wanted
        ]
        if wanted is not None and not result:
            zero = self._decimal(0, wanted)
            result = [Balance(wanted, zero, zero)]
        return result

    def statement(
        self,
        user: str,
        currency: str | None = None,
        *,
        limit: int = 50,
        before: int | str | None = None,
    ) -> list[StatementLine]:
        """The user's movements, newest first; page with ``before`` = the last line's ``id``
        (or use :meth:`statement_page` and its opaque cursor)."""
        return self.statement_page(user, currency, limit=limit, before=before).items

    def statement_page(
        self,
        user: str,
        currency: str | None = None,
        *,
        limit: int = 50,
        before: int | str | None = None,
    ) -> Page[StatementLine]:
        """A page of the user's movements, newest first, each with the balance after it.

        ``before`` is the previous page's ``next`` (an opaque cursor) or, as before cursors
        existed, a line ``id`` (an integer, or its decimal text): only older lines follow.
        """
        user = check_user(user)
        wanted = check_currency(currency) if currency else None
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidRequest("limit must be between 1 and 10000")
        older_than = statement_position(before)
        rows = self._read(lambda reads: reads.statement(user, wanted, limit + 1, older_than))
        lines = [
            StatementLine(
                id=row.id,
                created_at=row.created_at,
                account=row.account,
                currency=row.currency,
                amount=self._decimal(row.amount, row.currency),
                kind=row.kind,
                bet_uid=row.bet_uid,
                reference=row.reference,
                transaction_id=row.transaction_id,
                balance_after=(
                    None
                    if row.balance_after is None
                    else self._decimal(row.balance_after, row.currency)
                ),
                pool_uid=row.pool_uid,
            )
            for row in rows
        ]
        return page_of(lines, limit, lambda line: (line.id,))

    def statement_export(self, user: str, currency: str | None = None) -> Iterator[StatementLine]:
        """Every line of the user's statement, newest first, read a page at a time (for CSV)."""
        return every(
            lambda after: self.statement_page(user, currency, limit=EXPORT_PAGE, before=after)
        )

    def balance_at(
        self, user: str, at: datetime | str, currency: str | None = None
    ) -> list[Balance]:
        """The user's balances at the moment ``at`` (ISO 8601 with a zone), exactly: per
        account, the balance its last posting at or before ``at`` left. Currencies the user
        had no posting in by then are left out (or zero, for the ``currency`` asked for)."""
        user = check_user(user)
        moment = parse_instant(at, "at")
        wanted = check_currency(currency) if currency else None
        rows = self._read(lambda reads: reads.balances_at(user, moment))
        return self._balances(rows, wanted)

    def holds(
        self,
        *,
        stale: bool = False,
        user: str | None = None,
        pool_uid: int | None = None,
        older_than: timedelta | str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> Page[HoldView]:
        """Open holds (placed bets not yet settled or refunded), oldest first, a page at a time.

        ``stale``: only those to chase (see :meth:`stale_rule`); ``older_than``: placed longer
        ago than this (a ``timedelta``, or text such as ``2d``, ``12h``); ``before``: the
        previous page's ``next``.
        """
        who = check_user(user) if user is not None else None
        pool = check_id(pool_uid, "pool") if pool_uid is not None else None
        limit = check_limit(limit)
        after = position(before, str, int)
        start = None if after is None else (parse_instant(str(after[0]), "before"), int(after[1]))
        rule = self.stale_rule()
        age = duration(older_than, "older_than") if older_than is not None else None
        placed_by = None if age is None else rule.now - age
        rows = self._read(
            lambda reads: reads.holds(
                limit=limit + 1,
                after=start,
                user=who,
                pool_uid=pool,
                placed_by=placed_by,
                rule=rule,
                only_stale=stale,
            )
        )
        views = [
            HoldView(
                uid=row.uid,
                user=row.user,
                pool_uid=row.pool_uid,
                currency=row.currency,
                amount=self._decimal(row.amount, row.currency),
                rake=self._decimal(row.rake, row.currency),
                funding=row.funding,
                placed_at=row.placed_at,
                stale=row.stale,
            )
            for row in rows
        ]
        return page_of(views, limit, lambda hold: (timestamp_text(hold.placed_at), hold.uid))

    def holds_export(self, *, stale: bool = False, **filters: Any) -> Iterator[HoldView]:
        """Every open hold the filters of :meth:`holds` select, read a page at a time."""
        return every(
            lambda after: self.holds(stale=stale, limit=EXPORT_PAGE, before=after, **filters)
        )

    def stale_rule(self) -> StaleRule:
        """When an open hold is stale, now: its tournament's estimated end plus the grace
        (``LEDGER_STALE_HOLD_GRACE``) has passed or, without an end time, it is older than
        ``LEDGER_STALE_HOLD_DAYS``."""
        return StaleRule(
            now=datetime.now(UTC),
            grace=self.stale_hold_grace,
            max_age=timedelta(days=self.stale_hold_days),
        )

    def count_stale_holds(self) -> int:
        """How many open holds are stale now (the ``ledger_stale_holds`` gauge)."""
        rule = self.stale_rule()
        return self._read(lambda reads: reads.count_stale_holds(rule))

    def house(
        self,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        currency: str | None = None,
    ) -> HouseReport:
        """Per currency, the house accounts' balances now, and over ``[since, until)``:
        deposits, withdrawals, stakes captured, rake earned, prizes paid, ticket-funded
        entries, refunds, entries and unique players, exact from the postings and bets."""
        start = None if since is None else parse_instant(since, "since")
        end = None if until is None else parse_instant(until, "until")
        wanted = check_currency(currency) if currency else None
        if start is not None and end is not None and end < start:
            raise InvalidRequest("until must not be before since")
        rows = self._read(lambda reads: reads.house_totals(start, end, wanted))
        currencies = []
        for row in rows:
            scale = self.currencies.scale(row.currency)
            item: dict[str, Any] = {
                "currency": row.currency,
                "balances": {name: render(value, scale) for name, value in row.balances.items()},
            }
            for name in HOUSE_FIELDS:
                value = getattr(row, name)
                item[name] = value if name in HOUSE_COUNTS else render(value, scale)
            currencies.append(item)
        return HouseReport(since=start, until=end, currencies=currencies)

    def activity(self, days: int = 7, *, now: datetime | None = None) -> list[HourActivity]:
        """Per hour of the last ``days`` days (up to ``now``) and currency: entries placed,
        their stakes, and payouts settled; quiet hours are left out. Oldest first."""
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 366:
            raise InvalidRequest("days must be between 1 and 366")
        until = now or datetime.now(UTC)
        rows = self._read(lambda reads: reads.hourly_totals(until - timedelta(days=days), until))
        return [
            HourActivity(
                hour=row.hour,
                currency=row.currency,
                entries=row.entries,
                stakes=self._decimal(row.stakes, row.currency),
                payouts=self._decimal(row.payouts, row.currency),
            )
            for row in rows
        ]

    def delivery_counts(
        self, hours: int = 24, *, now: datetime | None = None
    ) -> list[DeliveryCount]:
        """The deliveries of the last ``hours`` hours, counted by event, status and error key."""
        if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= 24 * 366:
            raise InvalidRequest("hours must be between 1 and 8784")
        since = (now or datetime.now(UTC)) - timedelta(hours=hours)
        return self._read(lambda reads: reads.count_deliveries(since))

    def bet(self, uid: int) -> BetView | None:
        """The recorded bet with its user's and tournament's names and its postings, or
        ``None``."""
        uid = check_id(uid, "bet uid")

        def read(
            reads: Reads,
        ) -> tuple[BetRecord | None, list[PostingRecord], list[DeliveryRecord]]:
            found = reads.bet(uid)
            if found is None:
                return None, [], []
            named = reads.deliveries(DeliveryFilter(bet=uid), BET_DELIVERIES, None)
            return found, reads.bet_postings(found), named

        found, legs, named = self._read(read)
        if found is None:
            return None
        return self._bet_view(found, [self._posting(leg) for leg in legs], named)

    def _bet_view(
        self,
        record: BetRecord,
        postings: list[BetPosting] | None = None,
        deliveries: Sequence[DeliveryRecord] = (),
    ) -> BetView:
        found = record.bet
        return BetView(
            uid=found.uid,
            user=found.user,
            pool_uid=found.pool_uid,
            currency=found.currency,
            amount=self._decimal(found.amount, found.currency),
            rake=self._decimal(found.rake, found.currency),
            funding=found.funding.value,
            state=found.state.value,
            payout=(
                None
                if found.payout is None or found.payout_currency is None
                else self._decimal(found.payout, found.payout_currency)
            ),
            payout_currency=found.payout_currency,
            secrets=dict(found.secrets),
            placed_at=record.placed_at,
            closed_at=record.closed_at,
            user_name=record.user_name,
            pool_name=record.pool_name,
            postings=postings,
            deliveries=tuple(deliveries),
        )

    def _posting(self, leg: PostingRecord) -> BetPosting:
        return BetPosting(
            id=leg.id,
            created_at=leg.created_at,
            account=leg.account,
            currency=leg.currency,
            amount=self._decimal(leg.amount, leg.currency),
            kind=leg.kind,
            reference=leg.reference,
            transaction_id=leg.transaction_id,
        )

    def pool_report(self, pool_uid: int) -> PoolReport:
        """Entries, stakes, rake, payouts and open holds of one tournament, per currency.

        Payouts are listed per payout currency (``{"JPY": "500"}``): a bet may be paid out in
        another currency than its own, and two currencies never add up.
        """
        pool_uid = check_id(pool_uid, "pool uid")
        rows = self._read(lambda reads: reads.pool_totals(pool_uid))
        totals: dict[str, dict[str, Any]] = {}
        for row in rows:
            found = totals.setdefault(
                row.currency,
                {"entries": 0, "by_state": {}, "stakes": 0, "rake": 0, "payouts": {}, "open": 0},
            )
            found["entries"] += row.entries
            found["by_state"][row.state] = row.entries
            found["stakes"] += row.stakes
            found["rake"] += row.rake
            if row.state == domain.BetState.SETTLED:
                for currency, amount in row.payouts.items():
                    found["payouts"][currency] = found["payouts"].get(currency, 0) + amount
            if row.state == domain.BetState.PLACED:
                found["open"] += row.stakes + row.rake
        currencies = []
        for currency, found in totals.items():
            scale = self.currencies.scale(currency)
            currencies.append(
                {
                    "currency": currency,
                    "entries": found["entries"],
                    "by_state": found["by_state"],
                    "stakes": render(found["stakes"], scale),
                    "rake": render(found["rake"], scale),
                    "payouts": {
                        paid_in: render(amount, self.currencies.scale(paid_in))
                        for paid_in, amount in sorted(found["payouts"].items())
                    },
                    "open_holds": render(found["open"], scale),
                }
            )
        return PoolReport(pool_uid=pool_uid, currencies=currencies)

    def reconcile(self, source: Source, *, pools_only: bool = False) -> Reconciliation:
        """Compare a file of the platform's bets with the books (see :mod:`ledger.reconcile`).

        ``source`` is a path, raw bytes or a binary file (CSV, TSV, JSON array or JSON lines);
        with ``pools_only`` only the file's pools count as the books. Reads only, in one read
        unit of work (one snapshot). Use the result as a context manager.
        """
        # Imported here: sqlite-utils takes most of a second to import, which a process that
        # never reconciles (every callback server) should not pay at start.
        from ..reconcile import reconcile

        with self.store.reading() as reads:
            return reconcile(source, reads.bet_records, self.currencies, pools_only=pools_only)
