"""The one error root of the ledger.

Every failure the ledger reports is a :class:`LedgerError` carrying a stable, machine-readable
``key`` (the contract prefers translation keys such as ``user.insufficient_funds``) and the HTTP
``status`` the callback server answers with. The HTTP layer maps errors in one table by reading
these two attributes; lower-layer exceptions (SQLAlchemy, drivers, pydantic) are translated at their
boundary and never leave it.

Standard library only: the domain core raises these.
"""

from __future__ import annotations

__all__ = [
    "BetAlreadyRefunded",
    "BetAlreadySettled",
    "BetConflict",
    "BetNotFound",
    "CapacityExceeded",
    "CheckpointNotFound",
    "Forbidden",
    "InsufficientFunds",
    "InvalidAmount",
    "InvalidRequest",
    "LedgerError",
    "LimitReached",
    "PayloadTooLarge",
    "ReferenceConflict",
    "SchemaNotReady",
    "StoreBusy",
    "StoreUnavailable",
    "TournamentNotFound",
    "Unauthorized",
    "UnbalancedTransaction",
    "UnknownCurrency",
    "UnsupportedMediaType",
    "UserExcluded",
    "UserNotFound",
]


class LedgerError(Exception):
    """Root of every error the ledger raises on purpose.

    ``key`` is stable and safe to show to a user; ``status`` is the HTTP status; ``retryable``
    tells a caller (and the platform, through a 5xx) that re-sending the same request may succeed.
    """

    key: str = "ledger.error"
    status: int = 500
    retryable: bool = False

    def __init__(
        self, message: str | None = None, *, key: str | None = None, bet_uid: int | None = None
    ) -> None:
        if key is not None:
            self.key = key
        self.message = message or self.key
        self.bet_uid = bet_uid
        super().__init__(self.message)

    def to_dict(self) -> dict[str, str]:
        """The error body the callback server answers: ``{"error": key, "message": text}``."""
        return {"error": self.key, "message": self.message}


# --- bad input: 4xx, nothing changed -----------------------------------------------------------


class InvalidRequest(LedgerError):
    """The request is malformed: bad JSON, wrong types, missing fields."""

    key = "request.invalid"
    status = 400


class InvalidAmount(InvalidRequest):
    """An amount is negative, not finite, too large, or finer than its currency's scale."""

    key = "amount.invalid"


class UnknownCurrency(InvalidRequest):
    """A currency code that has no known scale while no default scale is configured."""

    key = "currency.unknown"


class PayloadTooLarge(InvalidRequest):
    """The request body is over the configured limit."""

    key = "request.too_large"
    status = 413


class UnsupportedMediaType(InvalidRequest):
    """The body is declared as something other than JSON."""

    key = "request.unsupported_media_type"
    status = 415


class Unauthorized(LedgerError):
    """Missing or invalid credentials."""

    key = "auth.invalid_token"
    status = 401


class Forbidden(LedgerError):
    """Valid credentials without the right to do this (role, client, address)."""

    key = "auth.forbidden"
    status = 403


# --- business rejections: 4xx, nothing changed -------------------------------------------------


class InsufficientFunds(LedgerError):
    """The user's available balance does not cover the debit (the contract's 402)."""

    key = "user.insufficient_funds"
    status = 402


class LimitReached(LedgerError):
    """A deposit or an entry would take the user past a responsible-gambling limit in force:
    ``user.deposit_limit_reached``, ``user.stake_limit_reached`` or ``user.loss_limit_reached``
    (the key names the limit's kind; the message its period and when the window frees room)."""

    key = "user.stake_limit_reached"
    status = 403


class UserExcluded(LedgerError):
    """The user is in a time-out or a self-exclusion: no entry and no deposit until it ends."""

    key = "user.excluded"
    status = 403


class BetNotFound(LedgerError):
    """A refund or settle names a bet the ledger never held."""

    key = "bet.not_found"
    status = 404


class UserNotFound(LedgerError):
    """An operator asked about a user no payload named and no account holds."""

    key = "user.not_found"
    status = 404


class TournamentNotFound(LedgerError):
    """An operator asked about a tournament no payload and no bet named."""

    key = "tournament.not_found"
    status = 404


class CheckpointNotFound(LedgerError):
    """No checkpoint of the journal has been signed yet (docs/integrity.md)."""

    key = "checkpoint.not_found"
    status = 404


class BetConflict(LedgerError):
    """A known bet uid arrives with different user, pool, amounts, currency or payout."""

    key = "bet.conflict"
    status = 409


class BetAlreadyRefunded(LedgerError):
    """A settle names a bet that was refunded."""

    key = "bet.already_refunded"
    status = 409


class BetAlreadySettled(LedgerError):
    """A refund names a bet that was settled."""

    key = "bet.already_settled"
    status = 409


class ReferenceConflict(LedgerError):
    """A deposit or withdrawal reference re-used with a different user, currency or amount."""

    key = "reference.conflict"
    status = 409


class CapacityExceeded(LedgerError):
    """A balance or a request's sum would exceed what the store holds exactly (38 digits).

    Every amount in it is valid and the request is well formed, so this is 422, not 400; and it
    is not 5xx: the same request would fail the same way on every re-send.
    """

    key = "amount.capacity_exceeded"
    status = 422


# --- technical failures: 5xx, the platform re-sends --------------------------------------------


class StoreUnavailable(LedgerError):
    """The database cannot be reached or failed in a way that may pass."""

    key = "store.unavailable"
    status = 503
    retryable = True


class StoreBusy(StoreUnavailable):
    """A lock, deadlock or serialization conflict outlasted the retries."""

    key = "store.busy"


class SchemaNotReady(StoreUnavailable):
    """The database schema is missing or older than this code: run ``ledger db upgrade``."""

    key = "store.schema_not_ready"


class UnbalancedTransaction(LedgerError):
    """A bug guard: the domain built postings that do not sum to zero. Never reaches a user."""

    key = "ledger.unbalanced"
    status = 500
