"""A small client for the wallet's operator API (``/admin``), used to fund users and read books.

Only our own server (``ledger serve``) has this API; against another wallet the validator runs
without it and says that it cannot see balances.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from ..errors import LedgerError
from .platform import loads

__all__ = ["Books", "Operator", "OperatorError"]


class OperatorError(LedgerError):
    """The operator API answered something other than success, or could not be reached."""

    key = "operator.error"
    status = 502


@dataclass(frozen=True, slots=True)
class Books:
    """A user's balance in one currency as the wallet reports it."""

    available: Decimal
    held: Decimal

    def __str__(self) -> str:
        return f"available {self.available}, held {self.held}"


class Operator:
    """``Authorization: Bearer <LEDGER_OPERATOR_TOKEN>`` calls to ``{base_url}/admin``."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Operator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self, method: str, path: str, body: Any = None, *, allow: tuple[int, ...] = ()
    ) -> Any:
        try:
            response = self._http.request(method, self.base_url + path, json=body)
        except httpx.TransportError as exc:
            raise OperatorError(f"{method} {path}: {exc!r}") from exc
        data = loads(response.text)
        if response.status_code != 200 and response.status_code not in allow:
            raise OperatorError(f"{method} {path}: {response.status_code} {response.text[:300]}")
        return data if response.status_code == 200 else None

    def deposit(self, user: str, currency: str, amount: Decimal, reference: str) -> None:
        """Credit ``user``; idempotent by ``reference`` on our server."""
        self._call(
            "POST",
            "/admin/deposits",
            {"user": user, "currency": currency, "amount": str(amount), "reference": reference},
        )

    def withdraw(self, user: str, currency: str, amount: Decimal, reference: str) -> None:
        """Debit ``user`` (no overdraft); idempotent by ``reference`` on our server."""
        self._call(
            "POST",
            "/admin/withdrawals",
            {"user": user, "currency": currency, "amount": str(amount), "reference": reference},
        )

    def _pages(self, path: str, name: str, query: dict[str, str], max_pages: int) -> list[Any]:
        # The directory's and the holds' lists: pages of {name: [...], "next": cursor}.
        rows: list[Any] = []
        before: str | None = None
        for _ in range(max_pages):
            params = {**query, "limit": "1000", **({"before": before} if before else {})}
            data = self._call("GET", f"{path}?{urlencode(params)}")
            if not isinstance(data, dict):
                break
            rows.extend(data.get(name) or [])
            before = data.get("next")
            if not before:
                break
        return rows

    def users(self, q: str, *, max_pages: int = 1000) -> list[str]:
        """The uids of the users whose uid or name contains ``q``."""
        return [
            str(row["uid"]) for row in self._pages("/admin/users", "users", {"q": q}, max_pages)
        ]

    def tournaments(self, q: str, *, max_pages: int = 1000) -> list[dict[str, Any]]:
        """The tournaments whose name or uid contains ``q``, as the directory lists them."""
        return self._pages("/admin/tournaments", "tournaments", {"q": q}, max_pages)

    def holds(
        self, *, user: str | None = None, pool: int | None = None, max_pages: int = 1000
    ) -> list[dict[str, Any]]:
        """Open holds (placed bets neither settled nor refunded), of a user or a tournament."""
        query = {"user": user} if user is not None else {}
        if pool is not None:
            query["pool"] = str(pool)
        return self._pages("/admin/holds", "holds", query, max_pages)

    def balances(self, user: str) -> dict[str, Books]:
        """Every currency the user has, as ``{currency: Books}``."""
        # 404 (user.not_found): a user the wallet has not seen yet holds nothing.
        path = f"/admin/users/{quote(user, safe='')}/balances"
        data = self._call("GET", path, allow=(404,))
        rows = data.get("balances", []) if isinstance(data, dict) else []
        return {
            str(row["currency"]).upper(): Books(
                Decimal(str(row["available"])), Decimal(str(row["held"]))
            )
            for row in rows
        }

    def balance(self, user: str, currency: str) -> Books:
        """The user's balance in one currency; zero when the wallet has none yet."""
        return self.balances(user).get(currency.upper(), Books(Decimal(0), Decimal(0)))

    def statement(self, user: str, *, page_size: int = 500, max_pages: int = 200) -> list[Any]:
        """Every movement of ``user``, newest first (bounded by ``max_pages`` pages)."""
        lines: list[Any] = []
        before: int | None = None
        for _ in range(max_pages):
            query = f"?limit={page_size}" + (f"&before={before}" if before is not None else "")
            data = self._call("GET", f"/admin/users/{quote(user, safe='')}/statement{query}")
            if not isinstance(data, dict):
                break
            lines.extend(data.get("lines") or [])
            before = data.get("next_before")
            if before is None:
                break
        return lines

    def bet(self, uid: int) -> dict[str, Any] | None:
        """The bet as the wallet recorded it, or ``None`` when it does not know it."""
        data = self._call("GET", f"/admin/bets/{uid}", allow=(404,))
        return data if isinstance(data, dict) else None

    def check(self) -> tuple[bool, Any]:
        """The journal check: ``(ok, report)``; our server answers 500 when an invariant fails."""
        try:
            response = self._http.get(self.base_url + "/admin/check")
        except httpx.TransportError as exc:
            raise OperatorError(f"GET /admin/check: {exc!r}") from exc
        try:
            report = response.json()
        except ValueError:
            report = response.text
        ok = response.status_code == 200 and not (
            isinstance(report, dict) and report.get("problems")
        )
        return ok, report
