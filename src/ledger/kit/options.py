"""The options the kit's commands share: the platform's client name and secret, what a run leaves
behind and where it may run, and the secret the platform signs with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["F", "first_secret", "platform_options", "test_data_options"]

# A click command function, decorated with options and returned as the same type.
F = TypeVar("F", bound=Callable[..., Any])


def first_secret(value: str) -> str:
    # LEDGER_JWT_SECRET may list several secrets for rotation; the platform signs with the first.
    return value.split(",")[0].strip()


def platform_options(function: F) -> F:
    """``--client`` and ``--secret``, defaulting to the server's own environment variables."""
    function = click.option(
        "--secret",
        envvar="LEDGER_JWT_SECRET",
        required=True,
        help="The shared JWT secret (first of a comma-separated list). Env: LEDGER_JWT_SECRET.",
    )(function)
    return click.option(
        "--client",
        "client_name",
        envvar="LEDGER_CLIENT_NAME",
        required=True,
        help="Client (white label) name in 'Bearer <client> <JWT>'. Env: LEDGER_CLIENT_NAME.",
    )(function)


def test_data_options(function: F) -> F:
    """``--keep`` and ``--allow-production``: what the kit leaves behind, and where it may run."""
    function = click.option(
        "--allow-production",
        is_flag=True,
        help="Run even though the server's /health says LEDGER_ENVIRONMENT=production.",
    )(function)
    return click.option(
        "--keep",
        is_flag=True,
        help="Leave this run's test data (users, balances, holds) for inspection.",
    )(function)
