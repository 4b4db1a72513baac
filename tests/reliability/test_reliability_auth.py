"""Auth attacks against a real ``ledger serve``: 401 or 403, a JSON error, and no ledger change.

The server remembers verified headers until their tokens expire (``ledger.http.auth._VERIFIED``);
the attacks below also go after that memory: a tampered copy of a remembered token is another string
and is verified afresh, and a remembered token that expires is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from support.httpkit import (
    CLIENT,
    OPERATOR,
    PLACE,
    REFUND_BET,
    SECRET,
    SETTLE,
    dumps,
    server_env,
    token,
)
from support.killable import LedgerProcess
from support.operator_calls import OPERATOR_AUTH, deposit, snapshot
from support.payloads import entry, place, refund, settle

USERS = ["victim"]
PAID = dumps(place(entry(500, user="victim")))
CALLBACKS = [
    ("/bets", PLACE, PAID),
    ("/bets/cancel", REFUND_BET, dumps(refund(7, (1, "victim")))),
    ("/winners", SETTLE, dumps(settle(7, (1, "50.00", "victim")))),
]


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(header: dict[str, Any], claims: dict[str, Any], key: bytes | None) -> str:
    """A JWT signed by hand (PyJWT refuses to sign HS256 with a PEM key, an attacker does not)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = (
        b"" if key is None else hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    )
    return f"{signing_input}.{b64(signature)}"


def claims(**extra: Any) -> dict[str, Any]:
    return {"role": "admin", "sub": "platform", "exp": int(time.time()) + 300, **extra}


def rsa_public_pem() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def tamper_payload(valid: str) -> str:
    header, payload, signature = valid.split(".")
    data = json.loads(base64.urlsafe_b64decode(payload + "=="))
    data["role"] = "admin"
    data["sub"] = "attacker"
    return f"{header}.{b64(json.dumps(data).encode())}.{signature}"


def tamper_signature(valid: str) -> str:
    head, _, signature = valid.rpartition(".")
    flipped = "A" if signature[0] != "A" else "B"
    return f"{head}.{flipped}{signature[1:]}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerProcess]:
    tmp_path = tmp_path_factory.mktemp("auth")
    env = server_env(f"sqlite:///{tmp_path}/wallet.db", LEDGER_JWT_LEEWAY="0")
    with LedgerProcess(tmp_path, env) as process, httpx.Client(base_url=process.url) as http:
        deposit(http, "victim", "5.00")  # short of every paid entry: 402
        yield process


def attempt(http: httpx.Client, authorization: str | None) -> list[httpx.Response]:
    responses = []
    for path, event, body in CALLBACKS:
        sent = {"Content-Type": "application/json", "X-Callback-Event": event}
        if authorization is not None:
            sent["Authorization"] = authorization
        responses.append(http.post(path, content=body, headers=sent))
    return responses


def refused(responses: list[httpx.Response], statuses: set[int]) -> None:
    for response in responses:
        assert response.status_code in statuses, (response.request.url, response.text)
        assert isinstance(response.json()["error"], str)


def valid_token(role: str = "admin", **extra: Any) -> str:
    return token(role, **extra)


