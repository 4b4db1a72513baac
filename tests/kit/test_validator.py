"""``ledger validate`` and ``ledger validate-token``: the platform's wire format, the token checks,
the full run passing against our server (SQLite and Postgres), and failing, naming the check,
against deliberately broken wallets."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

import ledger
from ledger.kit.admin_client import Operator
from ledger.kit.platform import CallbackEvent, Delivery, Platform, dumps
from ledger.kit.scenarios import Report, Validator, is_error_key
from ledger.kit.ticket_api import ServerThread
from ledger.kit.token import check_token
from ledger.tokens import sign_token
from support.httpkit import CLIENT, OPERATOR, SECRET, ledger_command, run_server, server_env
from support.validator_wallets import OPERATOR_TOKEN, Bugs, Wallet, create_wallet_app

# --- the platform's wire format -------------------------------------------------------------------


def test_every_callback_carries_the_contract_headers_and_event() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    with Platform(
        "https://wallet.test/base",
        client_name=CLIENT,
        secret=SECRET,
        transport=httpx.MockTransport(answer),
    ) as platform:
        for event in CallbackEvent:
            platform.deliver(event, {"pools": []})

    paths = [request.url.path for request in seen]
    assert paths == ["/base/bets", "/base/bets/cancel", "/base/bets/cancel", "/base/winners"]
    for event, request in zip(CallbackEvent, seen, strict=True):
        assert request.headers["content-type"] == "application/json"
        assert request.headers["accept"] == "application/json"
        assert request.headers["x-callback-event"] == event.value
        assert uuid.UUID(request.headers["x-request-id"]).version == 4
        scheme, client, token = request.headers["authorization"].split(" ")
        assert (scheme, client) == ("Bearer", CLIENT)
        assert jwt.get_unverified_header(token)["alg"] == "HS256"
        claims = jwt.decode(token, SECRET, algorithms=["HS256"])
        assert claims["exp"] > claims["iat"]
        assert claims["role"] == ("user" if event is CallbackEvent.PLACE_BET else "admin")
        assert claims["sub"]


def test_decimals_are_written_as_exact_json_numbers() -> None:
    text = dumps({"amount": Decimal("10.10"), "big": Decimal("1E+2"), "payout": "0.00", "n": 3})

    assert text == '{"amount":10.10,"big":100,"payout":"0.00","n":3}'
    with pytest.raises(TypeError):
        dumps({"amount": 1.5})


@pytest.mark.parametrize(
    ("status", "body", "passed"),
    [
        (200, "", True),
        (200, "ok", True),  # a non-JSON body is ignored
        (200, '{"secrets": {}}', True),
        (204, "", True),
        (200, '{"error": "x"}', False),  # 2xx with an error key fails
        (402, '{"error": "user.insufficient_funds"}', False),
        (503, "", False),
        (None, "", False),  # timeout or refused
    ],
)
def test_a_delivery_passes_by_the_rules_of_contract_7_1(
    status: int | None, body: str, passed: bool
) -> None:
    try:
        data = json.loads(body) if body else None
    except ValueError:
        data = None
    delivery = Delivery(CallbackEvent.SETTLE_BET, "id", status, body, 0.0, None, data)

    assert delivery.passed is passed
    assert delivery.outcome_unknown is (status is None or status >= 500)


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("user.insufficient_funds", True),
        ("insufficient_funds", True),
        ("Insufficient funds", False),
        ("user..funds", False),
        ("", False),
        (None, False),
    ],
)
def test_an_error_key_is_snake_cased_or_dotted(key: object, valid: bool) -> None:
    assert is_error_key(key) is valid


def test_verification_payloads_use_the_tournament_id_pipe_uuid_as_bet_uuid() -> None:
    with Platform("http://127.0.0.1:9", client_name=CLIENT, secret=SECRET) as platform:
        validator = Validator(platform, user="u1")
        tournament = validator._tournament("Cup")
        entry = validator._entry(tournament)

    prefix, _, rest = entry.uuid.partition("|")
    assert prefix == str(tournament.uid)
    assert uuid.UUID(rest).version == 4


# --- validate-token -------------------------------------------------------------------------------


def failed(token: str, **options: Any) -> set[str]:
    return {check.name for check in check_token(token, [SECRET], **options) if not check.passed}


def test_a_valid_admin_or_user_token_passes_every_check() -> None:
    assert failed(sign_token(SECRET, role="admin", subject="42")) == set()
    assert failed(sign_token(SECRET, role="user", subject=None)) == set()
    assert failed(f"Bearer {CLIENT} {sign_token(SECRET)}", client_name=CLIENT) == set()


def test_token_check_refuses_the_none_algorithm() -> None:
    assert "algorithm" in failed(sign_token(SECRET, algorithm="none"))


def test_token_check_refuses_an_unlisted_algorithm() -> None:
    token = sign_token(SECRET, algorithm="HS512")

    assert "algorithm" in failed(token)
    assert failed(token, algorithms=["HS256", "HS512"]) == set()


def test_token_check_refuses_another_secret() -> None:
    assert "signature" in failed(sign_token("another-" + SECRET))


def test_token_check_refuses_an_expired_token_or_one_without_exp() -> None:
    no_exp = jwt.encode({"role": "admin", "sub": "1"}, SECRET, algorithm="HS256")

    assert failed(sign_token(SECRET, ttl=-60)) == {"expiry"}
    assert failed(no_exp) == {"expiry"}


def test_token_check_requires_a_role_and_an_admin_subject() -> None:
    assert failed(sign_token(SECRET, role=None)) == {"claims"}
    assert failed(sign_token(SECRET, role="admin", subject=None)) == {"claims"}
    assert failed(sign_token(SECRET, role="admin", subject=None, claims={"id": 7})) == set()
    assert failed(sign_token(SECRET, role="admin", subject=None, claims={"uid": "op-1"})) == set()


def test_token_check_refuses_garbage_and_a_wrong_client_name() -> None:
    assert failed("not-a-jwt") >= {"format", "signature"}
    assert "client" in failed(f"Bearer other {sign_token(SECRET)}", client_name=CLIENT)


def test_validate_token_command_exits_0_only_for_a_valid_token() -> None:
    good = subprocess.run(
        [*ledger_command(), "validate-token", sign_token(SECRET, subject="7"), "--secret", SECRET],
        capture_output=True,
        text=True,
        timeout=60,
    )
    bad = subprocess.run(
        [*ledger_command(), "validate-token", sign_token(SECRET, ttl=-5), "--secret", SECRET],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert good.returncode == 0, good.stdout + good.stderr
    assert "token is valid" in good.stdout
    assert bad.returncode == 1
    assert "FAIL  expiry" in bad.stdout


# --- against our server ---------------------------------------------------------------------------


def run_validate(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_command(), "validate", url, "--client", CLIENT, "--secret", SECRET, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin"},
    )


def assert_all_passed(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
    assert re.search(r"(\d+)/\1 checks passed", result.stdout), result.stdout


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[str]:
    with run_server(tmp_path, server_env(f"sqlite:///{tmp_path}/wallet.db")) as server:
        yield server.url


def test_validate_passes_against_our_server_on_sqlite_with_balances(sqlite_server: str) -> None:
    result = run_validate(sqlite_server, "--user", "alice", "--operator-token", OPERATOR)

    assert_all_passed(result)
    for name in (
        "settle_bet.mixed",
        "concurrent.place_bet",
        "auth.none_algorithm",
        "resend.settle_bet",
    ):
        assert f"PASS  {name}:" in result.stdout
    assert "books: available" in result.stdout


def test_validate_can_be_rerun_against_the_same_wallet_and_reports_json(sqlite_server: str) -> None:
    first = run_validate(sqlite_server, "--user", "bob", "--operator-token", OPERATOR, "--json")
    second = run_validate(sqlite_server, "--user", "bob", "--operator-token", OPERATOR, "--json")

    for result in (first, second):
        assert result.returncode == 0, result.stdout + result.stderr
        report = json.loads(result.stdout)
        assert report["passed"] is True
        assert report["failed"] == []
        assert all(check["deliveries"] or check["notes"] for check in report["checks"])


def test_validate_without_operator_token_says_it_cannot_see_balances(sqlite_server: str) -> None:
    deposit = httpx.post(
        f"{sqlite_server}/admin/deposits",
        json={"user": "carol", "currency": "EUR", "amount": "300.00", "reference": "carol-1"},
        headers={"Authorization": f"Bearer {OPERATOR}"},
    )
    assert deposit.status_code == 200

    result = run_validate(sqlite_server, "--user", "carol")

    assert_all_passed(result)
    assert "cannot see the wallet's books" in result.stdout
    assert "books: available" not in result.stdout


def test_validate_fails_with_one_check_when_the_wallet_is_unreachable() -> None:
    with ServerThread(create_wallet_app(Wallet(SECRET, CLIENT))) as gone:
        url = gone.url

    result = run_validate(url, "--user", "alice")

    assert result.returncode == 1
    assert "FAIL  connection" in result.stdout
    assert "0/1 checks passed" in result.stdout


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_validate_passes_against_our_server_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    upgrade = subprocess.run(
        [*ledger_command(), "db", "upgrade", "--db", postgres_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    with run_server(tmp_path, server_env(postgres_url)) as server:
        result = run_validate(server.url, "--user", "dave", "--operator-token", OPERATOR)

    assert_all_passed(result)
    book = ledger.open_ledger(postgres_url)
    try:
        assert book.check().ok
    finally:
        book.close()


# --- against broken wallets -----------------------------------------------------------------------


def validate_wallet(bugs: Bugs) -> Report:
    wallet = Wallet(SECRET, CLIENT, bugs)
    with (
        ServerThread(create_wallet_app(wallet)) as server,
        Platform(server.url, client_name=CLIENT, secret=SECRET) as platform,
        Operator(server.url, OPERATOR_TOKEN) as operator,
    ):
        return Validator(platform, user="alice", operator=operator).run()


def test_the_correct_mini_wallet_passes_every_check() -> None:
    report = validate_wallet(Bugs())

    assert report.passed, "\n".join(check.render() for check in report.checks if not check.passed)


def test_validate_names_the_resend_checks_when_a_resend_debits_twice() -> None:
    report = validate_wallet(Bugs(debit_again_on_resend=True))

    assert not report.passed
    assert "resend.place_bet" in report.failed
    assert "concurrent.place_bet" in report.failed
    assert set(report.failed) <= {"resend.place_bet", "concurrent.place_bet"}
    [check] = [c for c in report.checks if c.name == "resend.place_bet"]
    assert any("books:" in problem for problem in check.problems)


def test_validate_names_the_unfunded_user_check_when_the_wallet_answers_200() -> None:
    report = validate_wallet(Bugs(accept_unfunded=True))

    assert "unfunded_user" in report.failed
    assert "all_or_nothing.place_bet" in report.failed
    assert set(report.failed) <= {"unfunded_user", "all_or_nothing.place_bet"}
    [check] = [c for c in report.checks if c.name == "unfunded_user"]
    assert "expected 402, got 200" in check.render()


def test_validate_names_the_all_or_nothing_refund_check_when_half_a_refund_is_applied() -> None:
    report = validate_wallet(Bugs(half_refund=True))

    assert report.failed == ["all_or_nothing.refund_bet"]
    [check] = [c for c in report.checks if c.name == "all_or_nothing.refund_bet"]
    rendered = check.render()
    assert "FAIL  all_or_nothing.refund_bet" in rendered
    assert "404" in rendered  # the endpoint's actual answer is shown


def test_the_half_refund_is_caught_without_the_operator_api_too() -> None:
    wallet = Wallet(SECRET, CLIENT, Bugs(half_refund=True))
    with (
        ServerThread(create_wallet_app(wallet)) as server,
        Platform(server.url, client_name=CLIENT, secret=SECRET) as platform,
    ):
        wallet.move(("alice", "EUR"), Decimal("500.00"), Decimal(0))
        report = Validator(platform, user="alice").run()

    assert report.failed == ["all_or_nothing.refund_bet"]
    [check] = [c for c in report.checks if c.name == "all_or_nothing.refund_bet"]
    assert any("no longer open" in problem for problem in check.problems)
