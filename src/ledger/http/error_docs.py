"""Every error key the server answers, with its status and a message as the server words it,
and the OpenAPI responses that document a route's keys (:func:`error_responses`).

``docs/errors.md`` lists the same keys; a test holds the two together.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar.openapi import ResponseSpec
from litestar.openapi.spec import Example
from msgspec import Struct

__all__ = [
    "CALLBACK_ERRORS",
    "ERRORS",
    "INPUT_ERRORS",
    "OPERATOR_ERRORS",
    "ErrorBody",
    "error_responses",
]


class ErrorBody(Struct):
    """Every error answer: a stable, machine-readable key and a text for people."""

    error: str
    message: str


ERRORS: dict[str, tuple[int, str]] = {
    "request.malformed_json": (400, "malformed JSON: truncated input at position 17"),
    "request.invalid": (400, "Object missing required field `uid` - at `$.bets[0].bet`"),
    "reconcile.unreadable_file": (400, "row 3: status 'won' is not one of placed, active, ..."),
    "request.invalid_cursor": (400, "not a cursor this API gave"),
    "amount.invalid": (400, "amount: 10.001 is finer than EUR's 2 decimals"),
    "currency.unknown": (400, "currency 'FUN' has no known scale"),
    "request.wrong_event": (
        400,
        "X-Callback-Event 'winners:tournament' does not belong on /bets "
        "(expected create:fantasy_team)",
    ),
    "auth.missing_token": (401, "missing Authorization header"),
    "auth.invalid_token": (401, "invalid token: Signature verification failed"),
    "auth.token_expired": (401, "the token has expired"),
    "operator.invalid_token": (401, "invalid operator token"),
    "user.insufficient_funds": (402, "user u1 has insufficient EUR funds"),
    "user.stake_limit_reached": (
        403,
        "user u1: stake limit per day of 2500 EUR (minor units) reached: 2000 used, 1000 asked; "
        "enough room from 2026-11-28T12:00:00+00:00",
    ),
    "user.loss_limit_reached": (
        403,
        "user u1: loss limit per week of 5000 EUR (minor units) reached: 4800 used, 1000 asked; "
        "enough room from 2026-11-30T09:00:00+00:00",
    ),
    "user.deposit_limit_reached": (
        403,
        "user u1: deposit limit per month of 100000 EUR (minor units) reached: 100000 used, "
        "500 asked; enough room from 2026-12-20T08:00:00+00:00",
    ),
    "user.excluded": (403, "user u1 is excluded until 2026-12-27T12:00:00+00:00"),
    "auth.wrong_client": (403, "client 'other' is not this wallet's client"),
    "auth.wrong_role": (403, "role 'user' may not call this endpoint (needs admin)"),
    "auth.ip_forbidden": (403, "address 192.0.2.1 is not allowed"),
    "operator.disabled": (403, "the operator API is disabled: set LEDGER_OPERATOR_TOKEN"),
    "bet.not_found": (404, "bet 1001 is unknown"),
    "checkpoint.not_found": (404, "no checkpoint has been signed yet"),
    "user.not_found": (404, "user u1 is unknown"),
    "tournament.not_found": (404, "tournament 7 is unknown"),
    "bet.conflict": (409, "bet 1001 is already recorded with other amounts"),
    "bet.already_refunded": (409, "bet 1001 was refunded; it cannot be settled"),
    "bet.already_settled": (409, "bet 1001 was settled; it cannot be refunded"),
    "reference.conflict": (409, "reference topup-1 names another movement"),
    "request.too_large": (
        413,
        "the request body is over the configured limit (LEDGER_MAX_BODY_BYTES)",
    ),
    "request.unsupported_media_type": (
        415,
        "Content-Type 'application/x-www-form-urlencoded': expected application/json",
    ),
    "ledger.check_failed": (500, "1 invariant(s) violated"),
    "store.unavailable": (503, "the database is unreachable: connection refused"),
    "store.busy": (503, "the database stayed locked: database is locked"),
    "request.timeout": (503, "no answer within 110 s; the outcome is unknown, re-send"),
}

_STATUS_MEANING = {
    400: "Bad input: nothing was changed",
    401: "Missing or invalid credentials",
    402: "The user's available balance is short: nothing was changed",
    403: "Valid credentials without the right to do this",
    404: "Unknown bet: nothing was changed",
    409: "Conflicts with what the ledger recorded: nothing was changed",
    413: "Body over LEDGER_MAX_BODY_BYTES",
    415: "Content-Type is not JSON",
    500: "The books fail a check",
    503: "Technical failure, outcome unknown: re-send (every callback is idempotent)",
}

INPUT_ERRORS = (
    "request.malformed_json",
    "request.invalid",
    "amount.invalid",
    "currency.unknown",
    "request.too_large",
    "request.unsupported_media_type",
)
CALLBACK_ERRORS = (
    *INPUT_ERRORS,
    "request.wrong_event",
    "auth.missing_token",
    "auth.invalid_token",
    "auth.token_expired",
    "auth.wrong_client",
    "auth.wrong_role",
    "auth.ip_forbidden",
    "store.unavailable",
    "store.busy",
    "request.timeout",
)
OPERATOR_ERRORS = ("operator.invalid_token", "operator.disabled", "store.unavailable", "store.busy")


def error_responses(keys: Iterable[str]) -> dict[int, ResponseSpec]:
    """The documented error answers for ``keys``: one response per status, an example per key."""
    by_status: dict[int, list[str]] = {}
    for key in keys:
        by_status.setdefault(ERRORS[key][0], []).append(key)
    return {
        status: ResponseSpec(
            data_container=ErrorBody,
            generate_examples=False,
            description=f"{_STATUS_MEANING[status]} ({', '.join(found)})",
            examples=[
                Example(summary=key, value={"error": key, "message": ERRORS[key][1]})
                for key in found
            ],
        )
        for status, found in sorted(by_status.items())
    }