ATTACKS: dict[str, Any] = {
    "alg none": lambda: forge({"alg": "none", "typ": "JWT"}, claims(), None),
    "alg None": lambda: forge({"alg": "None", "typ": "JWT"}, claims(), None),
    "hs256 with an rsa public key": lambda: forge(
        {"alg": "HS256", "typ": "JWT"}, claims(), rsa_public_pem()
    ),
    "rs256 header": lambda: forge({"alg": "RS256", "typ": "JWT"}, claims(), rsa_public_pem()),
    "other secret": lambda: token("admin", secret="not-the-secret-" + "x" * 40),
    "tampered payload": lambda: tamper_payload(token("user")),
    "tampered signature": lambda: tamper_signature(token("admin")),
    "signature stripped": lambda: token("admin").rpartition(".")[0] + ".",
    "expired": lambda: token("admin", ttl=-10),
    "missing exp": lambda: jwt.encode({"role": "admin", "sub": "x"}, SECRET, algorithm="HS256"),
    "exp not a number": lambda: jwt.encode(
        {"role": "admin", "sub": "x", "exp": "tomorrow"}, SECRET, algorithm="HS256"
    ),
    "nbf in the future": lambda: token("admin", nbf=int(time.time()) + 3600),
    "not a jwt": lambda: "not.a.jwt",
    "garbage": lambda: "%%%.%%%.%%%",
    "huge": lambda: "a" * 6000 + "." + "b" * 6000 + "." + "c" * 100,
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_forged_expired_or_tampered_tokens_are_401_and_change_nothing(
    server: LedgerProcess, name: str
) -> None:
    with httpx.Client(base_url=server.url) as http:
        # Remember a valid token first, so that the attack also meets the verified-token memory.
        assert attempt(http, f"Bearer {CLIENT} {token('admin')}")[0].status_code == 402
        before = snapshot(http, USERS)
        forged = ATTACKS[name]()
        refused(attempt(http, f"Bearer {CLIENT} {forged}"), {401})
        assert snapshot(http, USERS) == before


@pytest.mark.parametrize(
    ("name", "authorization", "statuses"),
    [
        ("wrong client name", lambda: f"Bearer intruder {token('admin')}", {403}),
        ("operator token on callbacks", lambda: f"Bearer {OPERATOR}", {401}),
        ("operator token with client", lambda: f"Bearer {CLIENT} {OPERATOR}", {401}),
        ("no header", lambda: None, {401}),
        ("empty header", lambda: "", {401}),
        ("basic scheme", lambda: f"Basic {CLIENT} {token('admin')}", {401}),
        ("token without client", lambda: f"Bearer {token('admin')}", {401}),
        ("extra part", lambda: f"Bearer {CLIENT} {token('admin')} more", {401}),
        ("bearer only", lambda: "Bearer", {401}),
        ("secret as token", lambda: f"Bearer {CLIENT} {SECRET}", {401}),
    ],
)
def test_malformed_or_misdirected_credentials_are_refused_and_change_nothing(
    server: LedgerProcess, name: str, authorization: Any, statuses: set[int]
) -> None:
    with httpx.Client(base_url=server.url) as http:
        before = snapshot(http, USERS)
        refused(attempt(http, authorization()), statuses)
        assert snapshot(http, USERS) == before


def test_user_role_and_admin_without_subject_may_not_refund_or_settle(
    server: LedgerProcess,
) -> None:
    with httpx.Client(base_url=server.url) as http:
        before = snapshot(http, USERS)
        for bad in (token("user"), token("admin", sub=None, id=None, uid=None), token("guest")):
            for response in attempt(http, f"Bearer {CLIENT} {bad}")[1:]:
                assert response.status_code in (401, 403), response.text
                assert "error" in response.json()
        # An admin token without id/uid/sub: built by hand, since token() adds a sub.
        anonymous = jwt.encode(
            {"role": "admin", "exp": int(time.time()) + 300}, SECRET, algorithm="HS256"
        )
        refused(attempt(http, f"Bearer {CLIENT} {anonymous}")[1:], {401, 403})
        assert snapshot(http, USERS) == before


def test_platform_token_never_opens_the_operator_api(server: LedgerProcess) -> None:
    body = {"user": "victim", "currency": "EUR", "amount": "1000.00", "reference": "steal"}
    with httpx.Client(base_url=server.url) as http:
        before = snapshot(http, USERS)
        for authorization in (
            f"Bearer {CLIENT} {token('admin')}",
            f"Bearer {token('admin')}",
            f"Bearer {SECRET}",
            f"Bearer {OPERATOR}x",
            f"Bearer {OPERATOR[:-1]}",
            f"Basic {OPERATOR}",
            "",
        ):
            for response in (
                http.post("/admin/deposits", json=body, headers={"Authorization": authorization}),
                http.get("/admin/check", headers={"Authorization": authorization}),
            ):
                assert response.status_code in (401, 403), (authorization, response.text)
                assert "error" in response.json()
        assert snapshot(http, USERS) == before


def test_a_remembered_token_is_refused_once_it_expires(server: LedgerProcess) -> None:
    short = token("admin", ttl=2)
    with httpx.Client(base_url=server.url) as http:
        free = dumps(place(entry(600, user="victim", amount="0", rake="0")))
        sent = {"Authorization": f"Bearer {CLIENT} {short}", "Content-Type": "application/json"}
        assert http.post("/bets", content=free, headers=sent).status_code == 200
        time.sleep(3.2)
        before = snapshot(http, USERS)
        again = http.post("/bets", content=PAID, headers=sent)
        assert again.status_code == 401, again.text
        assert again.json()["error"] == "auth.token_expired"
        assert snapshot(http, USERS) == before


def test_a_remembered_user_token_does_not_gain_admin_rights(server: LedgerProcess) -> None:
    user = token("user")
    with httpx.Client(base_url=server.url) as http:
        before = snapshot(http, USERS)
        responses = attempt(http, f"Bearer {CLIENT} {user}")
        assert responses[0].status_code == 402  # a user may place bets (and is short here)
        refused(responses[1:], {403})
        refused(attempt(http, f"Bearer {CLIENT} {user}")[1:], {403})
        refused(attempt(http, f"Bearer intruder {user}"), {403})
        assert snapshot(http, USERS) == before


def test_callers_outside_the_ip_allowlist_get_403_even_with_valid_tokens(tmp_path: Path) -> None:
    env = server_env(f"sqlite:///{tmp_path}/wallet.db", LEDGER_ALLOWED_IPS="203.0.113.0/24")
    with LedgerProcess(tmp_path, env) as process, httpx.Client(base_url=process.url) as http:
        responses = attempt(http, f"Bearer {CLIENT} {token('admin')}")
        # Forged forwarding headers from an untrusted peer are ignored.
        spoofed = http.post(
            "/bets",
            content=PAID,
            headers={
                "Authorization": f"Bearer {CLIENT} {token('admin')}",
                "Content-Type": "application/json",
                "X-Forwarded-For": "203.0.113.7",
            },
        )
        for response in [*responses, spoofed]:
            assert response.status_code == 403, response.text
            assert response.json()["error"] == "auth.ip_forbidden"
        check = http.get("/admin/check", headers=OPERATOR_AUTH)
        assert check.json()["transactions"] == 0
