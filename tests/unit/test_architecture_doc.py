"""docs/architecture.md names every module of the package, and names none that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import ledger

PACKAGE = Path(ledger.__file__).parent
PAGE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def modules() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent)
        if "versions" in relative.parts:  # the migrations themselves: Alembic's, one per change
            continue
        found.add(relative.as_posix())
    return found


def named() -> set[str]:
    return set(re.findall(r"`(ledger/[\w/]+\.py)`", PAGE.read_text()))


def test_every_module_is_on_the_architecture_page() -> None:
    assert sorted(modules() - named()) == []


def test_every_module_the_architecture_page_names_exists() -> None:
    assert sorted(named() - modules()) == []
