"""A tiny in-memory wallet for the conformance kit's tests, correct unless told to break.

It implements just enough of the contract (the three callback paths with auth) and of our
operator API (deposits, balances, bets, check) for ``ledger validate`` and ``ledger simulate``
to judge it. Each flag plants one deliberate bug, so that a test can prove the kit names it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import jwt
from litestar import Litestar, Request, Response, get, post

OPERATOR_TOKEN = "mini-operator-token"


@dataclass(frozen=True)
class Bugs:
    debit_again_on_resend: bool = False  # a re-sent Place Bet debits a second time
    accept_unfunded: bool = False  # no funds check: 200 and an overdraft
    half_refund: bool = False  # a failing refund keeps the bets refunded before the failure


@dataclass(eq=False)  # bets are compared by identity: two equal-looking entries are two bets
class Bet:
    user: str
    pool: int
    currency: str
    total: Decimal
    funding: str
    state: str = "placed"
    payout: Decimal | None = None


@dataclass
class Wallet:
    secret: str
    client: str
    bugs: Bugs = field(default_factory=Bugs)
    available: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    held: dict[tuple[str, str], Decimal] = field(default_factory=dict)
    bets: dict[int, Bet] = field(default_factory=dict)

    def move(self, key: tuple[str, str], available: Decimal, held: Decimal) -> None:
        self.available[key] = self.available.get(key, Decimal(0)) + available
        self.held[key] = self.held.get(key, Decimal(0)) + held


def _error(status: int, key: str) -> Response[dict[str, str]]:
    return Response({"error": key}, status_code=status)


def _authorize(
    wallet: Wallet, request: Request[Any, Any, Any], admin: bool
) -> Response[Any] | None:
    parts = request.headers.get("authorization", "").split()
    if len(parts) != 3 or parts[0] != "Bearer":
        return _error(401, "auth.invalid_token")
    try:
        claims = jwt.decode(
            parts[2], wallet.secret, algorithms=["HS256"], options={"require": ["exp"]}
        )
    except jwt.PyJWTError:
        return _error(401, "auth.invalid_token")
    if parts[1] != wallet.client:
        return _error(403, "auth.wrong_client")
    role = claims.get("role")
    if role not in (("admin",) if admin else ("admin", "user")):
        return _error(403, "auth.wrong_role")
    if role == "admin" and not any(claims.get(name) for name in ("id", "uid", "sub")):
        return _error(401, "auth.invalid_token")
    return None


async def _body(request: Request[Any, Any, Any]) -> Any:
    return json.loads(await request.body(), parse_float=Decimal)


def create_wallet_app(wallet: Wallet) -> Litestar:
    @post("/bets", status_code=200)
    async def place(request: Request[Any, Any, Any]) -> Response[Any]:
        refused = _authorize(wallet, request, admin=False)
        if refused is not None:
            return refused
        new: list[tuple[int, Bet]] = []
        needed: dict[tuple[str, str], Decimal] = {}
        for item in (await _body(request))["bets"]:
            bet = item["bet"]
            uid, user = int(bet["uid"]), item["user"]["uid"]
            currency = bet["currency"]
            total = Decimal(str(bet["amount"])) + Decimal(str(bet.get("rake", 0)))
            known = wallet.bets.get(uid)
            if known is not None:
                if known.state == "placed" and known.total != total:
                    return _error(409, "bet.conflict")
                if wallet.bugs.debit_again_on_resend and known.funding == "cash":
                    wallet.move((user, currency), -total, Decimal(0))
                continue
            funding = "ticket" if bet.get("ticket") else "free" if total == 0 else "cash"
            new.append((uid, Bet(user, int(item["pool"]["uid"]), currency, total, funding)))
            if funding == "cash":
                needed[(user, currency)] = needed.get((user, currency), Decimal(0)) + total
        if not wallet.bugs.accept_unfunded:
            for key, amount in needed.items():
                if wallet.available.get(key, Decimal(0)) < amount:
                    return _error(402, "user.insufficient_funds")
        for uid, bet_record in new:
            wallet.bets[uid] = bet_record
            key = (bet_record.user, bet_record.currency)
            if bet_record.funding == "cash":
                wallet.move(key, -bet_record.total, bet_record.total)
            elif bet_record.funding == "ticket":
                wallet.move(key, Decimal(0), bet_record.total)
        return Response({"secrets": {"wallet": "mini"}})

    @post("/bets/cancel", status_code=200)
    async def refund(request: Request[Any, Any, Any]) -> Response[Any]:
        refused = _authorize(wallet, request, admin=True)
        if refused is not None:
            return refused
        items = [part for pool in (await _body(request))["pools"] for part in pool["bets"]]
        todo: list[Bet] = []
        for part in items:
            bet = wallet.bets.get(int(part["bet"]["uid"]))
            if bet is None:
                if wallet.bugs.half_refund:
                    for done in todo:
                        _refund(wallet, done)
                return _error(404, "bet.not_found")
            if bet.state == "settled":
                return _error(409, "bet.already_settled")
            if bet.state == "placed" and bet not in todo:
                todo.append(bet)
        for bet in todo:
            _refund(wallet, bet)
        return Response({})

    @post("/winners", status_code=200)
    async def settle(request: Request[Any, Any, Any]) -> Response[Any]:
        refused = _authorize(wallet, request, admin=True)
        if refused is not None:
            return refused
        items = [part for pool in (await _body(request))["pools"] for part in pool["bets"]]
        todo: list[tuple[Bet, Decimal]] = []
        for part in items:
            bet = wallet.bets.get(int(part["bet"]["uid"]))
            payout = Decimal(str(part["bet"]["payout"]))
            if bet is None:
                return _error(404, "bet.not_found")
            if bet.state == "refunded":
                return _error(409, "bet.already_refunded")
            if bet.state == "placed":
                todo.append((bet, payout))
        for bet, payout in todo:
            key = (bet.user, bet.currency)
            held = bet.total if bet.funding != "free" else Decimal(0)
            wallet.move(key, payout, -held)
            bet.state, bet.payout = "settled", payout
        return Response({})

    def operator(request: Request[Any, Any, Any]) -> bool:
        return request.headers.get("authorization") == f"Bearer {OPERATOR_TOKEN}"

    @post("/admin/deposits", status_code=200)
    async def deposit(request: Request[Any, Any, Any]) -> Response[Any]:
        if not operator(request):
            return _error(401, "auth.invalid_token")
        body = await _body(request)
        wallet.move((body["user"], body["currency"]), Decimal(body["amount"]), Decimal(0))
        return Response({"applied": True})

    @get("/admin/users/{uid:str}/balances")
    async def balances(request: Request[Any, Any, Any]) -> dict[str, Any]:
        uid = str(request.path_params["uid"])
        rows = [
            {
                "currency": currency,
                "available": str(amount),
                "held": str(wallet.held[(user, currency)]),
            }
            for (user, currency), amount in wallet.available.items()
            if user == uid
        ]
        return {"user": uid, "balances": rows}

    @post("/admin/withdrawals", status_code=200)
    async def withdrawal(request: Request[Any, Any, Any]) -> Response[Any]:
        if not operator(request):
            return _error(401, "auth.invalid_token")
        body = await _body(request)
        key = (body["user"], body["currency"])
        amount = Decimal(body["amount"])
        if wallet.available.get(key, Decimal(0)) < amount:
            return _error(402, "funds.insufficient")
        wallet.move(key, -amount, Decimal(0))
        return Response({"applied": True})

    # The lists the kit's clean-up reads: its users by prefix, their open holds.
    @get("/admin/users")
    async def users(request: Request[Any, Any, Any]) -> dict[str, Any]:
        q = request.query_params.get("q", "")
        known = {user for user, _ in wallet.available} | {bet.user for bet in wallet.bets.values()}
        return {"users": [{"uid": uid} for uid in sorted(known) if q in uid], "next": None}

    @get("/admin/tournaments")
    async def tournaments() -> dict[str, Any]:
        return {"tournaments": [], "next": None}  # names are not kept here

    @get("/admin/holds")
    async def holds(request: Request[Any, Any, Any]) -> dict[str, Any]:
        user = request.query_params.get("user")
        pool = request.query_params.get("pool")
        rows = [
            {
                "uid": uid,
                "user": bet.user,
                "pool_uid": bet.pool,
                "currency": bet.currency,
                "amount": str(bet.total),
                "rake": "0.00",
            }
            for uid, bet in wallet.bets.items()
            if bet.state == "placed" and user in (None, bet.user) and pool in (None, bet.pool)
        ]
        return {"holds": rows, "next": None}

    @get("/admin/bets/{bet_uid:int}")
    async def bet_view(request: Request[Any, Any, Any]) -> Response[Any]:
        bet_uid = int(request.path_params["bet_uid"])
        bet = wallet.bets.get(bet_uid)
        if bet is None:
            return _error(404, "bet.not_found")
        payout = None if bet.payout is None else str(bet.payout)
        return Response({"uid": bet_uid, "state": bet.state, "payout": payout})

    @get("/admin/check")
    async def check() -> dict[str, Any]:
        return {"problems": []}

    handlers = [place, refund, settle, deposit, withdrawal, users, tournaments, holds]
    return Litestar(
        [*handlers, balances, bet_view, check],
        logging_config=None,
        openapi_config=None,
    )


def _refund(wallet: Wallet, bet: Bet) -> None:
    key = (bet.user, bet.currency)
    if bet.funding == "cash":
        wallet.move(key, bet.total, -bet.total)
    elif bet.funding == "ticket":
        wallet.move(key, Decimal(0), -bet.total)
    bet.state = "refunded"
