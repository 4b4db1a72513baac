"""Hostile input over real HTTP: never a 5xx, never a ledger change, always ``{"error": ...}``.

Two sources of hostile requests against one ``ledger serve`` process:

- schemathesis, generating requests for every route of the served OpenAPI schema
  (``/schema/openapi.json``), with valid credentials so that the requests get past auth;
- our own corpus of bodies on every body-taking route: malformed and truncated JSON, wrong
  types, huge and tiny numbers, exponents, NaN and Infinity, negative amounts, duplicate keys,
  deep nesting, long strings, non-UTF-8 bytes, a body over the limit, wrong content types.

Before and after, the journal counts and balances (``/admin/check``, ``/admin/users/*``) must be
identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from schemathesis.core.parameters import ParameterLocation

from support.httpkit import PLACE, REFUND_BET, SETTLE, dumps, headers, server_env
from support.killable import LedgerProcess
from support.operator_calls import OPERATOR_AUTH, deposit, snapshot
from support.payloads import entry, place, refund, settle

MAX_BODY = 1024 * 1024
USERS = ["rich", "nobody"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerProcess]:
    tmp_path = tmp_path_factory.mktemp("hostile")
    env = server_env(f"sqlite:///{tmp_path}/wallet.db", LEDGER_MAX_BODY_BYTES=str(MAX_BODY))
    with LedgerProcess(tmp_path, env) as process, httpx.Client(base_url=process.url) as http:
        deposit(http, "rich", "500.00")
        # A placed bet, so that refunds and settles have something real to aim at.
        placed = http.post(
            "/bets", content=dumps(place(entry(1, user="rich"))), headers=headers(PLACE)
        )
        assert placed.status_code == 200, placed.text
        yield process


def assert_refused(response: httpx.Response, what: str) -> None:
    assert 400 <= response.status_code < 500, (
        f"{what}: {response.status_code} {response.text[:300]}"
    )
    body = response.json()
    assert isinstance(body, dict), what
    assert isinstance(body.get("error"), str), f"{what}: {body}"


# --- our corpus -----------------------------------------------------------------------------------

VALID = dumps(place(entry(77, user="rich")))


def with_bet(**fields: Any) -> bytes:
    """A Place Bet body for the funded user with ``bet`` fields replaced by raw JSON text."""
    body = place(entry(78, user="rich"))
    for name in fields:
        body["bets"][0]["bet"][name] = f"@@{name}@@"
    text = dumps(body).decode()
    for name, raw in fields.items():
        text = text.replace(f'"@@{name}@@"', raw)
    return text.encode()


def with_user(uid: str) -> bytes:
    return dumps(place(entry(79, user=uid)))


def deep(levels: int) -> bytes:
    return b'{"bets": ' + b"[" * levels + b"]" * levels + b"}"


CORPUS: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b"   \n\t ",
    "open brace": b"{",
    "truncated": VALID[: len(VALID) // 2],
    "truncated by one": VALID[:-1],
    "trailing garbage": VALID + b"}",
    "two documents": VALID + VALID,
    "null": b"null",
    "array": b"[]",
    "number": b"42",
    "string": b'"bets"',
    "empty object": b"{}",
    "bets object": b'{"bets": {}}',
    "bets string": b'{"bets": "all"}',
    "bets numbers": b'{"bets": [1, 2]}',
    "bets empty entry": b'{"bets": [{}]}',
    "amount string": with_bet(amount='"ten"'),
    "amount bool": with_bet(amount="true"),
    "amount null": with_bet(amount="null"),
    "amount object": with_bet(amount='{"value": 1}'),
    "uid string": with_bet(uid='"abc"'),
    "uid float": with_bet(uid="1.5"),
    "uid huge": with_bet(uid="1" + "0" * 30),
    "uid huge negative": with_bet(uid="-1" + "0" * 30),
    "currency number": with_bet(currency="978"),
    "amount 1e400": with_bet(amount="1e400"),
    "amount -1e400": with_bet(amount="-1e400"),
    "amount 1e-400": with_bet(amount="1e-400"),
    "amount 1e308": with_bet(amount="1e308"),
    "amount 10^400": with_bet(amount="1" + "0" * 400),
    "amount many digits": with_bet(amount="0." + "1" * 5000),
    "amount sub-cent": with_bet(amount="0.001"),
    "amount NaN": with_bet(amount="NaN"),
    "amount Infinity": with_bet(amount="Infinity"),
    "amount -Infinity": with_bet(amount="-Infinity"),
    "amount NaN string": with_bet(amount='"NaN"'),
    "amount Infinity string": with_bet(amount='"Infinity"'),
    "amount negative": with_bet(amount="-10.00"),
    "amount negative cent": with_bet(amount="-0.01"),
    "rake negative": with_bet(rake="-1.00"),
    "nesting 100k": deep(100_000),
    "bare nesting 100k": b"[" * 100_000,
    "object nesting 100k": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "long user uid": with_user("u" * 200_000),
    "long currency": with_bet(currency=json.dumps("E" * 100_000)),
    "long key": b'{"' + b"k" * 500_000 + b'": 1, "bets": []}',
    "non-utf8 in string": b'{"bets": [{"user": {"uid": "\xff\xfe"}}]}',
    "non-utf8 outside strings": b'{"bets": \xc3\x28}',
    "utf-16 body": VALID.decode().encode("utf-16"),
    "nul byte": b'{"bets": [\x00]}',
    "lone surrogate escape": with_user("\udc00".encode("utf-8", "surrogatepass").decode("latin-1")),
    "over the limit": b'{"bets": [], "pad": "' + b" " * (MAX_BODY + 10) + b'"}',
}


@pytest.mark.parametrize("path", ["/bets", "/bets/cancel", "/winners"])
def test_hostile_bodies_are_refused_with_a_json_error_and_change_nothing(
    server: LedgerProcess, path: str
) -> None:
    event = {"/bets": PLACE, "/bets/cancel": REFUND_BET, "/winners": SETTLE}[path]
    with httpx.Client(base_url=server.url, timeout=60) as http:
        before = snapshot(http, USERS)
        for name, body in CORPUS.items():
            response = http.post(path, content=body, headers=headers(event))
            assert_refused(response, f"{path} {name}")
        after = snapshot(http, USERS)
    assert after == before


def test_hostile_bodies_on_operator_money_routes_are_refused_and_change_nothing(
    server: LedgerProcess,
) -> None:
    corpus = {
        **CORPUS,
        "amount NaN": b'{"user": "rich", "currency": "EUR", "amount": NaN, "reference": "x1"}',
        "amount 1e400": b'{"user": "rich", "currency": "EUR", "amount": 1e400, "reference": "x2"}',
        "amount negative": (
            b'{"user": "rich", "currency": "EUR", "amount": "-5", "reference": "x3"}'
        ),
        "user number": b'{"user": 5, "currency": "EUR", "amount": "5", "reference": "x4"}',
    }
    with httpx.Client(base_url=server.url, timeout=60) as http:
        before = snapshot(http, USERS)
        for path in ("/admin/deposits", "/admin/withdrawals"):
            for name, body in corpus.items():
                response = http.post(
                    path,
                    content=body,
                    headers={**OPERATOR_AUTH, "Content-Type": "application/json"},
                )
                assert_refused(response, f"{path} {name}")
        after = snapshot(http, USERS)
    assert after == before


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
        "json",
    ],
)
def test_valid_body_with_a_wrong_content_type_is_refused_and_changes_nothing(
    server: LedgerProcess, content_type: str
) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        before = snapshot(http, USERS)
        for path, event, body in (
            ("/bets", PLACE, VALID),
            ("/bets/cancel", REFUND_BET, dumps(refund(7, (1, "rich")))),
            ("/winners", SETTLE, dumps(settle(7, (1, "5.00", "rich")))),
        ):
            response = http.post(
                path, content=body, headers=headers(event, **{"Content-Type": content_type})
            )
            assert response.status_code == 415, f"{path} {content_type!r}: {response.text}"
            assert_refused(response, path)
        deposit_body = b'{"user": "rich", "currency": "EUR", "amount": "5", "reference": "ct"}'
        response = http.post(
            "/admin/deposits",
            content=deposit_body,
            headers={**OPERATOR_AUTH, "Content-Type": content_type},
        )
        assert_refused(response, f"deposit {content_type!r}")
        assert snapshot(http, USERS) == before


def test_json_content_type_with_parameters_is_accepted(server: LedgerProcess) -> None:
    free = dumps(place(entry(90, user="nobody", amount=Decimal(0), rake=Decimal(0))))
    with httpx.Client(base_url=server.url) as http:
        response = http.post(
            "/bets",
            content=free,
            headers=headers(PLACE, **{"Content-Type": "application/json; charset=utf-8"}),
        )
    assert response.status_code == 200, response.text


def test_a_duplicated_key_counts_once_with_its_last_value_and_answers_consistently(
    server: LedgerProcess,
) -> None:
    # Decided: msgspec semantics, the last value wins. The unfunded user cannot pay, so whatever
    # value wins, the answer is a refusal and nothing moves; what matters is that it is the same
    # answer every time, and the same as for the body with only the last value.
    last = dumps(place(entry(91, user="nobody"))).decode()
    first = dumps(place(entry(92, user="nobody", amount=Decimal(0), rake=Decimal(0)))).decode()
    duplicated = (first[:-1] + ", " + last[1:]).encode()  # {"bets": [free], "bets": [paid]}
    inner = dumps(place(entry(93, user="nobody"))).decode()
    # A duplicated amount inside the bet: 0 first, 10.00 last.
    assert '"amount": 10.00' in inner
    inner_dup = inner.replace('"amount": 10.00', '"amount": 0, "amount": 10.00', 1).encode()
    with httpx.Client(base_url=server.url) as http:
        before = snapshot(http, USERS)
        for body, alone in ((duplicated, last.encode()), (inner_dup, inner.encode())):
            answers = {
                (response.status_code, response.json().get("error"))
                for response in (
                    http.post("/bets", content=payload, headers=headers(PLACE))
                    for payload in (body, body, alone)
                )
            }
            assert answers == {(402, "user.insufficient_funds")}, answers
        assert snapshot(http, USERS) == before


# --- schemathesis ---------------------------------------------------------------------------------
#
# Generated from the served document, which describes every request body (generated from the
# payload structs), so schemathesis fuzzes bodies as well as paths, queries and headers, each
# request with valid credentials or none. Two runs:
#
# - negative: requests that break the document (a field missing, of the wrong type, out of
#   range, not matching its pattern): every one is refused with a JSON error and, over the whole
#   run, the ledger does not change at all;
# - positive: requests the document allows, which the ledger may well apply (a deposit to a
#   generated user, a free entry): never a 5xx, always a JSON error on a 4xx, the books stay
#   balanced, the seeded users are untouched, and every request applied (200) is sent again and
#   the re-send changes nothing.
#
# The default run keeps to about 30 s; the slow run generates ten times as many requests, with
# lists of any length.

EXAMPLES = 25
MAX_ITEMS = 3
SLOW_EXAMPLES = 250


def credentials(path: str) -> dict[str, str]:
    if path.startswith("/admin"):
        return OPERATOR_AUTH
    return {"Authorization": headers(None)["Authorization"]}


def counts(url: str) -> tuple[int, int, int, int]:
    with httpx.Client(base_url=url) as http:
        return snapshot(http, []).counts


def check_answer(where: str, response: Any, failures: list[str]) -> None:
    if response.status_code >= 500:
        failures.append(f"{where}: {response.status_code} {response.text[:200]}")
    elif response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = None
        if not (isinstance(body, dict) and isinstance(body.get("error"), str)):
            failures.append(f"{where}: {response.status_code} without a JSON error")


# POSTs that only read: a 200 to a request breaking the schema (Schemathesis adds unknown query
# parameters, which every route ignores) applies nothing.
READ_ONLY_POSTS = frozenset({"/admin/reconciliations"})


def fuzz(
    url: str,
    operation: Any,
    mode: Any,
    examples: int,
    failures: list[str],
    statuses: dict[str, set[int]],
) -> None:
    """Send ``examples`` generated requests for ``operation``.

    Requests that break the schema go with and without credentials; valid ones always with
    (without, each is a 401, which ``test_reliability_auth`` covers). The default run is
    derandomized, so that it sends the same requests every time; the slow run explores.
    """
    with_auth = st.booleans() if mode.value == "negative" else st.just(True)

    @given(case=operation.as_strategy(generation_mode=mode), with_auth=with_auth)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=examples <= EXAMPLES,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any, with_auth: bool) -> None:
        if mode.value == "negative" and operation.body:
            # Schemathesis may break only the Authorization header (the security scheme) and
            # leave a valid body, which our credentials then make a valid request: keep only
            # cases whose body breaks the schema.
            body = case.meta.components.get(ParameterLocation.BODY) if case.meta else None
            assume(body is not None and body.mode == mode)
        auth = credentials(operation.path) if with_auth else None
        response = case.call(base_url=url, headers=auth)
        where = f"{mode.value} {case.method} {case.formatted_path} {case.body!r:.300}"
        check_answer(where, response, failures)
        statuses.setdefault(f"{case.method} {operation.path}", set()).add(response.status_code)
        if case.method == "POST" and response.status_code == 200:
            if operation.path in READ_ONLY_POSTS:
                return  # answers a report and writes nothing: the snapshots prove it
            if mode.value == "negative":
                failures.append(f"{where}: a request breaking the schema was applied")
                return
            before = counts(url)
            again = case.call(base_url=url, headers=auth)
            if again.status_code != 200 or counts(url) != before:
                failures.append(f"{where}: the re-send answered {again.status_code} or moved money")

    run()


def operations(url: str, max_items: int | None) -> list[Any]:
    """The served document's operations; lists generated with at most ``max_items`` entries.

    Without a cap, a refund or settle body takes hypothesis about 0.4 s to generate (bodies of
    up to 50 KB), most of the default run's time; the server applies the same per-entry rules
    to the third entry as to the thousandth, so the default run caps lists at three entries
    and the slow run lifts the cap.
    """
    import schemathesis

    document = httpx.get(f"{url}/schema/openapi.json").json()
    if max_items is not None:
        for node in nodes(document):
            if node.get("type") == "array":
                node["maxItems"] = max_items
    schema = schemathesis.openapi.from_dict(document)
    found = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    paths = {operation.path for operation in found}
    assert {"/bets", "/bets/cancel", "/winners", "/admin/deposits", "/health"} <= paths
    return found


def nodes(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from nodes(item)
    elif isinstance(value, list):
        for item in value:
            yield from nodes(item)


def fuzz_schema_violations(server: LedgerProcess, examples: int, max_items: int | None) -> None:
    from schemathesis import GenerationMode

    failures: list[str] = []
    statuses: dict[str, set[int]] = {}
    with httpx.Client(base_url=server.url) as http:
        before = snapshot(http, USERS)
    for operation in operations(server.url, max_items):
        if operation.body or operation.path_parameters or operation.query:
            fuzz(server.url, operation, GenerationMode.NEGATIVE, examples, failures, statuses)
    assert not failures, "\n".join(failures[:20])
    # The bodies were fuzzed, not only refused at the door: each reached its validation.
    for route in ("POST /bets", "POST /winners", "POST /admin/deposits"):
        assert 400 in statuses[route], (route, statuses[route])
    with httpx.Client(base_url=server.url) as http:
        assert snapshot(http, USERS) == before


def fuzz_valid_requests(server: LedgerProcess, examples: int, max_items: int | None) -> None:
    from schemathesis import GenerationMode

    failures: list[str] = []
    statuses: dict[str, set[int]] = {}
    with httpx.Client(base_url=server.url) as http:
        before = snapshot(http, USERS)
    for operation in operations(server.url, max_items):
        fuzz(server.url, operation, GenerationMode.POSITIVE, examples, failures, statuses)
    assert not failures, "\n".join(failures[:20])
    # Valid bodies got past validation into the ledger: money moved, or was refused for want
    # of it, or for a bet it does not know.
    assert 200 in statuses["POST /admin/deposits"], statuses["POST /admin/deposits"]
    assert statuses["POST /bets"] & {200, 402, 409}, statuses["POST /bets"]
    assert statuses["POST /winners"] & {200, 404, 409}, statuses["POST /winners"]
    with httpx.Client(base_url=server.url) as http:
        after = snapshot(http, USERS)  # asserts /admin/check is ok
    assert after.balances == before.balances


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_schemathesis_requests_breaking_the_schema_are_refused_and_change_nothing(
    server: LedgerProcess,
) -> None:
    fuzz_schema_violations(server, EXAMPLES, MAX_ITEMS)


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_schemathesis_valid_requests_never_5xx_and_their_resends_change_nothing(
    server: LedgerProcess,
) -> None:
    fuzz_valid_requests(server, EXAMPLES, MAX_ITEMS)


@pytest.mark.slow
def test_schemathesis_longer_run_breaking_the_schema(server: LedgerProcess) -> None:
    fuzz_schema_violations(server, SLOW_EXAMPLES, None)


@pytest.mark.slow
def test_schemathesis_longer_run_of_valid_requests(server: LedgerProcess) -> None:
    fuzz_valid_requests(server, SLOW_EXAMPLES, None)
