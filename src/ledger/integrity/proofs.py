"""A bet's proof document checked: each of its commit records is a leaf of the tree that a
signed checkpoint names (``ledger prove --json``, ``GET /admin/bets/{uid}/proof``).

Pure: the document and the verifier key in, the checkpoint they prove inclusion in out, or
:class:`~ledger.integrity.checkpoints.NoteError` naming what does not hold.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from . import merkle
from .canonical import RECORD_PREFIX
from .checkpoints import Checkpoint, NoteError, open_checkpoint

__all__ = ["check_proof"]


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
    except (KeyError, TypeError, binascii.Error) as error:
        raise NoteError(f"not a proof document: {error!r}") from None
    return signed
