"""``ledger validate-token``: the hosted validator's first step (contract 4.3, item 2).

It checks a JWT produced by the client's backend against the shared secret: format, algorithm
(``none`` and anything unlisted refused), signature, expiry and the required claims of
contract section 5.4 (``role``; for ``admin`` one of ``id``, ``uid``, ``sub``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import jwt

__all__ = ["DEFAULT_ALGORITHMS", "TokenCheck", "check_token", "split_authorization"]

# The contract does not name the algorithm; a shared secret means HMAC, and HS256 is what the
# platform and our server use by default.
DEFAULT_ALGORITHMS: Final = ("HS256",)
ROLES: Final = ("admin", "user")


@dataclass(frozen=True, slots=True)
class TokenCheck:
    name: str
    passed: bool
    detail: str

    def render(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.detail}"


def split_authorization(value: str) -> tuple[str | None, str]:
    """Accept a bare JWT or a whole ``Bearer <client> <JWT>`` header value: ``(client, jwt)``."""
    parts = value.split()
    if len(parts) == 3 and parts[0].lower() == "bearer":
        return parts[1], parts[2]
    if len(parts) == 2 and parts[0].lower() == "bearer":
        return None, parts[1]
    return None, value.strip()


def check_token(
    token: str,
    secrets: Sequence[str],
    *,
    algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
    client_name: str | None = None,
    leeway: float = 0.0,
    now: float | None = None,
) -> list[TokenCheck]:
    """Every check on ``token``, in the order the hosted validator runs them.

    Later checks are reported as failed (not skipped) when an earlier one makes them impossible,
    so that the list always has the same names.
    """
    client, raw = split_authorization(token)
    checks: list[TokenCheck] = []
    if client_name is not None and client is not None:
        checks.append(
            TokenCheck(
                "client",
                client == client_name,
                f"client name {client!r}"
                + ("" if client == client_name else f", expected {client_name!r}"),
            )
        )
    try:
        header = jwt.get_unverified_header(raw)
    except jwt.PyJWTError as exc:
        checks.append(TokenCheck("format", False, f"not a JWT: {exc}"))
        for name in ("algorithm", "signature", "expiry", "claims"):
            checks.append(TokenCheck(name, False, "not checked: the token is not a JWT"))
        return checks
    checks.append(TokenCheck("format", True, "three base64url segments with a JSON header"))

    algorithm = header.get("alg")
    allowed = [name for name in algorithms if name.lower() != "none"]
    algorithm_ok = isinstance(algorithm, str) and algorithm in allowed
    detail = f"alg {algorithm!r}"
    if not algorithm_ok:
        detail += f" refused; allowed: {', '.join(allowed)}"
    checks.append(TokenCheck("algorithm", algorithm_ok, detail))

    claims: dict[str, Any] | None = None
    if algorithm_ok:
        for secret in secrets:
            try:
                claims = jwt.decode(
                    raw,
                    secret,
                    algorithms=allowed,
                    options={"verify_exp": False, "verify_aud": False, "verify_iat": False},
                )
                break
            except jwt.PyJWTError:
                continue
    if claims is None:
        reason = "does not verify with the shared secret" if algorithm_ok else "not checked"
        checks.append(TokenCheck("signature", False, reason))
        checks.append(TokenCheck("expiry", False, "not checked: the signature is not valid"))
        checks.append(TokenCheck("claims", False, "not checked: the signature is not valid"))
        return checks
    checks.append(TokenCheck("signature", True, f"verified with the shared secret ({algorithm})"))
    checks.append(_expiry(claims, now if now is not None else time.time(), leeway))
    checks.append(_claims(claims))
    return checks


def _expiry(claims: dict[str, Any], now: float, leeway: float) -> TokenCheck:
    exp = claims.get("exp")
    if exp is None:
        return TokenCheck("expiry", False, "no exp claim: a platform token must expire")
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return TokenCheck("expiry", False, f"exp {exp!r} is not a number")
    if exp + leeway <= now:
        return TokenCheck("expiry", False, f"expired {int(now - exp)} s ago")
    return TokenCheck("expiry", True, f"valid for another {int(exp - now)} s")


def _claims(claims: dict[str, Any]) -> TokenCheck:
    role = claims.get("role")
    if role is None:
        return TokenCheck("claims", False, "no role claim")
    if role not in ROLES:
        return TokenCheck("claims", False, f"role {role!r} is neither admin nor user")
    if role == "admin":
        subjects = [
            name
            for name in ("id", "uid", "sub")
            if isinstance(claims.get(name), int | str)
            and not isinstance(claims.get(name), bool)
            and claims.get(name) != ""
        ]
        if not subjects:
            return TokenCheck("claims", False, "an admin token needs id, uid or sub")
        return TokenCheck("claims", True, f"role admin with {', '.join(subjects)}")
    return TokenCheck("claims", True, "role user")
