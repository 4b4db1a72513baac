"""``ledger reconcile FILE``: exit 0 when clean, 1 on any difference, 2 for an unreadable file."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import ledger
from ledger.cli import main
from support.payloads import entry, place, settle

CLEAN = (
    "uid,user,pool,amount,rake,currency,status,payout\n"
    "1,u1,7,10.00,1.00,EUR,placed,\n"
    "2,u1,7,10.00,1.00,EUR,settled,12.50\n"
)


def run(*args: str, stdin: bytes | None = None, env: Mapping[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=stdin, env=env)


def make_books(url: str) -> None:
    with ledger.open_ledger(url) as book:
        book.deposit("u1", "EUR", "100", "dep-1")
        book.place_bets(place(entry(1), entry(2)))
        book.settle(settle(7, (2, "12.50")))


def test_reconcile_exits_0_when_clean_and_1_with_the_differences_on_every_store(
    store_url: str, tmp_path: Path
) -> None:
    make_books(store_url)
    clean = tmp_path / "clean.csv"
    clean.write_text(CLEAN)
    differing = tmp_path / "differing.csv"
    differing.write_text(CLEAN.replace("12.50", "12.00") + "3,u1,7,10.00,1.00,EUR,placed,\n")

    agreed = run("reconcile", str(clean), "--db", store_url)
    found = run("reconcile", str(differing), "--db", store_url)

    assert agreed.exit_code == 0, agreed.output
    assert agreed.stdout.splitlines()[:2] == [
        "clean: 2 platform bets (csv) against 2 wallet bets",
        "  matched:                  2",
    ]
    assert found.exit_code == 1, found.output
    assert "  missing in the wallet:    1" in found.stdout
    assert "  payout mismatch:          1" in found.stdout
    assert "  bet 2: payout_mismatch: payout 12.00 vs 12.50" in found.stdout


def test_reconcile_json_and_csv_print_every_differing_bet(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/ledger.db"
    make_books(url)
    differing = CLEAN.replace("placed", "refunded").encode()

    as_json = run("reconcile", "-", "--json", "--db", url, stdin=differing)
    as_csv = run("reconcile", "-", "--csv", "--db", url, stdin=differing)

    assert as_json.exit_code == as_csv.exit_code == 1
    report = json.loads(as_json.stdout)
    assert report["counts"]["state_mismatch"] == 1
    assert report["differences"] == [
        {
            "uid": 1,
            "differences": ["state_mismatch"],
            "platform": {
                "user": "u1",
                "pool": 7,
                "status": "refunded",
                "amount": "10.00",
                "rake": "1.00",
                "currency": "EUR",
                "payout": None,
                "payout_currency": None,
            },
            "wallet": {
                "user": "u1",
                "pool": 7,
                "status": "placed",
                "amount": "10.00",
                "rake": "1.00",
                "currency": "EUR",
                "payout": None,
                "payout_currency": None,
            },
        }
    ]
    table = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [(row["uid"], row["platform_status"], row["wallet_status"]) for row in table] == [
        ("1", "refunded", "placed")
    ]


def test_reconcile_exits_2_for_a_file_it_cannot_read(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/ledger.db"
    make_books(url)
    bad = tmp_path / "bad.csv"
    bad.write_text("uid,status\n1,won\n")

    unreadable = run("reconcile", str(bad), "--db", url)
    absent = run("reconcile", str(tmp_path / "absent.csv"), "--db", url)
    no_books = run("reconcile", str(bad), "--db", f"sqlite:///{tmp_path}/typo.db")

    assert unreadable.exit_code == 2
    assert unreadable.stderr.startswith("error: reconcile.unreadable_file: row 1: status 'won'")
    assert absent.exit_code == 2
    assert absent.stderr.startswith("error: reconcile.unreadable_file: cannot read ")
    assert no_books.exit_code == 2
    assert no_books.stderr.startswith("error: store.not_found: ")
    assert not (tmp_path / "typo.db").exists()


@pytest.mark.slow
def test_the_benchmark_finds_exactly_the_differences_it_injects(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "reconcile.py"
    out = tmp_path / "reconcile.json"

    done = subprocess.run(
        [sys.executable, str(script), "--bets", "5000", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )

    assert done.returncode == 0, done.stderr
    counts = json.loads(out.read_text())["counts"]
    assert {name: count for name, count in counts.items() if count} == {
        "matched": 4970,
        "missing_in_wallet": 10,
        "missing_on_platform": 10,
        "state_mismatch": 10,
        "amount_mismatch": 10,
    }


def test_importing_ledger_does_not_import_sqlite_utils_until_a_reconciliation() -> None:
    code = (
        "import sys, ledger\n"
        "print('sqlite_utils' in sys.modules)\n"
        "ledger.Ledger.reconcile  # the method exists without the import\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("deep.json", b"[" * 100_000 + b"]" * 100_000),
        ("deep.jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n"),
        ("huge.jsonl", b'{"uid": "' + b"9" * 5000 + b'", "user": "u1", "amount": "1"}\n'),
    ],
)
def test_reconcile_exits_2_for_a_deeply_nested_file_or_a_uid_of_thousands_of_digits(
    tmp_path: Path, name: str, content: bytes
) -> None:
    url = f"sqlite:///{tmp_path}/ledger.db"
    make_books(url)
    bad = tmp_path / name
    bad.write_bytes(content)
    found = run("reconcile", str(bad), "--db", url)
    assert found.exit_code == 2
    assert found.stderr.startswith("error: reconcile.unreadable_file: ")
