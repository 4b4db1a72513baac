"""``ledger operators add|list|disable|passwd`` and ``ledger audit``: the console's accounts.

Passwords are read from a prompt (hidden, asked twice) or, with ``--password-stdin``, from the
first line of standard input; never from the command line, where ``ps`` and shell history
would show them. Every change is recorded in the audit log as done by ``cli``.
"""

from __future__ import annotations

import getpass
import json
import sys

import click

from ..errors import LedgerError
from ..operators import ACTIONS, ROLES, Operators
from .common import db_option, emit, fail
from .opening import opened

# Who the audit log says made a change from the command line (the OS user is added as detail).
CLI = "cli"


def _password(from_stdin: bool) -> str:
    if from_stdin:
        line = sys.stdin.readline()
        return line.rstrip("\r\n")
    return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # pragma: no cover - no user name in this environment
        return "unknown"


@click.group()
def operators() -> None:
    """Console operators: add, list, disable, set a password."""


@operators.command("add")
@db_option
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), required=True, help="What they may do.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def add(db: str, name: str, role: str, password_stdin: bool) -> None:
    """Add an operator (the first admin is made this way)."""
    password = _password(password_stdin)
    with opened(db) as book:
        found = Operators(book.store)
        try:
            found.add(name, role, password)
        except LedgerError as error:
            found.record(CLI, None, "operator_add", name, outcome=error.key, by=_who())
            fail(error)
        found.record(CLI, None, "operator_add", name, role=role, by=_who())
    click.echo(f"added {name} ({role})")


@operators.command("list")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_(db: str, as_json: bool) -> None:
    """Every operator: name, role, state."""
    with opened(db, create=False) as book:
        rows = Operators(book.store).every()
    items = [
        {
            "name": row.name,
            "role": row.role,
            "state": "disabled" if row.disabled_at else "active",
            "locked_until": row.locked_until.isoformat() if row.locked_until else None,
            "created_at": row.created_at.isoformat(),
        }
        for row in rows
    ]
    if as_json:
        emit(items)
        return
    for item in items:
        locked = f" locked until {item['locked_until']}" if item["locked_until"] else ""
        click.echo(f"{item['name']}\t{item['role']}\t{item['state']}{locked}")


@operators.command("disable")
@db_option
@click.argument("name")
def disable(db: str, name: str) -> None:
    """Disable an operator and end their sessions."""
    with opened(db) as book:
        found = Operators(book.store)
        try:
            found.disable(name)
        except LedgerError as error:
            fail(error)
        found.record(CLI, None, "operator_disable", name, by=_who())
    click.echo(f"disabled {name}")


@operators.command("passwd")
@db_option
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
def passwd(db: str, name: str, password_stdin: bool) -> None:
    """Set an operator's password (also lifts a lockout, ends their sessions)."""
    password = _password(password_stdin)
    with opened(db) as book:
        found = Operators(book.store)
        try:
            found.passwd(name, password)
        except LedgerError as error:
            fail(error)
        found.record(CLI, None, "operator_passwd", name, by=_who())
    click.echo(f"password of {name} set")


@click.command("audit")
@db_option
@click.option("--action", type=click.Choice(ACTIONS), help="Only this action.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--after", help="The previous page's cursor (printed as next: ...).")
@click.option("--csv", "as_csv", is_flag=True, help="Print every entry as CSV.")
@click.option("--json", "as_json", is_flag=True, help="Print one page as JSON.")
def audit(
    db: str, action: str | None, limit: int, after: str | None, as_csv: bool, as_json: bool
) -> None:
    """The operators' audit log, newest first: who, when, from where, what, outcome."""
    with opened(db, create=False) as book:
        found = Operators(book.store)
        try:
            if as_csv:
                for chunk in found.audit_csv(action):
                    click.echo(chunk, nl=False)
                return
            page = found.audit(limit, after, action)
        except LedgerError as error:
            fail(error)
    if as_json:
        emit({"audit": page.items, "next": page.next})
        return
    for item in page.items:
        detail = json.dumps(item["detail"], separators=(",", ":")) if item["detail"] else ""
        click.echo(
            f"{item['at']}\t{item['operator'] or '-'}\t{item['ip'] or '-'}\t{item['action']}\t"
            f"{item['target'] or '-'}\t{item['outcome']}\t{detail}"
        )
    if page.next:
        click.echo(f"next: {page.next}")
