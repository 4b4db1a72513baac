"""The OpenAPI document (``/schema/openapi.json``) and its viewer (``/schema``), served offline.

The callback handlers read their bodies raw (so that every amount stays exact), which leaves
Litestar nothing to describe them from; the request schemas are generated here from the same
msgspec structs that parse the bodies (:mod:`ledger.contract`), so the document cannot drift
from what the server accepts. Unknown fields are allowed at every level (``additionalProperties:
true``), as the contract requires, and amounts are JSON numbers or decimal strings.

Error answers are documented with real examples (``{"error": "user.insufficient_funds",
"message": ...}``), one per key the route can answer, grouped by status.

The viewer is Swagger UI, vendored in ``static/swagger-ui`` (see the README there) and served
from the package: an operator's network without internet access still gets a working page, and
the page loads nothing from anywhere else.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
from litestar import Router
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import (
    Components,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    RequestBody,
    SecurityScheme,
)
from litestar.static_files import create_static_files_router
from msgspec import Struct

from ..contract import (
    AmountField,
    Currency,
    PlaceBetsRequest,
    RefundRequest,
    SettleRequest,
    Text,
    UserUid,
)
from .error_docs import CALLBACK_ERRORS, ERRORS, INPUT_ERRORS, OPERATOR_ERRORS, error_responses

__all__ = [
    "ASSETS_PATH",
    "DELIVERIES",
    "OPERATOR_SECURITY",
    "PLATFORM_SECURITY",
    "callback_docs",
    "openapi_assets",
    "openapi_config",
    "operator_docs",
]

SCHEMA_PATH = "/schema"
ASSETS_PATH = f"{SCHEMA_PATH}/assets"
ASSETS_DIR = Path(__file__).parent / "static" / "swagger-ui"

PLATFORM_SCHEME = "platformJwt"
OPERATOR_SCHEME = "operatorToken"
PLATFORM_SECURITY: list[dict[str, list[str]]] = [{PLATFORM_SCHEME: []}]
OPERATOR_SECURITY: list[dict[str, list[str]]] = [{OPERATOR_SCHEME: []}]

SECURITY_SCHEMES: dict[str, SecurityScheme] = {
    PLATFORM_SCHEME: SecurityScheme(
        type="http",
        scheme="bearer",
        bearer_format="<client_name> <JWT>",
        description=(
            "The platform's header: `Authorization: Bearer <client_name> <JWT>`, the JWT signed "
            "with `LEDGER_JWT_SECRET` (HS256 by default), `exp` required, `role` `user` or "
            "`admin` (refunds and settles need `admin` and one of `id`, `uid`, `sub`). Enter "
            "`<client_name> <JWT>` here, e.g. the output of `ledger token` without `Bearer `."
        ),
    ),
    OPERATOR_SCHEME: SecurityScheme(
        type="http",
        scheme="bearer",
        description="`Authorization: Bearer <LEDGER_OPERATOR_TOKEN>`; the API is 403 without one.",
    ),
}


# --- request bodies -------------------------------------------------------------------------------


class MovementRequest(Struct):
    """A deposit or withdrawal. A reused ``reference`` is answered as the first time (or 409
    ``reference.conflict`` for a different movement): it is what makes a retry land once."""

    user: UserUid
    currency: Currency
    amount: AmountField
    reference: Text


def body_schema(model: type[Struct]) -> dict[str, Any]:
    """The JSON Schema of ``model`` as the server reads it, inlined (no ``$ref``)."""
    schema = msgspec.json.schema(model)
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return inline(copy.deepcopy(definitions[node["$ref"].rsplit("/", 1)[-1]]))
        result = {key: inline(value) for key, value in node.items()}
        if result.get("type") == "object":
            # The contract: unknown fields are ignored, at every level.
            result["additionalProperties"] = True
        return result

    inlined: dict[str, Any] = inline(schema)
    return inlined


def _json_response(description: str, schema: dict[str, Any], example: Any) -> OpenAPIResponse:
    return OpenAPIResponse(
        description=description,
        content={"application/json": OpenAPIMediaType(schema=schema, example=example)},  # type: ignore[arg-type]
    )


def _operation(
    body: dict[str, Any] | None, example: Any, success: OpenAPIResponse | None
) -> type[Operation]:
    """An :class:`Operation` that documents a raw-read body and a precise 200 answer."""
    request_body = (
        RequestBody(
            content={
                "application/json": OpenAPIMediaType(schema=body, example=example)  # type: ignore[arg-type]
            },
            required=True,
        )
        if body is not None
        else None
    )

    @dataclass
    class Documented(Operation):
        def __post_init__(self) -> None:
            if request_body is not None:
                self.request_body = request_body
            if success is not None and self.responses is not None:
                self.responses["200"] = success

    return Documented


_SECRETS = _json_response(
    "Held (or a re-send: nothing done); `secrets` are echoed by later callbacks",
    {
        "type": "object",
        "required": ["secrets"],
        "properties": {"secrets": {"type": "object", "additionalProperties": True}},
    },
    {"secrets": {"ledger_ref": "6fc6153c9b65456c9cec31e790d7ae2c"}},
)
_CLOSED = _json_response(
    "Applied: `closed` bets changed now, `unchanged` ones were already in this state",
    {
        "type": "object",
        "required": ["closed", "unchanged"],
        "properties": {
            "closed": {"type": "integer", "minimum": 0},
            "unchanged": {"type": "integer", "minimum": 0},
        },
    },
    {"closed": 2, "unchanged": 0},
)
_MOVED = _json_response(
    "Done (`applied: true`), or already done under this reference (`applied: false`)",
    {
        "type": "object",
        "required": ["reference", "user", "currency", "amount", "applied"],
        "properties": {
            "reference": {"type": "string"},
            "user": {"type": "string"},
            "currency": {"type": "string"},
            "amount": {"type": "string", "description": "With the currency's scale"},
            "applied": {"type": "boolean"},
        },
    },
    {"reference": "topup-1", "user": "u1", "currency": "EUR", "amount": "100.00", "applied": True},
)

# Request examples as the platform sends them (contract 4.1), unknown fields included; whole
# amounts as JSON integers, so that no binary float appears even in an example.
_DELIVERY_EXAMPLE = {
    "id": 12,
    "received_at": "2026-06-01T12:00:00.123456Z",
    "request_id": "6fc6153c-9b65-456c-9cec-31e790d7ae2c",
    "event": "create:fantasy_team",
    "path": "/bets",
    "client": "acme",
    "subject": "platform",
    "address": "203.0.113.7",
    "status": 200,
    "error": None,
    "bet_count": 1,
    "bet_uids": [1],
    "duration_ms": 2.25,
}
DELIVERIES = _json_response(
    "A page of the delivery journal, newest first; `next` is the `before` of the next page",
    {
        "type": "object",
        "required": ["deliveries", "next"],
        "properties": {
            "deliveries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer"},
                        "received_at": {"type": "string", "format": "date-time"},
                        "request_id": {"type": ["string", "null"]},
                        "event": {"type": "string"},
                        "path": {"type": "string"},
                        "client": {"type": ["string", "null"]},
                        "subject": {"type": ["string", "null"]},
                        "address": {"type": ["string", "null"]},
                        "status": {"type": "integer"},
                        "error": {"type": ["string", "null"]},
                        "bet_count": {"type": "integer", "minimum": 0},
                        "bet_uids": {"type": "array", "items": {"type": "integer"}},
                        "duration_ms": {
                            "type": "number",
                            "minimum": 0,
                            "description": "Milliseconds, to the microsecond, as in the logs",
                        },
                    },
                },
            },
            "next": {"type": ["string", "null"]},
        },
    },
    {"deliveries": [_DELIVERY_EXAMPLE], "next": "WzEyXQ"},
)

_USER = {"client": "acme", "uid": "u1", "name": "Ann"}
_POOL = {"client": "acme", "game": "fantasy", "uid": 7, "name": "Sunday Cup", "currency": "EUR"}
_PLACE_EXAMPLE = {
    "bets": [
        {
            "user": _USER,
            "pool": _POOL,
            "bet": {
                "uid": 1001,
                "uuid": "7|9b2f0c1e",
                "amount": 10,
                "rake": 1,
                "currency": "EUR",
            },
        }
    ]
}
_REFUND_EXAMPLE = {
    "pools": [
        {
            "pool": {**_POOL, "status": "cancelled"},
            "bets": [{"user": _USER, "bet": {"uid": 1001, "amount": 10, "rake": 1}}],
        }
    ]
}
_SETTLE_EXAMPLE = {
    "pools": [
        {
            "pool": {**_POOL, "status": "closed"},
            "bets": [
                {"user": _USER, "bet": {"uid": 1001, "payout": "25.00", "currency": "EUR"}},
                {"user": {"uid": "u2"}, "bet": {"uid": 1002, "payout": "0.00"}},
            ],
        }
    ]
}
_MOVEMENT_EXAMPLE = {"user": "u1", "currency": "EUR", "amount": "100.00", "reference": "topup-1"}

_CALLBACKS: dict[type[Struct], tuple[tuple[str, ...], Any, OpenAPIResponse]] = {
    PlaceBetsRequest: (
        (
            *CALLBACK_ERRORS,
            "user.insufficient_funds",
            "bet.conflict",
            "user.stake_limit_reached",
            "user.loss_limit_reached",
            "user.excluded",
        ),
        _PLACE_EXAMPLE,
        _SECRETS,
    ),
    RefundRequest: (
        (*CALLBACK_ERRORS, "bet.not_found", "bet.already_settled", "bet.conflict"),
        _REFUND_EXAMPLE,
        _CLOSED,
    ),
    SettleRequest: (
        (*CALLBACK_ERRORS, "bet.not_found", "bet.already_refunded", "bet.conflict"),
        _SETTLE_EXAMPLE,
        _CLOSED,
    ),
}


def callback_docs(model: type[Struct]) -> dict[str, Any]:
    """The documentation arguments of a callback route whose body is ``model``."""
    keys, example, success = _CALLBACKS[model]
    return {
        "responses": error_responses(sorted(keys, key=lambda key: ERRORS[key][0])),
        "security": PLATFORM_SECURITY,
        "operation_class": _operation(body_schema(model), example, success),
    }


def operator_docs(
    *keys: str,
    movement: bool = False,
    funds: bool = False,
    success: OpenAPIResponse | None = None,
) -> dict[str, Any]:
    """The documentation arguments of an operator route answering ``keys`` (besides auth and
    database errors); ``movement`` for a deposit or withdrawal, ``funds`` when it can be 402;
    ``success``, the 200 answer's schema where it is documented (``DELIVERIES``).

    A route with path or query parameters must name ``request.invalid``: Litestar documents
    its own 400 for them otherwise, in a shape this server never answers.
    """
    if movement:
        keys = (*keys, *INPUT_ERRORS, "reference.conflict")
    if funds:
        keys = (*keys, "user.insufficient_funds")
    ordered = sorted({*keys, *OPERATOR_ERRORS}, key=lambda key: (ERRORS[key][0], key))
    docs: dict[str, Any] = {"responses": error_responses(ordered)}
    if movement:
        docs["operation_class"] = _operation(
            body_schema(MovementRequest), _MOVEMENT_EXAMPLE, _MOVED
        )
    elif success is not None:
        docs["operation_class"] = _operation(None, None, success)
    return docs


# --- the document and its viewer ------------------------------------------------------------------


def openapi_config(*, title: str, version: str, description: str) -> OpenAPIConfig:
    """The OpenAPI configuration: security schemes, and Swagger UI served from the package."""
    viewer = SwaggerRenderPlugin(
        js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
        css_url=f"{ASSETS_PATH}/swagger-ui.css",
        standalone_preset_js_url=f"{ASSETS_PATH}/swagger-ui-standalone-preset.js",
        favicon=f"<link rel='icon' type='image/png' href='{ASSETS_PATH}/favicon-32x32.png'>",
        path="/swagger",
    )
    return OpenAPIConfig(
        title=title,
        version=version,
        description=description,
        path=SCHEMA_PATH,
        components=Components(security_schemes=dict(SECURITY_SCHEMES)),
        render_plugins=[viewer],
    )


def openapi_assets() -> Router:
    """The vendored viewer's files, under :data:`ASSETS_PATH`."""
    return create_static_files_router(
        path=ASSETS_PATH,
        directories=[ASSETS_DIR],
        name="openapi_assets",
        include_in_schema=False,
    )
