"""Extras, seen from a fresh interpreter: the library works without the packages of ``[server]``
and ``[kit]``, and a command whose extra is missing says which one to install.

A package is made missing by ``sys.modules[name] = None`` before anything imports it: every
``import name`` then raises ``ModuleNotFoundError``, as on a machine where it is not installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ledger.cli import COMMANDS

SERVER_PACKAGES = ["litestar", "uvicorn", "prometheus_client", "jwt", "jinja2"]
KIT_PACKAGES = ["httpx", "tqdm", "pydantic"]


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def without(packages: list[str]) -> str:
    """Code that makes ``packages`` impossible to import."""
    return f"import sys\nfor name in {packages!r}:\n    sys.modules[name] = None\n"


def test_the_library_works_without_the_server_and_kit_packages(tmp_path: Path) -> None:
    code = without(SERVER_PACKAGES + KIT_PACKAGES) + textwrap.dedent(
        """
        import ledger

        with ledger.open_ledger("sqlite:///wallet.db") as book:
            book.deposit("u1", "EUR", "100.00", reference="topup-1")
            book.place_bets(
                {"bets": [{"user": {"uid": "u1"}, "pool": {"uid": 7},
                           "bet": {"uid": 1, "amount": "10.00", "rake": "1.00",
                                   "currency": "EUR"}}]}
            )
            book.settle(
                b'{"pools": [{"pool": {"uid": 7}, "bets": [{"user": {"uid": "u1"},'
                b' "bet": {"uid": 1, "payout": "25.00"}}]}]}'
            )
            assert book.balance("u1")[0].to_dict()["available"] == "114.00"
            assert book.check().ok
        loaded = [name for name, module in sys.modules.items() if module is not None]
        print(sorted({name.split(".")[0] for name in loaded}))
        """
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    loaded = set(result.stdout.strip().strip("[]").replace("'", "").split(", "))
    assert loaded.isdisjoint(SERVER_PACKAGES + KIT_PACKAGES)
    assert "ledger" in loaded


def test_importing_ledger_loads_no_package_of_the_extras_even_when_installed(
    tmp_path: Path,
) -> None:
    names = set(SERVER_PACKAGES + KIT_PACKAGES)
    code = f"""
        import sys
        import ledger
        print(sorted(name for name in sys.modules if name.split(".")[0] in {names!r}))
        """
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("missing", "argv", "extra"),
    [
        (["litestar"], ["serve"], "server"),
        (["litestar"], ["serve", "--port", "8123", "--help"], "server"),
        (["jwt"], ["token", "--secret", "s" * 32], "server"),
        (["httpx"], ["validate", "http://127.0.0.1:1", "--user", "alice"], "kit"),
        (["tqdm"], ["simulate", "http://127.0.0.1:1"], "kit"),
        (["pydantic"], ["tickets", "list"], "kit"),
        (["httpx"], ["validate-token", "x.y.z"], "kit"),
    ],
)
def test_a_command_without_its_extra_says_which_extra_to_install(
    tmp_path: Path, missing: list[str], argv: list[str], extra: str
) -> None:
    code = without(missing) + f"from ledger.cli import main\nmain({['ledger', *argv][1:]!r})\n"
    result = run_python(code, tmp_path)
    assert result.returncode == 1
    assert result.stderr == f"error: missing.extra: install ledger[{extra}]\n"
    assert result.stdout == ""


def test_the_book_commands_work_without_the_extras(tmp_path: Path) -> None:
    code = without(SERVER_PACKAGES + KIT_PACKAGES) + textwrap.dedent(
        """
        from ledger.cli import main
        main(["deposit", "u1", "EUR", "5.00", "--reference", "r1", "--db", "sqlite:///w.db"])
        """
    )
    result = run_python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "deposit r1: 5.00 EUR for u1 applied" in result.stdout


def test_every_command_of_an_extra_is_listed_under_its_extra() -> None:
    extras = {name: entry.extra for name, entry in COMMANDS.items() if entry.extra is not None}
    assert extras == {
        "serve": "server",
        "token": "server",
        "validate": "kit",
        "validate-token": "kit",
        "simulate": "kit",
        "tickets": "kit",
    }
