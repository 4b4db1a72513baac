"""The blocks of docs/webhooks.md, as a reader would use them: the receiver's signature check
(the Python snippet) and the status of a server whose receiver is away (the shell block)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.webhooks import sign
from support.readme import marked_block, run_block

RECEIVER = "<!-- tested by tests/e2e/test_docs_webhooks.py: the receiver -->"
STATUS = "<!-- tested by tests/e2e/test_docs_webhooks.py: the status -->"
PAGE = "docs/webhooks.md"
SECRET = "whsec-" + "0123456789abcdef" * 2


def readme_verify() -> Callable[..., bool]:
    namespace: dict[str, object] = {}
    exec(marked_block(RECEIVER, "python", PAGE), namespace)  # the page's own lines, as written
    verify = namespace["verify"]
    assert callable(verify)
    return verify


def test_the_readme_receiver_accepts_what_the_sender_signs_and_nothing_else() -> None:
    verify = readme_verify()
    body = json.dumps({"events": [{"id": 1, "type": "deposit", "amount": "10.00"}]}).encode()
    header = sign(SECRET, body)
    assert verify(SECRET, body, header)
    assert not verify(SECRET, body.replace(b"10.00", b"99.00"), header)
    assert not verify("another-secret-0123456789", body, header)
    old = sign(SECRET, body, int(time.time()) - 301)
    assert not verify(SECRET, body, old)
    assert not verify(SECRET, body, "garbage")


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_readme_status_block_runs_and_shows_the_failing_endpoint(tmp_path: Path) -> None:
    code, stdout, stderr = run_block(marked_block(STATUS, path=PAGE), tmp_path)
    assert code == 0, (stdout, stderr)
    answers = [line for line in stdout.splitlines() if line.startswith("{")]
    status = json.loads(answers[-1])["endpoints"][0]
    assert (status["name"], status["cursor"], status["head"]) == ("crm", 0, 1)
    assert status["lag_events"] == 1
    assert status["attempts"] >= 1
    assert status["last_error"].startswith("ConnectError")
    # `ledger webhooks status`, after the server stopped and handed its lease back.
    assert "crm  cursor=0 head=1 lag=1 events" in stdout
    assert "holder=-" in stdout
    assert "last error:" in stdout
