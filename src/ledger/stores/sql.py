"""The unit of work shared by the SQL stores, in SQLAlchemy Core over the one schema.

The dialect modules (:mod:`.sqlite`, :mod:`.postgres`) build the engine, allocate transaction
ids, and translate their driver's errors; everything else is the same SQL on both.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType, TracebackType
from typing import Any, Self

from sqlalchemy import (
    Connection,
    Engine,
    Table,
    and_,
    case,
    func,
    literal,
    select,
    tuple_,
)
from sqlalchemy.exc import SQLAlchemyError

from ..domain import Bet, BetState, Funding, Posting, Transaction, TxnKind, account_kind
from ..errors import InsufficientFunds, LedgerError
from .base import AccountBalance, CheckReport, PoolTotals, Retry, StatementRow
from .schema import accounts, bets, postings, transactions

__all__ = ["SqlStore", "SqlUnitOfWork"]

# Keeps IN lists and executemany batches well under every driver's parameter limit.
CHUNK = 900


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


BET_COLUMNS = (
    "uid",
    "user_uid",
    "pool_uid",
    "currency",
    "amount",
    "rake",
    "funding",
    "state",
    "payout",
    "payout_currency",
    "ticket",
    "request_uuid",
    "secrets",
    "placed_at",
)
ACCOUNT_COLUMNS = ("name", "currency", "kind", "balance")
POSTING_COLUMNS = ("txn_id", "account", "currency", "amount", "bet_uid")
TRANSACTION_COLUMNS = ("id", "idempotency_key", "kind", "user_uid", "reference", "created_at")


class SqlStore:
    """Base of the SQL stores: an engine, a URL, and the dialect hooks the unit of work calls."""

    url: str
    engine: Engine

    def unit_of_work(self, *, write: bool = True) -> SqlUnitOfWork:
        return SqlUnitOfWork(self, write=write)

    def close(self) -> None:
        self.engine.dispose()

    def migrate(self) -> None:
        from ..migrations import upgrade

        with self.translate_errors(), self.engine.begin() as connection:
            upgrade(connection)

    # --- dialect hooks --------------------------------------------------------------------------

    def connect(self, *, write: bool) -> Connection:
        """A connection with a database transaction begun."""
        raise NotImplementedError

    def allocate_transaction_ids(self, connection: Connection, count: int) -> list[int]:
        raise NotImplementedError

    def translate(self, error: SQLAlchemyError) -> LedgerError:
        """Map a driver error to the ledger's error root."""
        raise NotImplementedError

    # Bulk writes go straight to the driver (executemany on SQLite, unnest arrays on Postgres):
    # a settle of a million participants is millions of rows, and per-row statement building
    # in SQLAlchemy would cost more than the database's own work.

    def timestamp(self, moment: datetime) -> Any:
        """A timestamp as the driver should receive it in a bulk write."""
        return moment

    def insert_rows(
        self,
        connection: Connection,
        table: Table,
        columns: Sequence[str],
        rows: Sequence[tuple[Any, ...]],
        *,
        ignore_conflicts: bool = False,
    ) -> None:
        raise NotImplementedError

    def debit_balances(self, connection: Connection, rows: Sequence[tuple[int, str, str]]) -> int:
        """Add each negative ``(delta, name, currency)`` unless the balance would go below zero;
        return how many accounts changed."""
        raise NotImplementedError

    def upsert_balances(
        self, connection: Connection, rows: Sequence[tuple[str, str, str, int]]
    ) -> None:
        """Add ``delta`` to each ``(name, currency, kind, delta)`` account, creating it if new."""
        raise NotImplementedError

    def close_bet_rows(self, connection: Connection, rows: Sequence[tuple[Any, ...]]) -> int:
        """Apply ``(state, payout, payout_currency, closed_at, uid)`` to placed bets only;
        return how many changed."""
        raise NotImplementedError

    def select_bets(self, connection: Connection, uids: Sequence[int]) -> Iterator[Any]:
        """The bet rows among ``uids``."""
        raise NotImplementedError

    @contextlib.contextmanager
    def translate_errors(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as error:
            raise self.translate(error) from error


def _secrets(value: Any) -> Mapping[str, Any]:
    # SQLite hands JSON back as text, Postgres as parsed objects.
    if isinstance(value, str):
        return _parse_secrets(value)
    return MappingProxyType(dict(value or {}))


@functools.lru_cache(maxsize=1024)
def _parse_secrets(text: str) -> Mapping[str, Any]:
    # Every bet of one Place Bet request stores the same secrets: parse each text once.
    # Read-only, because the cached mapping is shared.
    return MappingProxyType(json.loads(text))


_STATES = {state.value: state for state in BetState}
_FUNDINGS = {funding.value: funding for funding in Funding}

# The bet columns in the order of the Bet record's fields: select_bets returns plain tuples.
BET_SELECT = (
    "uid, user_uid, pool_uid, currency, amount, rake, funding, state, payout, payout_currency, "
    "ticket, request_uuid, secrets"
)


def _bet_from_row(row: Any) -> Bet:
    # Hot: a settle reads every participant's bet. Plain tuples in, a NamedTuple out.
    (uid, user, pool, currency, amount, rake, funding, state, payout, payout_currency, *rest) = row
    ticket, request_uuid, secrets = rest
    return Bet(
        uid,
        user,
        pool,
        currency,
        amount,
        rake,
        _FUNDINGS[funding],
        _STATES[state],
        payout,
        payout_currency,
        ticket,
        request_uuid,
        _secrets(secrets),
    )


class SqlUnitOfWork:
    """One database transaction; see :class:`ledger.stores.base.UnitOfWork`."""

    def __init__(self, store: SqlStore, *, write: bool) -> None:
        self._store = store
        self._write = write
        self._connection: Connection | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        with self._store.translate_errors():
            self._connection = self._store.connect(write=self._write)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        # Rollback is automatic; a failing rollback (the database went away) must not mask the
        # error that brought us here, and the pool discards the broken connection anyway.
        with contextlib.suppress(SQLAlchemyError):
            connection.rollback()
        with contextlib.suppress(SQLAlchemyError):
            connection.close()

    @property
    def _conn(self) -> Connection:
        if self._connection is None:
            raise RuntimeError("the unit of work is not open")
        return self._connection

    def commit(self) -> None:
        with self._store.translate_errors():
            self._conn.commit()

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        with self._store.translate_errors():
            nested = self._conn.begin_nested()
        try:
            yield
        except BaseException:
            with self._store.translate_errors():
                nested.rollback()
            raise
        with self._store.translate_errors():
            nested.commit()

    def ping(self) -> None:
        with self._store.translate_errors():
            self._conn.execute(select(literal(1))).scalar_one()

    # --- bets -----------------------------------------------------------------------------------

    def get_bets(self, uids: Sequence[int]) -> dict[int, Bet]:
        with self._store.translate_errors():
            rows = self._store.select_bets(self._conn, sorted(set(uids)))
            return {row.uid: _bet_from_row(row) for row in rows}

    def add_bets(self, new_bets: Sequence[Bet]) -> None:
        if not new_bets:
            return
        now = self._store.timestamp(datetime.now(UTC))
        # Bets of one request share their secrets: serialise them once, not once per bet.
        dumped: dict[int, str] = {}
        rows = []
        # Sorted, so concurrent writers meet unique-index entries in the same order.
        for bet in sorted(new_bets, key=lambda bet: bet.uid):
            secrets = dumped.get(id(bet.secrets))
            if secrets is None:
                secrets = dumped[id(bet.secrets)] = json.dumps(dict(bet.secrets))
            rows.append(
                (
                    bet.uid,
                    bet.user,
                    bet.pool_uid,
                    bet.currency,
                    bet.amount,
                    bet.rake,
                    bet.funding.value,
                    bet.state.value,
                    bet.payout,
                    bet.payout_currency,
                    bet.ticket,
                    bet.request_uuid,
                    secrets,
                    now,
                )
            )
        with self._store.translate_errors():
            self._store.insert_rows(self._conn, bets, BET_COLUMNS, rows)

    def close_bets(self, closed: Sequence[Bet]) -> None:
        if not closed:
            return
        now = self._store.timestamp(datetime.now(UTC))
        rows = [
            (bet.state.value, bet.payout, bet.payout_currency, now, bet.uid)
            for bet in sorted(closed, key=lambda bet: bet.uid)
        ]
        with self._store.translate_errors():
            changed = self._store.close_bet_rows(self._conn, rows)
        if changed != len(rows):
            # Another writer closed one of these bets after we read it (Postgres, READ
            # COMMITTED): run the request again so that it sees that bet's new state.
            raise Retry(f"{len(rows) - changed} bet(s) were closed by a concurrent request")

    # --- transactions ---------------------------------------------------------------------------

    def get_transaction(self, key: str) -> Transaction | None:
        with self._store.translate_errors():
            header = self._conn.execute(
                select(transactions).where(transactions.c.idempotency_key == key)
            ).first()
            if header is None:
                return None
            legs = self._conn.execute(
                select(
                    postings.c.account, postings.c.currency, postings.c.amount, postings.c.bet_uid
                )
                .where(postings.c.txn_id == header.id)
                .order_by(postings.c.id)
            )
            return Transaction(
                key=header.idempotency_key,
                kind=TxnKind(header.kind),
                postings=tuple(
                    Posting(leg.account, leg.currency, leg.amount, leg.bet_uid) for leg in legs
                ),
                user=header.user_uid,
                reference=header.reference,
            )

    def post(self, new_transactions: Sequence[Transaction]) -> None:
        if not new_transactions:
            return
        now = self._store.timestamp(datetime.now(UTC))
        deltas: dict[tuple[str, str], int] = defaultdict(int)
        with self._store.translate_errors():
            ids = self._store.allocate_transaction_ids(self._conn, len(new_transactions))
            headers = []
            legs = []
            for txn_id, txn in zip(ids, new_transactions, strict=True):
                headers.append((txn_id, txn.key, txn.kind.value, txn.user, txn.reference, now))
                for leg in txn.postings:
                    legs.append((txn_id, leg.account, leg.currency, leg.amount, leg.bet_uid))
                    deltas[(leg.account, leg.currency)] += leg.amount
            credits: list[tuple[str, str, str, int]] = []
            debits: list[tuple[int, str, str]] = []
            for (name, currency), delta in sorted(deltas.items()):
                kind = account_kind(name)
                if delta < 0 and kind != "house":
                    debits.append((delta, name, currency))
                elif delta:
                    # House accounts may go below zero (prizes, cash): no check needed.
                    credits.append((name, currency, kind, delta))
            # One upsert per account, creating the accounts seen for the first time; it cannot
            # fail for want of funds, so its place in the order does not matter.
            self._store.upsert_balances(self._conn, credits)
            # Postings first, then the transaction rows that seal them: the database checks,
            # when a transaction row arrives (SQLite) or at commit (Postgres), that its postings
            # sum to zero per currency.
            self._store.insert_rows(self._conn, postings, POSTING_COLUMNS, legs)
            self._store.insert_rows(self._conn, transactions, TRANSACTION_COLUMNS, headers)
            # Debits last, after the idempotency keys are claimed. On Postgres a concurrent
            # writer of the same key (a re-sent withdrawal) then waits on the unique index and
            # fails with a unique violation, which is a Retry that sees the winner's work and
            # answers "unchanged"; debited first, it would fail on the balance the winner had
            # just spent as user.insufficient_funds (a 402) instead.
            self._debit(debits)

    def _debit(self, debits: list[tuple[int, str, str]]) -> None:
        """Apply debits of user balances, refusing any that would go below zero.

        Held money only ever returns what a hold put there, so only available balances can
        really come up short; held ones are checked all the same.
        """
        # Conditional updates (balance + delta >= 0): atomic against every other writer, so no
        # read-modify-write and no lost update, and an overdraft changes no row.
        if self._store.debit_balances(self._conn, debits) != len(debits):
            short = self._conn.execute(
                select(accounts.c.name, accounts.c.currency).where(
                    tuple_(accounts.c.name, accounts.c.currency).in_(
                        [(name, currency) for _, name, currency in debits]
                    ),
                    accounts.c.balance
                    + case(
                        *(
                            (and_(accounts.c.name == name, accounts.c.currency == currency), delta)
                            for delta, name, currency in debits
                        ),
                        else_=0,
                    )
                    < 0,
                )
            ).first()
            user, currency = (short[0], short[1]) if short else (debits[0][1], debits[0][2])
            raise InsufficientFunds(
                f"user {user.removeprefix('user:')} has insufficient {currency} funds"
            )

    # --- reads ----------------------------------------------------------------------------------

    def account_balances(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], int]:
        found: dict[tuple[str, str], int] = {}
        with self._store.translate_errors():
            for chunk in _chunks(sorted(set(keys)), 400):
                query = select(accounts.c.name, accounts.c.currency, accounts.c.balance).where(
                    tuple_(accounts.c.name, accounts.c.currency).in_(list(chunk))
                )
                for name, currency, balance in self._conn.execute(query):
                    found[(name, currency)] = balance
        return found

    def bet_times(self, uid: int) -> tuple[datetime, datetime | None] | None:
        query = select(bets.c.placed_at, bets.c.closed_at).where(bets.c.uid == uid)
        with self._store.translate_errors():
            row = self._conn.execute(query).first()
        return None if row is None else (row.placed_at, row.closed_at)

    def balances(self, user: str) -> list[AccountBalance]:
        available, held = f"user:{user}", f"user:{user}:held"
        query = (
            select(
                accounts.c.currency,
                func.sum(case((accounts.c.name == available, accounts.c.balance), else_=0)),
                func.sum(case((accounts.c.name == held, accounts.c.balance), else_=0)),
            )
            .where(accounts.c.name.in_([available, held]))
            .group_by(accounts.c.currency)
            .order_by(accounts.c.currency)
        )
        with self._store.translate_errors():
            return [
                AccountBalance(currency=row[0], available=int(row[1]), held=int(row[2]))
                for row in self._conn.execute(query)
            ]

    def statement(
        self, user: str, currency: str | None, limit: int, before: int | None
    ) -> list[StatementRow]:
        available, held = f"user:{user}", f"user:{user}:held"
        query = (
            select(
                postings.c.id,
                postings.c.account,
                postings.c.currency,
                postings.c.amount,
                transactions.c.id.label("txn_id"),
                transactions.c.kind,
                postings.c.bet_uid,
                transactions.c.reference,
                transactions.c.created_at,
            )
            .join(transactions, transactions.c.id == postings.c.txn_id)
            .where(postings.c.account.in_([available, held]))
            .order_by(postings.c.id.desc())
            .limit(limit)
        )
        if currency is not None:
            query = query.where(postings.c.currency == currency)
        if before is not None:
            query = query.where(postings.c.id < before)
        with self._store.translate_errors():
            return [
                StatementRow(
                    id=row.id,
                    created_at=row.created_at,
                    account="held" if row.account == held else "available",
                    currency=row.currency,
                    amount=row.amount,
                    kind=row.kind,
                    bet_uid=row.bet_uid,
                    reference=row.reference,
                    transaction_id=row.txn_id,
                )
                for row in self._conn.execute(query)
            ]

    def pool_totals(self, pool_uid: int) -> list[PoolTotals]:
        query = (
            select(
                bets.c.currency,
                bets.c.state,
                func.count(),
                func.sum(bets.c.amount),
                func.sum(bets.c.rake),
                func.sum(func.coalesce(bets.c.payout, 0)),
            )
            .where(bets.c.pool_uid == pool_uid)
            .group_by(bets.c.currency, bets.c.state)
            .order_by(bets.c.currency, bets.c.state)
        )
        with self._store.translate_errors():
            return [
                PoolTotals(
                    currency=row[0],
                    state=row[1],
                    entries=int(row[2]),
                    stakes=int(row[3]),
                    rake=int(row[4]),
                    payouts=int(row[5]),
                )
                for row in self._conn.execute(query)
            ]

    def _check_bets(self) -> Iterator[str]:
        """Invariant 4 from the money: every bet's legs match its state, each at most once."""
        held_name = literal("user:") + bets.c.user_uid + literal(":held")
        user_name = literal("user:") + bets.c.user_uid

        def total(condition: Any) -> Any:
            return func.coalesce(func.sum(case((condition, postings.c.amount), else_=0)), 0)

        legs = (
            select(
                postings.c.bet_uid,
                total(and_(postings.c.account == held_name, postings.c.amount > 0)).label("held"),
                total(and_(postings.c.account == held_name, postings.c.amount < 0)).label(
                    "released"
                ),
                total(
                    and_(postings.c.account == user_name, transactions.c.kind == TxnKind.HOLD.value)
                ).label("debited"),
                total(
                    and_(
                        postings.c.account == user_name, transactions.c.kind == TxnKind.REFUND.value
                    )
                ).label("refunded"),
                total(
                    and_(
                        postings.c.account == user_name, transactions.c.kind == TxnKind.SETTLE.value
                    )
                ).label("paid"),
            )
            .select_from(
                postings.join(transactions, transactions.c.id == postings.c.txn_id).join(
                    bets, bets.c.uid == postings.c.bet_uid
                )
            )
            .where(postings.c.bet_uid.is_not(None))
            .group_by(postings.c.bet_uid)
            .subquery()
        )
        query = select(
            bets.c.uid,
            bets.c.state,
            bets.c.funding,
            bets.c.amount + bets.c.rake,
            func.coalesce(bets.c.payout, 0),
            func.coalesce(legs.c.held, 0),
            func.coalesce(-legs.c.released, 0),
            func.coalesce(-legs.c.debited, 0),
            func.coalesce(legs.c.refunded, 0),
            func.coalesce(legs.c.paid, 0),
        ).select_from(bets.outerjoin(legs, legs.c.bet_uid == bets.c.uid))
        found = 0
        for (
            uid,
            state,
            funding,
            cost,
            payout,
            held,
            released,
            debited,
            refunded,
            paid,
        ) in self._conn.execute(query):
            placed = state == BetState.PLACED.value
            charged = 0 if funding == Funding.FREE.value else cost
            expected = {
                "held": charged,
                "released": 0 if placed else charged,
                "debited": cost if funding == Funding.CASH.value else 0,
                "refunded": cost if funding == Funding.CASH.value and state == "refunded" else 0,
                "paid": payout if state == BetState.SETTLED.value else 0,
            }
            actual = {
                "held": held,
                "released": released,
                "debited": debited,
                "refunded": refunded,
                "paid": paid,
            }
            if actual != expected:
                found += 1
                if found <= 50:
                    yield f"bet {uid} is {state} ({funding}): legs {actual}, expected {expected}"

    def check(self) -> CheckReport:
        problems: list[str] = []
        conn = self._conn
        row: Any
        with self._store.translate_errors():
            # 1. Every transaction sums to zero per currency; every posting has a transaction.
            for row in conn.execute(
                select(postings.c.txn_id, postings.c.currency, func.sum(postings.c.amount))
                .group_by(postings.c.txn_id, postings.c.currency)
                .having(func.sum(postings.c.amount) != 0)
                .limit(50)
            ):
                problems.append(f"transaction {row[0]} is off by {row[2]} in {row[1]}")
            orphans = conn.execute(
                select(func.count())
                .select_from(postings.outerjoin(transactions))
                .where(transactions.c.id.is_(None))
            ).scalar_one()
            if orphans:
                problems.append(f"{orphans} postings have no transaction")
            # Every posting is on an account that exists (the balance upsert creates them).
            for row in conn.execute(
                select(postings.c.account, postings.c.currency)
                .select_from(
                    postings.outerjoin(
                        accounts,
                        and_(
                            accounts.c.name == postings.c.account,
                            accounts.c.currency == postings.c.currency,
                        ),
                    )
                )
                .where(accounts.c.name.is_(None))
                .distinct()
                .limit(50)
            ):
                problems.append(f"postings on account {row[0]} {row[1]}, which does not exist")
            # 2. Each account's balance equals the sum of its postings.
            sums = (
                select(
                    postings.c.account,
                    postings.c.currency,
                    func.sum(postings.c.amount).label("total"),
                )
                .group_by(postings.c.account, postings.c.currency)
                .subquery()
            )
            for row in conn.execute(
                select(accounts.c.name, accounts.c.currency, accounts.c.balance, sums.c.total)
                .select_from(
                    accounts.outerjoin(
                        sums,
                        and_(
                            sums.c.account == accounts.c.name,
                            sums.c.currency == accounts.c.currency,
                        ),
                    )
                )
                .where(accounts.c.balance != func.coalesce(sums.c.total, 0))
                .limit(50)
            ):
                problems.append(
                    f"account {row[0]} {row[1]} has balance {row[2]} but postings sum to "
                    f"{row[3] or 0}"
                )
            # 3. No user balance is negative.
            for row in conn.execute(
                select(accounts.c.name, accounts.c.currency, accounts.c.balance)
                .where(accounts.c.kind != "house", accounts.c.balance < 0)
                .limit(50)
            ):
                problems.append(f"account {row[0]} {row[1]} is negative: {row[2]}")
            # 4. Each bet is held at most once and closed at most once, and its state matches its
            #    money (the bet's primary key and its placed-only state trigger make this
            #    structural; this proves it from the postings).
            for row in conn.execute(
                select(transactions.c.idempotency_key, func.count())
                .group_by(transactions.c.idempotency_key)
                .having(func.count() > 1)
                .limit(50)
            ):
                problems.append(f"idempotency key {row[0]} is used {row[1]} times")
            problems.extend(self._check_bets())
            # Held money equals the open holds, per user and currency.
            open_holds = (
                select(
                    (literal("user:") + bets.c.user_uid + literal(":held")).label("name"),
                    bets.c.currency,
                    func.sum(bets.c.amount + bets.c.rake).label("total"),
                )
                .where(
                    bets.c.state == BetState.PLACED.value,
                    bets.c.funding != Funding.FREE.value,
                )
                .group_by(bets.c.user_uid, bets.c.currency)
                .subquery()
            )
            for row in conn.execute(
                select(accounts.c.name, accounts.c.currency, accounts.c.balance, open_holds.c.total)
                .select_from(
                    accounts.outerjoin(
                        open_holds,
                        and_(
                            open_holds.c.name == accounts.c.name,
                            open_holds.c.currency == accounts.c.currency,
                        ),
                    )
                )
                .where(
                    accounts.c.kind == "held",
                    accounts.c.balance != func.coalesce(open_holds.c.total, 0),
                )
                .limit(50)
            ):
                problems.append(
                    f"account {row[0]} {row[1]} holds {row[2]} but its open bets total "
                    f"{row[3] or 0}"
                )
            counts = [
                conn.execute(select(func.count()).select_from(table)).scalar_one()
                for table in (transactions, postings, accounts, bets)
            ]
        return CheckReport(
            problems=problems,
            transactions=counts[0],
            postings=counts[1],
            accounts=counts[2],
            bets=counts[3],
        )
