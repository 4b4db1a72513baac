"""The ``ledger`` command's books: reads that never create a database, paging, docs/questions.md's
examples, and errors and warnings in the project's words (``error: <key>: <message>``)."""

from __future__ import annotations

import importlib
import json
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import ledger
from ledger.cli import COMMANDS, main
from ledger.kit.ticket_api import ServerThread, TicketStore, create_ticket_app
from support.httpkit import CLIENT, SECRET
from support.payloads import entry, place
from support.readme import ROOT, marked_block

KIT_PAGE = ROOT / "docs" / "kit.md"


def run(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


# --- reads never create a database ---------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["balance", "u1"], ["statement", "u1"], ["bet", "1"], ["check"]], ids=" ".join
)
def test_a_read_command_refuses_a_sqlite_file_that_does_not_exist(
    tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "typo" / "ledger.db"
    result = run(*command, "--db", f"sqlite:///{typo}")
    assert result.exit_code == 1
    assert result.stderr.startswith("error: store.not_found: no SQLite database at ")
    assert str(typo) in result.stderr
    assert not typo.parent.exists()  # neither the file nor its directory was created


@pytest.mark.parametrize(
    "command",
    [["db", "upgrade"], ["deposit", "u1", "EUR", "1.00"], ["withdraw", "u1", "EUR", "1.00"]],
    ids=" ".join,
)
def test_db_upgrade_and_writes_create_the_database(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "new" / "ledger.db"
    result = run(*command, "--db", f"sqlite:///{path}")
    assert "store.not_found" not in result.output
    assert path.is_file()
    assert run("check", "--db", f"sqlite:///{path}").exit_code == 0


def test_read_commands_work_on_every_store(store_url: str) -> None:
    assert run("deposit", "u1", "EUR", "5.00", "--db", store_url, "--reference", "r").exit_code == 0
    balance = run("balance", "u1", "--json", "--db", store_url)
    assert balance.exit_code == 0, balance.output
    assert json.loads(balance.output)["balances"][0]["available"] == "5.00"
    assert run("check", "--db", store_url).exit_code == 0


# --- statement paging ----------------------------------------------------------------------------


def test_statement_pages_with_before_and_prints_the_next_cursor(store_url: str) -> None:
    for number in range(3):
        ref = f"top-{number}"
        deposit = run("deposit", "u1", "EUR", "1.00", "--db", store_url, "--reference", ref)
        assert deposit.exit_code == 0, deposit.output
    first = run("statement", "u1", "--limit", "2", "--db", store_url)
    assert first.exit_code == 0, first.output
    *lines, cursor = first.output.splitlines()
    assert [line.split()[-1] for line in lines] == ["top-2", "top-1"]
    found = re.fullmatch(r"next page: --before (\d+)", cursor)
    assert found, cursor
    rest = run("statement", "u1", "--limit", "2", "--before", found[1], "--db", store_url)
    assert [line.split()[-1] for line in rest.output.splitlines()] == ["top-0"]  # no cursor

    page = json.loads(run("statement", "u1", "--limit", "2", "--json", "--db", store_url).output)
    assert [line["reference"] for line in page["lines"]] == ["top-2", "top-1"]
    assert page["next_before"] == int(found[1])
    last = run("statement", "u1", "--limit", "2", "--json", "--before", found[1], "--db", store_url)
    assert json.loads(last.output)["next_before"] is None


def test_bet_view_shows_when_the_bet_was_placed(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/l.db"
    with ledger.open_ledger(db) as book:
        book.place_bets(place(entry(1, amount="0", rake="0")))
    text = run("bet", "1", "--db", db)
    assert re.search(r", placed \d{4}-\d\d-\d\dT[0-9:.]+\+00:00$", text.output.strip()), text.output
    view = json.loads(run("bet", "1", "--json", "--db", db).output)
    assert view["placed_at"] is not None
    assert view["closed_at"] is None


# --- docs/questions.md's command-line block, as written -----------------------------------


BOOKS = "<!-- tested by tests/e2e/test_cli.py: the books from the command line -->"


def test_the_readme_books_commands_run_as_written_and_print_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the page relies on the default database, ./ledger.db
    shown = 0
    for line in marked_block(BOOKS, path="docs/questions.md").splitlines():
        if not line.startswith(".venv/bin/ledger "):
            continue  # a continued comment
        command, _, comment = line.partition("#")
        args = shlex.split(command)[1:]
        result = CliRunner().invoke(main, args, env={"LEDGER_DATABASE_URL": None})
        expected_exit = 1 if "exit 1" in comment and "bet" in args else 0
        assert result.exit_code == expected_exit, (line, result.output)
        if comment.strip().startswith("{"):
            assert result.stdout == comment.strip() + "\n", line
            shown += 1
    assert shown == 1  # the balance example was compared
    assert (tmp_path / "ledger.db").is_file()


# --- errors and warnings in the project's words --------------------------------------------------


def test_token_without_a_secret_prints_the_projects_error() -> None:
    result = run("token", env={"LEDGER_JWT_SECRET": ""})
    assert result.exit_code == 1
    assert result.stderr.startswith("error: config.missing_secret: ")
    assert "LEDGER_JWT_SECRET" in result.stderr
    assert "Error:" not in result.output


def test_a_short_secret_is_warned_once_in_the_projects_words() -> None:
    result = run("token", "--secret", "short", env={"LEDGER_JWT_SECRET": None})
    assert result.exit_code == 0, result.output
    assert result.stderr.count("warning: jwt.short_secret:") == 1
    assert "InsecureKeyLengthWarning" not in result.stderr
    assert result.stdout.startswith("Bearer dev ")


def test_tickets_serve_help_names_the_environment_variables() -> None:
    result = run("tickets", "serve", "--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "Env: LEDGER_CLIENT_NAME" in text
    assert "Env: LEDGER_JWT_SECRET" in text


@pytest.fixture
def ticket_api() -> Iterator[str]:
    with ServerThread(create_ticket_app(TicketStore(secret=SECRET), client_name=CLIENT)) as api:
        yield api.url


def test_ticket_errors_print_as_the_readme_shows(ticket_api: str) -> None:
    env = {"LEDGER_TICKETS_URL": ticket_api, "LEDGER_CLIENT_NAME": CLIENT}
    past = ["--uid", "u1", "--due-at", "2001-01-31T23:59:00Z", "--currency", "EUR"]
    result = run("tickets", "create", *past, "--buy-in", "5.00", "--secret", SECRET, env=env)
    assert result.exit_code == 1
    line = result.stderr.strip()
    # The API's message (its translation key) first, then its descriptive error, as docs/kit.md
    # says.
    assert line == "error: 422 tournament_ticket.due_at_in_past: dueAt must be in the future"
    assert f"`{line}`" in KIT_PAGE.read_text()


# --- a command imports what it runs ---------------------------------------------------------------


def test_each_command_is_listed_with_its_own_short_help() -> None:
    for name, where in COMMANDS.items():
        command = getattr(importlib.import_module(where.module), where.attribute)
        assert command.name == name
        assert where.summary == command.get_short_help_str(10**6), name


def test_listing_the_commands_imports_neither_a_command_nor_the_database_layer() -> None:
    code = (
        "import sys\n"
        "from ledger.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in\n"
        "    ('sqlalchemy', 'alembic', 'litestar', 'httpx', 'psycopg', 'msgspec')\n"
        "    or n.startswith('ledger.cli.') and n != 'ledger.cli.common'))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_a_read_command_imports_neither_alembic_nor_the_server(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'w.db'}"
    assert run("deposit", "u1", "EUR", "5.00", "--db", db).exit_code == 0
    code = (
        "import sys\n"
        "from ledger.cli import main\n"
        "try:\n"
        f"    main(['balance', 'u1', '--db', {db!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'alembic', 'litestar', 'httpx'}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


# --- Ctrl-C ----------------------------------------------------------------------------------


@click.command("interrupted-midway")
def interrupted_midway() -> None:
    raise KeyboardInterrupt  # what Ctrl-C raises in a command with work still to do


def test_a_command_interrupted_before_its_work_is_done_exits_130_without_abort(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # simulate, validate, a long export: stopped halfway is not success (0), nor click's
    # "Aborted!" and 1; commands that run until stopped (serve, events --follow) exit 0.
    entry = COMMANDS["bet"]._replace(module=__name__, attribute="interrupted_midway")
    monkeypatch.setitem(COMMANDS, "interrupted-midway", entry)
    result = run("interrupted-midway")
    assert result.exit_code == 130
    assert result.output == "interrupted\n"


def test_every_command_warns_about_a_misspelled_ledger_variable_naming_the_right_one(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    webhooks = json.dumps(
        {"endpoints": [{"name": "crm", "url": "https://crm.example/hook",
                        "secret_env": "LEDGER_CRM_SECRET"}]}
    )  # fmt: skip
    env = {
        "LEDGER_DATABSE_URL": db,
        "LEDGER_WEBHOOKS": webhooks,
        "LEDGER_CRM_SECRET": "s" * 32,  # named by a webhook endpoint: read, not unknown
    }
    result = run("db", "upgrade", "--db", db, env=env)
    assert result.exit_code == 0, result.output
    assert (
        "warning: config.unknown_variable: LEDGER_DATABSE_URL is not a ledger setting and is "
        "ignored; did you mean LEDGER_DATABASE_URL?"
    ) in result.output
    assert "LEDGER_CRM_SECRET" not in result.output


def test_tickets_serve_on_a_busy_port_says_so_and_exits_1() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        result = run(
            "tickets", "serve", "--port", str(port), "--client", "acme", "--secret", "s" * 32
        )
    assert result.exit_code == 1, result.output
    assert f"error: server.port_in_use: 127.0.0.1:{port} is already in use" in result.output
