"""Who may call: platform JWTs on the callbacks, the operator token on ``/admin``, IP allowlists.

Callbacks carry ``Authorization: Bearer <client_name> <JWT>`` (contract section 5). The JWT is
checked against every configured secret (rotation), with the configured HMAC algorithms only: the
token's own header never chooses the algorithm, so ``none`` and algorithm-confusion tokens fail.
``exp`` is required. 401 means the credentials are bad; 403 means they are good but not enough
(wrong client, wrong role, address not allowed).

The operator token is a separate, random bearer string compared in constant time. Because a
platform JWT is never equal to it and it is never a valid JWT, neither opens the other's door.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import math
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jwt

from ..errors import Forbidden, Unauthorized
from ..settings import Network, Settings
from ..tokens import sign_token

if TYPE_CHECKING:
    from litestar import Request

    from .runtime import Runtime

__all__ = [
    "Caller",
    "authenticate",
    "check_operator",
    "client_address",
    "mint_token",
    "request_address",
    "require_address",
    "require_role",
]

SUBJECT_CLAIMS = ("id", "uid", "sub")


@dataclass(frozen=True, slots=True)
class Caller:
    """A verified platform token: the client name it came with and its claims."""

    client: str
    role: str | None
    subject: str | None
    claims: dict[str, Any]


def authenticate(header: str | None, settings: Settings) -> Caller:
    """Verify ``Bearer <client_name> <JWT>``; raise :class:`Unauthorized` or :class:`Forbidden`.

    The platform re-uses one token for many deliveries, and verifying it (splitting the header,
    decoding it, the HMAC, the claim checks) was the largest share of a Place Bet's own CPU time
    on the event loop. A header verified once stays good until its token expires, so a repeat
    costs one dictionary lookup and an expiry check. The memory holds only what a fresh
    verification accepted, keyed by the exact header and every setting the verdict depends on.
    """
    if not header:
        raise Unauthorized("missing Authorization header", key="auth.missing_token")
    key = (
        header,
        settings.jwt_secrets,
        settings.jwt_algorithms,
        settings.jwt_leeway,
        settings.client_name,
    )
    remembered = _VERIFIED.get(key)
    if remembered is not None:
        expires, caller = remembered
        if _expired(expires, settings.jwt_leeway):
            _VERIFIED.pop(key, None)
            raise Unauthorized("the token has expired", key="auth.token_expired")
        return caller
    caller, expires = _authenticate(header, settings)
    if len(_VERIFIED) >= VERIFIED_TOKENS:
        _VERIFIED.pop(next(iter(_VERIFIED)), None)  # forget the oldest
    _VERIFIED[key] = (expires, caller)
    return caller


def _authenticate(header: str, settings: Settings) -> tuple[Caller, int]:
    parts = header.split()
    if len(parts) != 3 or parts[0].lower() != "bearer":
        raise Unauthorized("expected Authorization: Bearer <client_name> <JWT>")
    _, client, token = parts
    if not settings.jwt_secrets:
        raise Unauthorized("no LEDGER_JWT_SECRET is configured on this server")
    try:
        algorithm = jwt.get_unverified_header(token).get("alg")
    except jwt.PyJWTError:
        raise Unauthorized("the token is not a JWT") from None
    if algorithm not in settings.jwt_algorithms:
        raise Unauthorized(f"token algorithm {algorithm!r} is not allowed")
    claims = _verify(token, settings)
    expires = _check_claims(claims, settings.jwt_leeway)
    if settings.client_name is not None and not hmac.compare_digest(
        client.encode(), settings.client_name.encode()
    ):
        raise Forbidden(f"client {client!r} is not this wallet's client", key="auth.wrong_client")
    role = claims.get("role")
    subject = next((str(claims[name]) for name in SUBJECT_CLAIMS if _is_id(claims.get(name))), None)
    caller = Caller(
        client=client,
        role=role if isinstance(role, str) else None,
        subject=subject,
        claims=claims,
    )
    return caller, expires


# Headers verified recently, oldest first: their token's whole-second expiry and the caller.
VERIFIED_TOKENS = 1024
_VERIFIED: dict[tuple[Any, ...], tuple[int, Caller]] = {}

TIME_CLAIMS = ("exp", "nbf", "iat")


def _verify(token: str, settings: Settings) -> dict[str, Any]:
    """The claims of a token signed with one of the secrets; their types and times unchecked."""
    last: jwt.PyJWTError | None = None
    for secret in settings.jwt_secrets:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                secret,
                algorithms=list(settings.jwt_algorithms),
                # PyJWT reads "1795330035" (even " 1795330035") and true as times, and checks
                # times before we could see the types: _check_claims does both, types first.
                # The contract allows integer subjects, which PyJWT's ``sub`` check refuses.
                options={
                    "require": ["exp"],
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                    "verify_sub": False,
                },
            )
            return claims
        except jwt.InvalidSignatureError as exc:
            last = exc  # maybe signed with another (rotated) secret: try the next one
        except jwt.MissingRequiredClaimError as exc:
            raise Unauthorized(f"the token has no {exc.claim!r} claim") from None
        except jwt.PyJWTError as exc:
            raise Unauthorized(f"invalid token: {exc}") from None
    raise Unauthorized(f"invalid token: {last or 'signature verification failed'}")


def _check_claims(claims: dict[str, Any], leeway: int) -> int:
    """Refuse claims of the wrong JSON type, then check the times; return ``exp`` in seconds.

    Times are JSON numbers (a boolean is not one); ``role`` is a string; ``id``, ``uid`` and
    ``sub`` are integers or strings (contract 5.4). ``null`` counts as absent for ``role`` and
    the subjects, as the contract does not show the user token's claims. Every refusal is the
    same 401 whether the token is new or was seen before.
    """
    for name in TIME_CLAIMS:
        if name in claims and not _is_time(claims[name]):
            raise Unauthorized(f"the token's {name!r} claim must be a number")
    role = claims.get("role")
    if role is not None and not isinstance(role, str):
        raise Unauthorized("the token's 'role' claim must be a string")
    for name in SUBJECT_CLAIMS:
        value = claims.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | str)):
            raise Unauthorized(f"the token's {name!r} claim must be an integer or a string")
    # Whole seconds and the same comparisons as PyJWT's own claim checks.
    now = time.time()
    expires = int(claims["exp"])
    if _expired(expires, leeway, now):
        raise Unauthorized("the token has expired", key="auth.token_expired")
    for name in ("nbf", "iat"):
        if name in claims and int(claims[name]) > now + leeway:
            raise Unauthorized(f"the token is not valid yet ({name})")
    return expires


def _is_time(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _expired(expires: int, leeway: int, now: float | None = None) -> bool:
    return expires <= (time.time() if now is None else now) - leeway


def _is_id(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and bool(value))


def require_role(caller: Caller, roles: Collection[str], *, need_subject: bool = False) -> None:
    """Refuse a caller without one of ``roles``; admin callers of refund and settle need an id."""
    if caller.role not in roles:
        raise Forbidden(
            f"role {caller.role!r} may not call this endpoint (needs {' or '.join(roles)})",
            key="auth.wrong_role",
        )
    if need_subject and caller.subject is None:
        # The contract lists id/uid/sub as required admin claims: a token without them is bad.
        raise Unauthorized("an admin token needs one of the claims id, uid, sub")


def check_operator(header: str | None, settings: Settings) -> None:
    """Allow ``Authorization: Bearer <LEDGER_OPERATOR_TOKEN>`` and nothing else."""
    if settings.operator_token is None:
        raise Forbidden(
            "the operator API is disabled: set LEDGER_OPERATOR_TOKEN", key="operator.disabled"
        )
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(
            "expected Authorization: Bearer <operator token>", key="operator.invalid_token"
        )
    if not hmac.compare_digest(token.encode(), settings.operator_token.encode()):
        raise Unauthorized("invalid operator token", key="operator.invalid_token")


def client_address(
    peer: str | None, forwarded_for: str | None, trusted: Sequence[Network]
) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The caller's address: the peer, or from ``X-Forwarded-For`` when the peer is a trusted proxy.

    The header is read right to left, skipping trusted proxies, so that a client cannot forge its
    address by sending its own ``X-Forwarded-For``: only hops added by our proxies are believed.
    """
    address = _parse_ip(peer)
    if address is None or not forwarded_for or not _within(address, trusted):
        return address
    for hop in reversed([part.strip() for part in forwarded_for.split(",")]):
        hop_address = _parse_ip(hop)
        if hop_address is None:
            return address  # garbage in the chain: fall back to the last address we can trust
        address = hop_address
        if not _within(address, trusted):
            return address
    return address


