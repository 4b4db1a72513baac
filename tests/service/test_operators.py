"""Console operators on both stores: accounts, sign-in, sessions, lockout, audit log, overview,
and the ``ledger operators`` / ``ledger audit`` commands."""

from __future__ import annotations

import csv
import io
import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

import ledger
import ledger.operators
from ledger.cli import main
from ledger.errors import InvalidRequest
from ledger.operators import (
    IDLE,
    LIFETIME,
    LOCKOUT,
    MAX_FAILURES,
    Operators,
    SignInFailed,
    allowed,
    expired,
    hash_password,
    verify_password,
)
from ledger.paging import cursor
from ledger.stores.operators import OperatorExists

PASSWORD = "correct horse battery"


class Clock:
    """A settable clock for expiry and lockout."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The production cost takes most of a second per hash on a busy machine; the rules under
    # test do not depend on it (each hash records its own parameters).
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def staff(book: ledger.Ledger, clock: Clock) -> Operators:
    found = Operators(book.store, clock)
    found.add("ada", "admin", PASSWORD)
    found.add("cal", "cashier", PASSWORD)
    return found


# --- pure rules ---------------------------------------------------------------------------------


def test_password_hash_is_salted_scrypt_at_owasp_cost_and_verifies_only_the_right_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledger.operators, "COST", (2**14, 8, 5))
    first, second = hash_password(PASSWORD), hash_password(PASSWORD)
    assert first.startswith("scrypt$16384$8$5$")
    assert first.startswith("scrypt$")
    assert first != second
    assert verify_password(PASSWORD, first)
    assert verify_password(PASSWORD, second)
    assert not verify_password(PASSWORD + "x", first)
    assert not verify_password(PASSWORD, "not a hash")
    assert PASSWORD not in first


def test_roles_are_cumulative_viewer_reads_cashier_moves_admin_checks_and_manages() -> None:
    table = {
        role: [allowed(role, permission) for permission in ("read", "move", "check", "operators")]
        for role in ("viewer", "cashier", "admin")
    }
    assert table == {
        "viewer": [True, False, False, False],
        "cashier": [True, True, False, False],
        "admin": [True, True, True, True],
    }


def test_a_session_expires_when_idle_too_long_or_past_its_lifetime() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert not expired(start, start, start + IDLE)
    assert expired(start, start, start + IDLE + timedelta(seconds=1))
    busy = start + LIFETIME  # used a second ago, but signed in a lifetime ago
    assert not expired(start, busy, busy)
    assert expired(start, busy, busy + timedelta(seconds=1))


# --- accounts and sessions, on both stores ------------------------------------------------------


def test_sign_in_opens_a_session_known_by_its_token_only(staff: Operators) -> None:
    session = staff.sign_in("ada", PASSWORD, "127.0.0.1")
    assert session.token
    assert session.role == "admin"
    found = staff.session(session.token)
    assert found is not None
    assert (found.operator, found.csrf) == ("ada", session.csrf)
    assert staff.session(session.token + "x") is None
    # The database holds the token's hash, never the token.
    assert staff.tables.session(session.token) is None


def test_wrong_password_unknown_name_and_disabled_account_are_refused_alike(
    staff: Operators,
) -> None:
    staff.disable("cal")
    refusals = []
    for name, password in (("ada", "wrong password"), ("nobody", PASSWORD), ("cal", PASSWORD)):
        with pytest.raises(SignInFailed) as caught:
            staff.sign_in(name, password, "10.0.0.9")
        refusals.append((caught.value.key, caught.value.message))
    assert len(set(refusals)) == 1
    entries = staff.audit(10, action="sign_in").items
    reasons = [
        (entry["operator"], entry["outcome"], entry["detail"]["reason"]) for entry in entries
    ]
    assert reasons == [
        ("cal", "auth.sign_in_failed", "disabled"),
        ("nobody", "auth.sign_in_failed", "unknown_operator"),
        ("ada", "auth.sign_in_failed", "bad_password"),
    ]
    assert {entry["ip"] for entry in entries} == {"10.0.0.9"}


def test_repeated_failures_lock_the_account_even_against_the_right_password(
    staff: Operators, clock: Clock
) -> None:
    for _ in range(MAX_FAILURES):
        with pytest.raises(SignInFailed):
            staff.sign_in("ada", "wrong password", None)
    with pytest.raises(SignInFailed):
        staff.sign_in("ada", PASSWORD, None)
    assert staff.audit(1).items[0]["detail"] == {"reason": "locked"}
    clock.now += LOCKOUT + timedelta(seconds=1)
    assert staff.sign_in("ada", PASSWORD, None).operator == "ada"


def test_failures_below_the_limit_are_forgotten_at_a_good_sign_in(
    staff: Operators, clock: Clock
) -> None:
    for _ in range(MAX_FAILURES - 1):
        with pytest.raises(SignInFailed):
            staff.sign_in("ada", "wrong password", None)
    staff.sign_in("ada", PASSWORD, None)
    for _ in range(MAX_FAILURES - 1):
        with pytest.raises(SignInFailed):
            staff.sign_in("ada", "wrong password", None)
    assert staff.sign_in("ada", PASSWORD, None).operator == "ada"


def test_concurrent_wrong_passwords_never_get_more_than_the_limit_of_checks(
    staff: Operators, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = ledger.operators.verify_password

    def slow(password: str, stored: str) -> bool:
        time.sleep(0.05)  # a production hash takes far longer: the window the race needs
        return real(password, stored)

    monkeypatch.setattr(ledger.operators, "verify_password", slow)

    def attempt(_: int) -> None:
        with pytest.raises(SignInFailed):
            staff.sign_in("ada", "wrong password", "10.0.0.9")

    with ThreadPoolExecutor(max_workers=20) as pool:
        list(pool.map(attempt, range(40)))
    reasons = [entry["detail"]["reason"] for entry in staff.audit(50, action="sign_in").items]
    assert reasons.count("bad_password") == MAX_FAILURES
    assert reasons.count("locked") == 40 - MAX_FAILURES


def test_a_lockout_from_one_address_leaves_the_operator_open_from_another(
    staff: Operators,
) -> None:
    for _ in range(MAX_FAILURES):
        with pytest.raises(SignInFailed):
            staff.sign_in("ada", "wrong password", "203.0.113.7")
    with pytest.raises(SignInFailed):
        staff.sign_in("ada", PASSWORD, "203.0.113.7")
    assert staff.sign_in("ada", PASSWORD, "10.0.0.9").operator == "ada"
    # and a good sign-in elsewhere does not lift the attacker's lock
    with pytest.raises(SignInFailed):
        staff.sign_in("ada", PASSWORD, "203.0.113.7")


def test_a_new_password_lifts_the_lockout_from_every_address(staff: Operators) -> None:
    for _ in range(MAX_FAILURES):
        with pytest.raises(SignInFailed):
            staff.sign_in("ada", "wrong password", "203.0.113.7")
    staff.passwd("ada", PASSWORD + "!")
    assert staff.sign_in("ada", PASSWORD + "!", "203.0.113.7").operator == "ada"


def test_a_session_idle_too_long_is_over(staff: Operators, clock: Clock) -> None:
    token = staff.sign_in("ada", PASSWORD, None).token
    clock.now += IDLE - timedelta(seconds=1)
    assert staff.session(token) is not None  # this use restarts the idle time
    clock.now += IDLE - timedelta(seconds=1)
    assert staff.session(token) is not None
    clock.now += IDLE + timedelta(seconds=1)
    assert staff.session(token) is None
    clock.now -= IDLE  # and it stays over: the session row is gone
    assert staff.session(token) is None


def test_a_sign_in_sweeps_the_sessions_abandoned_past_their_idle_time(
    staff: Operators, clock: Clock
) -> None:
    abandoned = staff.sign_in("cal", PASSWORD, None).token
    assert abandoned is not None
    clock.now += IDLE + timedelta(seconds=1)
    staff.sign_in("ada", PASSWORD, None)
    assert staff.tables.session(ledger.operators.token_hash(abandoned)) is None


def test_disabling_or_a_new_password_ends_the_operators_sessions(staff: Operators) -> None:
    ada = staff.sign_in("ada", PASSWORD, None).token
    cal = staff.sign_in("cal", PASSWORD, None).token
    staff.disable("cal")
    staff.passwd("ada", "another good password")
    assert staff.session(ada) is None
    assert staff.session(cal) is None
    with pytest.raises(SignInFailed):
        staff.sign_in("ada", PASSWORD, None)
    assert staff.sign_in("ada", "another good password", None).operator == "ada"


def test_sign_in_ends_the_session_token_the_browser_brought(staff: Operators) -> None:
    # Fixation: whatever token an attacker planted is ended, and the new session has its own.
    planted = staff.sign_in("cal", PASSWORD, None).token
    assert planted is not None
    session = staff.sign_in("ada", PASSWORD, None, planted=planted)
    assert session.token != planted
    assert staff.session(planted) is None


def test_sign_out_ends_the_session_and_is_audited(staff: Operators) -> None:
    token = staff.sign_in("ada", PASSWORD, "127.0.0.1").token
    staff.sign_out(token, "127.0.0.1")
    assert staff.session(token) is None
    assert staff.audit(1).items[0]["action"] == "sign_out"


def test_operator_names_are_unique_and_rules_refuse_bad_accounts(staff: Operators) -> None:
    with pytest.raises(OperatorExists):
        staff.add("ada", "viewer", PASSWORD)
    for name, role, password in (
        ("has space", "viewer", PASSWORD),
        ("vic", "root", PASSWORD),
        ("vic", "viewer", "short"),
    ):
        with pytest.raises(InvalidRequest):
            staff.add(name, role, password)
    assert [row.name for row in staff.every()] == ["ada", "cal"]


# --- audit log and overview ---------------------------------------------------------------------


def test_audit_log_pages_newest_first_and_exports_every_entry_as_csv(staff: Operators) -> None:
    for number in range(7):
        staff.record("cal", "127.0.0.1", "deposit", f"u{number}", amount=f"{number}.00")
    first = staff.audit(3)
    assert [entry["target"] for entry in first.items] == ["u6", "u5", "u4"]
    second = staff.audit(3, first.next)
    third = staff.audit(3, second.next)
    assert [entry["target"] for entry in second.items + third.items] == ["u3", "u2", "u1", "u0"]
    assert third.next is None
    rows = list(csv.DictReader(io.StringIO("".join(staff.audit_csv("deposit")))))
    assert [row["target"] for row in rows] == [f"u{n}" for n in range(6, -1, -1)]
    assert json.loads(rows[0]["detail"]) == {"amount": "6.00"}
    with pytest.raises(InvalidRequest):
        staff.audit(3, "not a cursor")


def test_overview_totals_are_exact_per_currency_beyond_64_bits(
    book: ledger.Ledger, staff: Operators
) -> None:
    big = "90000000000000000000.00"  # 9e21 minor units: beyond a 64-bit integer
    book.deposit("u1", "EUR", big, "r1")
    book.deposit("u2", "EUR", big, "r2")
    book.deposit("u3", "JPY", "500", "r3")
    overview = staff.overview(book.currencies.scale)
    assert overview["currencies"] == [
        {"currency": "EUR", "available": "180000000000000000000.00", "held": "0.00",
         "house": "-180000000000000000000.00"},
        {"currency": "JPY", "available": "500", "held": "0", "house": "-500"},
    ]  # fmt: skip
    assert {row["account"] for row in overview["house"]} == {"house:cash"}
    assert overview["last_check"] is None
    staff.record("ada", None, "check", outcome="ok", problems=0)
    assert staff.overview(book.currencies.scale)["last_check"]["operator"] == "ada"


# --- the commands -------------------------------------------------------------------------------


def test_operators_commands_read_passwords_from_stdin_and_are_audited(store_url: str) -> None:
    runner = CliRunner()
    db = ["--db", store_url]
    added = runner.invoke(
        main,
        ["operators", "add", "vic", "--role", "viewer", "--password-stdin", *db],
        input=PASSWORD + "\n",
    )
    assert added.exit_code == 0, added.output
    listed = runner.invoke(main, ["operators", "list", "--json", *db])
    assert json.loads(listed.output)[0] | {"created_at": None} == {
        "name": "vic",
        "role": "viewer",
        "state": "active",
        "locked_until": None,
        "created_at": None,
    }
    changed = runner.invoke(
        main, ["operators", "passwd", "vic", "--password-stdin", *db], input="new password 1\n"
    )
    assert changed.exit_code == 0, changed.output
    assert runner.invoke(main, ["operators", "disable", "vic", *db]).exit_code == 0
    missing = runner.invoke(main, ["operators", "disable", "nobody", *db])
    assert missing.exit_code == 1
    assert "operator.not_found" in missing.output
    log = json.loads(runner.invoke(main, ["audit", "--json", *db]).output)
    assert [(item["action"], item["target"]) for item in log["audit"]] == [
        ("operator_disable", "vic"),
        ("operator_passwd", "vic"),
        ("operator_add", "vic"),
    ]
    exported = runner.invoke(main, ["audit", "--csv", *db]).output
    assert exported.splitlines()[0] == "id,at,operator,ip,action,target,outcome,detail"


def test_operators_add_prompts_twice_for_a_hidden_password(store_url: str) -> None:
    runner = CliRunner()
    result = runner.invoke(
        main,
        ["operators", "add", "ada", "--role", "admin", "--db", store_url],
        input=f"{PASSWORD}\n{PASSWORD}\n",
    )
    assert result.exit_code == 0, result.output
    assert PASSWORD not in result.output
    with ledger.open_ledger(store_url) as book:
        assert Operators(book.store).sign_in("ada", PASSWORD, None).role == "admin"


def test_the_audit_log_refuses_update_and_delete_like_the_journal(
    book: ledger.Ledger, staff: Operators
) -> None:
    staff.record("ada", None, "check")
    store: Any = book.store
    for statement in ("UPDATE operator_audit SET outcome = 'x'", "DELETE FROM operator_audit"):
        connection = store.dialect.connect(write=True)
        try:
            with pytest.raises(DBAPIError, match="append-only"):
                connection.execute(text(statement))
        finally:
            connection.rollback()
            store.dialect.release(connection, committed=False)
    assert staff.audit(1).items[0]["action"] == "check"


def test_an_audit_entry_keeps_bounded_fields_whatever_it_is_given(staff: Operators) -> None:
    many = {f"field{n}": "v" * 10_000 for n in range(100)}
    staff.record("o" * 500, "i" * 500, "deposit", "t" * 10_000, outcome="x" * 500, **many)
    (entry,) = staff.audit(1).items
    assert len(entry["operator"]) == 64
    assert len(entry["ip"]) == 64
    assert len(entry["target"]) == 300
    assert len(entry["outcome"]) == 64
    assert len(entry["detail"]) == ledger.operators.AUDIT_DETAILS
    assert {len(value) for value in entry["detail"].values()} == {ledger.operators.AUDIT_TEXT}


def test_the_audit_export_reads_the_log_a_page_at_a_time_as_it_is_taken(
    staff: Operators, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(2500):
        staff.record("ada", None, "check", str(n))
    reads: list[int] = []
    real = staff.tables.audit

    def counted(limit: int, before: int | None, action: str | None = None) -> Any:
        reads.append(limit)
        return real(limit, before, action)

    monkeypatch.setattr(staff.tables, "audit", counted)
    lines = staff.audit_csv()
    assert reads == []
    first = next(lines)
    assert first.startswith("id,at,operator")
    assert len(reads) == 2  # two pages of 1000 for the first 64 KB, not the whole log
    assert sum(chunk.count("\n") for chunk in [first, *lines]) == 2501
    with pytest.raises(InvalidRequest):
        staff.audit_csv("nonsense")


@pytest.mark.parametrize(
    "password", [" " * 12, "\t\n" * 6, "aaaaaaaaaaaa", "Password123", "QWERTYUIOP", "1234567890"]
)
def test_whitespace_repeated_and_common_passwords_are_refused(
    staff: Operators, password: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        staff.add("eve", "viewer", password)
    assert caught.value.key == "operator.weak_password"
    with pytest.raises(InvalidRequest):
        staff.passwd("ada", password)


def test_the_last_enabled_admin_cannot_be_disabled(staff: Operators) -> None:
    with pytest.raises(ledger.operators.LastAdmin):
        staff.disable("ada")
    staff.add("bob", "admin", PASSWORD)
    staff.disable("ada")
    with pytest.raises(ledger.operators.LastAdmin) as caught:
        staff.disable("bob")
    assert (caught.value.key, caught.value.status) == ("operator.last_admin", 409)
    assert [row.name for row in staff.every() if row.disabled_at is None] == ["bob", "cal"]


@pytest.mark.parametrize("key", [2**64, -(2**70), int("9" * 1000)])
def test_a_cursor_beyond_64_bits_is_a_400_not_a_database_error(staff: Operators, key: int) -> None:
    with pytest.raises(InvalidRequest) as caught:
        staff.audit(10, cursor(key))
    assert caught.value.key == "request.invalid_cursor"


@pytest.mark.parametrize("name", ["ada\x00", "\x00", "x\ud800y"])
def test_a_sign_in_name_a_store_cannot_hold_is_refused_and_audited_on_every_store(
    staff: Operators, name: str
) -> None:
    with pytest.raises(SignInFailed):
        staff.sign_in(name, PASSWORD, "10.0.0.9")
    entry = staff.audit(1).items[0]
    assert (entry["action"], entry["outcome"]) == ("sign_in", "auth.sign_in_failed")
    assert "\x00" not in entry["operator"]
    assert "\ufffd" in entry["operator"]
