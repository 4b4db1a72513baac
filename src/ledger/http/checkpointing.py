"""``ledger serve`` with ``LEDGER_SIGNING_KEY``: a signed checkpoint of the journal's tree every
``LEDGER_CHECKPOINT_INTERVAL`` seconds, only when something was committed since the last one;
kept in the database and appended to ``LEDGER_CHECKPOINT_FILE`` (ledger.service.journal).

A plain asyncio task, the signing on a worker thread: a failure (the database away) is logged
and the next interval tries again; it never reaches the server's lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from ..service.journal import latest_size, publish_checkpoint
from .runtime import Runtime

__all__ = ["CheckpointSigner"]

log = logging.getLogger("ledger.checkpoints")


class CheckpointSigner:
    """Signs checkpoints in the background while the server runs."""

    def __init__(self, runtime: Runtime, key_file: str) -> None:
        self._runtime = runtime
        self._key_file = key_file
        self._task: asyncio.Task[None] | None = None
        self._signed: int | None = None

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ledger-checkpoints")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def sign_once(self) -> int | None:
        """Sign a checkpoint now unless the tree has not grown; the size signed (None: none)."""
        settings = self._runtime.settings
        signer = Path(self._key_file).read_text(encoding="utf-8").strip()
        store = self._runtime.ledger().store
        if self._signed is None:
            self._signed = latest_size(store)
        published = publish_checkpoint(
            store, signer, file=settings.checkpoint_file, unless_size=self._signed
        )
        if published is None:
            return None
        self._signed = published[0].size
        log.info("signed the journal's checkpoint of %d commits", published[0].size)
        return published[0].size

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._runtime.settings.checkpoint_interval)
            try:
                await self._runtime.offload(self.sign_once)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("signing the journal's checkpoint failed; trying again later")
