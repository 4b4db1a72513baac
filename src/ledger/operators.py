"""Operators of the console: accounts, roles, password hashes, sessions, lockout, audit log.

The rules live here, pure where they can be (hashing, permissions, expiry, lockout); the rows
live in :mod:`ledger.stores.operators`. :class:`Operators` joins the two for the CLI
(``ledger operators``, ``ledger audit``), the console and ``GET /admin/audit``.

- Passwords are hashed with scrypt (stdlib ``hashlib.scrypt``), a fresh salt each, compared in
  constant time. An unknown name is checked against a dummy hash, so a failed sign-in takes as
  long whether or not the name exists, and every refusal says the same thing.
- A session is a random token in a cookie; the database keeps only its SHA-256. A new one is
  made at every sign-in (a token planted before sign-in is never promoted: no fixation). It ends
  at sign-out, after ``IDLE`` without a request, ``LIFETIME`` after sign-in, or when its
  operator is disabled or their password changes.
- After ``MAX_FAILURES`` failed sign-ins from one address an account is locked for ``LOCKOUT``
  from that address, even against the right password (counted atomically, before the hash).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import Forbidden, InvalidRequest, LedgerError, Unauthorized
from .money import render
from .paging import Page, check_limit, csv_lines, every, page_of, position
from .storable import storable
from .stores import Store
from .stores.operators import AuditRow, OperatorRow, OperatorTables

__all__ = [
    "ACTIONS",
    "AUDIT_COLUMNS",
    "IDLE",
    "LIFETIME",
    "LOCKOUT",
    "MAX_FAILURES",
    "ROLES",
    "LastAdmin",
    "OperatorNotFound",
    "Operators",
    "Session",
    "SignInFailed",
    "allowed",
    "hash_password",
    "verify_password",
]

ROLES = ("viewer", "cashier", "admin")

# What each role may do beyond the one below it: viewer reads, cashier moves money, admin runs
# check and manages operators.
_GRANTS = {
    "read": "viewer",
    "move": "cashier",
    "check": "admin",
    "operators": "admin",
    # Ending a player's exclusion before its end: an administrator's act, with a reason.
    "lift": "admin",
}

# What the audit log records (the ``action`` column).
ACTIONS = (
    "sign_in",
    "sign_out",
    "deposit",
    "withdrawal",
    "check",
    "export",
    "operator_add",
    "operator_disable",
    "operator_passwd",
    # A player's limit set, removed or its pending change cancelled; an exclusion; one lifted.
    "limit",
    "exclude",
    "lift_exclusion",
    # A console POST refused for a missing or wrong CSRF token.
    "csrf_refused",
    # A call of the operator API (/admin) with the operator token that changes something or
    # exports a list: by ``token:<fingerprint>``.
    "reconcile",
    "admin",
)

# Bounds of what one audit entry keeps: anyone signed in (a viewer too) can make the console
# write one, with form fields of their choosing.
AUDIT_TEXT = 200
AUDIT_DETAILS = 16

AUDIT_COLUMNS = ("id", "at", "operator", "ip", "action", "target", "outcome", "detail")

MAX_FAILURES = 5
LOCKOUT = timedelta(minutes=15)
IDLE = timedelta(minutes=30)
LIFETIME = timedelta(hours=12)
# last_seen is written at most this often: a page of htmx requests is not a burst of writes.
TOUCH_EVERY = timedelta(seconds=30)

MIN_PASSWORD = 10
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")

# scrypt's cost (N, r, p): OWASP's minimum, in the form of its listed equivalent N=2**14, r=8,
# p=5 (16 MB per lane). Every hash records its own parameters, so raising them later keeps
# old hashes valid.
COST = (2**14, 8, 5)
_MAXMEM = 64 * 1024 * 1024


class SignInFailed(Unauthorized):
    """A wrong name or password, a disabled or locked account: all answered alike."""

    key = "auth.sign_in_failed"


class LastAdmin(LedgerError):
    key = "operator.last_admin"
    status = 409


class OperatorNotFound(LedgerError):
    key = "operator.not_found"
    status = 404


def allowed(role: str, permission: str) -> bool:
    """Whether ``role`` may do ``permission`` (read, move, check, operators)."""
    return ROLES.index(role) >= ROLES.index(_GRANTS[permission])


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$N$r$p$salt$hash`` (base64): the parameters travel with the hash."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    n, r, p = COST
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM)
    return f"scrypt${n}${r}${p}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (constant time; a malformed hash never matches)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        found = hashlib.scrypt(
            password.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=_MAXMEM,
            dklen=len(expected),
        )
    except ValueError:
        return False
    return hmac.compare_digest(found, expected)


@functools.cache
def _dummy_hash() -> str:
    """Checked when the name is unknown, so that a failed sign-in costs one hash either way.

    Made at the first sign-in, not at import: one scrypt is about half a second of CPU, which
    every ``ledger`` command paid when this module was imported."""
    return hash_password("not a password of anyone", salt=b"\0" * 16)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidRequest(
            "an operator name is 1 to 64 letters, digits, '.', '_', '@' or '-'",
            key="operator.invalid_name",
        )
    return name


def check_role(role: str) -> str:
    if role not in ROLES:
        raise InvalidRequest(f"role must be one of {', '.join(ROLES)}", key="operator.invalid_role")
    return role


# The commonest passwords of at least MIN_PASSWORD characters in the public breach lists (the
# SecLists "10-million-password-list" top entries of that length), compared case-blind.
_COMMON_LIST = """
    1234567890 0987654321 1234567891 1111111111 0000000000 1q2w3e4r5t 1qaz2wsx3edc
    qwertyuiop qwertyuiop1 qwerty1234 qwerty12345 qwerty123456 asdfghjkl1 asdfghjkl123
    zxcvbnm123 password12 password123 password1234 passw0rd12 passw0rd123 p@ssw0rd123
    iloveyou12 iloveyou123 letmein123 welcome123 welcome1234 changeme123 administrator
    admin12345 admin123456 abcdefghij abc1234567 abcd123456 a123456789 123456789a
    1234qwerty 12345qwert 123qweasdzxc 1qazxsw23edc football123 baseball123 princess123
    sunshine123 superman123 trustno1234 monkey1234 dragon1234 master1234 starwars123
