"""The journal's checkpoints and proofs, for the commands and the server alike: sign a checkpoint
of the records' tree and publish it (the database, a file), and a bet's proof document."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import BetNotFound, CheckpointNotFound
from ..events import NOTE_ROOM
from ..integrity.checkpoints import Checkpoint, NoteError, sign
from ..integrity.proofs import check_proof
from ..stores import Store
from ..stores.chain_audit import ChainReport
from ..stores.integrity import JournalIntegrity

__all__ = [
    "ORIGIN",
    "Inclusion",
    "bet_inclusion",
    "consistency_document",
    "latest_checkpoint",
    "latest_size",
    "proof_document",
    "publish_checkpoint",
    "verify_journal",
]

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
    if len(note) > NOTE_ROOM:
        raise NoteError(
            f"the signed checkpoint is over {NOTE_ROOM} characters: shorten the origin or key name"
        )
    journal.keep(checkpoint, note)
    if file is not None:
        with open(file, "a", encoding="utf-8") as out:
            out.write(note)
    return checkpoint, note


def latest_size(store: Store) -> int | None:
    """The size of the newest kept checkpoint (None: none yet)."""
    latest = JournalIntegrity(store).latest()
    return None if latest is None else int(latest[0].split("\n", 2)[1])


def _newest(journal: JournalIntegrity) -> tuple[str, int]:
    """The newest kept checkpoint's signed note and size; CheckpointNotFound: none yet."""
    latest = journal.latest()
    if latest is None:
        raise CheckpointNotFound("no checkpoint has been signed yet: run ledger checkpoint")
    return latest[0], int(latest[0].split("\n", 2)[1])


def proof_document(store: Store, bet_uid: int, *, content: bool = False) -> dict[str, Any]:
    """Bet ``bet_uid``'s commits, each record's bytes and its inclusion proof in the newest
    kept checkpoint, with that checkpoint's signed note (what ``ledger verify-proof`` and the
    standalone verifier of docs/integrity.md check); with ``content``, each commit's canonical
    content too, in which the bet's rows are found and whose hash the record carries."""
    journal = JournalIntegrity(store)
    note, size = _newest(journal)
    proofs = journal.bet_proofs(bet_uid, size, content=content)
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
                **({} if proof.content is None else {"content": proof.content}),
            }
            for proof in proofs
        ],
    }


def consistency_document(store: Store, old_size: int) -> dict[str, Any]:
    """The proof that the newest kept checkpoint's tree extends the tree of its first
    ``old_size`` records, with the newest checkpoint's signed note and the kept one of size
    ``old_size`` (None when none of that size was kept: the holder of that checkpoint has it).
    What ``ledger verify-consistency`` checks, against the checkpoint its holder saved."""
    journal = JournalIntegrity(store)
    note, size = _newest(journal)
    if not 0 <= old_size <= size:
        raise CheckpointNotFound(
            f"the newest checkpoint is of {size} commits: none of {old_size} can precede it"
        )
    old_note, path = journal.consistency(old_size, size)
    return {
        "old_size": old_size,
        "old_checkpoint": old_note,
        "checkpoint": note,
        "path": [base64.b64encode(step).decode() for step in path],
    }


def latest_checkpoint(store: Store) -> tuple[str, datetime] | None:
    """The newest kept checkpoint's signed note and when it was signed (None: none yet)."""
    return JournalIntegrity(store).latest()


@dataclass(frozen=True, slots=True)
class Inclusion:
    """Where a bet stands in the newest signed checkpoint: the checkpoint's size and time
    (``None``: none signed yet), the bet's commits it includes, and whether the proof of each
    was checked against the checkpoint's signature (``None``: no key to check it with;
    ``problem`` says what failed)."""

    size: int | None
    signed_at: datetime | None
    commits: tuple[int, ...]
    verified: bool | None
    problem: str | None = None


def bet_inclusion(store: Store, bet_uid: int, verifier: str | None) -> Inclusion:
    """Bet ``bet_uid``'s commits in the newest signed checkpoint, their proofs checked with
    ``verifier`` (the signer's public key) when given: what the console's bet page shows."""
    try:
        document = proof_document(store, bet_uid)
    except CheckpointNotFound:
        return Inclusion(None, None, (), None)
    latest = JournalIntegrity(store).latest()
    signed_at = None if latest is None else latest[1]
    size = int(document["checkpoint"].split("\n", 2)[1])
    commits = tuple(int(commit["seq"]) for commit in document["commits"])
    if verifier is None:
        return Inclusion(size, signed_at, commits, None)
    try:
        check_proof(document, verifier)
    except NoteError as error:
        return Inclusion(size, signed_at, commits, False, str(error))
    return Inclusion(size, signed_at, commits, True)


def verify_journal(store: Store, checkpoint: Checkpoint | None = None) -> ChainReport:
    """Recompute every commit record, the chain, the tree and the balances from the tables;
    with ``checkpoint``, also that today's tree extends the one it signed (``ledger verify``)."""
    return JournalIntegrity(store).verify(checkpoint)
