"""The console's changes to a player's responsible-gambling limits and exclusions, from the
user's page: a cashier or an admin sets, removes or cancels a pending change of a limit and
excludes a player; only an admin ends an exclusion early, with a reason.

Each form answers with the user's page as it is after the change (the limits' table shows the
new limit, or the pending raise and when it takes effect), or with the refusal beside the form,
the page unchanged. Every attempt is audited, refused ones with their error key. The rules
(a raise waits the cooling-off, an exclusion only lengthens) are the ledger's
(:mod:`ledger.service.limits`), as through the operator API and ``ledger limits``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from litestar import Request, Response, post

from ...errors import InvalidRequest, LedgerError
from ...operators import Session
from ...service import Ledger
from .formats import utc_field
from .kit import Kit
from .users import user_page

__all__ = ["player_limits_handlers"]

_LIMIT_ACTIONS = ("set", "remove", "cancel")


def _by(session: Session) -> str:
    """Who asked, as the limits' history records it."""
    return f"console:{session.operator}"


def _limit_change(form: dict[str, str], by: str) -> Callable[[Ledger], Any]:
    action = form.get("action", "")
    if action not in _LIMIT_ACTIONS:
        raise InvalidRequest("action must be set, remove or cancel")
    user, currency = form.get("uid", ""), form.get("currency", "").strip().upper()
    kind, period = form.get("kind", ""), form.get("period", "")
    amount = form.get("amount", "").strip()
    if action == "set":
        if not amount:
            raise InvalidRequest("amount: required to set a limit", key="amount.invalid")
        return lambda ledger: ledger.set_limit(user, currency, kind, period, amount, by=by)
    if action == "remove":
        return lambda ledger: ledger.remove_limit(user, currency, kind, period, by=by)
    return lambda ledger: ledger.cancel_pending(user, currency, kind, period, by=by)


def _until(form: dict[str, str]) -> datetime | None:
    text = utc_field(form.get("until"), "until")
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def player_limits_handlers(kit: Kit) -> list[Any]:
    """The limit and exclusion forms' answers."""

    async def answer(
        request: Request[Any, Any, Any],
        session: Session,
        action: str,
        user: str,
        change: Callable[[], Callable[[Ledger], Any]],
        note: dict[str, str],
    ) -> Response[Any]:
        """Apply ``change()`` (built inside, so that its bad input is refused like the rest),
        audit it, and answer the user's page or the refusal beside the form."""
        try:
            done = await kit.call(change())
        except LedgerError as error:
            await kit.call(kit.audit(request, session, action, user, outcome=error.key, **note))
            return kit.beside(request, session, error, "#limits-result")
        await kit.call(kit.audit(request, session, action, user, **note))
        found = await kit.call(lambda ledger: user_page(ledger, user, None, None, None))
        notice = _notice(action, note, done)
        return kit.page(
            request, session, "users.html", partial="_user.html", uid=user, q="",
            limits_notice=notice, **found,
        )  # fmt: skip

    @post("/users/limits", include_in_schema=False)
    async def limit(request: Request[Any, Any, Any]) -> Response[Any]:
        session = await kit.signed_in(request)
        form = await kit.form_of(request, session)
        user = form.get("uid", "")
        # "change", not "action": the audit entry's own action is "limit".
        note = {
            name: form.get(key, "").strip()
            for name, key in (
                ("change", "action"), ("currency", "currency"), ("kind", "kind"),
                ("period", "period"), ("amount", "amount"),
            )
            if form.get(key, "").strip()
        }  # fmt: skip

        def change() -> Callable[[Ledger], Any]:
            session.require("move")
            return _limit_change(form, _by(session))

        return await answer(request, session, "limit", user, change, note)

    @post("/users/exclusions", include_in_schema=False)
    async def exclusion(request: Request[Any, Any, Any]) -> Response[Any]:
        session = await kit.signed_in(request)
        form = await kit.form_of(request, session)
        user, reason = form.get("uid", ""), form.get("reason", "").strip()
        lift = form.get("action") == "lift"
        note = {"reason": reason, **({"until": form["until"]} if form.get("until") else {})}

        def change() -> Callable[[Ledger], Any]:
            session.require("lift" if lift else "move")
            if not reason:
                raise InvalidRequest("reason: required", key="request.invalid")
            if lift:
                return lambda ledger: ledger.lift_exclusion(user, reason=reason, by=_by(session))
            until = _until(form)
            return lambda ledger: ledger.exclude(user, until, reason=reason, by=_by(session))

        return await answer(
            request, session, "lift_exclusion" if lift else "exclude", user, change, note
        )

    return [limit, exclusion]


def _notice(action: str, note: dict[str, str], done: Any) -> str:
    """What the form did, in words, for the notice above the limits' table."""
    if action == "lift_exclusion":
        return f"Exclusions ended early: {done}."
    if action == "exclude":
        return "Exclusion recorded; the table shows the one in force."
    kind, period = note.get("kind", ""), note.get("period", "")
    kind = f"{kind} limit per {period} in {note.get('currency', '')}"
    if note.get("change") == "cancel":
        return f"Pending change of the {kind} cancelled." if done else f"No {kind} to cancel."
    pending_at = getattr(done, "pending_at", None)
    if pending_at is not None:
        return f"The {kind} changes on {pending_at:%Y-%m-%d %H:%M:%S} UTC (cooling-off)."
    return f"The {kind} is in force now." if note.get("change") == "set" else f"The {kind} removed."
