"""A finished reconciliation as its reader sees it: the counts, the differing bets from the
scratch database, and the JSON, CSV and text forms of the report.

Invariant: the report only reads the scratch database :mod:`.matching` filled; its rows come in
bet uid order, each naming its differences by the keys of :data:`COUNTS`, amounts rendered as
decimal strings of their currency. Proved by ``tests/service/test_reconcile.py`` and
``tests/e2e/test_reconcile_cli.py``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, Self

from sqlite_utils import Database

from ..currencies import CurrencyTable
from ..errors import LedgerError
from ..money import render
from ..paging import csv_lines

__all__ = ["COUNTS", "CSV_COLUMNS", "Reconciliation"]

# The counts of a report, in the order they are shown.
COUNTS: Final = (
    "matched",
    "missing_in_wallet",
    "missing_on_platform",
    "state_mismatch",
    "amount_mismatch",
    "payout_mismatch",
    "owner_mismatch",
)
_LABELS: Final = {
    "matched": "matched",
    "missing_in_wallet": "missing in the wallet",
    "missing_on_platform": "missing on the platform",
    "state_mismatch": "state mismatch",
    "amount_mismatch": "amount or rake mismatch",
    "payout_mismatch": "payout mismatch",
    "owner_mismatch": "user or pool mismatch",
}

_FIELDS: Final = (
    "user",
    "pool",
    "status",
    "amount",
    "rake",
    "currency",
    "payout",
    "payout_currency",
)
CSV_COLUMNS: Final = (
    "uid",
    "differences",
    *(f"platform_{name}" for name in _FIELDS),
    *(f"wallet_{name}" for name in _FIELDS),
)

_DIFFERENCES_QUERY: Final = """
SELECT uid, w_uid IS NULL, 0, state_mismatch, amount_mismatch, payout_mismatch, owner_mismatch,
       user, pool, state, amount, rake, currency, payout, payout_currency,
       w_user, w_pool, w_state, w_amount, w_rake, w_currency, w_payout, w_payout_currency
FROM compared
WHERE w_uid IS NULL OR state_mismatch OR amount_mismatch OR payout_mismatch OR owner_mismatch
UNION ALL
SELECT uid, 0, 1, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       user, pool, state, amount, rake, currency, payout, payout_currency
FROM wallet w WHERE NOT EXISTS (SELECT 1 FROM platform p WHERE p.uid = w.uid)
ORDER BY 1
LIMIT ?
"""


@dataclass
class Reconciliation:
    """A finished comparison: the counts, and the differing rows read from the scratch database.

    Use it as a context manager: the scratch database is deleted on exit.
    """

    database: Database
    currencies: CurrencyTable
    format: str
    platform_rows: int
    wallet_bets: int
    counts: dict[str, int]
    differing: int  # bets with at least one difference
    pools_only: bool
    _scratch: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """True when the file and the books agree on every bet compared."""
        return all(self.counts[name] == 0 for name in COUNTS if name != "matched")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Delete the scratch database."""
        self.database.close()
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def summary(self) -> dict[str, Any]:
        """The report without its rows: what the file held, what was compared, the counts."""
        return {
            "ok": self.ok,
            "format": self.format,
            "pools_only": self.pools_only,
            "platform_rows": self.platform_rows,
            "wallet_bets": self.wallet_bets,
            "counts": dict(self.counts),
            "differing": self.differing,
        }

    def differences(self, limit: int | None = None) -> Iterator[dict[str, Any]]:
        """The differing bets in uid order: what each side says, and the names of the
        differences (the keys of :data:`COUNTS`). Read lazily from the scratch database."""
        # SQLite reads a negative LIMIT as no limit.
        for row in self.database.execute(_DIFFERENCES_QUERY, [-1 if limit is None else limit]):
            uid, *flags = row[:7]
            platform, wallet = row[7:15], row[15:]
            names = [name for name, flag in zip(COUNTS[1:], flags, strict=True) if flag]
            yield {
                "uid": uid,
                "differences": names,
                "platform": None if names[0] == "missing_on_platform" else self._side(platform),
                "wallet": None if names[0] == "missing_in_wallet" else self._side(wallet),
            }

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        """The JSON report: the summary and the differing bets (at most ``limit``)."""
        rows = list(self.differences(None if limit is None else limit + 1))
        truncated = limit is not None and len(rows) > limit
        return {
            **self.summary(),
            "differences": rows[:limit] if limit is not None else rows,
            "truncated": truncated,
        }

    def json_chunks(self) -> Iterator[str]:
        """The whole JSON report as text pieces, the rows streamed: for huge differences."""
        head = json.dumps({**self.summary(), "truncated": False})
        yield head[:-1] + ', "differences": ['
        for index, row in enumerate(self.differences()):
            yield ("," if index else "") + json.dumps(row)
        yield "]}"

    def csv_chunks(self) -> Iterator[str]:
        """The differing bets as CSV, one row each, flattened (:data:`CSV_COLUMNS`)."""
        return csv_lines((_flat(row) for row in self.differences()), CSV_COLUMNS)

    def text_lines(self, limit: int = 50) -> Iterator[str]:
        """A readable summary: the counts, then the first ``limit`` differing bets."""
        scope = " in the file's pools" if self.pools_only else ""
        yield (
            f"{'clean' if self.ok else 'DIFFERENCES'}: {self.platform_rows} platform bets "
            f"({self.format}) against {self.wallet_bets} wallet bets{scope}"
        )
        for name in COUNTS:
            yield f"  {_LABELS[name] + ':':<26}{self.counts[name]}"
        for shown, row in enumerate(self.differences(limit + 1)):
            if shown == limit:
                yield f"  ... {self.differing - limit} more differing bets: see --json or --csv"
                break
            yield f"  bet {row['uid']}: {', '.join(row['differences'])}: {_describe(row)}"

    def _side(self, values: tuple[Any, ...]) -> dict[str, Any]:
        """One side of a differing bet, amounts as decimal strings of their currency."""
        user, pool, state, amount, rake, currency, payout, payout_currency = values
        return {
            "user": user,
            "pool": pool,
            "status": state,
            "amount": self._amount(amount, currency),
            "rake": self._amount(rake, currency),
            "currency": currency,
            "payout": self._amount(payout, payout_currency or currency)
            if state == "settled"
            else None,
            "payout_currency": payout_currency,
        }

    def _amount(self, minor: str | None, currency: str | None) -> str | None:
        if minor is None or currency is None:
            return minor
        if minor.startswith("~"):
            return minor[1:]  # the platform's amount that is no whole number of minor units
        try:
            return render(int(minor), self.currencies.scale(currency))
        except LedgerError:  # a currency configured away since: the minor units still say it
            return f"{minor} minor units"


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {"uid": row["uid"], "differences": " ".join(row["differences"])}
    for side in ("platform", "wallet"):
        for name, value in (row[side] or {}).items():
            flat[f"{side}_{name}"] = value
    return flat


def _describe(row: dict[str, Any]) -> str:
    platform, wallet = row["platform"], row["wallet"]
    if platform is None:
        return f"the wallet has it {wallet['status']} in pool {wallet['pool']}"
    if wallet is None:
        return f"the platform has it {platform['status'] or 'recorded'}"
    differing = [
        f"{name} {platform[name]} vs {wallet[name]}"
        for name in _FIELDS
        if platform[name] is not None and str(platform[name]) != str(wallet[name])
    ]
    return "; ".join(differing) or "see --json"
