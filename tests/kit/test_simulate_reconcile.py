"""``ledger simulate --platform-record`` against our wallet, reconciled with ``ledger reconcile``:
clean after a clean day, exactly the injected differences after deliveries were lost."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ledger
from ledger.http.app import create_app
from ledger.kit.admin_client import Operator
from ledger.kit.platform import CallbackEvent, Delivery, Platform
from ledger.kit.simulator import SimulationConfig, Simulator, write_platform_record
from ledger.kit.ticket_api import ServerThread, TicketStore, create_ticket_app
from ledger.kit.tickets import TicketClient
from support.httpkit import CLIENT, OPERATOR, SECRET, settings_for

# keep: the lost deliveries leave bets open in the wallet, which is what reconcile must find.
CONFIG = SimulationConfig(users=8, tournaments=5, seed=11, progress=False, keep=True)


class LossyPlatform(Platform):
    """A platform whose first Settle and first Refund Bet never reach the wallet, though the
    platform believes them delivered (a proxy answered 200): the bets they close stay open in
    the wallet and closed in the platform's record."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lost: dict[int, str] = {}  # bet uid -> the state the platform believes

    def deliver(self, event: CallbackEvent, payload: Any, **options: Any) -> Delivery:
        lose = {CallbackEvent.SETTLE_BET: "settled", CallbackEvent.REFUND_BET: "refunded"}
        state = lose.get(event)
        if state is None or state in self.lost.values():
            return super().deliver(event, payload, **options)
        for pool in payload["pools"]:
            for item in pool["bets"]:
                self.lost[int(item["bet"]["uid"])] = state
        return Delivery(event, "lost", 200, "{}", 0.0, None, data={})


def simulate(tmp_path: Path, platform_class: type[Platform] = Platform) -> tuple[Any, str]:
    """Run the day against our server over SQLite; the platform's record rows, and the URL."""
    settings = settings_for(tmp_path)
    store = TicketStore(secret=SECRET)
    with (
        ServerThread(create_app(settings)) as wallet_server,
        ServerThread(create_ticket_app(store, client_name=CLIENT)) as ticket_server,
        platform_class(wallet_server.url, client_name=CLIENT, secret=SECRET) as platform,
        Operator(wallet_server.url, OPERATOR) as operator,
        TicketClient(ticket_server.url, client_name=CLIENT, secret=SECRET) as tickets,
    ):
        simulator = Simulator(platform, operator, CONFIG, tickets=tickets, ticket_store=store)
        simulator.run()
    return (simulator, platform), settings.database_url


def differences(url: str, record: Path) -> Iterator[tuple[int, tuple[str, ...]]]:
    with ledger.open_ledger(url) as book, book.reconcile(record) as report:
        for row in report.differences():
            yield row["uid"], tuple(row["differences"])


def test_a_clean_day_reconciles_clean_and_removed_rows_are_missing_on_the_platform(
    tmp_path: Path,
) -> None:
    (simulator, _), url = simulate(tmp_path)
    rows = simulator.platform_record()
    record, trimmed = tmp_path / "platform.csv", tmp_path / "trimmed.jsonl"
    write_platform_record(rows, record)
    write_platform_record(rows[2:], trimmed)

    with ledger.open_ledger(url) as book, book.reconcile(record) as report:
        assert report.ok, list(report.differences())
        assert report.counts["matched"] == len(rows) == report.wallet_bets
        assert report.format == "csv"
    # The day closes every bet: cash, ticket and free entries, refunded and settled.
    written = list(csv.DictReader(record.open()))
    assert {row["status"] for row in written} == {"refunded", "settled"}
    assert {row["funding"] for row in written} == {"cash", "ticket", "free"}
    assert list(differences(url, trimmed)) == [
        (rows[0]["uid"], ("missing_on_platform",)),
        (rows[1]["uid"], ("missing_on_platform",)),
    ]


def test_lost_deliveries_are_exactly_the_state_mismatches(tmp_path: Path) -> None:
    (simulator, platform), url = simulate(tmp_path, LossyPlatform)
    record = tmp_path / "platform.json"
    write_platform_record(simulator.platform_record(), record)

    found = dict(differences(url, record))

    assert set(platform.lost.values()) == {"settled", "refunded"}
    assert found == {uid: ("state_mismatch",) for uid in platform.lost}
    with ledger.open_ledger(url) as book:
        assert all(
            (view := book.bet(uid)) is not None and view.state == "placed" for uid in platform.lost
        )
