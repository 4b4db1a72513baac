"""The token rules: a Place Bet without a valid user token, and a Refund or Settle without a valid
admin token, are refused with 401 or 403 and move no money.

Proved by ``tests/kit/test_validator.py``.
"""

from __future__ import annotations

from ...tokens import sign_token
from ..platform import CallbackEvent
from .base import AUTH_STATUSES, D, Scenario

__all__ = ["AuthChecks"]


class AuthChecks(Scenario):
    """The checks of the callbacks' tokens."""

    def check_token_rules(self) -> None:
        secret, client = self.platform.secret, self.client

        def bearer(token: str, name: str = client) -> str:
            return f"Bearer {name} {token}"

        place_cases: list[tuple[str, str, str | None]] = [
            ("auth.missing", "a Place Bet without Authorization", None),
            (
                "auth.wrong_secret",
                "a token signed with another secret",
                bearer(sign_token(secret + "-wrong", role="user")),
            ),
            (
                "auth.none_algorithm",
                "an unsigned token (alg none)",
                bearer(sign_token(secret, role="user", algorithm="none")),
            ),
            ("auth.expired", "an expired token", bearer(sign_token(secret, role="user", ttl=-600))),
            (
                "auth.wrong_client",
                "a valid token for another client name",
                bearer(sign_token(secret, role="user"), f"{client}-other"),
            ),
            (
                "auth.not_bearer",
                "a token without the 'Bearer <client>' prefix",
                sign_token(secret, role="user"),
            ),
        ]
        tournament = self._tournament("Auth")
        for name, what, header in place_cases:
            entry = self._entry(tournament)
            with self._check(
                name, f"{what} is refused with 401 or 403 and debits nothing"
            ) as check:
                delivery = check.send(
                    "place", CallbackEvent.PLACE_BET, self._place([entry]), authorization=header
                )
                check.expect_rejected("place", delivery, AUTH_STATUSES)
                check.books(D(0), D(0))
        ghost = self._entry(tournament)
        admin_cases: list[tuple[str, str, CallbackEvent, str]] = [
            (
                "auth.user_role_on_refund",
                "a user-role token on Refund Bet",
                CallbackEvent.REFUND_BET,
                bearer(sign_token(secret, role="user")),
            ),
            (
                "auth.user_role_on_settle",
                "a user-role token on Settle",
                CallbackEvent.SETTLE_BET,
                bearer(sign_token(secret, role="user")),
            ),
            (
                "auth.admin_without_subject",
                "an admin token without id, uid or sub",
                CallbackEvent.REFUND_BET,
                bearer(sign_token(secret, role="admin", subject=None)),
            ),
        ]
        for name, what, event, header in admin_cases:
            payload = (
                self._refund(tournament, [ghost])
                if event is CallbackEvent.REFUND_BET
                else self._settle(tournament, [self._result(ghost, D("1.00"), 1)])
            )
            with self._check(name, f"{what} is refused with 401 or 403") as check:
                delivery = check.send("deliver", event, payload, authorization=header)
                check.expect_rejected("deliver", delivery, AUTH_STATUSES)
                check.books(D(0), D(0))
