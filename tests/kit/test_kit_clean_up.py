"""The kit takes out what it writes: after ``ledger validate`` or ``ledger simulate`` (finished,
or killed halfway and then cleaned up), the wallet's users hold what they held before, no hold of
the kit is open, the journal check is clean, and the operator's own users are untouched. It
refuses a server that says it is production unless allowed."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.kit import payloads
from ledger.kit.admin_client import Books, Operator
from ledger.kit.platform import CallbackEvent, Platform
from ledger.testdata import KIT_PREFIX, is_kit_data
from support.httpkit import CLIENT, OPERATOR, SECRET, Server, ledger_command, run_server, server_env

OWN_USER = "olga"
OPERATOR_ARGS = ("--operator-token", OPERATOR)


def kit(command: str, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ledger_command(), command, url, "--client", CLIENT, "--secret", SECRET, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.fixture(params=["sqlite", "postgres"])
def wallet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Server, str]]:
    if request.param == "sqlite":
        database = f"sqlite:///{tmp_path}/wallet.db"
    else:
        database = request.getfixturevalue("postgres_url")
        upgrade = subprocess.run(
            [*ledger_command(), "db", "upgrade", "--db", database],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    with run_server(tmp_path, server_env(database)) as server:
        yield server, database


@pytest.fixture
def sqlite_wallet(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    database = f"sqlite:///{tmp_path}/wallet.db"
    with run_server(tmp_path, server_env(database)) as server:
        yield server, database


def operators_own_user(url: str) -> dict[str, Books]:
    """The operator's own user, with a balance and an open bet in a tournament of its own."""
    with Operator(url, OPERATOR) as operator, Platform(url, client_name=CLIENT, secret=SECRET) as p:
        operator.deposit(OWN_USER, "EUR", Decimal("100.00"), "olga-1")
        tournament = payloads.Tournament(4242, "Sunday Million", "EUR", Decimal("5"), Decimal("1"))
        entry = payloads.Entry(
            bet_uid=77_001,
            player=payloads.Player(OWN_USER, "Olga", "EUR"),
            tournament=tournament,
            amount=Decimal("5.00"),
            rake=Decimal("1.00"),
            base_amount=Decimal("5.00"),
            base_rake=Decimal("1.00"),
            uuid="4242|7e57d0c5-0000-4000-8000-000000000001",
        )
        placed = p.deliver(CallbackEvent.PLACE_BET, payloads.place_bet(CLIENT, [entry]))
        assert placed.passed, placed.describe()
        return operator.balances(OWN_USER)


