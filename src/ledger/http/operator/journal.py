"""The journal's integrity under ``/admin``: the newest signed checkpoint, the proof that it
extends an older one, and a bet's proof of inclusion in it (docs/integrity.md)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import get
from litestar.handlers import HTTPRouteHandler
from litestar.params import PathParameter, QueryParameter

from ...errors import CheckpointNotFound
from ...service.journal import consistency_document, proof_document
from ...service.journal import latest_checkpoint as newest
from ..openapi import operator_docs
from ..params import parse_id
from ..runtime import Runtime

__all__ = ["journal_handlers"]


def journal_handlers(runtime: Runtime) -> list[HTTPRouteHandler]:
    """The checkpoint and proof routes, bound to ``runtime``."""

    @get(
        "/checkpoints/latest",
        summary="The newest signed checkpoint of the journal's tree (a signed note)",
        **operator_docs("checkpoint.not_found"),
    )
    async def latest_checkpoint() -> dict[str, Any]:
        found = await runtime.call(lambda ledger: newest(ledger.store))
        if found is None:
            raise CheckpointNotFound("no checkpoint has been signed yet")
        note, signed_at = found
        lines = note.split("\n")
        return {
            "origin": lines[0],
            "size": int(lines[1]),
            "root": lines[2],
            "signed_at": signed_at.isoformat().replace("+00:00", "Z"),
            "note": note,
        }

    @get(
        "/bets/{bet_uid:str}/proof",
        summary="A bet's commits and the proof of each in the newest signed checkpoint",
        **operator_docs("request.invalid", "bet.not_found", "checkpoint.not_found"),
    )
    async def bet_proof(
        bet_uid: Annotated[str, PathParameter(description="bet.uid")],
        content: Annotated[
            bool,
            QueryParameter(
                description="with each commit's canonical content (a close of many bets: large)"
            ),
        ] = False,
    ) -> dict[str, Any]:
        uid = parse_id(bet_uid, "bet_uid")
        return await runtime.call(lambda ledger: proof_document(ledger.store, uid, content=content))

    @get(
        "/checkpoints/{old_size:str}/consistency",
        summary="The proof that the newest signed checkpoint extends the one of old_size commits",
        **operator_docs("request.invalid", "checkpoint.not_found"),
    )
    async def consistency(
        old_size: Annotated[str, PathParameter(description="the older checkpoint's size")],
    ) -> dict[str, Any]:
        size = parse_id(old_size, "old_size")
        return await runtime.call(lambda ledger: consistency_document(ledger.store, size))

    return [latest_checkpoint, consistency, bet_proof]
