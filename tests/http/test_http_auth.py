"""Who may call (contract section 5, DESIGN section 6): platform JWTs, operator token, addresses."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from ipaddress import ip_network
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from litestar.testing import TestClient

from ledger.http.app import create_app
from ledger.http.auth import client_address
from support.httpkit import (
    CLIENT,
    OLD_SECRET,
    OPERATOR,
    OPERATOR_HEADERS,
    PLACE,
    SECRET,
    SETTLE,
    Wallet,
    bearer,
    dumps,
    serve,
    settings_for,
    token,
)
from support.payloads import entry, place, refund, settle

FREE = place(entry(1, amount="0.0", rake="0.0"))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with serve(tmp_path) as test_client:
        yield test_client


def call(
    client: TestClient[Any],
    authorization: str | None,
    path: str = "/bets",
    body: Any = FREE,
    event: str | None = PLACE,
) -> Any:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    if event is not None:
        headers["X-Callback-Event"] = event
    return client.post(path, content=dumps(body), headers=headers)


def unsigned(claims: dict[str, Any]) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


# --- platform tokens on the callbacks ----------------------------------------------------------


def test_valid_admin_token_is_accepted(client: TestClient[Any]) -> None:
    assert call(client, bearer()).status_code == 200


def test_missing_authorization_is_401(client: TestClient[Any]) -> None:
    response = call(client, None)
    assert response.status_code == 401
    assert response.json()["error"] == "auth.missing_token"


@pytest.mark.parametrize(
    "authorization",
    ["Bearer", "Basic abc", "Bearer onlyonepart", "Bearer acme not-a-jwt", "Token acme x.y.z"],
)
def test_malformed_authorization_is_401(client: TestClient[Any], authorization: str) -> None:
    response = call(client, authorization)
    assert response.status_code == 401
    assert response.json()["error"] == "auth.invalid_token"


def test_token_signed_with_another_secret_is_401(client: TestClient[Any]) -> None:
    response = call(client, bearer(token(secret="x" * 64)))
    assert response.status_code == 401


def test_both_rotated_secrets_are_accepted(tmp_path: Path) -> None:
    with serve(tmp_path, jwt_secrets=(SECRET, OLD_SECRET)) as client:
        assert call(client, bearer(token(secret=SECRET))).status_code == 200
        assert call(client, bearer(token(secret=OLD_SECRET))).status_code == 200
        assert call(client, bearer(token(secret="z" * 64))).status_code == 401


def test_expired_token_is_401(client: TestClient[Any]) -> None:
    response = call(client, bearer(token(ttl=-3600)))
    assert response.status_code == 401
    assert response.json()["error"] == "auth.token_expired"


def test_token_without_exp_is_401(client: TestClient[Any]) -> None:
    no_exp = jwt.encode({"role": "admin", "sub": "1"}, SECRET, algorithm="HS256")
    assert call(client, bearer(no_exp)).status_code == 401


def test_alg_none_token_is_401(client: TestClient[Any]) -> None:
    forged = unsigned({"role": "admin", "sub": "1", "exp": int(time.time()) + 60})
    response = call(client, bearer(forged))
    assert response.status_code == 401


def test_algorithm_outside_the_allowed_list_is_401(client: TestClient[Any]) -> None:
    response = call(client, bearer(token(algorithm="HS512")))
    assert response.status_code == 401


def test_allowed_algorithms_are_configurable(tmp_path: Path) -> None:
    with serve(tmp_path, jwt_algorithms=("HS512",)) as client:
        assert call(client, bearer(token(algorithm="HS512"))).status_code == 200
        assert call(client, bearer(token(algorithm="HS256"))).status_code == 401


def test_wrong_client_name_is_403(client: TestClient[Any]) -> None:
    response = call(client, bearer(token(), client="someone-else"))
    assert response.status_code == 403
    assert response.json()["error"] == "auth.wrong_client"


def test_any_client_name_is_accepted_when_none_is_configured(tmp_path: Path) -> None:
    with serve(tmp_path, client_name=None) as client:
        assert call(client, bearer(token(), client="whoever")).status_code == 200


def test_user_role_may_place_bets(client: TestClient[Any]) -> None:
    assert call(client, bearer(token("user"))).status_code == 200


@pytest.mark.parametrize("role", ["guest", None])
def test_other_roles_may_not_place_bets(client: TestClient[Any], role: str | None) -> None:
    response = call(client, bearer(token(role)))
    assert response.status_code == 403
    assert response.json()["error"] == "auth.wrong_role"


@pytest.mark.parametrize(
    ("path", "event", "body"),
    [
        ("/bets/cancel", "destroy:fantasy_team", refund(7, 1)),
        ("/winners", SETTLE, settle(7, (1, "0.00"))),
    ],
)
def test_user_role_may_not_refund_or_settle(
    client: TestClient[Any], path: str, event: str, body: Any
) -> None:
    response = call(client, bearer(token("user")), path, body, event)
    assert response.status_code == 403
    assert response.json()["error"] == "auth.wrong_role"


def test_admin_token_without_id_uid_or_sub_may_not_settle(client: TestClient[Any]) -> None:
    bare = jwt.encode({"role": "admin", "exp": int(time.time()) + 60}, SECRET, algorithm="HS256")
    response = call(client, bearer(bare), "/winners", settle(7, (1, "0.00")), SETTLE)
    assert response.status_code == 401


@pytest.mark.parametrize("claim", [{"id": 42}, {"uid": "admin-7"}, {"sub": 9}])
def test_admin_subject_may_be_id_uid_or_sub_as_int_or_string(
    client: TestClient[Any], claim: dict[str, Any]
) -> None:
    wallet = Wallet(client)
    wallet.deposit("u1", "20.00")
    wallet.place(place(entry(1)))
    response = call(client, bearer(token(**claim)), "/winners", settle(7, (1, "0.00")), SETTLE)
    assert response.status_code == 200, response.text


def test_operator_token_never_works_on_callbacks(client: TestClient[Any]) -> None:
    assert call(client, f"Bearer {OPERATOR}").status_code == 401
    assert call(client, f"Bearer {CLIENT} {OPERATOR}").status_code == 401


def test_callbacks_refuse_everything_when_no_secret_is_configured(tmp_path: Path) -> None:
    with serve(tmp_path, jwt_secrets=()) as client:
        assert call(client, bearer()).status_code == 401


# --- the operator API -------------------------------------------------------------------------


def test_operator_api_accepts_the_operator_token(client: TestClient[Any]) -> None:
    response = client.get("/admin/users/u1/balances", headers=OPERATOR_HEADERS)
    # Past the guard: the answer is about the user (unknown here), not about the token.
    assert response.status_code == 404
    assert response.json()["error"] == "user.not_found"


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-0123456789", f"Basic {OPERATOR}", bearer(), f"Bearer {SECRET}"],
    ids=["missing", "wrong", "basic", "platform-jwt", "jwt-secret"],
)
def test_operator_api_refuses_anything_but_the_operator_token(
    client: TestClient[Any], authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = client.get("/admin/users/u1/balances", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"] == "operator.invalid_token"


def test_operator_api_is_disabled_without_an_operator_token(tmp_path: Path) -> None:
    with serve(tmp_path, operator_token=None) as client:
        response = client.post(
            "/admin/deposits",
            json={"user": "u1", "currency": "EUR", "amount": "5", "reference": "r"},
            headers={"Authorization": "Bearer anything-at-all-here"},
        )
        assert response.status_code == 403
        assert response.json()["error"] == "operator.disabled"


# --- addresses ----------------------------------------------------------------------------------


def test_caller_outside_the_allowlist_is_403(tmp_path: Path) -> None:
    # The test client connects from "testclient", which is no address at all.
    with serve(tmp_path, allowed_ips=(ip_network("10.0.0.0/8"),)) as client:
        response = call(client, bearer())
        assert response.status_code == 403
        assert response.json()["error"] == "auth.ip_forbidden"


def test_forwarded_for_is_ignored_from_an_untrusted_peer(tmp_path: Path) -> None:
    with serve(tmp_path, allowed_ips=(ip_network("10.0.0.0/8"),)) as client:
        headers = {
            "Authorization": bearer(),
            "X-Callback-Event": PLACE,
            "X-Forwarded-For": "10.1.2.3",
        }
        response = client.post("/bets", content=dumps(FREE), headers=headers)
        assert response.status_code == 403


def test_allowlisted_address_behind_a_trusted_proxy_is_accepted(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path,
        allowed_ips=(ip_network("203.0.113.0/24"),),
        trusted_proxies=(ip_network("127.0.0.0/8"),),
    )
    app = create_app(settings)

    async def deliver(forwarded: str | None) -> int:
        # httpx's ASGI transport lets the test choose the peer address; the test client cannot.
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))  # type: ignore[arg-type]
        headers = {"Authorization": bearer(), "X-Callback-Event": PLACE}
        if forwarded:
            headers["X-Forwarded-For"] = forwarded
        async with httpx.AsyncClient(transport=transport, base_url="http://wallet") as http:
            response = await http.post("/bets", content=dumps(FREE), headers=headers)
            return response.status_code

    try:
        assert asyncio.run(deliver("203.0.113.9")) == 200
        assert asyncio.run(deliver("198.51.100.1")) == 403
        assert asyncio.run(deliver(None)) == 403  # the proxy itself is not allowlisted
    finally:
        app.state.runtime.ledger().close()


def test_client_address_believes_forwarded_for_only_from_trusted_proxies() -> None:
    proxies = [ip_network("10.0.0.0/8")]
    # Peer is a trusted proxy: take the right-most untrusted hop.
    assert str(client_address("10.0.0.5", "198.51.100.7, 10.0.0.9", proxies)) == "198.51.100.7"
    # A client-forged left-most entry is not believed past an untrusted hop.
    assert str(client_address("10.0.0.5", "1.1.1.1, 198.51.100.7", proxies)) == "198.51.100.7"
    # Peer is not a proxy: the header is ignored.
    assert str(client_address("198.51.100.8", "203.0.113.1", proxies)) == "198.51.100.8"
    # No proxies configured: the header is ignored.
    assert str(client_address("10.0.0.5", "203.0.113.1", [])) == "10.0.0.5"
    # Garbage in the header: fall back to the last trusted address.
    assert str(client_address("10.0.0.5", "nonsense", proxies)) == "10.0.0.5"
    # IPv4 clients on a dual-stack socket match IPv4 networks.
    assert str(client_address("::ffff:10.0.0.5", "198.51.100.7", proxies)) == "198.51.100.7"


# --- claims of the wrong JSON type ---------------------------------------------------------------


def _signed(**claims: Any) -> str:
    body: dict[str, Any] = {"role": "admin", "sub": "platform", "exp": int(time.time()) + 300}
    body.update(claims)
    return jwt.encode(body, SECRET, algorithm="HS256")


_SOON = int(time.time()) + 3600
WRONG_TYPED_CLAIMS: dict[str, dict[str, Any]] = {
    "exp numeric string": {"exp": str(_SOON)},
    "exp padded string": {"exp": f" {_SOON}"},
    "exp boolean": {"exp": True},
    "exp null": {"exp": None},
    "exp list": {"exp": [_SOON]},
    "nbf numeric string": {"nbf": "1"},
    "nbf boolean": {"nbf": False},
    "iat numeric string": {"iat": str(int(time.time()))},
    "iat boolean": {"iat": True},
    "iat object": {"iat": {"t": 1}},
    "role number": {"role": 1},
    "role list": {"role": ["admin"]},
    "sub boolean": {"sub": True},
    "sub float": {"sub": 4.5},
    "sub list": {"sub": ["x"]},
    "uid object": {"uid": {"id": 1}},
}


@pytest.mark.parametrize("claims", WRONG_TYPED_CLAIMS.values(), ids=WRONG_TYPED_CLAIMS.keys())
def test_claims_of_the_wrong_type_are_401_on_first_use_and_every_reuse(
    client: TestClient[Any], claims: dict[str, Any]
) -> None:
    authorization = bearer(_signed(**claims))
    for _ in range(3):  # the first use and re-uses that could hit the verified-token memory
        response = call(client, authorization)
        assert response.status_code == 401, response.text
        assert response.json()["error"] == "auth.invalid_token"


def test_a_float_exp_is_remembered_as_a_number_and_reused(client: TestClient[Any]) -> None:
    authorization = bearer(_signed(exp=time.time() + 300.5))
    assert [call(client, authorization).status_code for _ in range(3)] == [200, 200, 200]
