"""The unit of work shared by the SQL stores, in SQLAlchemy Core over the one schema.

The dialect modules (:mod:`.sqlite`, :mod:`.postgres`) build the engine, allocate transaction
ids, and translate their driver's errors; everything else is the same SQL on both.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    case,
    func,
    literal,
    or_,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError

from ..domain import Bet, BetState, Funding, Posting, Transaction, TxnKind, account_kind
from ..errors import InsufficientFunds, LedgerError
from .base import AccountBalance, CheckReport, PoolTotals, StatementRow
from .schema import accounts, bets, postings, transactions

__all__ = ["SqlStore", "SqlUnitOfWork"]

# Keeps IN lists and executemany batches well under every driver's parameter limit.
CHUNK = 900


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


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

    @contextlib.contextmanager
    def translate_errors(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as error:
            raise self.translate(error) from error

    def insert_ignore(self, table: Any) -> Any:
        dialect = sqlite if self.engine.dialect.name == "sqlite" else postgresql
        return dialect.insert(table).on_conflict_do_nothing()


def _bet_from_row(row: Any) -> Bet:
    return Bet(
        uid=row.uid,
        user=row.user_uid,
        pool_uid=row.pool_uid,
        currency=row.currency,
        amount=row.amount,
        rake=row.rake,
        funding=Funding(row.funding),
        state=BetState(row.state),
        payout=row.payout,
        payout_currency=row.payout_currency,
        ticket=row.ticket,
        request_uuid=row.request_uuid,
        secrets=row.secrets or {},
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

    def ping(self) -> None:
        with self._store.translate_errors():
            self._conn.execute(select(literal(1))).scalar_one()

    # --- bets -----------------------------------------------------------------------------------

    def get_bets(self, uids: Sequence[int]) -> dict[int, Bet]:
        found: dict[int, Bet] = {}
        unique = sorted(set(uids))
        with self._store.translate_errors():
            for chunk in _chunks(unique):
                rows = self._conn.execute(select(bets).where(bets.c.uid.in_(chunk)))
                for row in rows:
                    found[row.uid] = _bet_from_row(row)
        return found

    def add_bets(self, new_bets: Sequence[Bet]) -> None:
        if not new_bets:
            return
        now = datetime.now(UTC)
        rows = [
            {
                "uid": bet.uid,
                "user_uid": bet.user,
                "pool_uid": bet.pool_uid,
                "currency": bet.currency,
                "amount": bet.amount,
                "rake": bet.rake,
                "funding": bet.funding.value,
                "state": bet.state.value,
                "payout": bet.payout,
                "payout_currency": bet.payout_currency,
                "ticket": bet.ticket,
                "request_uuid": bet.request_uuid,
                "secrets": dict(bet.secrets),
                "placed_at": now,
            }
            # Sorted, so concurrent writers meet unique-index entries in the same order.
            for bet in sorted(new_bets, key=lambda bet: bet.uid)
        ]
        with self._store.translate_errors():
            for chunk in _chunks(rows):
                self._conn.execute(bets.insert(), list(chunk))

    def close_bets(self, closed: Sequence[Bet]) -> None:
        if not closed:
            return
        now = datetime.now(UTC)
        statement = (
            bets.update()
            .where(bets.c.uid == bindparam("b_uid"), bets.c.state == BetState.PLACED.value)
            .values(
                state=bindparam("b_state"),
                payout=bindparam("b_payout"),
                payout_currency=bindparam("b_payout_currency"),
                closed_at=now,
            )
        )
        rows = [
            {
                "b_uid": bet.uid,
                "b_state": bet.state.value,
                "b_payout": bet.payout,
                "b_payout_currency": bet.payout_currency,
            }
            for bet in sorted(closed, key=lambda bet: bet.uid)
        ]
        with self._store.translate_errors():
            for chunk in _chunks(rows):
                self._conn.execute(statement, list(chunk))

    # --- transactions ---------------------------------------------------------------------------

    def get_transaction(self, key: str) -> Transaction | None:
        with self._store.translate_errors():
            header = self._conn.execute(
                select(transactions).where(transactions.c.idempotency_key == key)
            ).first()
            if header is None:
                return None
            legs = self._conn.execute(
                select(postings.c.account, postings.c.currency, postings.c.amount)
                .where(postings.c.txn_id == header.id)
                .order_by(postings.c.id)
            )
            return Transaction(
                key=header.idempotency_key,
                kind=TxnKind(header.kind),
                postings=tuple(Posting(leg.account, leg.currency, leg.amount) for leg in legs),
                user=header.user_uid,
                bet_uid=header.bet_uid,
                reference=header.reference,
            )

    def post(self, new_transactions: Sequence[Transaction]) -> None:
        if not new_transactions:
            return
        now = datetime.now(UTC)
        deltas: dict[tuple[str, str], int] = defaultdict(int)
        with self._store.translate_errors():
            ids = self._store.allocate_transaction_ids(self._conn, len(new_transactions))
            headers = []
            legs = []
            for txn_id, txn in zip(ids, new_transactions, strict=True):
                headers.append(
                    {
                        "id": txn_id,
                        "idempotency_key": txn.key,
                        "kind": txn.kind.value,
                        "bet_uid": txn.bet_uid,
                        "user_uid": txn.user,
                        "reference": txn.reference,
                        "created_at": now,
                    }
                )
                for leg in txn.postings:
                    legs.append(
                        {
                            "txn_id": txn_id,
                            "account": leg.account,
                            "currency": leg.currency,
                            "amount": leg.amount,
                        }
                    )
                    deltas[(leg.account, leg.currency)] += leg.amount
            self._open_accounts(sorted(deltas))
            # Postings first, then the transaction rows that seal them: on SQLite the trigger on
            # the transaction row checks that its postings sum to zero per currency.
            for chunk in _chunks(legs):
                self._conn.execute(postings.insert(), list(chunk))
            for chunk in _chunks(headers):
                self._conn.execute(transactions.insert(), list(chunk))
            # Balances last, after the idempotency keys are claimed. On Postgres a concurrent
            # writer of the same key (a re-sent settle, refund or withdrawal) then waits on the
            # unique index and fails with a unique violation, which is a Retry that sees the
            # winner's work and answers "unchanged". Applied first, its debit of the balance the
            # winner had just spent failed as user.insufficient_funds (a 402) instead.
            self._apply(deltas)

    def _open_accounts(self, keys: Sequence[tuple[str, str]]) -> None:
        """Create the accounts the postings name, if they do not exist yet, in key order."""
        new_accounts = [
            {"name": name, "currency": currency, "kind": account_kind(name), "balance": 0}
            for name, currency in keys
        ]
        for chunk in _chunks(new_accounts):
            self._conn.execute(self._store.insert_ignore(accounts), list(chunk))

    def _apply(self, deltas: dict[tuple[str, str], int]) -> None:
        """Apply net balance changes: checked debits first, then credits, each in key order."""
        keys = sorted(deltas)
        debit = (
            accounts.update()
            .where(
                accounts.c.name == bindparam("a_name"),
                accounts.c.currency == bindparam("a_currency"),
                accounts.c.balance + bindparam("a_delta") >= 0,
            )
            .values(balance=accounts.c.balance + bindparam("a_delta"))
        )
        credits = []
        for name, currency in keys:
            delta = deltas[(name, currency)]
            if delta == 0:
                continue
            params = {"a_name": name, "a_currency": currency, "a_delta": delta}
            if delta > 0 or account_kind(name) != "available":
                # Held money only ever returns what a hold put there; the database's
                # no-overdraft check guards it all the same, so these can go in bulk.
                credits.append(params)
                continue
            # One conditional update per debited available balance: atomic against every other
            # writer (no read-modify-write, so no lost update), and it refuses an overdraft.
            if self._conn.execute(debit, params).rowcount != 1:
                user = name.removeprefix("user:").removesuffix(":held")
                raise InsufficientFunds(f"user {user} has insufficient {currency} funds")
        credit = (
            accounts.update()
            .where(
                accounts.c.name == bindparam("a_name"),
                accounts.c.currency == bindparam("a_currency"),
            )
            .values(balance=accounts.c.balance + bindparam("a_delta"))
        )
        for chunk in _chunks(credits):
            self._conn.execute(credit, list(chunk))

    # --- reads ----------------------------------------------------------------------------------

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
                transactions.c.bet_uid,
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
            #    transactions (unique keys make the first part structural; this proves it).
            for row in conn.execute(
                select(transactions.c.idempotency_key, func.count())
                .group_by(transactions.c.idempotency_key)
                .having(func.count() > 1)
                .limit(50)
            ):
                problems.append(f"idempotency key {row[0]} is used {row[1]} times")
            hold = transactions.alias("hold")
            close = transactions.alias("close")
            for row in conn.execute(
                select(bets.c.uid, bets.c.state, hold.c.id, close.c.kind)
                .select_from(
                    bets.outerjoin(
                        hold, and_(hold.c.bet_uid == bets.c.uid, hold.c.kind == TxnKind.HOLD.value)
                    ).outerjoin(
                        close,
                        and_(
                            close.c.bet_uid == bets.c.uid,
                            close.c.kind.in_([TxnKind.REFUND.value, TxnKind.SETTLE.value]),
                        ),
                    )
                )
                .where(
                    or_(
                        hold.c.id.is_(None),
                        and_(bets.c.state == BetState.PLACED.value, close.c.kind.is_not(None)),
                        and_(
                            bets.c.state == BetState.REFUNDED.value,
                            func.coalesce(close.c.kind, "") != TxnKind.REFUND.value,
                        ),
                        and_(
                            bets.c.state == BetState.SETTLED.value,
                            func.coalesce(close.c.kind, "") != TxnKind.SETTLE.value,
                        ),
                    )
                )
                .limit(50)
            ):
                problems.append(
                    f"bet {row[0]} is {row[1]} but its hold is {'present' if row[2] else 'missing'}"
                    f" and its closing transaction is {row[3] or 'missing'}"
                )
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