def require_address(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None, allowed: Sequence[Network]
) -> None:
    """Refuse a caller outside ``LEDGER_ALLOWED_IPS`` (no list: everyone is allowed)."""
    if allowed and (address is None or not _within(address, allowed)):
        raise Forbidden(f"address {address} is not allowed", key="auth.ip_forbidden")


# Callers come from a few addresses (the platform's, its proxies'): parse each text once.
@functools.lru_cache(maxsize=4096)
def _parse_ip(text: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not text:
        return None
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    # An IPv4 client on a dual-stack socket shows up as ::ffff:a.b.c.d; match it as IPv4.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _within(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, networks: Sequence[Network]
) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def mint_token(
    secret: str,
    *,
    role: str = "admin",
    subject: str | None = "ledger",
    ttl: int = 3600,
    algorithm: str = "HS256",
    extra: dict[str, Any] | None = None,
) -> str:
    """A JWT like the platform's, for development, tests and the hosted validator's token check."""
    return sign_token(
        secret, role=role, subject=subject, ttl=ttl, algorithm=algorithm, claims=extra
    )


def request_address(request: Request[Any, Any, Any], runtime: Runtime) -> str | None:
    """Where a request came from, trusted proxies applied (what the audit log records)."""
    client = request.client
    found = client_address(
        client.host if client else None,
        request.headers.get("x-forwarded-for"),
        runtime.settings.trusted_proxies,
    )
    return str(found) if found else None