"""
_COMMON = frozenset(_COMMON_LIST.split())


def check_password(password: str) -> str:
    """A password of at least ``MIN_PASSWORD`` characters that is not only whitespace, not one
    character repeated and not one of the commonest (:data:`_COMMON`)."""
    if not isinstance(password, str) or len(password) < MIN_PASSWORD:
        raise InvalidRequest(
            f"a password has at least {MIN_PASSWORD} characters", key="operator.weak_password"
        )
    if not password.strip() or len(set(password)) == 1 or password.lower() in _COMMON:
        raise InvalidRequest(
            "this password is too easy to guess (whitespace, one character repeated, or one "
            "of the commonest passwords): choose another",
            key="operator.weak_password",
        )
    return password


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def expired(created_at: datetime, last_seen: datetime, now: datetime) -> bool:
    """Whether a session is over: idle too long, or older than its lifetime."""
    return now - last_seen > IDLE or now - created_at > LIFETIME


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in operator. ``token`` is only known right after sign-in (for the cookie)."""

    operator: str
    role: str
    csrf: str
    token: str | None = None

    def may(self, permission: str) -> bool:
        return allowed(self.role, permission)

    def require(self, permission: str) -> None:
        if not self.may(permission):
            raise Forbidden(
                f"the {self.role} role may not do this ({permission})", key="operator.forbidden"
            )

    def csrf_ok(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self.csrf.encode())


def _bounded(value: Any) -> Any:
    if isinstance(value, bool | int | float) or value is None:
        return value
    return storable(str(value)[:AUDIT_TEXT])


def audit_dict(row: AuditRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "at": row.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "operator": row.operator,
        "ip": row.ip,
        "action": row.action,
        "target": row.target,
        "outcome": row.outcome,
        "detail": json.loads(row.detail) if row.detail else None,
    }


