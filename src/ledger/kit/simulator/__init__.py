"""``ledger simulate``: a whole fantasy platform played against a wallet, then the books checked.

The simulator creates users (funded through the operator API), tournaments in two currencies
with paid, ticket and free entries, refunds some bets, cancels some tournaments (Refund
Tournament) and settles the rest with normal and mixed payout tables. It keeps its own books of
what every user must hold, and at the end reconciles them against the wallet's balances, every
bet's state and the journal check.

With ``faults`` it behaves like a platform on a bad day: it re-sends deliveries, sends
concurrent duplicates from several threads, and treats some answers as lost (a timeout or 5xx
seen by the platform) or gives up waiting after a few milliseconds, then re-sends as contract
section 7.2 says.

Everything random comes from ``random.Random(seed)``, ids included, so that a seed replays the
same platform day against a correct wallet.

Its parts: the day in order (:mod:`.day`), its shared state (:mod:`.state`), delivering with
faults (:mod:`.deliveries`), the callbacks (:mod:`.callbacks`), the comparison at the end and the
platform's record (:mod:`.checks`), the model (:mod:`.model`) and the report (:mod:`.report`).
"""

from __future__ import annotations

from .checks import write_platform_record
from .day import Simulator
from .model import SimulationConfig
from .report import SimulationReport

__all__ = ["SimulationConfig", "SimulationReport", "Simulator", "write_platform_record"]
