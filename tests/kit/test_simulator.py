"""``ledger simulate``: a seeded platform day against a wallet, reconciled against its books."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.kit.admin_client import Operator
from ledger.kit.platform import Platform
from ledger.kit.simulator import SimulationConfig, SimulationReport, Simulator
from ledger.kit.ticket_api import ServerThread, TicketStore, create_ticket_app
from ledger.kit.tickets import TicketClient
from support.httpkit import CLIENT, OPERATOR, SECRET, ledger_command, run_server
from support.validator_wallets import OPERATOR_TOKEN, Bugs, Wallet, create_wallet_app


def simulate_in_process(
    config: SimulationConfig, bugs: Bugs | None = None
) -> tuple[SimulationReport, TicketStore, Wallet]:
    wallet = Wallet(SECRET, CLIENT, bugs or Bugs())
    store = TicketStore(secret=SECRET)
    with (
        ServerThread(create_wallet_app(wallet)) as wallet_server,
        ServerThread(create_ticket_app(store, client_name=CLIENT)) as ticket_server,
        Platform(wallet_server.url, client_name=CLIENT, secret=SECRET) as platform,
        Operator(wallet_server.url, OPERATOR_TOKEN) as operator,
        TicketClient(ticket_server.url, client_name=CLIENT, secret=SECRET) as tickets,
    ):
        report = Simulator(platform, operator, config, tickets=tickets, ticket_store=store).run()
    return report, store, wallet


def comparable(report: SimulationReport) -> dict[str, Any]:
    data = report.to_dict()
    del data["elapsed_s"]
    return data


def test_a_seed_replays_the_same_platform_day() -> None:
    config = SimulationConfig(users=8, tournaments=5, seed=42, progress=False)

    first, _, first_wallet = simulate_in_process(config)
    second, _, second_wallet = simulate_in_process(config)

    assert first.ok, first.render()
    assert comparable(first) == comparable(second)
    assert sorted(first_wallet.bets) == sorted(second_wallet.bets)


def test_another_seed_gives_other_ids_and_another_day() -> None:
    _, _, one = simulate_in_process(
        SimulationConfig(users=5, tournaments=3, seed=1, progress=False)
    )
    _, _, two = simulate_in_process(
        SimulationConfig(users=5, tournaments=3, seed=2, progress=False)
    )

    assert not set(one.bets) & set(two.bets)


def test_the_day_has_paid_ticket_and_free_entries_refunds_cancels_and_both_payout_tables() -> None:
    report, store, _ = simulate_in_process(
        SimulationConfig(users=20, tournaments=12, seed=5, progress=False)
    )

    assert report.ok, report.render()
    for kind in ("placed cash", "placed ticket", "placed free", "refused", "settled"):
        assert report.entries[kind] > 0, kind
    assert report.entries["cancelled tournaments"] > 0
    assert report.deliveries["refund_bet"] > 0
    assert report.deliveries["refund_tournament"] > 0
    assert set(report.money) == {"EUR", "USD"}
    assert report.tickets["used"] > 0
    assert report.tickets["used ticket delete refused"] == 1
    used = [store.get(i) for i in range(1, 200)]
    assert any(ticket is not None and ticket.fantasy_team_id for ticket in used)


def test_faults_resend_duplicate_and_retry_without_mismatches_on_a_correct_wallet() -> None:
    report, _, _ = simulate_in_process(
        SimulationConfig(users=10, tournaments=6, seed=9, faults=True, progress=False)
    )

    assert report.ok, report.render()
    for fault in ("resend", "concurrent", "lost", "retries"):
        assert report.faults[fault] > 0, fault


def test_a_wallet_that_debits_again_on_a_resend_is_reported_as_mismatches() -> None:
    report, _, _ = simulate_in_process(
        SimulationConfig(users=10, tournaments=6, seed=9, faults=True, progress=False),
        Bugs(debit_again_on_resend=True),
    )

    assert not report.ok
    assert any("expected available" in mismatch for mismatch in report.mismatches)


def test_simulate_command_exits_1_on_mismatches() -> None:
    wallet = Wallet(SECRET, CLIENT, Bugs(accept_unfunded=True))
    with ServerThread(create_wallet_app(wallet)) as server:
        result = subprocess.run(
            [
                *ledger_command(),
                "simulate",
                server.url,
                "--client",
                CLIENT,
                "--secret",
                SECRET,
                "--operator-token",
                OPERATOR_TOKEN,
                "--seed",
                "3",
                "--no-progress",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={"PATH": "/usr/bin:/bin"},
        )

    assert result.returncode == 1, result.stdout + result.stderr
    assert "expected 402, got 200" in result.stdout


@pytest.fixture
def sqlite_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    database = f"sqlite:///{tmp_path}/wallet.db"
    env = {
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_CLIENT_NAME": CLIENT,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
        "LEDGER_DATABASE_URL": database,
    }
    with run_server(tmp_path, env) as server:
        yield server.url, database


def run_simulate(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [*ledger_command(), "simulate", url, "--client", CLIENT, "--secret", SECRET]
    return subprocess.run(
        [*command, "--operator-token", OPERATOR, "--no-progress", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": "/usr/bin:/bin"},
    )


def test_simulate_with_faults_against_our_server_has_no_mismatches_and_a_clean_check(
    sqlite_server: tuple[str, str],
) -> None:
    url, database = sqlite_server

    result = run_simulate(url, "--faults", "--seed", "2024", "--users", "15", "--tournaments", "8")
    check = subprocess.run(
        [*ledger_command(), "check", "--db", database],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "mismatches: 0" in result.stdout
    assert "journal check: ok" in result.stdout
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith("ok")


@pytest.mark.slow
def test_a_bigger_faulty_day_against_our_server_on_postgres(
    tmp_path: Path, postgres_url: str
) -> None:
    upgrade = subprocess.run(
        [*ledger_command(), "db", "upgrade", "--db", postgres_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert upgrade.returncode == 0, upgrade.stderr
    env = {
        "LEDGER_JWT_SECRET": SECRET,
        "LEDGER_CLIENT_NAME": CLIENT,
        "LEDGER_OPERATOR_TOKEN": OPERATOR,
        "LEDGER_DATABASE_URL": postgres_url,
    }
    with run_server(tmp_path, env) as server:
        result = run_simulate(
            server.url, "--faults", "--seed", "77", "--users", "40", "--tournaments", "25"
        )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "mismatches: 0" in result.stdout
