""":class:`PlatformDriver` plays the platform: it places entries, refunds and settles them,
re-sends every delivery that did not get a definitive answer (contract 7.2), re-sends some that
did, and keeps the model of what every user must hold."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx

from support.httpkit import (
    PLACE,
    REFUND_BET,
    SETTLE,
    dumps,
    headers,
)
from support.operator_calls import balances_of
from support.payloads import entry, participant, place, pool_of
from support.stored import ledger_check, stored_bets

CENT = Decimal("0.01")


@dataclass
class Group:
    """One Place Bet request (1 to 3 teams of one user in one pool) and what becomes of it."""

    user: str
    pool: int
    bets: list[tuple[int, Decimal, Decimal]]  # (uid, amount, rake)
    fate: str  # "open", "refund" or "settle"
    payouts: list[Decimal]
    placed: bool = False
    closed: bool = False

    @property
    def total(self) -> Decimal:
        return sum((amount + rake for _, amount, rake in self.bets), Decimal(0))

    def place_body(self) -> bytes:
        return dumps(
            place(
                *(
                    entry(uid, user=self.user, pool=self.pool, amount=amount, rake=rake)
                    for uid, amount, rake in self.bets
                )
            )
        )

    def close_body(self) -> bytes:
        status = "cancelled" if self.fate == "refund" else "closed"
        parts = []
        for (uid, _, _), payout in zip(self.bets, self.payouts, strict=True):
            extra: dict[str, Any] = (
                {} if self.fate == "refund" else {"payout": str(payout), "rank": 1}
            )
            parts.append(participant(uid, self.user, **extra))
        return dumps({"pools": [pool_of(self.pool, parts, status=status)]})

    def expected_states(self) -> dict[int, tuple[str, int | None]]:
        if not self.placed:
            return {}
        result: dict[int, tuple[str, int | None]] = {}
        for (uid, _, _), payout in zip(self.bets, self.payouts, strict=True):
            if not self.closed:
                result[uid] = ("placed", None)
            elif self.fate == "refund":
                result[uid] = ("refunded", None)
            else:
                result[uid] = ("settled", int(payout / CENT))
        return result


@dataclass
class PlatformDriver:
    """Concurrent platform traffic that re-sends until each delivery is answered for certain."""

    url: str
    users: list[str]
    seed: int
    deposit: Decimal = Decimal("1000.00")
    resend_share: float = 0.2
    give_up_after: float = 120.0
    groups: list[Group] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    # Deliveries answered 200, as (bet uid, what): "placed", "refunded" or "settled".
    acknowledged: list[tuple[int, str]] = field(default_factory=list)
    # The X-Request-Id of every delivery answered 200.
    acknowledged_requests: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    slowest: float = 0.0  # seconds, the longest wait for any answer
    # When set, the next 200 calls this at once, from the thread that heard it: a test kills
    # the server there, the moment a client has heard "done".
    on_next_answer: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._next_uid = 0

    # --- one delivery -----------------------------------------------------------------------------

    def deliver(self, http: httpx.Client, path: str, event: str, body: bytes) -> httpx.Response:
        """Send until the answer is not a 5xx or a failed connection: the platform's re-sends."""
        deadline = time.monotonic() + self.give_up_after
        while True:
            started = time.monotonic()
            try:
                # A fresh X-Request-Id per attempt: the journal must hold the one answered 200.
                attempt = headers(event, **{"X-Request-Id": str(uuid.uuid4())})
                response = http.post(path, content=body, headers=attempt)
            except httpx.TransportError as exc:
                self._count(type(exc).__name__)
            else:
                self._took(time.monotonic() - started)
                self._count(str(response.status_code))
                if response.status_code < 500:
                    return response
            if time.monotonic() > deadline:
                raise AssertionError(f"{path}: no definitive answer in {self.give_up_after} s")
            time.sleep(0.02)

    def _answered(self) -> None:
        with self._lock:
            hook, self.on_next_answer = self.on_next_answer, None
        if hook is not None:
            hook()

    def _took(self, seconds: float) -> None:
        with self._lock:
            self.slowest = max(self.slowest, seconds)

    def _count(self, what: str) -> None:
        with self._lock:
            self.statuses[what] += 1

    def _expect_200(self, response: httpx.Response, what: str) -> bool:
        if response.status_code == 200 and "error" not in response.json():
            with self._lock:
                self.acknowledged_requests.append(response.request.headers["x-request-id"])
            return True
        with self._lock:
            self.unexpected.append(f"{what}: {response.status_code} {response.text[:300]}")
        return False

    # --- the traffic ------------------------------------------------------------------------------

    def new_group(self, rng: random.Random) -> Group:
        with self._lock:
            self._next_uid += 10
            first = self.seed * 10**9 + self._next_uid
        user = rng.choice(self.users)
        bets = []
        for offset in range(rng.choice((1, 1, 2, 3))):
            amount = rng.choice((Decimal("1.00"), Decimal("2.00"), Decimal("5.00")))
            bets.append((first + offset, amount, (amount / 10).quantize(CENT)))
        fate = rng.choice(("open", "refund", "settle", "settle"))
        payouts = [
            rng.choice((Decimal("0.00"), Decimal("0.00"), Decimal("3.50"), Decimal("12.00")))
            if fate == "settle"
            else Decimal("0.00")
            for _ in bets
        ]
        group = Group(user, first // 10, bets, fate, payouts)
        with self._lock:
            self.groups.append(group)
        return group

    def lifecycle(self, http: httpx.Client, rng: random.Random) -> None:
        group = self.new_group(rng)
        uids = [uid for uid, _, _ in group.bets]
        place_body = group.place_body()
        for _ in range(2 if rng.random() < self.resend_share else 1):
            if not self._expect_200(self.deliver(http, "/bets", PLACE, place_body), f"{uids}"):
                return
            with self._lock:
                group.placed = True
                self.acknowledged.extend((uid, "placed") for uid in uids)
            self._answered()
        if group.fate == "open":
            return
        path, event, state = (
            ("/bets/cancel", REFUND_BET, "refunded")
            if group.fate == "refund"
            else ("/winners", SETTLE, "settled")
        )
        close_body = group.close_body()
        for _ in range(2 if rng.random() < self.resend_share else 1):
            if not self._expect_200(self.deliver(http, path, event, close_body), f"{uids}"):
                return
            with self._lock:
                group.closed = True
                self.acknowledged.extend((uid, state) for uid in uids)
            self._answered()

    def worker(self, number: int) -> None:
        rng = random.Random(self.seed * 1000 + number)
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while not self.stop.is_set():
                self.lifecycle(http, rng)

    @contextmanager
    def running(self, threads: int) -> Iterator[None]:
        """Traffic from ``threads`` workers until the block ends; then they finish what is open."""
        workers = [
            threading.Thread(target=self.worker, args=(number,), daemon=True)
            for number in range(threads)
        ]
        for worker in workers:
            worker.start()
        try:
            yield
        finally:
            self.stop.set()
            for worker in workers:
                worker.join(timeout=self.give_up_after + 30)
            assert not any(worker.is_alive() for worker in workers), "a worker hung"

    # --- the model -------------------------------------------------------------------------------

    def acknowledged_so_far(self) -> list[tuple[int, str]]:
        with self._lock:
            return list(self.acknowledged)

    def acknowledged_requests_so_far(self) -> list[str]:
        with self._lock:
            return list(self.acknowledged_requests)

    def expected_bets(self) -> dict[int, tuple[str, int | None]]:
        result: dict[int, tuple[str, int | None]] = {}
        for group in self.groups:
            result.update(group.expected_states())
        return result

    def expected_balance(self, user: str) -> tuple[Decimal, Decimal]:
        """``(available, held)`` the user must have after every acknowledged delivery."""
        available, held = self.deposit, Decimal(0)
        for group in self.groups:
            if group.user != user or not group.placed:
                continue
            if not group.closed:
                available -= group.total
                held += group.total
            elif group.fate == "settle":
                available += sum(group.payouts, Decimal(0)) - group.total
        return available, held


def assert_books_match(driver: PlatformDriver, server_url: str, database_url: str) -> None:
    """Every bet as the platform's model says (none missing, extra or closed twice), every
    balance equal to the model, and the journal check clean."""
    assert not driver.unexpected, "\n".join(driver.unexpected[:20])
    assert stored_bets(database_url) == driver.expected_bets()
    with httpx.Client(base_url=server_url, timeout=30) as http:
        for user in driver.users:
            assert balances_of(http, user) == driver.expected_balance(user), user
    check = ledger_check(database_url)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith("ok"), check.stdout