def _chunked(lines: Iterator[str], size: int = 65_536) -> Iterator[str]:
    # A streamed answer hands each item over from a worker thread: ~64 KB at a time, not a line.
    buffer: list[str] = []
    held = 0
    for line in lines:
        buffer.append(line)
        held += len(line)
        if held >= size:
            yield "".join(buffer)
            buffer, held = [], 0
    if buffer:
        yield "".join(buffer)


class Operators:
    """The console's operators and audit log over one store."""

    def __init__(self, store: Store, clock: Callable[[], datetime] | None = None) -> None:
        self.tables = OperatorTables(store)
        self._clock = clock or (lambda: datetime.now(UTC))

    def now(self) -> datetime:
        return self._clock()

    # --- accounts -------------------------------------------------------------------------------

    def add(self, name: str, role: str, password: str) -> None:
        self.tables.add(
            check_name(name), check_role(role), hash_password(check_password(password)), self.now()
        )

    def every(self) -> list[OperatorRow]:
        return self.tables.every()

    def disable(self, name: str) -> None:
        """Disable ``name`` and end their sessions; never the last enabled admin (nobody could
        manage operators any more but through the CLI)."""
        found = self.tables.disable(check_name(name), self.now())
        if found is None:
            raise OperatorNotFound(f"no operator {name!r}")
        if not found:
            raise LastAdmin(f"{name!r} is the last enabled admin: add another admin first")

    def passwd(self, name: str, password: str) -> None:
        """Set a new password; it also lifts a lockout and ends the operator's sessions."""
        found = self.tables.change(
            check_name(name),
            end_sessions=True,
            password_hash=hash_password(check_password(password)),
        )
        if not found:
            raise OperatorNotFound(f"no operator {name!r}")
        self.tables.forget_failures(name)

    # --- sign-in and sessions -------------------------------------------------------------------

    def sign_in(
        self, name: str, password: str, ip: str | None, *, planted: str | None = None
    ) -> Session:
        """A new session, or :class:`SignInFailed` (recorded in the audit log either way).

        ``planted`` is the session token the browser already had: it is ended, whoever's it
        was, so that a token fixed by an attacker before sign-in never becomes a session.

        The attempt is counted as a failure of ``name`` from ``ip`` *before* the password is
        checked, in one statement that answers the new count: of any number of concurrent
        attempts, only the first ``MAX_FAILURES`` can be judged on their password, and the
        count is dropped again when one succeeds. Another address has a count of its own, so
        nobody elsewhere can lock a real operator out (docs/security.md: the trade-off).
        """
        if planted:
            self.tables.close_session(token_hash(planted))
        now = self.now()
        name = name if isinstance(name, str) else ""
        found = self.tables.get(name) if _NAME.fullmatch(name) else None
        address = (ip or "")[:64]
        failures = 0
        if found is not None and found.disabled_at is None:
            failures = self.tables.count_failure(
                found.name, address, now, limit=MAX_FAILURES, lockout=LOCKOUT
            )
        # The hash runs whatever the outcome, so that every refusal takes as long.
        good = verify_password(password, found.password_hash if found else _dummy_hash())
        reason = None
        if found is None:
            reason = "unknown_operator"
        elif found.disabled_at is not None:
            reason = "disabled"
        elif failures > MAX_FAILURES:
            reason = "locked"
        elif not good:
            reason = "bad_password"
        if reason is not None or found is None:
            # Only a bounded name: a password typed into the name field is not kept whole.
            self.record(name[:64] or None, ip, "sign_in", outcome=SignInFailed.key, reason=reason)
            raise SignInFailed("wrong name or password, or the account is locked or disabled")
        self.tables.forget_failures(found.name, address)
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        # Sessions and failure counts abandoned are swept here, so the tables stay small.
        self.tables.prune_sessions(now - IDLE)
        self.tables.prune_failures(now - LOCKOUT)
        self.tables.open_session(token_hash(token), found.name, csrf, now)
        self.record(found.name, ip, "sign_in")
        return Session(found.name, found.role, csrf, token)

    def session(self, token: str | None) -> Session | None:
        """The live session of a cookie's token, or ``None`` (ended, expired, disabled)."""
        if not token or len(token) > 128:
            return None
        hashed = token_hash(token)
        found = self.tables.session(hashed)
        if found is None:
            return None
        now = self.now()
        if expired(found.created_at, found.last_seen, now) or found.operator.disabled_at:
            self.tables.close_session(hashed)
            return None
        if now - found.last_seen >= TOUCH_EVERY:
            self.tables.touch_session(hashed, now)
        return Session(found.operator.name, found.operator.role, found.csrf)

    def sign_out(self, token: str | None, ip: str | None) -> None:
        session = self.session(token)
        if token:
            self.tables.close_session(token_hash(token))
        if session is not None:
            self.record(session.operator, ip, "sign_out")

    # --- audit ----------------------------------------------------------------------------------

    def record(
        self,
        operator: str | None,
        ip: str | None,
        action: str,
        target: str | None = None,
        *,
        outcome: str = "ok",
        **detail: Any,
    ) -> None:
        """Write one audit entry: who, from where, what, with what outcome (now). Every field
        is bounded: texts to ``AUDIT_TEXT`` characters, at most ``AUDIT_DETAILS`` details."""
        kept = {
            name[:64]: _bounded(value)
            for name, value in list(detail.items())[:AUDIT_DETAILS]
            if value is not None
        }
        self.tables.record(
            at=self.now(),
            operator=None if operator is None else storable(operator[:64]),
            ip=None if ip is None else storable(ip[:64]),
            action=action,
            target=None if target is None else storable(str(target)[:300]),
            # JSON escapes NUL (\u0000), which Postgres' text holds; a lone surrogate it would
            # write as it is, so every detail is made storable first.
            detail=json.dumps(kept, default=str, separators=(",", ":")) if kept else None,
            outcome=storable(outcome[:64]),
        )

    def audit(
        self, limit: int = 50, after: str | None = None, action: str | None = None
    ) -> Page[dict[str, Any]]:
        """One page of the audit log, newest first; ``after`` is the previous page's ``next``."""
        limit = check_limit(limit)
        if action is not None and action not in ACTIONS:
            raise InvalidRequest(f"action must be one of {', '.join(ACTIONS)}")
        key = position(after, int)
        rows = self.tables.audit(limit + 1, int(key[0]) if key else None, action)
        page = page_of(rows, limit, lambda row: (row.id,))
        return Page([audit_dict(row) for row in page.items], page.next)

    def audit_csv(self, action: str | None = None) -> Iterator[str]:
        """The whole audit log (or one action's entries) as CSV, newest first, read a page at a
        time as the lines are taken (``action`` is checked before the first line)."""
        if action is not None and action not in ACTIONS:
            raise InvalidRequest(f"action must be one of {', '.join(ACTIONS)}")
        rows = every(lambda after: self.audit(1000, after, action))
        return _chunked(csv_lines(rows, AUDIT_COLUMNS))

    def last_check(self) -> dict[str, Any] | None:
        rows = self.tables.audit(1, None, "check")
        return audit_dict(rows[0]) if rows else None

    # --- overview -------------------------------------------------------------------------------

    def overview(self, scale: Callable[[str], int]) -> dict[str, Any]:
        """Per currency the users' available and held totals and the house accounts' balances."""
        currencies: dict[str, dict[str, str]] = {}
        for row in self.tables.totals():
            zero = render(0, scale(row.currency))
            found = currencies.setdefault(
                row.currency, {"available": zero, "held": zero, "house": zero}
            )
            found[row.kind] = render(row.total, scale(row.currency))
        house = [
            {"account": name, "currency": currency, "balance": render(balance, scale(currency))}
            for name, currency, balance in self.tables.house_accounts()
        ]
        return {
            "currencies": [
                {"currency": code, **found} for code, found in sorted(currencies.items())
            ],
            "house": house,
            "last_check": self.last_check(),
        }
