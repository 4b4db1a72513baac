"""The baseline of benchmark (a): a bare Litestar JSON endpoint, served like ``ledger serve``.

It parses the same Place Bet body and answers a small JSON object, with no auth and no
database: what the framework and server cost on this machine, measured in the same run.
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar, post


@post("/echo", status_code=200)
async def echo(data: dict[str, Any]) -> dict[str, Any]:
    return {"secrets": {"echo": len(data)}}


app = Litestar([echo])