def kit_leftovers(url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every kit user's non-zero balances, and every open hold that is not the operator's."""
    zero = Books(Decimal(0), Decimal(0))
    with Operator(url, OPERATOR) as operator:
        balances = {
            uid: left
            for uid in operator.users(KIT_PREFIX)
            if (left := {c: b for c, b in operator.balances(uid).items() if b != zero})
        }
        holds = [hold for hold in operator.holds() if hold["user"] != OWN_USER]
    return balances, holds


def assert_as_found(server: Server, database: str, own: dict[str, Books]) -> None:
    balances, holds = kit_leftovers(server.url)
    assert balances == {}
    assert holds == []
    with Operator(server.url, OPERATOR) as operator:
        assert operator.balances(OWN_USER) == own
        [hold] = operator.holds(user=OWN_USER)
        assert hold["uid"] == 77_001
    check = subprocess.run(
        [*ledger_command(), "check", "--db", database], capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout + check.stderr


def kill_midway(url: str, after: str) -> None:
    """Start ``ledger validate`` and SIGKILL it once it printed a line starting with ``after``."""
    process = subprocess.Popen(
        [
            *ledger_command(),
            "validate",
            url,
            "--client",
            CLIENT,
            "--secret",
            SECRET,
            *OPERATOR_ARGS,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if line.startswith(after):
            os.kill(process.pid, signal.SIGKILL)
            break
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "".join(seen)


def test_kit_data_is_marked_by_the_kit_prefix() -> None:
    assert is_kit_data("kit-validate-1a2b3c4d")
    assert is_kit_data("kit-validator Cup 1a2b3c4d")
    assert not is_kit_data("alice")
    assert not is_kit_data("skit-1")
    assert not is_kit_data(None)


def test_a_validate_run_leaves_the_wallet_as_it_found_it(wallet: tuple[Server, str]) -> None:
    server, database = wallet
    own = operators_own_user(server.url)

    result = kit("validate", server.url, "--operator-token", OPERATOR)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  clean_up:" in result.stdout
    assert_as_found(server, database, own)


def test_a_validate_run_with_the_operators_user_restores_its_balance(
    sqlite_wallet: tuple[Server, str],
) -> None:
    server, database = sqlite_wallet
    own = operators_own_user(server.url)

    result = kit("validate", server.url, "--user", OWN_USER, "--operator-token", OPERATOR)

    assert result.returncode == 0, result.stdout + result.stderr
    assert_as_found(server, database, own)


def test_a_killed_validate_run_is_taken_out_by_clean_up(wallet: tuple[Server, str]) -> None:
    server, database = wallet
    own = operators_own_user(server.url)
    kill_midway(server.url, "PASS  place_bet.free_to_play")
    balances, holds = kit_leftovers(server.url)
    # The killed run left money and a free entry's hold.
    assert balances
    assert holds

    result = kit("validate", server.url, "--operator-token", OPERATOR, "--clean-up")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "open hold(s) refunded" in result.stdout
    assert_as_found(server, database, own)


def test_a_killed_validate_run_is_taken_out_by_the_next_run(
    sqlite_wallet: tuple[Server, str],
) -> None:
    server, database = sqlite_wallet
    own = operators_own_user(server.url)
    kill_midway(server.url, "PASS  settle_bet")

    result = kit("validate", server.url, "--operator-token", OPERATOR)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  setup.clean_up:" in result.stdout
    assert_as_found(server, database, own)


def test_keep_leaves_the_runs_data_until_clean_up(sqlite_wallet: tuple[Server, str]) -> None:
    server, database = sqlite_wallet
    own = operators_own_user(server.url)

    kept = kit("validate", server.url, "--operator-token", OPERATOR, "--keep")

    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "note: --keep" in kept.stdout
    balances, holds = kit_leftovers(server.url)
    assert balances
    assert holds
    assert all(is_kit_data(uid) for uid in balances)
    cleaned = kit("validate", server.url, "--operator-token", OPERATOR, "--clean-up")
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert_as_found(server, database, own)


def test_a_simulate_run_leaves_the_wallet_as_it_found_it(wallet: tuple[Server, str]) -> None:
    server, database = wallet
    own = operators_own_user(server.url)

    result = kit(
        "simulate",
        server.url,
        *("--operator-token", OPERATOR, "--users", "6", "--tournaments", "4", "--seed", "5"),
        *("--faults", "--no-progress"),
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "after: clean-up:" in result.stdout
    assert_as_found(server, database, own)


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_kit_refuses_a_production_server_unless_allowed(tmp_path: Path) -> None:
    env = server_env(f"sqlite:///{tmp_path}/wallet.db", LEDGER_ENVIRONMENT="production")
    with run_server(tmp_path, env) as server:
        assert httpx.get(f"{server.url}/health").json() == {
            "status": "ok",
            "environment": "production",
        }
        refused = [
            kit("validate", server.url, "--operator-token", OPERATOR),
            kit("simulate", server.url, "--operator-token", OPERATOR, "--no-progress"),
        ]
        allowed = kit("validate", server.url, "--operator-token", OPERATOR, "--allow-production")
        balances, holds = kit_leftovers(server.url)

    for result in refused:
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.startswith("error: kit.production_refused: "), result.stderr
        assert "--allow-production" in result.stderr
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert balances == {}
    assert holds == []


def test_without_the_operator_token_validate_still_closes_every_hold_it_opened(
    sqlite_wallet: tuple[Server, str],
) -> None:
    server, _ = sqlite_wallet
    with Operator(server.url, OPERATOR) as operator:
        operator.deposit("carol", "EUR", Decimal("300.00"), "carol-1")

    result = kit("validate", server.url, "--user", "carol")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS  clean_up:" in result.stdout
    with Operator(server.url, OPERATOR) as operator:
        assert operator.holds() == []
        assert operator.balance("carol", "EUR").held == 0
