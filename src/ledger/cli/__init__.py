"""The ``ledger`` command (click): one module per group of commands, each loaded when it runs.

Every command that touches the database takes ``--db URL`` (default ``$LEDGER_DATABASE_URL``,
else ``sqlite:///ledger.db``). The read commands (``balance``, ``statement``, ``holds``,
``house``, ``bet``, ``check``, ``deliveries``, ``events``) never create a database; ``db upgrade``,
``deposit``, ``withdraw`` and ``serve`` do.
Errors print ``error: <key>: <message>`` on stderr and exit 1; ``ledger check`` exits 1 when an
invariant fails. ``--json`` prints one line of JSON, in the shapes of :mod:`ledger.views`.

Why lazily: importing every command's module brought in the server (Litestar, the console) and
the kit, 1.2 to 1.6 s of CPU for any command, ``ledger --help`` included. Now a command imports
what it runs, and ``ledger --help`` lists every command from :data:`COMMANDS` without importing
any of them.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any, NamedTuple

import click

from ..errors import LedgerError
from .common import fail, short_secret_warning

__all__ = ["main"]

# The exit status of a command stopped by Ctrl-C before its work was done: 128 + SIGINT.
INTERRUPTED = 130


class _Entry(NamedTuple):
    """Where a command lives, and what ``ledger --help`` says of it without importing it."""

    module: str
    attribute: str
    extra: str | None  # the extra its packages come with; None: the library's own suffice
    summary: str  # the command's own short help (tests/e2e/test_cli.py keeps them equal)


COMMANDS: dict[str, _Entry] = {
    "audit": _Entry(
        "ledger.cli.operators",
        "audit",
        None,
        "The operators' audit log, newest first: who, when, from where, what, outcome.",
    ),
    "balance": _Entry(
        "ledger.cli.books",
        "balance",
        None,
        "Show USER's available and held balances (now, or --at a past moment).",
    ),
    "bet": _Entry("ledger.cli.directory", "bet", None, "Show the recorded state of bet BET_UID."),
    "bets": _Entry("ledger.cli.directory", "bets", None, "List bets, highest uid first."),
    "check": _Entry(
        "ledger.cli.books",
        "check",
        None,
        "Verify the journal's invariants; exit 1 with a report when one fails.",
    ),
    "checkpoint": _Entry(
        "ledger.cli.journal",
        "checkpoint",
        None,
        "Sign a checkpoint of the journal's tree now; keep it in the database (and --out).",
    ),
    "db": _Entry(
        "ledger.cli.db",
        "db",
        None,
        "The database: upgrade its schema, back it up, copy it into Postgres.",
    ),
    "deliveries": _Entry(
        "ledger.cli.deliveries",
        "deliveries",
        None,
        "The callback delivery journal, newest first (``prune`` deletes old rows).",
    ),
    "deposit": _Entry(
        "ledger.cli.books", "deposit", None, "Credit USER with AMOUNT of CURRENCY from outside."
    ),
    "events": _Entry(
        "ledger.cli.events",
        "events",
        None,
        "The event feed in commit order, after an id (``prune`` deletes old events).",
    ),
    "exclude": _Entry(
        "ledger.cli.limits",
        "exclude",
        None,
        "Exclude USER from betting and depositing until --until, or indefinitely.",
    ),
    "holds": _Entry(
        "ledger.cli.books",
        "holds",
        None,
        "Show open holds (placed bets not settled or refunded), oldest first.",
    ),
    "house": _Entry(
        "ledger.cli.books",
        "house",
        None,
        "Show the house accounts per currency, and what the house earned over a period.",
    ),
    "keys": _Entry("ledger.cli.journal", "keys", None, "The checkpoint signing key."),
    "limits": _Entry(
        "ledger.cli.limits",
        "limits",
        None,
        "A player's deposit, stake and loss limits: set, remove, cancel a pending change, show.",
    ),
    "operators": _Entry(
        "ledger.cli.operators",
        "operators",
        None,
        "Console operators: add, list, disable, set a password.",
    ),
    "prove": _Entry(
        "ledger.cli.journal",
        "prove",
        None,
        "The bet's commits and the proof of each in the latest signed checkpoint.",
    ),
    "prove-consistency": _Entry(
        "ledger.cli.journal",
        "prove_consistency",
        None,
        "The proof that the newest signed checkpoint extends the checkpoint of OLD_SIZE.",
    ),
    "reconcile": _Entry(
        "ledger.cli.reconcile",
        "reconcile",
        None,
        "Compare FILE, the platform's record of its bets, with the books (reads only).",
    ),
    "serve": _Entry(
        "ledger.http.serve",
        "serve",
        "server",
        "Run the callback server (/bets, /bets/cancel, /winners, /admin, /health, /metrics).",
    ),
    "simulate": _Entry(
        "ledger.kit.cli",
        "simulate",
        "kit",
        "Play a seeded platform day against the wallet at URL and reconcile its books.",
    ),
    "statement": _Entry(
        "ledger.cli.books",
        "statement",
        None,
        "Show USER's movements, newest first, with the balance after each, a page at a time.",
    ),
    "tickets": _Entry(
        "ledger.kit.cli",
        "tickets",
        "kit",
        "Tournament ticket administration on the platform (contract section 4.2).",
    ),
    "token": _Entry(
        "ledger.http.serve",
        "token",
        "server",
        "Print a platform-style token: `Bearer <client> <JWT>` (or only the JWT).",
    ),
    "tournament": _Entry(
        "ledger.cli.directory",
        "tournament",
        None,
        "Show tournament UID with its report per currency.",
    ),
    "tournaments": _Entry(
        "ledger.cli.directory",
        "tournaments",
        None,
        "List tournaments as the platform described them, newest first.",
    ),
    "user": _Entry("ledger.cli.directory", "user", None, "Show user UID with their balances."),
    "users": _Entry(
        "ledger.cli.directory",
        "users",
        None,
        "List users as the platform described them, newest first.",
    ),
    "validate": _Entry(
        "ledger.kit.cli",
        "validate",
        "kit",
        "Run the platform's verification scenario and the client-side checks against URL.",
    ),
    "validate-token": _Entry(
        "ledger.kit.cli",
        "validate_token",
        "kit",
        "Check TOKEN like the hosted validator: signature, algorithm, expiry, required claims.",
    ),
    "verify": _Entry(
        "ledger.cli.journal",
        "verify",
        None,
        "Recompute the journal's chain, tree and balances; exit 1 naming the first difference.",
    ),
    "verify-consistency": _Entry(
        "ledger.cli.journal",
        "verify_consistency",
        None,
        "Check a document of ``ledger prove-consistency --json``: both signatures, the proof.",
    ),
    "verify-proof": _Entry(
        "ledger.cli.journal",
        "verify_proof",
        None,
        "Check a proof written by ``ledger prove --json`` against its signed checkpoint.",
    ),
    "webhooks": _Entry(
        "ledger.cli.webhooks",
        "webhooks",
        None,
        "Signed webhooks (configured by LEDGER_WEBHOOKS; sent by `ledger serve`).",
    ),
    "withdraw": _Entry(
        "ledger.cli.books",
        "withdraw",
        None,
        "Pay AMOUNT of CURRENCY out of USER's available balance.",
    ),
}


def _missing_extra(name: str, extra: str) -> click.Command:
    @click.command(
        name,
        help=f"Needs the [{extra}] extra: pip install 'ledger[{extra}]'.",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
    def stand_in() -> None:
        click.echo(f"error: missing.extra: install ledger[{extra}]", err=True)
        sys.exit(1)

    return stand_in


class _Main(click.Group):
    """The ``ledger`` group: commands loaded by name; every command's ledger errors print
    ``error: <key>: <message>``."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, extra, _ = COMMANDS[cmd_name]
        try:
            command: click.Command = getattr(importlib.import_module(module), attribute)
        except ModuleNotFoundError as missing:
            # Only a package of the extra may be missing; a missing module of our own is a bug.
            if extra is None or (missing.name or "ledger").split(".")[0] == "ledger":
                raise
            return _missing_extra(cmd_name, extra)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, click.Command(name, help=COMMANDS[name].summary).get_short_help_str(limit))
            for name in self.list_commands(ctx)
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        with short_secret_warning():
            try:
                return super().invoke(ctx)
            except LedgerError as error:
                fail(error)
            except KeyboardInterrupt:
                # Commands that run until stopped (serve, events --follow, tickets serve) end
                # on Ctrl-C by themselves and exit 0. One interrupted before its work was done
                # did not do it: it exits 130 (128 + SIGINT, as the shell reports), never 0, and
                # without click's bare "Aborted!" and exit 1, which reads like a failure.
                click.echo("interrupted", err=True)
                sys.exit(INTERRUPTED)


@click.group(cls=_Main)
@click.version_option(package_name="ledger")
@click.pass_context
def main(ctx: click.Context) -> None:
    """A double-entry wallet ledger for a fantasy-sports platform's wallet callbacks."""
    if ctx.invoked_subcommand != "serve":  # serve warns once it has read its settings
        for line in _unknown_variables():
            click.echo(line, err=True)


def _unknown_variables() -> list[str]:
    """A warning per ``LEDGER_*`` variable that no command reads: a misspelled one would
    otherwise be ignored in silence. The variables a webhook endpoint names as its secret
    (``LEDGER_WEBHOOKS``) are read too, and not unknown."""
    from ..variables import RecordingEnviron, unknown_variable_warnings

    environ = RecordingEnviron(os.environ)
    if os.environ.get("LEDGER_WEBHOOKS", "").strip():
        from ..webhooks import WebhookConfigError, parse_config

        # A bad configuration is said by the commands that use it, not here.
        with contextlib.suppress(WebhookConfigError):
            parse_config(os.environ["LEDGER_WEBHOOKS"], environ=environ)
    return unknown_variable_warnings(os.environ, also_read=environ.read)
