"""The ``ledger serve`` and ``ledger token`` commands (registered by :mod:`ledger.cli`)."""

from __future__ import annotations

import click

__all__ = ["COMMANDS", "serve", "token"]


@click.command()
def serve() -> None:
    """Run the callback server."""
    raise click.ClickException("not implemented yet")


@click.command()
def token() -> None:
    """Print an Authorization header value for the callback server."""
    raise click.ClickException("not implemented yet")


COMMANDS: list[click.Command] = [serve, token]
