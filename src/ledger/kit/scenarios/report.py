"""What a validation run reports: each check's verdict with the deliveries behind it, and the
run's summary, shown like the hosted validator's.

Invariant: a check passes exactly when it recorded no problem, and a run only when it ran at least
one check and all passed. Proved by ``tests/kit/test_validator.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..platform import Delivery

__all__ = ["CheckResult", "Report", "is_error_key"]


def is_error_key(value: object) -> bool:
    """A snake_cased (``insufficient_funds``) or dotted key (``user.insufficient_funds``)."""
    if not isinstance(value, str) or not value:
        return False
    return all(
        part and all(ch.islower() or ch.isdigit() or ch == "_" for ch in part)
        for part in value.split(".")
    )


@dataclass
class CheckResult:
    """One check, reported like the hosted validator: pass or fail with the actual answers."""

    name: str
    description: str
    deliveries: list[tuple[str, Delivery]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "description": self.description,
            "deliveries": [
                {
                    "label": label,
                    "event": delivery.event.value,
                    "request_id": delivery.request_id,
                    "status": delivery.status,
                    "body": delivery.body,
                    "error": delivery.error,
                    "elapsed_ms": round(delivery.elapsed * 1000, 1),
                }
                for label, delivery in self.deliveries
            ],
            "problems": self.problems,
            "notes": self.notes,
        }

    def render(self) -> str:
        lines = [f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.description}"]
        lines.extend(
            f"        {label}: {delivery.describe()}" for label, delivery in self.deliveries
        )
        lines.extend(f"        books: {note}" for note in self.notes)
        lines.extend(f"     !  {problem}" for problem in self.problems)
        return "\n".join(lines)


@dataclass
class Report:
    url: str
    checks: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def failed(self) -> list[str]:
        return [check.name for check in self.checks if not check.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "passed": self.passed,
            "total": len(self.checks),
            "failed": self.failed,
            "notes": self.notes,
            "checks": [check.to_dict() for check in self.checks],
        }

    def summary(self) -> str:
        passed = sum(check.passed for check in self.checks)
        verdict = "all checks passed" if self.passed else "failed: " + ", ".join(self.failed)
        return f"{passed}/{len(self.checks)} checks passed against {self.url}: {verdict}"
