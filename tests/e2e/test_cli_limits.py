"""``ledger limits`` and ``ledger exclude`` on both stores, and docs/limits.md's command block
as written: limits set, raised (pending), cancelled, shown with their use; an exclusion."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ledger.cli import main
from support.readme import marked_block

LIMITS = "<!-- tested by tests/e2e/test_cli_limits.py: limits block -->"


def run(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env)


def test_limits_set_raise_and_show_with_a_pending_change(store_url: str) -> None:
    first = run("limits", "set", "u1", "EUR", "stake", "day", "25.00", "--db", store_url)
    assert first.exit_code == 0, first.output
    assert first.output.strip() == "EUR stake/day: 25.00 (used 0.00, room 25.00)"
    raised = run("limits", "set", "u1", "EUR", "stake", "day", "50", "--json", "--db", store_url)
    answer = json.loads(raised.output)
    assert answer["amount"] == "25.00"
    assert answer["pending"]["amount"] == "50.00"
    shown = run("limits", "show", "u1", "--json", "--db", store_url)
    assert [item["kind"] for item in json.loads(shown.output)["limits"]] == ["stake"]


def test_the_cooling_off_is_read_from_the_environment(store_url: str) -> None:
    run("limits", "set", "u1", "EUR", "loss", "week", "10", "--db", store_url)
    env = {"LEDGER_LIMIT_COOLING_OFF": "0"}
    raised = run("limits", "set", "u1", "EUR", "loss", "week", "20", "--json", "--db", store_url,
                 env=env)  # fmt: skip
    assert json.loads(raised.output)["amount"] == "20.00"
    bad = run("limits", "set", "u1", "EUR", "loss", "week", "20", "--db", store_url,
              env={"LEDGER_LIMIT_COOLING_OFF": "soon"})  # fmt: skip
    assert bad.exit_code == 1


def test_exclude_refuses_a_moment_without_its_zone(store_url: str) -> None:
    result = run("exclude", "u1", "--until", "2030-01-01T00:00:00", "--reason", "x", "--db",
                 store_url)  # fmt: skip
    assert result.exit_code == 1
    assert "request.invalid" in result.output


def test_the_limits_page_block_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    block = marked_block(LIMITS, path="docs/limits.md")
    commands = [line for line in block.splitlines() if line.startswith(".venv/bin/ledger ")]
    assert len(commands) == 6
    outputs = []
    for line in commands:
        args = shlex.split(line.partition("#")[0])[1:]
        result = CliRunner().invoke(main, args, env={"LEDGER_DATABASE_URL": None})
        assert result.exit_code == 0, (line, result.output)
        outputs.append(result.output)
    assert outputs[-1].splitlines() == [
        "EUR deposit/month: 1000.00 (used 0.00, room 1000.00)",
        "EUR stake/day: 25.00 (used 0.00, room 25.00)",
        outputs[-1].splitlines()[2],
    ]
    assert "until 2030-01-01T00:00:00+00:00 (in force): time-out" in outputs[-1]


def test_exclude_lift_ends_an_exclusion_with_its_reason(store_url: str) -> None:
    run("exclude", "u1", "--reason", "self-exclusion", "--db", store_url)
    lifted = run("exclude", "u1", "--lift", "--reason", "error", "--by", "alice", "--db", store_url)
    assert lifted.exit_code == 0, lifted.output
    assert lifted.output.strip() == "user u1: 1 exclusion(s) ended"
    shown = json.loads(run("limits", "show", "u1", "--json", "--db", store_url).output)
    assert [item["active"] for item in shown["exclusions"]] == [False, False]
