"""The console's tables: operator accounts, their sessions, the audit log, and the overview query.

These rows are not the ledger's journal: no money moves here, so they are written in short
transactions of their own rather than through the writer (:mod:`ledger.writer`). Every method
is one transaction. The rules (password hashes, lockout, expiry) are :mod:`ledger.operators`';
this module only reads and writes rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import case, delete, insert, null, select, update
from sqlalchemy.dialects import postgresql, sqlite

from ..errors import LedgerError
from .schema import accounts, operator_audit, operator_failures, operator_sessions, operators
from .tables import SideTables, utc

__all__ = [
    "AuditRow",
    "OperatorExists",
    "OperatorRow",
    "OperatorTables",
    "SessionRow",
    "TotalRow",
]


class OperatorExists(LedgerError):
    """An operator of this name exists already."""

    key = "operator.exists"
    status = 409


@dataclass(frozen=True, slots=True)
class OperatorRow:
    name: str
    role: str
    password_hash: str
    failed_attempts: int
    locked_until: datetime | None
    disabled_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SessionRow:
    token_hash: str
    operator: OperatorRow
    csrf: str
    created_at: datetime
    last_seen: datetime


@dataclass(frozen=True, slots=True)
class AuditRow:
    id: int
    at: datetime
    operator: str | None
    ip: str | None
    action: str
    target: str | None
    detail: str | None
    outcome: str


@dataclass(frozen=True, slots=True)
class TotalRow:
    """The sum of one kind of account (available, held, house) in one currency, minor units."""

    currency: str
    kind: str
    total: int


def _operator(row: Any) -> OperatorRow:
    return OperatorRow(
        name=row.name,
        role=row.role,
        password_hash=row.password_hash,
        failed_attempts=row.failed_attempts,
        locked_until=utc(row.locked_until),
        disabled_at=utc(row.disabled_at),
        created_at=utc(row.created_at) or row.created_at,
    )


class OperatorTables(SideTables):
    """Reads and writes of the console's tables in ``store`` (a SQL store)."""

    # --- operators ------------------------------------------------------------------------------

    def add(self, name: str, role: str, password_hash: str, now: datetime) -> None:
        with self._tx(write=True) as c:
            if c.execute(select(operators.c.name).where(operators.c.name == name)).first():
                raise OperatorExists(f"operator {name!r} exists already")
            c.execute(
                insert(operators).values(
                    name=name,
                    role=role,
                    password_hash=password_hash,
                    failed_attempts=0,
                    created_at=now,
                )
            )

    def get(self, name: str) -> OperatorRow | None:
        with self._tx(write=False) as c:
            row = c.execute(select(operators).where(operators.c.name == name)).first()
        return None if row is None else _operator(row)

    def every(self) -> list[OperatorRow]:
        with self._tx(write=False) as c:
            rows = c.execute(select(operators).order_by(operators.c.name)).all()
        return [_operator(row) for row in rows]

    def disable(self, name: str, now: datetime) -> bool | None:
        """Disable ``name`` and end their sessions: ``True``; ``None`` for no such operator;
        ``False`` (nothing changed) if they are the last enabled admin.

        The enabled admins are read locked (Postgres; SQLite's write transaction holds the
        whole database), so two admins disabling each other at once leave one of them."""
        enabled = operators.c.disabled_at.is_(None)
        with self._tx(write=True) as c:
            target = c.execute(
                select(operators.c.role, operators.c.disabled_at).where(operators.c.name == name)
            ).first()
            if target is None:
                return None
            if target.role == "admin" and target.disabled_at is None:
                admins = c.execute(
                    select(operators.c.name)
                    .where((operators.c.role == "admin") & enabled)
                    .with_for_update()
                ).all()
                if not any(row.name != name for row in admins):
                    return False
            c.execute(update(operators).where(operators.c.name == name).values(disabled_at=now))
            c.execute(delete(operator_sessions).where(operator_sessions.c.operator == name))
        return True

    def change(self, name: str, *, end_sessions: bool = False, **values: Any) -> bool:
        """Set ``values`` on the operator; ``end_sessions`` signs them out everywhere."""
        with self._tx(write=True) as c:
            found = c.execute(
                update(operators).where(operators.c.name == name).values(**values)
            ).rowcount
            if end_sessions:
                c.execute(delete(operator_sessions).where(operator_sessions.c.operator == name))
        return bool(found)

    # --- failed sign-ins, per operator and address -----------------------------------------------

    def count_failure(
        self, name: str, address: str, now: datetime, *, limit: int, lockout: timedelta
    ) -> int:
        """Count one more failed sign-in of ``name`` from ``address``; the new count.

        One statement (an upsert), so that concurrent attempts each see their own count: the
        one that reaches ``limit`` locks until ``now + lockout``. A lock that is over, or a
        count untouched for ``lockout``, starts again at 1.
        """
        table = operator_failures
        stale = (table.c.locked_until <= now) | (
            table.c.locked_until.is_(None) & (table.c.last_at <= now - lockout)
        )
        # A limit of 1 locks at the first failure.
        first_lock: Any = now + lockout if limit <= 1 else null()
        with self._tx(write=True) as c:
            dialect = postgresql if c.dialect.name == "postgresql" else sqlite
            statement = dialect.insert(table).values(
                operator=name,
                address=address,
                failures=1,
                locked_until=None if limit > 1 else now + lockout,
                last_at=now,
            )
            counted = statement.on_conflict_do_update(
                index_elements=[table.c.operator, table.c.address],
                set_={
                    "failures": case((stale, 1), else_=table.c.failures + 1),
                    "locked_until": case(
                        (stale, first_lock),
                        (
                            table.c.locked_until.is_(None) & (table.c.failures + 1 >= limit),
                            now + lockout,
                        ),
                        else_=table.c.locked_until,
                    ),
                    "last_at": now,
                },
            ).returning(table.c.failures)
            return int(c.execute(counted).scalar_one())

    def forget_failures(self, name: str, address: str | None = None) -> None:
        """Drop the failure count of ``name`` from ``address`` (from everywhere if ``None``)."""
        query = delete(operator_failures).where(operator_failures.c.operator == name)
        if address is not None:
            query = query.where(operator_failures.c.address == address)
        with self._tx(write=True) as c:
            c.execute(query)

    def prune_failures(self, before: datetime) -> None:
        """Drop counts untouched since ``before`` whose lock, if any, is over."""
        table = operator_failures
        with self._tx(write=True) as c:
            c.execute(
                delete(table).where(
                    (table.c.last_at < before)
                    & (table.c.locked_until.is_(None) | (table.c.locked_until < before))
                )
            )

    # --- sessions -------------------------------------------------------------------------------

    def open_session(self, token_hash: str, operator: str, csrf: str, now: datetime) -> None:
        with self._tx(write=True) as c:
            c.execute(
                insert(operator_sessions).values(
                    token_hash=token_hash,
                    operator=operator,
                    csrf=csrf,
                    created_at=now,
                    last_seen=now,
                )
            )

    def session(self, token_hash: str) -> SessionRow | None:
        with self._tx(write=False) as c:
            found = c.execute(
                select(operator_sessions).where(operator_sessions.c.token_hash == token_hash)
            ).first()
            if found is None:
                return None
            owner = c.execute(select(operators).where(operators.c.name == found.operator)).one()
        return SessionRow(
            token_hash=found.token_hash,
            operator=_operator(owner),
            csrf=found.csrf,
            created_at=utc(found.created_at) or found.created_at,
            last_seen=utc(found.last_seen) or found.last_seen,
        )

    def touch_session(self, token_hash: str, now: datetime) -> None:
        with self._tx(write=True) as c:
            c.execute(
                update(operator_sessions)
                .where(operator_sessions.c.token_hash == token_hash)
                .values(last_seen=now)
            )

    def prune_sessions(self, idle_since: datetime) -> None:
        """End every session not used since ``idle_since`` (they can only expire anyway)."""
        with self._tx(write=True) as c:
            c.execute(delete(operator_sessions).where(operator_sessions.c.last_seen < idle_since))

    def close_session(self, token_hash: str) -> None:
        with self._tx(write=True) as c:
            c.execute(delete(operator_sessions).where(operator_sessions.c.token_hash == token_hash))

    # --- audit ----------------------------------------------------------------------------------

    def record(
        self,
        *,
        at: datetime,
        operator: str | None,
        ip: str | None,
        action: str,
        target: str | None,
        detail: str | None,
        outcome: str,
    ) -> None:
        with self._tx(write=True) as c:
            c.execute(
                insert(operator_audit).values(
                    at=at,
                    operator=operator,
                    ip=ip,
                    action=action,
                    target=target,
                    detail=detail,
                    outcome=outcome,
                )
            )

    def audit(self, limit: int, before: int | None, action: str | None = None) -> list[AuditRow]:
        """At most ``limit`` entries, newest first, older than entry id ``before``."""
        query = select(operator_audit).order_by(operator_audit.c.id.desc()).limit(limit)
        if before is not None:
            query = query.where(operator_audit.c.id < before)
        if action is not None:
            query = query.where(operator_audit.c.action == action)
        with self._tx(write=False) as c:
            rows = c.execute(query).all()
        return [
            AuditRow(
                id=row.id,
                at=utc(row.at) or row.at,
                operator=row.operator,
                ip=row.ip,
                action=row.action,
                target=row.target,
                detail=row.detail,
                outcome=row.outcome,
            )
            for row in rows
        ]

    # --- overview -------------------------------------------------------------------------------

    def totals(self) -> list[TotalRow]:
        """Per currency and account kind, the sum of the balances (exact on both stores)."""
        total = self._store.dialect.exact_sum(accounts.c.balance)
        query = (
            select(accounts.c.currency, accounts.c.kind, total.label("total"))
            .group_by(accounts.c.currency, accounts.c.kind)
            .order_by(accounts.c.currency, accounts.c.kind)
        )
        with self._tx(write=False) as c:
            rows = c.execute(query).all()
        return [TotalRow(row.currency, row.kind, int(row.total or 0)) for row in rows]

    def house_accounts(self) -> list[tuple[str, str, int]]:
        """Every house account: ``(name, currency, balance)``."""
        query = (
            select(accounts.c.name, accounts.c.currency, accounts.c.balance)
            .where(accounts.c.kind == "house")
            .order_by(accounts.c.name, accounts.c.currency)
        )
        with self._tx(write=False) as c:
            return [(row.name, row.currency, int(row.balance)) for row in c.execute(query)]
