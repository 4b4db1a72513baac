"""The event feed example of docs/events.md, run as a reader would run it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.readme import ROOT, marked_block, run_block

PAGE = "docs/events.md"
MARKER = "<!-- tested by tests/e2e/test_docs_events.py"


@pytest.mark.slow  # a long run: the default ring stays under ten minutes
def test_the_events_example_works_as_written_and_prints_what_it_shows(tmp_path: Path) -> None:
    block = marked_block(MARKER, path=PAGE)
    code, stdout, stderr = run_block(block, tmp_path)
    report = f"stdout:\n{stdout}\nstderr:\n{stderr[-3000:]}"
    assert code == 0, report
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert [line for line in lines if line.startswith("HTTP ")] == ["HTTP 200"] * 4, report

    # The long-poll was answered with the deposit (and the bet too, if it had committed by then).
    first = json.loads((tmp_path / "first.json").read_text().split("\nHTTP ")[0])
    deposit = first["events"][0]
    shown = (ROOT / PAGE).read_text().split(MARKER, 1)[1]
    shown_poll = json.loads(next(line for line in shown.splitlines() if line.startswith('{"')))
    expected = shown_poll["events"][0]
    assert {**deposit, "committed_at": None} == {**expected, "committed_at": None}, report

    # The text line the page shows, but for its commit time.
    shown_line = next(line for line in shown.splitlines() if line.startswith("2 2026-"))
    printed = next(line for line in lines if line.startswith("2 "))
    assert printed.split(" ", 2)[2] == shown_line.split(" ", 2)[2], report
    assert "pruned 0 events committed more than 120 days ago" in lines, report
