"""Currency scales: ISO 4217 minor units from the maintained ``iso4217`` package.

A scale is the number of decimal places of a currency's minor unit (EUR 2, JPY 0, BHD 3).
Operators can override any code and set the scale used for codes ISO 4217 does not know, such as
platform coins; with no default, an unknown code is refused rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from iso4217 import Currency

from .errors import UnknownCurrency

__all__ = ["CurrencyTable", "parse_scales"]


@lru_cache(maxsize=1024)
def _iso_scale(code: str) -> int | None:
    try:
        exponent = Currency(code).exponent
    except ValueError:
        return None
    # ISO gives no exponent for metals and funds (XAU, XDR): treat them as unknown.
    return exponent if isinstance(exponent, int) else None


@dataclass(frozen=True)
class CurrencyTable:
    """Looks up the scale of a currency code.

    ``overrides`` win over ISO 4217; ``default_scale`` applies to codes neither knows, and when
    it is ``None`` such codes raise :class:`UnknownCurrency` (a 400).
    """

    overrides: Mapping[str, int] = field(default_factory=dict)
    default_scale: int | None = 2
    # Looked up once per code: a settle asks for the same currency a million times.
    _memo: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> CurrencyTable:
        """``LEDGER_CURRENCY_SCALES`` (``FUN=0,BTC=8``) and ``LEDGER_DEFAULT_SCALE`` (a number,
        or ``none`` to refuse unknown codes; default 2)."""
        default = environ.get("LEDGER_DEFAULT_SCALE", "2").strip().lower()
        return cls(
            overrides=parse_scales(environ.get("LEDGER_CURRENCY_SCALES", "")),
            default_scale=None if default in ("", "none") else int(default),
        )

    def scale(self, code: str) -> int:
        known = self._memo.get(code)
        if known is not None:
            return known
        found = self._lookup(code.upper())
        self._memo[code] = found
        return found

    def _lookup(self, code: str) -> int:
        if code in self.overrides:
            return self.overrides[code]
        iso = _iso_scale(code)
        if iso is not None:
            return iso
        if self.default_scale is None:
            raise UnknownCurrency(f"currency {code!r} has no known scale")
        return self.default_scale


def parse_scales(text: str) -> dict[str, int]:
    """Parse ``"FUN=0,BTC=8"`` (the ``LEDGER_CURRENCY_SCALES`` format) into overrides."""
    scales: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        code, sep, digits = item.partition("=")
        if not sep or not (digits.isascii() and digits.strip().isdigit()) or not code.strip():
            raise ValueError(f"bad currency scale {item!r}: expected CODE=DIGITS")
        scales[code.strip().upper()] = int(digits)
    return scales
