"""The journal's checkpoints and proofs, for the commands and the server alike: sign a checkpoint
of the records' tree and publish it (the database, a file), and a bet's proof document."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

from ..errors import BetNotFound, CheckpointNotFound
from ..integrity.checkpoints import Checkpoint, sign
from ..stores import Store
from ..stores.integrity import JournalIntegrity

__all__ = ["ORIGIN", "latest_size", "proof_document", "publish_checkpoint"]

ORIGIN = "ledger"


def publish_checkpoint(
    store: Store,
    signer: str,
    *,
    origin: str = ORIGIN,
    file: str | None = None,
    unless_size: int | None = None,
) -> tuple[Checkpoint, str] | None:
    """Sign a checkpoint of the tree as it stands, keep it in the database and append it to
    ``file``; None (nothing signed) when the tree still has ``unless_size`` records."""
    journal = JournalIntegrity(store)
    size, root = journal.head()
    if unless_size is not None and size == unless_size:
        return None
    checkpoint = Checkpoint(origin, size, root, datetime.now(UTC))
    note = sign(checkpoint, signer)
    journal.keep(checkpoint, note)
    if file is not None:
        with open(file, "a", encoding="utf-8") as out:
            out.write(note)
    return checkpoint, note


def latest_size(store: Store) -> int | None:
    """The size of the newest kept checkpoint (None: none yet)."""
    latest = JournalIntegrity(store).latest()
    return None if latest is None else int(latest[0].split("\n", 2)[1])


def proof_document(store: Store, bet_uid: int) -> dict[str, Any]:
    """Bet ``bet_uid``'s commits, each record's bytes and its inclusion proof in the newest
    kept checkpoint, with that checkpoint's signed note (what ``ledger verify-proof`` and the
    standalone verifier of docs/integrity.md check)."""
    journal = JournalIntegrity(store)
    latest = journal.latest()
    if latest is None:
        raise CheckpointNotFound("no checkpoint has been signed yet: run ledger checkpoint")
    note = latest[0]
    size = int(note.split("\n", 2)[1])
    proofs = journal.bet_proofs(bet_uid, size)
    if proofs is None:
        raise BetNotFound(f"bet {bet_uid} is not in the books", bet_uid=bet_uid)
    return {
        "bet_uid": bet_uid,
        "checkpoint": note,
        "commits": [
            {
                "seq": proof.seq,
                "record": base64.b64encode(proof.record).decode(),
                "content_hash": proof.content_hash.hex(),
                "path": [base64.b64encode(step).decode() for step in proof.path],
            }
            for proof in proofs
        ],
    }
