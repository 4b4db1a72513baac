"""The ticket administration client (``ledger.kit.tickets``) against the simulated platform's ticket
API over real HTTP, one test per rule of contract section 4.2 (and 2.6 for the ticket object)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import jwt
import pytest

from ledger.errors import LedgerError
from ledger.kit.ticket_api import ServerThread, TicketStore, create_ticket_app
from ledger.kit.tickets import (
    TicketClient,
    TicketError,
    TicketForbidden,
    TicketPaths,
    TicketRejected,
    TicketUnauthorized,
    TicketUnavailable,
)
from ledger.tokens import sign_token

SECRET = "ticket-secret-" + "0123456789abcdef" * 3
CLIENT = "acme"
DUE = datetime.now(UTC) + timedelta(days=3)


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[TicketStore, ServerThread]]:
    # One server for the module: starting uvicorn per test would dominate the run time.
    store = TicketStore(secret=SECRET, affiliate_id=42)
    with ServerThread(create_ticket_app(store, client_name=CLIENT)) as running:
        yield store, running


@pytest.fixture
def store(shared: tuple[TicketStore, ServerThread]) -> TicketStore:
    shared[0].clear()
    return shared[0]


@pytest.fixture
def server(shared: tuple[TicketStore, ServerThread], store: TicketStore) -> ServerThread:
    return shared[1]


@pytest.fixture
def client(server: ServerThread) -> Iterator[TicketClient]:
    with TicketClient(server.url, client_name=CLIENT, secret=SECRET) as ticket_client:
        yield ticket_client


def create(client: TicketClient, *uids: str, **options: Any) -> list[int]:
    fields: dict[str, Any] = {"due_at": DUE, "currency": "EUR", "buy_in": Decimal("5.00")}
    fields.update(options)
    return client.create(uids=list(uids) or ["u1"], **fields).ids


# --- create ---------------------------------------------------------------------------------------


def test_create_answers_total_ids_and_one_ticket_per_uid(client: TicketClient) -> None:
    created = client.create(uids=["u1", "u2", "u3"], due_at=DUE, currency="EUR", buy_in="2.50")

    assert created.total == 3
    assert len(created.ids) == 3
    assert [(t.id, t.uid) for t in created.tickets] == list(
        zip(created.ids, ["u1", "u2", "u3"], strict=True)
    )


def test_create_defaults_the_type_to_marketing(client: TicketClient) -> None:
    [ticket_id] = create(client)

    [ticket] = client.list(ids=[ticket_id]).tickets
    assert ticket.type == "marketing"


@pytest.mark.parametrize("kind", ["marketing", "godwill", "satellite", "test", "billable"])
def test_create_accepts_every_contract_type_including_the_godwill_spelling(
    client: TicketClient, kind: Any
) -> None:
    [ticket_id] = create(client, type=kind)

    assert client.list(ids=[ticket_id]).tickets[0].type == kind


def test_buy_in_round_trips_exactly_as_a_decimal(client: TicketClient) -> None:
    [ticket_id] = create(client, buy_in=Decimal("12.345"))

    ticket = client.list(ids=[ticket_id]).tickets[0]
    assert ticket.buy_in == Decimal("12.345")
    assert ticket.cost is not None
    assert ticket.cost.amount == Decimal("12.345")


BAD_TICKETS: list[tuple[str, dict[str, Any]]] = [
    ("missing uids", {"uids": None}),
    ("empty uids", {"uids": []}),
    ("a uid that is not a string", {"uids": [7]}),
    ("missing dueAt", {"dueAt": None}),
    ("dueAt not ISO 8601", {"dueAt": "next tuesday"}),
    ("dueAt in the past", {"dueAt": "2001-01-01T00:00:00Z"}),
    ("missing currency", {"currency": None}),
    ("missing buyIn", {"buyIn": None}),
    ("negative buyIn", {"buyIn": "-1.00"}),
    ("buyIn not a decimal", {"buyIn": "lots"}),
    ("unknown type", {"type": "goodwill"}),
    ("tournamentId not an integer", {"tournamentId": "12"}),
    ("ref not a UUID", {"ref": "not-a-uuid"}),
]


@pytest.mark.parametrize(("case", "change"), BAD_TICKETS, ids=[case for case, _ in BAD_TICKETS])
def test_a_bad_create_is_refused_with_422_message_and_error(
    server: ServerThread, case: str, change: dict[str, Any]
) -> None:
    ticket: dict[str, Any] = {
        "uids": ["u1"],
        "dueAt": DUE.isoformat(),
        "currency": "EUR",
        "buyIn": "5.00",
    }
    ticket.update(change)
    ticket = {key: value for key, value in ticket.items() if value is not None}
    headers = {"authorization": f"Bearer {CLIENT} {sign_token(SECRET, role='admin')}"}

    response = httpx.post(
        f"{server.url}/tournament_tickets", json={"tournamentTicket": ticket}, headers=headers
    )

    assert response.status_code == 422, case
    body = response.json()
    assert set(body) == {"message", "error"}
    assert body["message"].startswith("tournament_ticket.")
    assert body["error"]


def test_the_client_raises_a_422_as_ticket_rejected_carrying_message_and_error(
    client: TicketClient,
) -> None:
    with pytest.raises(TicketRejected) as caught:
        client.create(uids=[], due_at=DUE, currency="EUR", buy_in="1")

    error = caught.value
    assert isinstance(error, LedgerError)
    assert error.status == 422
    assert error.message == "tournament_ticket.uids_required"
    assert error.key == error.message
    assert "uids" in error.error


def test_a_ref_groups_tickets_and_filters_the_list(client: TicketClient) -> None:
    ref = str(uuid.uuid4())
    grouped = create(client, "u1", "u2", ref=ref)
    create(client, "u3")  # its ref is generated

    listed = client.list(ref=ref)

    assert listed.total == 2
    assert sorted(ticket.id for ticket in listed.tickets) == sorted(grouped)


def test_a_ref_is_generated_when_omitted(client: TicketClient, store: TicketStore) -> None:
    first, second = create(client), create(client)

    refs = {store.get(first[0]).ref, store.get(second[0]).ref}  # type: ignore[union-attr]
    assert len(refs) == 2
    assert all(uuid.UUID(ref) for ref in refs)


# --- list -----------------------------------------------------------------------------------------


def test_list_is_sorted_by_ticket_id_descending(client: TicketClient) -> None:
    ids = create(client, "a", "b", "c", "d")

    assert [ticket.id for ticket in client.list().tickets] == sorted(ids, reverse=True)


def test_list_pages_are_zero_based_with_a_default_limit_of_50(client: TicketClient) -> None:
    ids = create(client, *[f"user{n}" for n in range(60)])
    newest_first = sorted(ids, reverse=True)

    first = client.list()
    second = client.list(page=1)

    assert first.total == second.total == 60
    assert [t.id for t in first.tickets] == newest_first[:50]
    assert [t.id for t in second.tickets] == newest_first[50:]
    assert client.list(page=2).tickets == []


def test_list_limit_sets_the_page_size(client: TicketClient) -> None:
    ids = sorted(create(client, *[f"user{n}" for n in range(7)]), reverse=True)

    pages = [[t.id for t in client.list(limit=3, page=page).tickets] for page in range(3)]

    assert pages == [ids[0:3], ids[3:6], ids[6:7]]
    assert [t.id for t in client.iter_all(limit=3)] == ids


def test_list_filters_by_user_id_and_by_ids(client: TicketClient) -> None:
    mine = create(client, "me", "me")
    theirs = create(client, "them")

    by_user = client.list(user_id="me")
    by_ids = client.list(ids=[mine[0], theirs[0]])

    assert sorted(t.id for t in by_user.tickets) == sorted(mine)
    assert all(t.user is not None and t.user.uid == "me" for t in by_user.tickets)
    assert sorted(t.id for t in by_ids.tickets) == sorted([mine[0], theirs[0]])
    assert by_ids.total == 2


def test_kind_is_derived_tournament_season_or_open(client: TicketClient) -> None:
    [tournament] = create(client, tournament_id=77, season_id=5)
    [season] = create(client, season_id=5)
    [open_ticket] = create(client)

    kinds = {t.id: t.kind for t in client.list().tickets}

    assert kinds == {tournament: "tournament", season: "season", open_ticket: "open"}


def test_listed_tickets_carry_kind_cost_and_user(client: TicketClient, store: TicketStore) -> None:
    store.register_user("u9", "Nine")
    [ticket_id] = create(client, "u9", currency="USD", buy_in="3.00")

    ticket = client.list(ids=[ticket_id]).tickets[0]

    assert ticket.kind == "open"
    assert ticket.cost is not None
    assert (ticket.cost.amount, ticket.cost.currency) == (
        Decimal("3.00"),
        "USD",
    )
    assert ticket.user is not None
    assert (ticket.user.uid, ticket.user.name) == ("u9", "Nine")
    assert isinstance(ticket.user.id, int)
    assert ticket.due_at is not None
    assert ticket.created_at is not None


def test_null_fields_are_omitted_from_ticket_objects(
    client: TicketClient, server: ServerThread
) -> None:
    [ticket_id] = create(client)  # no tournament, season, comment; unused
    headers = {"authorization": f"Bearer {CLIENT} {sign_token(SECRET, role='admin')}"}

    raw = httpx.get(f"{server.url}/tournament_tickets", headers=headers).json()
    [listed] = raw["tournamentTickets"]

    assert None not in listed.values()
    for absent in ("tournamentId", "seasonId", "comment", "fantasyTeamId", "affiliateId"):
        assert absent not in listed
    dumped = client.list(ids=[ticket_id]).tickets[0].to_dict()
    assert "tournamentId" not in dumped
    assert "fantasyTeamId" not in dumped
    assert None not in dumped.values()


# --- delete ---------------------------------------------------------------------------------------


def test_delete_removes_an_unused_ticket_and_returns_it(client: TicketClient) -> None:
    [ticket_id] = create(client, tournament_id=12, comment="welcome")

    deleted = client.delete(ticket_id)

    assert deleted.id == ticket_id
    assert (deleted.tournament_id, deleted.comment, deleted.affiliate_id) == (12, "welcome", 42)
    assert deleted.buy_in == Decimal("5.00")
    assert deleted.kind is None
    assert deleted.user is None
    assert client.list(ids=[ticket_id]).total == 0


def test_a_used_ticket_carries_fantasy_team_id_and_cannot_be_deleted(
    client: TicketClient, store: TicketStore
) -> None:
    [ticket_id] = create(client)
    store.use(ticket_id, fantasy_team_id=9001)

    listed = client.list(ids=[ticket_id]).tickets[0]
    with pytest.raises(TicketForbidden) as caught:
        client.delete(ticket_id)

    assert listed.fantasy_team_id == 9001
    assert listed.used
    assert caught.value.status == 403
    assert caught.value.message == "tournament_ticket.already_used"
    assert "9001" in caught.value.error
    assert client.list(ids=[ticket_id]).total == 1


def test_deleting_an_unknown_ticket_is_refused_with_403(client: TicketClient) -> None:
    with pytest.raises(TicketForbidden) as caught:
        client.delete(123456)

    assert caught.value.message == "tournament_ticket.not_available"


# --- authorization and transport -----------------------------------------------------------------


def test_a_token_signed_with_another_secret_is_refused_with_401(server: ServerThread) -> None:
    stranger = TicketClient(server.url, client_name=CLIENT, secret="another-" + SECRET)
    with stranger, pytest.raises(TicketUnauthorized) as caught:
        stranger.list()

    assert caught.value.status == 401


def test_another_client_name_or_a_user_role_is_refused_with_403(server: ServerThread) -> None:
    user_token = sign_token(SECRET, role="user")
    with (
        TicketClient(server.url, client_name="other", secret=SECRET) as other,
        TicketClient(server.url, client_name=CLIENT, token=user_token) as user,
    ):
        for ticket_client in (other, user):
            with pytest.raises(TicketForbidden):
                ticket_client.list()


def test_requests_carry_bearer_client_name_and_an_admin_jwt_on_overridable_paths() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "POST":
            return httpx.Response(
                200, json={"total": 1, "ids": [5], "tickets": [{"id": 5, "uid": "u"}]}
            )
        if request.method == "GET":
            return httpx.Response(200, json={"total": 0, "tournamentTickets": []})
        return httpx.Response(200, json={"ticket": {"id": 5, "type": "test"}})

    paths = TicketPaths(
        create="/v2/tickets", list="/v2/tickets/search", delete="/v2/tickets/{id}/x"
    )
    with TicketClient(
        "https://platform.test/api",
        client_name=CLIENT,
        secret=SECRET,
        paths=paths,
        transport=httpx.MockTransport(answer),
    ) as ticket_client:
        ticket_client.create(uids=["u"], due_at=DUE, currency="EUR", buy_in="1")
        ticket_client.list(ids=[1, 2], user_id="u", limit=10, page=0)
        ticket_client.delete(5)

    assert [(r.method, r.url.path) for r in seen] == [
        ("POST", "/api/v2/tickets"),
        ("GET", "/api/v2/tickets/search"),
        ("DELETE", "/api/v2/tickets/5/x"),
    ]
    assert seen[1].url.params.get_list("ids") == ["1", "2"]
    assert json.loads(seen[0].content)["tournamentTicket"]["buyIn"] == "1"
    for request in seen:
        scheme, name, token = request.headers["authorization"].split(" ")
        claims = jwt.decode(token, SECRET, algorithms=["HS256"])
        assert (scheme, name, claims["role"]) == ("Bearer", CLIENT, "admin")
        assert claims["sub"]
        assert claims["exp"] > claims["iat"]


def test_an_unreachable_api_raises_ticket_unavailable() -> None:
    with ServerThread(create_ticket_app(TicketStore(secret=SECRET), client_name=CLIENT)) as gone:
        url = gone.url
    ticket_client = TicketClient(url, client_name=CLIENT, secret=SECRET, timeout=2)
    with ticket_client, pytest.raises(TicketUnavailable) as caught:
        ticket_client.list()

    assert isinstance(caught.value, TicketError)
    assert caught.value.retryable


def test_the_client_needs_exactly_one_of_token_and_secret() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        TicketClient("http://x", client_name=CLIENT)
    with pytest.raises(ValueError, match="exactly one"):
        TicketClient("http://x", client_name=CLIENT, token="t", secret="s")
