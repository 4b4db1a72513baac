"""The verified-header memory: a repeat costs a lookup, and remembers only what verified."""

from __future__ import annotations

import time

import jwt
import pytest

from ledger.errors import Forbidden, Unauthorized
from ledger.http import auth
from ledger.settings import Settings

SECRET = "unit-secret-0123456789abcdef-0123456789"
SETTINGS = Settings(jwt_secrets=(SECRET,), client_name="acme")


def header(ttl: int = 3600, client: str = "acme") -> str:
    claims = {"role": "admin", "sub": "p", "exp": int(time.time()) + ttl}
    return f"Bearer {client} {jwt.encode(claims, SECRET, algorithm='HS256')}"


def test_a_header_verified_once_is_answered_from_memory_until_its_token_expires(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    value = header()
    first = auth.authenticate(value, SETTINGS)

    def no_second_verification(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a remembered header was verified again")

    monkeypatch.setattr(jwt, "decode", no_second_verification)
    monkeypatch.setattr(jwt, "get_unverified_header", no_second_verification)
    assert auth.authenticate(value, SETTINGS) is first
    # Past its expiry (and the leeway) the remembered header is refused, and forgotten.
    later = time.time() + 3600 + SETTINGS.jwt_leeway + 5
    monkeypatch.setattr(time, "time", lambda: later)
    with pytest.raises(Unauthorized) as info:
        auth.authenticate(value, SETTINGS)
    assert info.value.key == "auth.token_expired"


def test_a_refused_header_is_not_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong_client = header(client="other")
    for _ in range(2):
        with pytest.raises(Forbidden):
            auth.authenticate(wrong_client, SETTINGS)
    assert not any(key[0] == wrong_client for key in auth._VERIFIED)
    # The same header under other settings is verified afresh, not answered from memory.
    value = header()
    auth.authenticate(value, SETTINGS)
    with pytest.raises(Unauthorized):
        auth.authenticate(value, Settings(jwt_secrets=("another-secret-0123456789abcdef-xx",)))
