"""Proof documents checked: a bet's (each of its commit records is a leaf of the tree that a
signed checkpoint names: ``ledger prove --json``, ``GET /admin/bets/{uid}/proof``), and two
checkpoints' (the newer tree extends the older: ``ledger prove-consistency --json``,
``GET /admin/checkpoints/{size}/consistency``).

Pure: the document and the verifier key in, the checkpoint they prove inclusion in out, or
:class:`~ledger.integrity.checkpoints.NoteError` naming what does not hold.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from . import merkle
from .canonical import RECORD_PREFIX
from .checkpoints import Checkpoint, NoteError, open_checkpoint

__all__ = ["bet_rows", "check_consistency", "check_proof"]

_CONTENT = slice(len(RECORD_PREFIX) + 8 + 32, len(RECORD_PREFIX) + 8 + 64)  # in a record
# Where a row names its bet: a bet's row (placed: B, closed: C) first, a posting's (P) sixth.
_BET_AT = {"B": 0, "C": 0, "P": 5}


def check_proof(document: Mapping[str, Any], verifier: str) -> Checkpoint:
    """The checkpoint in which every commit of ``document`` is proved included, its signature
    by ``verifier``'s key checked first."""
    try:
        signed = open_checkpoint(document["checkpoint"], verifier)
        for commit in document["commits"]:
            record = base64.b64decode(commit["record"], validate=True)
            start = len(RECORD_PREFIX)
            seq = int.from_bytes(record[start : start + 8], "big")
            if not record.startswith(RECORD_PREFIX) or seq != commit["seq"]:
                raise NoteError(f"commit {commit['seq']}: not a commit record")
            path = [base64.b64decode(step, validate=True) for step in commit["path"]]
            leaf = merkle.leaf_hash(record)
            if not merkle.verify_inclusion(leaf, seq - 1, signed.size, path, signed.root):
                raise NoteError(f"commit {seq} is not in the checkpoint of {signed.size}")
            if "content" in commit:
                content = commit["content"]
                if hashlib.sha256(content.encode()).digest() != record[_CONTENT]:
                    raise NoteError(f"commit {seq}: the content is not the one its record seals")
                if not bet_rows(content, document["bet_uid"]):
                    raise NoteError(f"commit {seq}: its content has no row of the bet")
    except (AttributeError, KeyError, IndexError, TypeError, ValueError, binascii.Error) as error:
        raise NoteError(f"not a proof document: {error!r}") from None
    return signed


def bet_rows(content: str, uid: int) -> list[tuple[str, list[str | None]]]:
    """The rows of bet ``uid`` in a commit's canonical content (docs/integrity.md), each with
    its section's letter: the bet as placed (B) or closed (C), its postings (P)."""
    decoder, position, found = json.JSONDecoder(), 0, []
    while position < len(content):
        tag = content[position]
        rows, position = decoder.raw_decode(content, position + 1)
        at = _BET_AT.get(tag)
        if at is not None:
            found += [(tag, row) for row in rows if row[at] == str(uid)]
    return found


def check_consistency(
    document: Mapping[str, Any], verifier: str, saved: str | None = None
) -> tuple[Checkpoint, Checkpoint]:
    """The older and the newer checkpoint, once both signatures by ``verifier``'s key hold and
    the document's path proves that the newer tree extends the older. ``saved``: the older
    checkpoint's note as its holder kept it (else the document's own)."""
    try:
        older_note = saved if saved is not None else document["old_checkpoint"]
        if older_note is None:
            raise NoteError(
                f"the document carries no checkpoint of {document['old_size']}: give the one saved"
            )
        older = open_checkpoint(older_note, verifier)
        newer = open_checkpoint(document["checkpoint"], verifier)
        if older.size != document["old_size"]:
            raise NoteError(
                f"the proof is from {document['old_size']} commits, the checkpoint is of "
                f"{older.size}"
            )
        path = [base64.b64decode(step, validate=True) for step in document["path"]]
    except (KeyError, TypeError, binascii.Error) as error:
        raise NoteError(f"not a consistency document: {error!r}") from None
    if older.origin != newer.origin:
        raise NoteError(f"checkpoints of two journals: {older.origin!r} and {newer.origin!r}")
    if not merkle.verify_consistency(older.size, newer.size, older.root, newer.root, path):
        raise NoteError(
            f"the checkpoint of {newer.size} does not extend the checkpoint of {older.size}: "
            "the history was rewritten"
        )
    return older, newer
