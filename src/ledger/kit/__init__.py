"""The conformance kit: ``ledger validate``, ``validate-token``, ``simulate`` and ``tickets``.

- :mod:`.platform`: the platform's side of the wire (signed deliveries, ticket JWTs);
- :mod:`.payloads`: full callback payloads per contract section 2;
- :mod:`.scenarios`: the validator's checks; :mod:`.token`: the token check;
- :mod:`.simulator`: a seeded platform day, reconciled against the wallet's books;
- :mod:`.ticket_api`: the simulated platform's ticket administration API (its tickets in
  :mod:`.ticket_store`, served by :mod:`.server_thread`);
- :mod:`.admin_client`: a client for our server's operator API;
- :mod:`.tickets`: a client for the platform's ticket administration (contract 4.2).
"""

from __future__ import annotations

from .platform import CallbackEvent, Delivery, Paths, Platform, sign_ticket
from .scenarios import CheckResult, Report, Validator
from .simulator import SimulationConfig, SimulationReport, Simulator
from .token import TokenCheck, check_token

__all__ = [
    "CallbackEvent",
    "CheckResult",
    "Delivery",
    "Paths",
    "Platform",
    "Report",
    "SimulationConfig",
    "SimulationReport",
    "Simulator",
    "TokenCheck",
    "Validator",
    "check_token",
    "sign_ticket",
]
