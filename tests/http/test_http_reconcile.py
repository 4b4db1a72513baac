"""``POST /admin/reconciliations``: the platform's file as the body, the report as the answer."""

from __future__ import annotations

from pathlib import Path

from support.httpkit import OPERATOR_HEADERS, Wallet, serve
from support.payloads import entry, place

RECORD = (
    b"uid\tuser\tpool\tamount\trake\tcurrency\tstatus\n"
    b"1\tu1\t7\t10.00\t1.00\tEUR\tactive\n"
    b"2\tu1\t7\t10.00\t1.00\tEUR\tactive\n"
)


def books(wallet: Wallet) -> None:
    wallet.deposit("u1", "50.00")
    assert wallet.place(place(entry(1), entry(2))).status_code == 200


def test_the_report_answers_whether_the_file_agrees_with_the_books(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        wallet = Wallet(client)
        books(wallet)
        clean = client.post("/admin/reconciliations", content=RECORD, headers=OPERATOR_HEADERS)
        differing = client.post(
            "/admin/reconciliations",
            content=RECORD.replace(b"1\tu1", b"3\tu1"),
            params={"limit": 1},
            headers=OPERATOR_HEADERS,
        )
        alone = client.post(
            "/admin/reconciliations",
            content=RECORD.replace(b"1\tu1", b"3\tu1"),
            params={"pools_only": "true"},
            headers=OPERATOR_HEADERS,
        )

    assert clean.status_code == 200, clean.text
    assert clean.json()["ok"] is True
    assert clean.json()["format"] == "tsv"
    assert clean.json()["counts"]["matched"] == 2
    assert differing.status_code == 200
    report = differing.json()
    assert report["ok"] is False
    assert report["counts"]["missing_in_wallet"] == report["counts"]["missing_on_platform"] == 1
    assert report["differing"] == 2
    assert [row["uid"] for row in report["differences"]] == [1]
    assert report["truncated"] is True
    assert alone.json()["pools_only"] is True


def test_an_unreadable_file_is_a_400_and_a_body_over_the_limit_a_413(tmp_path: Path) -> None:
    with serve(tmp_path, max_body_bytes=4096) as client:
        unreadable = client.post(
            "/admin/reconciliations", content=b"uid,status\n1,won\n", headers=OPERATOR_HEADERS
        )
        too_large = client.post(
            "/admin/reconciliations", content=RECORD * 200, headers=OPERATOR_HEADERS
        )
        anonymous = client.post("/admin/reconciliations", content=RECORD)

    assert unreadable.status_code == 400
    assert unreadable.json()["error"] == "reconcile.unreadable_file"
    assert too_large.status_code == 413
    assert too_large.json()["error"] == "request.too_large"
    assert anonymous.status_code == 401


def test_a_deeply_nested_or_huge_uid_file_is_a_400(tmp_path: Path) -> None:
    with serve(tmp_path) as client:
        answers = [
            client.post("/admin/reconciliations", content=body, headers=OPERATOR_HEADERS)
            for body in (
                b"[" * 100_000 + b"]" * 100_000,
                b'[{"uid": "' + b"9" * 5000 + b'", "user": "u1", "amount": "1"}]',
            )
        ]
    assert [answer.status_code for answer in answers] == [400, 400]
    assert {answer.json()["error"] for answer in answers} == {"reconcile.unreadable_file"}
