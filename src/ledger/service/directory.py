"""The directory: tournaments, users and bets as the platform described them
(:mod:`ledger.directory`), with their books."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from .. import domain
from ..contract import (
    check_id,
    check_user,
)
from ..errors import InvalidRequest, UserNotFound
from ..paging import DEFAULT_LIMIT, Page, check_limit, page_of, position
from ..stores import (
    TournamentRecord,
    UserRecord,
)
from ..views import (
    Balance,
    BetView,
    PoolReport,
    TournamentView,
    UserView,
)
from .books import Books
from .params import (
    cursor_time,
    filter_text,
    timestamp_key,
)

__all__ = ["Directory"]

_STATES = tuple(state.value for state in domain.BetState)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Directory(Books):
    """Tournaments, users and bets, listed and looked up."""

    def tournaments(
        self,
        status: str | None = None,
        search: str | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        before: str | None = None,
    ) -> Page[TournamentView]:
        """Tournaments, newest first (by when the ledger first saw them), a page at a time.

        ``status``: only those whose last status seen is this one; ``search``: a
        case-insensitive substring of the name or of the uid. ``before``: the previous page's
        ``next`` cursor.
        """
        status = filter_text(status, "status")
        search = filter_text(search, "q")
        limit = check_limit(limit)
        key = position(before, str, int)
        after = None if key is None else (cursor_time(key[0]), int(key[1]))
        rows = self._read(lambda reads: reads.tournaments(status, search, limit + 1, after))
        page = page_of(rows, limit, lambda row: (timestamp_key(row.first_seen), row.uid))
        return Page([_tournament_view(row) for row in page.items], page.next)

    def tournament(self, uid: int) -> TournamentView | None:
        """The tournament with its report per currency, or ``None`` when no payload and no bet
        named it."""
        uid = check_id(uid, "pool uid")
        found = self._read(lambda reads: reads.tournament(uid))
        if found is None:
            return None
        return _tournament_view(found, self.pool_report(uid))

    def users(
        self, search: str | None = None, *, limit: int = DEFAULT_LIMIT, before: str | None = None
    ) -> Page[UserView]:
        """Users the payloads described, newest first, a page at a time.

        ``search``: a case-insensitive substring of the uid or of the name.
        """
        search = filter_text(search, "q")
        limit = check_limit(limit)
        key = position(before, str, str)
        after = None if key is None else (cursor_time(key[0]), str(key[1]))
        rows = self._read(lambda reads: reads.users(search, limit + 1, after))
        # Every listed user has a first_seen: only users known by an account alone lack one,
        # and those are not in the list.
        page = page_of(rows, limit, lambda row: (timestamp_key(row.first_seen or _EPOCH), row.uid))
        return Page([_user_view(row) for row in page.items], page.next)

    def user(self, uid: str) -> UserView | None:
        """The user with their balances; ``None`` unless a payload named them or they hold an
        account (a deposit creates one)."""
        uid = check_user(uid)
        found = self._read(lambda reads: reads.user(uid))
        if found is None:
            return None
        return _user_view(found, self.balance(uid))

    def require_user(self, uid: str) -> None:
        """Raise ``user.not_found`` (404) unless a payload named the user or they hold an
        account: an unknown user must not look like one with nothing."""
        uid = check_user(uid)
        if self._read(lambda reads: reads.user(uid)) is None:
            raise UserNotFound(f"user {uid} is unknown")

    def bets(
        self,
        user: str | None = None,
        pool: int | None = None,
        state: str | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        before: str | None = None,
        by_time: bool = False,
    ) -> Page[BetView]:
        """Bets by uid, highest first (or, ``by_time``, the last placed first), filtered by
        user, tournament and state, a page at a time."""
        user = None if user is None else check_user(user)
        pool = None if pool is None else check_id(pool, "pool")
        if state is not None and state not in _STATES:
            raise InvalidRequest(f"state: expected one of {', '.join(_STATES)}")
        limit = check_limit(limit)
        if by_time:
            return self._bets_by_time(user, pool, state, limit, before)
        key = position(before, int)
        after = None if key is None else int(key[0])
        rows = self._read(lambda reads: reads.bets(user, pool, state, limit + 1, after))
        page = page_of(rows, limit, lambda row: (row.bet.uid,))
        return Page([self._bet_view(row) for row in page.items], page.next)

    def _bets_by_time(
        self, user: str | None, pool: int | None, state: str | None, limit: int, before: str | None
    ) -> Page[BetView]:
        key = position(before, str, int)
        after = None if key is None else (cursor_time(key[0]), int(key[1]))
        rows = self._read(lambda reads: reads.bets_by_time(user, pool, state, limit + 1, after))
        page = page_of(rows, limit, lambda row: (timestamp_key(row.placed_at), row.bet.uid))
        return Page([self._bet_view(row) for row in page.items], page.next)

    def tournament_names(self, uids: Iterable[int]) -> dict[int, str]:
        """The names the platform gave these tournaments (those it named), by uid."""
        wanted = sorted({check_id(uid, "pool uid") for uid in uids})
        return self._read(lambda reads: reads.tournament_names(wanted))

    def tournament_statuses(self) -> list[str]:
        """Every status the platform gave a tournament, sorted (the choices of a filter)."""
        return self._read(lambda reads: reads.tournament_statuses())


def _tournament_view(row: TournamentRecord, report: PoolReport | None = None) -> TournamentView:
    return TournamentView(
        uid=row.uid,
        name=row.name,
        currency=row.currency,
        category=row.category,
        game_type=row.game_type,
        status=row.status,
        estimated_end_time=row.estimated_end_time,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        entries=row.entries,
        report=report,
    )


def _user_view(row: UserRecord, balances: list[Balance] | None = None) -> UserView:
    return UserView(
        uid=row.uid,
        name=row.name,
        client=row.client,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        balances=balances,
    )
