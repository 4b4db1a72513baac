"""The OpenAPI document at /schema/openapi.json, and its viewer at /schema, served offline."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import jsonschema_rs  # schemathesis' own validator
import pytest
from litestar.testing import TestClient

from ledger.http.error_docs import ERRORS
from ledger.http.openapi import ASSETS_DIR
from support.httpkit import OPERATOR_HEADERS, dumps, serve
from support.payloads import entry, place, refund, settle

ROOT = Path(__file__).resolve().parents[2]
CALLBACKS = ("/bets", "/bets/cancel", "/winners", "/tournaments/cancel")
MOVEMENTS = ("/admin/deposits", "/admin/withdrawals")
ERROR_KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    tmp_path = tmp_path_factory.mktemp("openapi")
    with serve(tmp_path, refund_tournament_path="/tournaments/cancel") as client:
        yield client


@pytest.fixture(scope="module")
def document(client: TestClient[Any]) -> dict[str, Any]:
    response = client.get("/schema/openapi.json")
    assert response.status_code == 200
    found: dict[str, Any] = response.json()
    return found


def body_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    body = document["paths"][path]["post"]["requestBody"]
    assert body["required"] is True
    schema: dict[str, Any] = body["content"]["application/json"]["schema"]
    return schema


def as_json(payload: Any) -> Any:
    return json.loads(dumps(payload))


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


# --- request bodies -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CALLBACKS + MOVEMENTS)
def test_every_post_documents_its_json_request_body(document: dict[str, Any], path: str) -> None:
    schema = body_schema(document, path)
    assert schema["type"] == "object"
    assert schema["required"]


def test_callback_body_schemas_accept_the_platforms_real_payloads(
    document: dict[str, Any],
) -> None:
    # The builders add fields the wallet ignores (base_amount, gameType, rank, ...) at every
    # level, and send amounts as numbers and payouts as strings, as the platform does.
    bodies = {
        "/bets": [place(entry(1), entry(2, amount="5.50", rake=0))],
        "/bets/cancel": [refund(7, 1, (2, "u2"))],
        "/tournaments/cancel": [refund(7, 1)],
        "/winners": [settle(7, (1, "25.00"), (2, "0.00", "u2"))],
    }
    for path, payloads in bodies.items():
        validator = jsonschema_rs.validator_for(body_schema(document, path))
        for payload in payloads:
            errors = [str(error) for error in validator.iter_errors(as_json(payload))]
            assert not errors, f"{path}: {errors}"


@pytest.mark.parametrize(
    ("path", "payload"),
    [
        ("/bets", {"bets": []}),
        ("/bets", {"bets": [{"user": {"uid": "u1"}, "pool": {"uid": 7}}]}),
        ("/bets", place(entry(1, amount=-1))),
        ("/bets", place(entry(1, amount="ten"))),
        ("/bets", place(entry(1, user="u1:held"))),
        ("/bets", place(entry(2**63))),
        ("/winners", {"pools": [{"pool": {"uid": 7}, "bets": [{"user": {"uid": "u1"}}]}]}),
        ("/bets/cancel", {"pools": []}),
    ],
)
def test_callback_body_schemas_refuse_what_the_server_refuses(
    document: dict[str, Any], client: TestClient[Any], path: str, payload: Any
) -> None:
    assert not jsonschema_rs.validator_for(body_schema(document, path)).is_valid(as_json(payload))


@pytest.mark.parametrize("path", CALLBACKS + MOVEMENTS)
def test_every_request_example_fits_its_schema(document: dict[str, Any], path: str) -> None:
    media = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    assert jsonschema_rs.validator_for(media["schema"]).is_valid(media["example"])


@pytest.mark.parametrize("path", CALLBACKS + MOVEMENTS)
def test_every_object_in_a_body_schema_allows_unknown_fields(
    document: dict[str, Any], path: str
) -> None:
    objects = [node for node in walk(body_schema(document, path)) if node.get("type") == "object"]
    assert objects
    assert all(node.get("additionalProperties") is True for node in objects)


def test_amounts_are_documented_as_decimal_strings_or_numbers(document: dict[str, Any]) -> None:
    bet = body_schema(document, "/bets")["properties"]["bets"]["items"]["properties"]["bet"]
    payout = body_schema(document, "/winners")["properties"]["pools"]["items"]["properties"][
        "bets"
    ]["items"]["properties"]["bet"]["properties"]["payout"]
    movement = body_schema(document, "/admin/deposits")["properties"]["amount"]
    for amount in (bet["properties"]["amount"], bet["properties"]["rake"], payout, movement):
        kinds = {option["type"] for option in amount["anyOf"]}
        assert kinds == {"string", "number"}, amount
    validator = jsonschema_rs.validator_for(movement)
    assert validator.is_valid("10.00")
    assert validator.is_valid(10)
    assert not validator.is_valid("1e5")
    assert not validator.is_valid(-1)


def test_operator_movement_schema_names_user_currency_amount_and_reference(
    document: dict[str, Any],
) -> None:
    for path in MOVEMENTS:
        schema = body_schema(document, path)
        assert set(schema["required"]) == {"user", "currency", "amount", "reference"}
        validator = jsonschema_rs.validator_for(schema)
        good = {"user": "u1", "currency": "EUR", "amount": "100.00", "reference": "topup-1"}
        assert validator.is_valid({**good, "note": "unknown fields are fine"})
        assert not validator.is_valid({key: good[key] for key in ("user", "currency", "amount")})


# --- security and errors --------------------------------------------------------------------------


def test_security_schemes_declare_the_platform_jwt_and_the_operator_token(
    document: dict[str, Any],
) -> None:
    schemes = document["components"]["securitySchemes"]
    assert schemes["platformJwt"]["type"] == "http"
    assert schemes["platformJwt"]["scheme"] == "bearer"
    assert "<client_name> <JWT>" in schemes["platformJwt"]["bearerFormat"]
    assert (schemes["operatorToken"]["type"], schemes["operatorToken"]["scheme"]) == (
        "http",
        "bearer",
    )
    for path, item in document["paths"].items():
        for method, operation in item.items():
            expected: list[dict[str, list[str]]] | None = (
                [{"platformJwt": []}]
                if path in CALLBACKS
                else [{"operatorToken": []}]
                if path.startswith("/admin/")
                else None
            )
            assert operation.get("security") == expected, f"{method} {path}"


def test_error_answers_carry_real_examples_one_per_key(document: dict[str, Any]) -> None:
    documented: set[str] = set()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if int(status) < 400:
                    continue
                where = f"{method} {path} {status}"
                media = response["content"]["application/json"]
                assert media["schema"] == {"$ref": "#/components/schemas/ErrorBody"}, where
                examples = list(media["examples"].values())
                assert examples, where
                for example in examples:
                    value = example["value"]
                    assert set(value) == {"error", "message"}, where
                    assert ERROR_KEY.match(value["error"]), where
                    assert ERRORS[value["error"]][0] == int(status), where
                    assert example["summary"] == value["error"], where
                    documented.add(value["error"])
    assert {"user.insufficient_funds", "bet.not_found", "bet.already_settled"} <= documented
    assert {"auth.invalid_token", "operator.invalid_token", "store.unavailable"} <= documented
    # No generated filler anywhere: Litestar puts its random examples in schemas, as lists.
    filler = [node for node in walk(document) if isinstance(node.get("examples"), list)]
    assert not filler, filler[:3]


def test_place_bet_documents_402_and_settle_documents_already_refunded(
    document: dict[str, Any],
) -> None:
    place_bet = document["paths"]["/bets"]["post"]["responses"]
    assert "402" in place_bet
    assert "404" not in place_bet
    winners = document["paths"]["/winners"]["post"]["responses"]
    keys = {
        example["value"]["error"]
        for example in winners["409"]["content"]["application/json"]["examples"].values()
    }
    assert "bet.already_refunded" in keys


def test_an_example_error_matches_what_the_server_answers(client: TestClient[Any]) -> None:
    response = client.post(
        "/admin/withdrawals",
        content=b'{"user": "nobody", "currency": "EUR", "amount": "1.00", "reference": "w"}',
        headers={"Authorization": "Bearer operator-token-0123456789"},
    )
    assert response.status_code == 402
    assert response.json()["error"] == "user.insufficient_funds"
    assert ERRORS["user.insufficient_funds"][0] == 402


# --- the viewer -----------------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["/schema", "/schema/swagger"])
def test_schema_viewer_loads_nothing_from_the_internet(client: TestClient[Any], page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200
    html = response.text
    for url in re.findall(r"https?://[^\s\"'<>)]+", html):
        assert re.match(r"https?://(127\.0\.0\.1|localhost)[:/]", url), f"{page} loads {url}"
    assets = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)
    assert {asset.rsplit("/", 1)[-1] for asset in assets} >= {
        "swagger-ui-bundle.js",
        "swagger-ui.css",
        "favicon-32x32.png",
    }
    for asset in assets:
        fetched = client.get(asset)
        assert fetched.status_code == 200, asset
        assert len(fetched.content) > 100, asset
    bundle = client.get(next(asset for asset in assets if asset.endswith("bundle.js")))
    assert "javascript" in bundle.headers["content-type"]


def test_vendored_viewer_files_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["ledger"]
    package = ROOT / "src" / "ledger"
    files = [path for path in ASSETS_DIR.rglob("*") if path.is_file()]
    assert {path.name for path in files} >= {
        "swagger-ui-bundle.js",
        "swagger-ui-standalone-preset.js",
        "swagger-ui.css",
        "favicon-32x32.png",
        "LICENSE",
        "README.md",
    }
    for path in files:
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch(relative, pattern) for pattern in patterns), relative


def test_the_schema_routes_are_not_in_the_document(document: dict[str, Any]) -> None:
    assert not [path for path in document["paths"] if path.startswith("/schema")]


def test_the_delivery_journal_is_documented_with_duration_ms_a_number_as_it_answers(
    client: TestClient[Any], document: dict[str, Any]
) -> None:
    answered = client.get("/admin/deliveries", headers=OPERATOR_HEADERS)
    assert answered.status_code == 200
    ok = document["paths"]["/admin/deliveries"]["get"]["responses"]["200"]
    schema = ok["content"]["application/json"]["schema"]
    row = schema["properties"]["deliveries"]["items"]
    assert row["properties"]["duration_ms"]["type"] == "number"
    assert jsonschema_rs.validator_for(schema).is_valid(answered.json())
    assert jsonschema_rs.validator_for(schema).is_valid(
        ok["content"]["application/json"]["example"]
    )
