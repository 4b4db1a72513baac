"""The console's server-side rules through Litestar's test client: sign-in, cookies, CSRF,
fixation, roles, lockout, the audit log (also over ``GET /admin/audit``) and basic accessibility
of every page's HTML."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

import ledger
import ledger.operators
from ledger.http.logs import fingerprint
from ledger.operators import MAX_FAILURES, Operators
from support.console import PASSWORD, ROLES, csrf_of, sign_in
from support.httpkit import OPERATOR, OPERATOR_HEADERS, Wallet, serve


@pytest.fixture(autouse=True)
def cheap_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    # See tests/service/test_operators.py: the rules do not depend on scrypt's cost.
    monkeypatch.setattr(ledger.operators, "COST", (2**10, 8, 1))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    with serve(tmp_path) as found:
        with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
            staff = Operators(book.store)
            for name, role in ROLES.items():
                staff.add(name, role, PASSWORD)
        Wallet(found).deposit("u1", "10.00")
        yield found


def signed_in(client: TestClient[Any], name: str) -> str:
    """Sign ``name`` in; the CSRF token of their session."""
    answer = sign_in(client, name)
    assert answer.status_code == 303, answer.text
    return csrf_of(client.get("/console/overview").text)


def move(client: TestClient[Any], csrf: str | None, reference: str, **extra: str) -> Any:
    data = {
        "uid": "u1",
        "kind": "deposit",
        "currency": "EUR",
        "amount": "5",
        "reference": reference,
    }
    if csrf is not None:
        data["csrf"] = csrf
    return client.post("/console/users/movements", data={**data, **extra})


def available(client: TestClient[Any]) -> str:
    return str(Wallet(client).balance("u1")[0])


def audit(client: TestClient[Any], **params: Any) -> list[dict[str, Any]]:
    """The console's audit entries (the fixture's deposit over /admin is audited too, by the
    token's fingerprint: not what these tests are about)."""
    answer = client.get("/admin/audit", params=params, headers=OPERATOR_HEADERS)
    assert answer.status_code == 200, answer.text
    items = answer.json()["audit"]
    return [item for item in items if not (item["operator"] or "").startswith("token:")]


