"""One JWT helper signs the server's tokens (``ledger token``, development mode) and the kit's
(deliveries, ticket JWTs, the validator's bad tokens)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import jwt

from ledger.http.auth import mint_token
from ledger.kit.platform import CallbackEvent, Platform, sign_ticket
from ledger.tokens import sign_token

SECRET = "a-shared-secret-" + "0123456789abcdef" * 4


def claims_of(token: str, algorithm: str = "HS256") -> dict[str, Any]:
    return jwt.decode(
        token, SECRET, algorithms=[algorithm], options={"verify_exp": False, "verify_sub": False}
    )


def test_a_token_carries_iat_exp_role_subject_and_a_fresh_jti() -> None:
    first = claims_of(sign_token(SECRET, role="user", subject=42, ttl=60, now=1_000))
    second = claims_of(sign_token(SECRET, role="user", subject=42, ttl=60, now=1_000))

    assert {key: first[key] for key in ("iat", "exp", "role", "sub")} == {
        "iat": 1_000,
        "exp": 1_060,
        "role": "user",
        "sub": "42",
    }
    assert first["jti"] != second["jti"]


def test_role_or_subject_none_leaves_the_claim_out_and_claims_come_last() -> None:
    claims = claims_of(sign_token(SECRET, role=None, subject=None, claims={"id": 7, "exp": 5}))

    assert "role" not in claims
    assert "sub" not in claims
    assert (claims["id"], claims["exp"]) == (7, 5)


def test_the_none_algorithm_gives_an_unsigned_token() -> None:
    token = sign_token(SECRET, algorithm="none")

    assert token.endswith(".")
    assert jwt.get_unverified_header(token)["alg"] == "none"


def test_mint_token_keeps_its_signature_and_signs_through_the_shared_helper() -> None:
    claims = claims_of(
        mint_token(SECRET, role="user", subject="dev", ttl=90, algorithm="HS384", extra={"x": 1}),
        "HS384",
    )

    assert (claims["role"], claims["sub"], claims["exp"] - claims["iat"], claims["x"]) == (
        "user",
        "dev",
        90,
        1,
    )
    assert "jti" in claims  # the shared helper's mark
    assert "sub" not in claims_of(mint_token(SECRET, subject=None))


def test_the_kit_signs_deliveries_and_tickets_through_the_shared_helper() -> None:
    with Platform("http://127.0.0.1:1", client_name="acme", secret=SECRET) as platform:
        scheme, client, token = platform.authorization(CallbackEvent.PLACE_BET).split()
    claims = claims_of(token)
    ticket = claims_of(
        sign_ticket(SECRET, ticket_id=1, user="u1", currency="EUR", buy_in=Decimal(5), now=1_000)
    )

    assert (scheme, client, claims["role"], claims["sub"]) == ("Bearer", "acme", "user", "platform")
    assert claims["exp"] - claims["iat"] == 300
    assert "jti" in claims
    assert (ticket["role"], ticket["sub"], ticket["ticket_id"], ticket["exp"]) == (
        "ticket",
        "u1",
        1,
        1_000 + 86_400,
    )
