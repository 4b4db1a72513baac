"""Webhook configuration, signatures and the retry schedule (ledger.webhooks): no I/O."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from ledger.settings import Settings, SettingsError
from ledger.webhooks import (
    EVENT_TYPES,
    WebhookConfigError,
    backoff,
    parse_config,
    sign,
    verify,
)

SECRET = "s" * 32


def config(**endpoint: Any) -> str:
    item = {"name": "crm", "url": "https://crm.example/hooks", "secret": SECRET, **endpoint}
    return json.dumps({"endpoints": [item]})


def test_an_endpoint_takes_every_event_type_in_batches_of_100_by_default() -> None:
    parsed = parse_config(config())
    (endpoint,) = parsed.endpoints
    assert endpoint.events == frozenset(EVENT_TYPES)
    assert (endpoint.batch_size, endpoint.timeout) == (100, 10.0)
    assert (parsed.lease, parsed.retry_cap) == (30.0, 60.0)


def test_a_secret_may_come_from_the_variable_secret_env_names() -> None:
    text = json.dumps(
        {"endpoints": [{"name": "a", "url": "http://127.0.0.1:9/x", "secret_env": "HOOK_KEY"}]}
    )
    (endpoint,) = parse_config(text, {"HOOK_KEY": SECRET}).endpoints
    assert endpoint.secret == SECRET
    assert SECRET not in repr(endpoint)
    with pytest.raises(WebhookConfigError, match="HOOK_KEY is not set"):
        parse_config(text, {})


def test_the_configuration_may_be_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "hooks.json"
    path.write_text(config(events=["deposit"]))
    (endpoint,) = parse_config(str(path)).endpoints
    assert endpoint.events == frozenset({"deposit"})
    with pytest.raises(WebhookConfigError, match="readable JSON file"):
        parse_config(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ("[]", "expected an object"),
        ('{"endpoints": []}', "non-empty list"),
        ('{"endpoints": [], "extra": 1}', "unknown field"),
        (config(name="Bad Name"), "name: expected"),
        (config(url="ftp://x"), "url: expected"),
        (config(secret="short"), "at least 16"),
        (config(secret_env="X"), "exactly one of secret and secret_env"),
        (config(events=["bet.lost"]), "unknown bet.lost"),
        (config(events=[]), "non-empty list of event types"),
        (config(batch_size=0), "batch_size"),
        (config(batch_size=True), "batch_size"),
        (config(timeout="10"), "timeout"),
        (config(colour="red"), "unknown field"),
        (config(timeout=20), "at least twice"),
    ],
)
def test_a_malformed_configuration_is_refused_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(WebhookConfigError, match=message):
        parse_config(text)


def test_two_endpoints_may_not_share_a_name() -> None:
    item = {"name": "crm", "url": "https://crm.example/hooks", "secret": SECRET}
    with pytest.raises(WebhookConfigError, match="used twice: crm"):
        parse_config(json.dumps({"endpoints": [item, item]}))


def test_the_server_refuses_to_start_with_a_bad_ledger_webhooks() -> None:
    with pytest.raises(SettingsError, match="LEDGER_WEBHOOKS"):
        Settings.from_env({"LEDGER_WEBHOOKS": config(url="nope")})
    settings = Settings.from_env({"LEDGER_WEBHOOKS": config()})
    assert settings.webhooks is not None
    assert Settings.from_env({}).webhooks is None


def test_a_signature_verifies_only_its_body_with_its_secret_within_the_tolerance() -> None:
    body = b'{"events":[]}'
    header = sign(SECRET, body, timestamp=1_800_000_000)
    assert header.startswith("t=1800000000,v1=")
    assert verify(SECRET, body, header, now=1_800_000_100)
    assert not verify(SECRET, body + b" ", header, now=1_800_000_100)
    assert not verify("t" * 32, body, header, now=1_800_000_100)
    assert not verify(SECRET, body, header, now=1_800_000_301)  # replayed too late
    assert not verify(SECRET, body, None)
    assert not verify(SECRET, body, "v1=abc")
    assert not verify(SECRET, body, "t=1800000000")


def test_a_receiver_rotating_its_secret_accepts_either_of_two_signatures() -> None:
    body = b"{}"
    old, new = sign("o" * 20, body, 1000), sign(SECRET, body, 1000)
    both = f"{old},v1={new.split('v1=')[1]}"
    assert verify(SECRET, body, both, now=1000)


def test_backoff_doubles_with_jitter_up_to_its_cap() -> None:
    rng = random.Random(7)
    for attempt, step in [(1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0), (500, 60.0)]:
        for _ in range(20):
            assert step / 2 <= backoff(attempt, 1.0, 60.0, rng) <= step
