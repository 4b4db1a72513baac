"""The console's pages of the operator's own books: check, the audit log, and the operators
(an admin's); a page refused for a role says what the role allows."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.params import QueryParameter
from litestar.response import Stream, Template

from ... import views
from ...errors import InvalidRequest, LedgerError
from ...operators import ACTIONS, ROLES, Operators
from ...service import Ledger
from ..filenames import CSV
from .kit import Kit

__all__ = ["staff_handlers"]

Text = Annotated[str | None, QueryParameter()]


def staff_handlers(kit: Kit) -> list[Any]:
    """Check, the audit log and the operators' page."""

    @get("/check", include_in_schema=False)
    async def check_page(request: Request[Any, Any, Any]) -> Template:
        session = await kit.signed_in(request)
        last = await kit.call(lambda ledger: Operators(ledger.store).last_check())
        return kit.page(request, session, "check.html", last=last, report=None)

    @post("/check", include_in_schema=False)
    async def check_run(request: Request[Any, Any, Any]) -> Template:
        session = await kit.signed_in(request)
        await kit.form_of(request, session)
        try:
            session.require("check")
        except LedgerError as error:
            await kit.call(kit.audit(request, session, "check", outcome=error.key))
            return kit.failed(request, session, error)
        report = views.check_dict(await kit.call(lambda ledger: ledger.check()))
        outcome = "ok" if report["ok"] else "ledger.check_failed"
        await kit.call(
            kit.audit(
                request,
                session,
                "check",
                outcome=outcome,
                problems=len(report["problems"]),
                transactions=report.get("transactions"),
            )
        )
        return kit.page(
            request, session, "check.html", partial="_check.html", report=report, last=None
        )

    @get("/audit", include_in_schema=False)
    async def audit_page(
        request: Request[Any, Any, Any],
        after: Text = None,
        action: Text = None,
    ) -> Template:
        session = await kit.signed_in(request)
        try:
            found = await kit.call(
                lambda ledger: Operators(ledger.store).audit(50, after, action or None)
            )
        except LedgerError as error:
            return kit.failed(request, session, error)
        return kit.page(
            request,
            session,
            "audit.html",
            partial="_audit_rows.html",
            entries=found.items,
            next=found.next,
            action=action or "",
            actions=ACTIONS,
        )

    @get("/audit.csv", include_in_schema=False)
    async def audit_csv(request: Request[Any, Any, Any], action: Text = None) -> Response[Any]:
        session = await kit.signed_in(request)
        try:
            # Lazy: read a page at a time on a worker thread as the browser takes the lines.
            lines = await kit.call(lambda ledger: Operators(ledger.store).audit_csv(action or None))
        except LedgerError as error:
            return kit.failed(request, session, error)
        await kit.call(kit.audit(request, session, "export", "audit", only=action))
        return Stream(
            lines,
            media_type=CSV,
            headers={"content-disposition": 'attachment; filename="audit.csv"'},
        )

    @get("/operators", include_in_schema=False)
    async def operators_page(request: Request[Any, Any, Any]) -> Template:
        session = await kit.signed_in(request)
        try:
            session.require("operators")
        except LedgerError as error:
            return kit.failed(request, session, error)
        return kit.page(request, session, "operators.html", **(await _operator_list()))

    async def _operator_list() -> dict[str, Any]:
        rows = await kit.call(lambda ledger: Operators(ledger.store).every())
        return {"operators": rows, "roles": ROLES}

    @post("/operators", include_in_schema=False)
    async def operators_change(request: Request[Any, Any, Any]) -> Template:
        """Add an operator, disable one, or set a password (``do`` says which)."""
        session = await kit.signed_in(request)
        form = await kit.form_of(request, session)
        do, name = form.get("do", ""), form.get("name", "")
        action = {"add": "operator_add", "disable": "operator_disable"}.get(do, "operator_passwd")
        try:
            session.require("operators")

            def work(ledger: Ledger) -> None:
                found = Operators(ledger.store)
                if do == "add":
                    found.add(name, form.get("role", ""), form.get("password", ""))
                elif do == "disable":
                    found.disable(name)
                elif do == "passwd":
                    found.passwd(name, form.get("password", ""))
                else:
                    raise InvalidRequest("do must be add, disable or passwd")

            await kit.call(work)
        except LedgerError as error:
            await kit.call(kit.audit(request, session, action, name, outcome=error.key))
            return kit.failed(request, session, error)
        role = form.get("role") if do == "add" else None
        await kit.call(kit.audit(request, session, action, name, role=role))
        return kit.page(
            request, session, "operators.html", done=f"{do}: {name}", **(await _operator_list())
        )

    return [check_page, check_run, audit_page, audit_csv, operators_page, operators_change]
