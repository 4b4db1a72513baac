"""Signing platform-style JWTs: the one helper the server (``ledger token``, development mode) and
the conformance kit (signed deliveries, ticket JWTs, the validator's bad tokens) share.

Only :mod:`ledger.http` and :mod:`ledger.kit` import this module: ``import ledger`` never pulls in
PyJWT, which comes with the ``[server]`` and ``[kit]`` extras.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import jwt

__all__ = ["sign_token"]


def sign_token(
    secret: str,
    *,
    role: str | None = "admin",
    subject: str | int | None = "platform",
    ttl: float = 300.0,
    algorithm: str = "HS256",
    claims: Mapping[str, Any] | None = None,
    now: float | None = None,
) -> str:
    """A JWT like the platform's (contract section 5): ``iat``, ``exp``, ``role``, ``sub``, ``jti``.

    ``role=None`` or ``subject=None`` leave the claim out (the validator's negative token checks
    need that); ``claims`` are added last and may replace any of them; a negative ``ttl`` gives an
    already expired token. ``algorithm="none"`` yields an unsigned token, which a wallet must
    refuse. The random ``jti`` makes every token distinct, even two signed in the same second.
    """
    issued = int(now if now is not None else time.time())
    payload: dict[str, Any] = {"iat": issued, "exp": issued + int(ttl), "jti": uuid.uuid4().hex}
    if role is not None:
        payload["role"] = role
    if subject is not None:
        payload["sub"] = str(subject)
    payload.update(claims or {})
    if algorithm == "none":
        # PyJWT refuses a key with the "none" algorithm: the unsigned token takes an empty one.
        return jwt.encode(payload, "", algorithm="none")
    return jwt.encode(payload, secret, algorithm=algorithm)
