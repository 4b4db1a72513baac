"""Every ```sh block of README.md and docs/ is run by a test or says it is a placeholder for a
real host; and the README's configuration table names every environment variable the code reads."""

from __future__ import annotations

import re
from pathlib import Path

from ledger.variables import KNOWN

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SH_BLOCK = re.compile(r"^```sh\n.*?^```$", re.MULTILINE | re.DOTALL)
TESTED = re.compile(r"^<!-- tested by (tests/\S+?\.py)(?:: (.+?))? -->$")
PLACEHOLDER = re.compile(r"^<!-- placeholder: .+ -->$")


def sh_blocks(page: Path) -> list[tuple[int, str]]:
    """Each ```sh block's line number and the line just above it."""
    text = page.read_text()
    found = []
    for match in SH_BLOCK.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append((text.count("\n", 0, match.start()) + 1, before))
    return found


def test_the_pages_have_blocks_to_check() -> None:
    assert sum(len(sh_blocks(page)) for page in PAGES) > 25


def test_every_sh_block_is_run_by_a_test_or_is_a_placeholder() -> None:
    problems = []
    for page in PAGES:
        name = page.relative_to(ROOT)
        for line, above in sh_blocks(page):
            if PLACEHOLDER.match(above):
                continue
            tested = TESTED.match(above)
            if tested is None:
                problems.append(f"{name}:{line}: no `<!-- tested by ... -->` or placeholder")
                continue
            test, label = tested.groups()
            source = ROOT / test
            if not source.is_file():
                problems.append(f"{name}:{line}: {test} does not exist")
                continue
            code = source.read_text()
            if f"<!-- tested by {test}" not in code or (label and label not in code):
                problems.append(f"{name}:{line}: {test} does not look this block up")
    assert not problems, "\n".join(problems)


def test_every_marker_names_one_block_of_its_page() -> None:
    for page in PAGES:
        markers = [above for _line, above in sh_blocks(page) if TESTED.match(above)]
        assert len(markers) == len(set(markers)), page


VARIABLE = re.compile(r"\bLEDGER_[A-Z0-9_]*[A-Z0-9]\b")
# Misspelt on purpose: the tests of the warning about unknown variables.
UNKNOWN_IN_TESTS = {
    "LEDGER_OPERATORTOKEN",
    "LEDGER_HOOK_SECRET",
    "LEDGER_NOTHING_LIKE_IT",
    "LEDGER_DATABSE_URL",
    "LEDGER_CRM_SECRET",
}


def test_the_configuration_table_names_exactly_the_known_variables() -> None:
    # ledger.variables.KNOWN is the list `ledger serve` warns against: one list for both.
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Configuration") : readme.index("## Endpoints")]
    assert sorted(set(VARIABLE.findall(section))) == sorted(KNOWN)
    assert len(KNOWN) == len(set(KNOWN))


def test_every_variable_the_code_reads_is_a_known_one() -> None:
    read = set()
    for folder in ("src", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            read.update(VARIABLE.findall(path.read_text()))
    assert {"LEDGER_DB_STATEMENT_TIMEOUT", "LEDGER_EVENT_RETENTION_DAYS"} <= read
    assert sorted(read - set(KNOWN) - UNKNOWN_IN_TESTS) == []


METRIC = re.compile(r"\b(Counter|Gauge|Histogram|CounterMetricFamily)\(\s*\"(ledger_[a-z_]+)\"")


def test_the_monitoring_page_explains_every_metric_the_server_exports() -> None:
    page = (ROOT / "docs" / "operations" / "monitoring.md").read_text()
    exported = set()
    for path in (ROOT / "src" / "ledger").rglob("*.py"):
        for kind, name in METRIC.findall(path.read_text()):
            counter = kind in ("Counter", "CounterMetricFamily")
            exported.add(f"{name}_total" if counter else name)
    assert len(exported) >= 13  # the scan finds every metric the server exports, 13 of them
    assert sorted(name for name in exported if f"| `{name}` |" not in page) == []