PAGES = ["/console/overview", "/console/users?uid=u1", "/console/bets", "/console/tournaments"]
PAGES += ["/console/check", "/console/audit", "/console/operators"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_sends_a_browser_without_a_session_to_sign_in(
    client: TestClient[Any], path: str
) -> None:
    answer = client.get(path, follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in"
    htmx = client.get(path, headers={"HX-Request": "true"}, follow_redirects=False)
    assert htmx.headers["hx-redirect"] == "/console/sign-in"


def test_session_cookie_is_httponly_samesite_strict_and_secure_only_under_tls(
    tmp_path: Path,
) -> None:
    with serve(tmp_path) as plain:
        with ledger.open_ledger(f"sqlite:///{tmp_path}/ledger.db") as book:
            Operators(book.store).add("ada", "admin", PASSWORD)
        cookie = sign_in(plain, "ada").headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        assert "path=/console" in cookie
        assert "secure" not in cookie
        tls = TestClient(plain.app, base_url="https://testserver.local")
        with tls:
            cookies = ";".join(sign_in(tls, "ada").headers.get_list("set-cookie")).lower()
        assert "secure" in cookies


def test_sign_in_without_its_form_token_is_refused(client: TestClient[Any]) -> None:
    client.get("/console/sign-in")
    data = {"name": "ada", "password": PASSWORD, "csrf": "forged"}
    answer = client.post("/console/sign-in", data=data, follow_redirects=False)
    assert answer.status_code == 403
    assert "csrf.invalid" in answer.text
    assert client.get("/console/overview", follow_redirects=False).status_code == 303


def test_a_planted_session_cookie_is_never_promoted_at_sign_in(client: TestClient[Any]) -> None:
    # The attacker's own valid session token, planted in the victim's browser before sign-in.
    attacker = sign_in(client, "vic").cookies["ledger_console"]
    client.cookies.clear()
    client.cookies.set("ledger_console", attacker, path="/console")
    victim = sign_in(client, "cal")
    fresh = victim.cookies["ledger_console"]
    assert fresh != attacker
    client.cookies.clear()
    client.cookies.set("ledger_console", attacker, path="/console")
    assert client.get("/console/overview", follow_redirects=False).status_code == 303


def test_a_form_without_the_sessions_csrf_token_changes_nothing(client: TestClient[Any]) -> None:
    signed_in(client, "cal")
    assert move(client, None, "r1").status_code == 403
    assert move(client, "forged", "r2").status_code == 403
    assert available(client) == "10.00"
    assert audit(client, action="deposit") == []


def test_htmx_sends_the_csrf_token_as_a_header(client: TestClient[Any]) -> None:
    csrf = signed_in(client, "cal")
    data = {"uid": "u1", "kind": "deposit", "currency": "EUR", "amount": "1", "reference": "h"}
    answer = client.post(
        "/console/users/movements",
        data=data,
        headers={"HX-Request": "true", "X-CSRF-Token": csrf},
    )
    assert answer.status_code == 200, answer.text
    assert 'id="movement-done"' in answer.text
    assert "<html" not in answer.text  # only the fragment htmx swaps in
    assert available(client) == "11.00"


def test_a_cashiers_deposit_lands_once_however_often_the_form_is_sent(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "cal")
    first, again = move(client, csrf, "ticket-7"), move(client, csrf, "ticket-7")
    assert "applied; the balances and the statement show it" in first.text
    assert "already applied earlier" in again.text
    assert available(client) == "15.00"
    entries = audit(client, action="deposit")
    assert [entry["detail"]["applied"] for entry in entries] == [False, True]
    assert {(entry["operator"], entry["target"], entry["outcome"]) for entry in entries} == {
        ("cal", "u1", "ok")
    }


def test_a_deposit_needs_a_reference(client: TestClient[Any]) -> None:
    csrf = signed_in(client, "cal")
    answer = move(client, csrf, "  ")
    assert answer.status_code == 400
    assert "reference.missing" in answer.text
    assert available(client) == "10.00"


def test_a_viewer_is_refused_money_movements_and_the_refusal_is_audited(
    client: TestClient[Any],
) -> None:
    csrf = signed_in(client, "vic")
    page = client.get("/console/users?uid=u1").text
    assert 'id="movement"' not in page  # no form offered
    answer = move(client, csrf, "r1", kind="withdrawal")
    assert answer.status_code == 403
    assert "operator.forbidden" in answer.text
    assert available(client) == "10.00"
    (entry,) = audit(client, action="withdrawal")
    assert (entry["operator"], entry["outcome"]) == ("vic", "operator.forbidden")


def test_only_an_admin_runs_check_and_each_run_is_audited(client: TestClient[Any]) -> None:
    csrf = signed_in(client, "cal")
    refused = client.post("/console/check", data={"csrf": csrf})
    assert refused.status_code == 403
    csrf = signed_in(client, "ada")
    ran = client.post("/console/check", data={"csrf": csrf})
    assert ran.status_code == 200
    assert 'id="check-ok"' in ran.text
    outcomes = [(e["operator"], e["outcome"]) for e in audit(client, action="check")]
    assert outcomes == [("ada", "ok"), ("cal", "operator.forbidden")]
    assert "Books balance" in client.get("/console/overview").text


def test_only_an_admin_manages_operators(client: TestClient[Any]) -> None:
    csrf = signed_in(client, "cal")
    assert client.get("/console/operators").status_code == 403
    data = {"csrf": csrf, "do": "add", "name": "eve", "role": "admin", "password": PASSWORD}
    assert client.post("/console/operators", data=data).status_code == 403
    csrf = signed_in(client, "ada")
    added = client.post("/console/operators", data={**data, "csrf": csrf, "role": "viewer"})
    assert added.status_code == 200
    assert ">eve<" in added.text
    disabled = client.post(
        "/console/operators", data={"csrf": csrf, "do": "disable", "name": "eve"}
    )
    assert disabled.status_code == 200
    changes = [
        (e["operator"], e["action"], e["target"], e["outcome"])
        for e in audit(client)
        if e["action"].startswith("operator_")
    ]
    assert changes == [
        ("ada", "operator_disable", "eve", "ok"),
        ("ada", "operator_add", "eve", "ok"),
        ("cal", "operator_add", "eve", "operator.forbidden"),
    ]
    client.cookies.clear()
    assert sign_in(client, "eve").status_code == 401


def test_repeated_failed_sign_ins_lock_the_account(client: TestClient[Any]) -> None:
    for _ in range(MAX_FAILURES):
        assert sign_in(client, "ada", "wrong password").status_code == 401
    locked = sign_in(client, "ada")
    assert locked.status_code == 401
    assert "auth.sign_in_failed" not in locked.headers.get("location", "")
    reasons = [e["detail"]["reason"] for e in audit(client, action="sign_in")]
    assert reasons == ["locked"] + ["bad_password"] * MAX_FAILURES


def test_sign_out_ends_the_session_for_good(client: TestClient[Any]) -> None:
    csrf = signed_in(client, "vic")
    token = client.cookies["ledger_console"]
    out = client.post("/console/sign-out", data={"csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303
    client.cookies.set("ledger_console", token, path="/console")
    assert client.get("/console/overview", follow_redirects=False).status_code == 303
    assert [e["action"] for e in audit(client)][:2] == ["sign_out", "sign_in"]


def test_pages_show_balances_statement_bet_report_and_escape_what_they_show(
    client: TestClient[Any],
) -> None:
    signed_in(client, "vic")
    user = client.get("/console/users", params={"uid": "u1"}).text
    assert ">10.00<" in user
    assert "dep-u1-10.00" in user  # the statement line's reference
    hostile = client.get("/console/users", params={"uid": "<script>x</script>"}).text
    assert "<script>x</script>" not in hostile
    assert client.get("/console/bets", params={"uid": "77"}).status_code == 404
    assert client.get("/console/bets", params={"uid": "x"}).status_code == 400
    # A tournament no payload and no bet named is unknown, as on /admin/tournaments/{uid}.
    unknown = client.get("/console/tournaments", params={"uid": "5"})
    assert unknown.status_code == 404
    assert "tournament.not_found" in unknown.text


def test_the_audit_log_is_paged_and_exported_and_the_export_is_audited(
    client: TestClient[Any],
) -> None:
    signed_in(client, "ada")
    exported = client.get("/console/audit.csv")
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert rows[0]["action"] == "export"
    first = client.get("/admin/audit", params={"limit": 1}, headers=OPERATOR_HEADERS).json()
    second = client.get(
        "/admin/audit", params={"limit": 1, "after": first["next"]}, headers=OPERATOR_HEADERS
    ).json()
    assert [first["audit"][0]["action"], second["audit"][0]["action"]] == ["export", "sign_in"]
    as_csv = client.get("/admin/audit", params={"format": "csv"}, headers=OPERATOR_HEADERS)
    assert as_csv.text.splitlines()[0] == "id,at,operator,ip,action,target,outcome,detail"
    # The export over the API is audited too, by the token's fingerprint (never the token).
    assert as_csv.text.splitlines()[1].split(",")[2:6] == [
        f"token:{fingerprint(OPERATOR)}",
        "",
        "export",
        "audit",
    ]


def test_the_audit_api_needs_the_operator_token(client: TestClient[Any]) -> None:
    assert client.get("/admin/audit").status_code == 401
    bad = client.get("/admin/audit", params={"after": "nope"}, headers=OPERATOR_HEADERS)
    assert bad.status_code == 400


# The accessibility check of every page, as each role and on both stores, is in
# tests/http/test_console_books.py.
