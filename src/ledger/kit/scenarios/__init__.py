"""``ledger validate``: the platform's verification scenario and the checks it leaves to clients.

Contract section 4.3 describes the hosted validator: one user, one paid tournament settled with a
cash win and a zero payout, the refund paths, a free-to-play entry. It cannot see the ledger, so
item 8 leaves re-sends and unfunded users to the client. This runner does all of that and more
(all-or-nothing requests, conflicting duplicates, unknown fields, mixed payouts, concurrent
duplicates, token checks) against any wallet URL. With the operator API of our own server it also
verifies the user's available and held balances after every step.

Every run uses fresh random bet and tournament ids, so it can be repeated against the same wallet.

Its parts: the run's state and a check's context (:mod:`.base`), the checks by contract area
(:mod:`.placing`, :mod:`.closing`, :mod:`.all_or_nothing`, :mod:`.tolerance`, :mod:`.auth`),
sweeping and cleaning up (:mod:`.housekeeping`), the order they run in (:mod:`.validator`) and
the report (:mod:`.report`).
"""

from __future__ import annotations

from .report import CheckResult, Report, is_error_key
from .validator import Validator

__all__ = ["CheckResult", "Report", "Validator", "is_error_key"]
