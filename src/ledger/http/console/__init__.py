"""The operator console at ``/console``: server-rendered pages (Jinja2) with htmx.

Served by ``ledger serve`` from the same process and ledger as the callbacks. Every asset is
vendored under ``static/`` (see its README); no page loads anything from another origin.

Security, in one place:

- Operators sign in with a name and password (:mod:`ledger.operators`); the session cookie is
  HttpOnly, SameSite=Strict, Secure when the request came over TLS, and gets a fresh token at
  every sign-in (a cookie planted before sign-in is discarded, never promoted).
- Every POST carries the session's CSRF token (a hidden field, or the ``X-CSRF-Token`` header
  htmx sends); the sign-in form carries a pre-session token matched against its own cookie.
  A missing or wrong token is a 403 ``csrf.invalid`` and changes nothing.
- Each page says which permission it needs (:func:`ledger.operators.allowed`); a refused action
  is a 403 and is audited like any other.

The pages beyond sign-in and the overview live in their own modules (:mod:`.users`,
:mod:`.books`, :mod:`.deliveries`, :mod:`.overview`, :mod:`.staff`), each given a :class:`.Kit`
of what this core lends them; :data:`BOOKS_NAV` lists the books' pages in the navigation. No
page is a dead end: ``/`` leads to the console, any other path under it answers a console 404
page, and a refusal names what was refused and offers the way on (``error.html``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
from litestar import Request, Response, Router, get, post
from litestar.datastructures import Cookie
from litestar.params import PathParameter
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig

from ...errors import Forbidden, LedgerError
from ...operators import Operators, Session, SignInFailed
from ...service import Ledger
from ..auth import request_address
from ..limits import SignInGate, SignInThrottled
from ..runtime import Runtime
from ..secure import came_over_tls, nul_refused, secure_headers
from .books import books_handlers
from .deliveries import deliveries_handlers
from .formats import add_filters
from .kit import Kit
from .overview import earnings_handlers, overview_books
from .player_limits import player_limits_handlers
from .staff import staff_handlers
from .users import users_handlers

__all__ = ["BOOKS_NAV", "NAV", "ROLE_MAY", "console_handlers", "console_templates"]

T = TypeVar("T")

HERE = Path(__file__).parent
PREFIX = "/console"
COOKIE = "ledger_console"
# The sign-in form's own CSRF token, before there is a session to hold one.
SIGN_IN_COOKIE = "ledger_console_sign_in"
CSRF_HEADER = "x-csrf-token"
# The largest body of any console POST, checked (Content-Length, then as it streams) before a
# form is parsed: the biggest form (a movement) is well under 1 KB; the app-wide limit is sized
# for a settle of a million participants (LEDGER_MAX_BODY_BYTES).
FORM_MAX_BYTES = 8 * 1024
# Seconds a refused (throttled) sign-in waits before its 429: see ``throttled``.
THROTTLE_PAUSE = 1.0

# (path, label, permission): the navigation, in order.
NAV: list[tuple[str, str, str]] = [
    ("/overview", "Overview", "read"),
    ("/users", "Users", "read"),
    ("/bets", "Bets", "read"),
    ("/tournaments", "Tournaments", "read"),
    ("/check", "Check", "read"),
    ("/audit", "Audit log", "read"),
    ("/operators", "Operators", "operators"),
]
# The pages of the operator's books (:mod:`.books`) beyond the ones above; the overview's
# deliveries, stale holds and chart fill the ``books`` block of overview.html.
BOOKS_NAV: list[tuple[str, str, str]] = [
    ("/earnings", "Earnings", "read"),
    ("/deliveries", "Deliveries", "read"),
    ("/holds", "Holds", "read"),
]
# What each role may do, as a page refused for a role explains it.
ROLE_MAY = {
    "viewer": "read every page: overview, users, statements, bets, tournaments, earnings, "
    "deliveries, holds, check results and the audit log, and export every list as CSV",
    "cashier": "what a viewer may, and deposit or withdraw, set a player's limits and exclude a "
    "player on a user's page",
    "admin": "what a cashier may, and end an exclusion early, run check and manage operators",
}


class SignInNeeded(LedgerError):
    """No live session: the browser is sent to the sign-in page."""

    key = "auth.sign_in_needed"
    status = 401


class CsrfRefused(Forbidden):
    key = "csrf.invalid"


class PageNotFound(LedgerError):
    key = "not_found"
    status = 404


def console_templates() -> TemplateConfig[JinjaTemplateEngine]:
    def configure(engine: JinjaTemplateEngine) -> None:
        add_filters(engine.engine)

    return TemplateConfig(
        directory=HERE / "templates", engine=JinjaTemplateEngine, engine_callback=configure
    )


def _cookie(request: Request[Any, Any, Any], key: str, value: str, max_age: int | None) -> Cookie:
    runtime: Runtime = request.app.state.runtime
    return Cookie(
        key=key,
        value=value,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=came_over_tls(request, runtime.settings),
        max_age=max_age,
    )


def _htmx(request: Request[Any, Any, Any]) -> bool:
    return request.headers.get("hx-request") == "true"


def pages(kit: Kit) -> list[Any]:
    """The pages beyond sign-in, overview, check, audit and operators."""
    return [
        *staff_handlers(kit),
        *users_handlers(kit),
        *player_limits_handlers(kit),
        *books_handlers(kit),
        *deliveries_handlers(kit),
        *earnings_handlers(kit),
    ]


@get("/", include_in_schema=False)
async def root() -> Redirect:
    return Redirect(PREFIX)


def console_handlers(runtime: Runtime) -> list[Any]:
    """The console's route handlers and its static files, bound to ``runtime``."""

    async def call(work: Callable[[Ledger], T]) -> T:
        return await runtime.call(work)

    settings = runtime.settings
    # A queue of a few attempts per hashing thread: the rest are answered 429 at once.
    gate = SignInGate(
        settings.sign_in_rate,
        settings.sign_in_rate_total,
        settings.hash_threads,
        queue=2 * settings.hash_threads,
    )
    runtime.on_close.append(gate.close)

    def operators(ledger: Ledger) -> Operators:
        return Operators(ledger.store)

    async def signed_in(request: Request[Any, Any, Any]) -> Session:
        token = request.cookies.get(COOKIE)
        found = await call(lambda ledger: operators(ledger).session(token))
        if found is None:
            raise SignInNeeded("sign in first")
        return found

    async def form_of(request: Request[Any, Any, Any], session: Session) -> dict[str, str]:
        """The POSTed form, once its CSRF token is checked."""
        form = {name: str(value) for name, value in (await request.form()).items()}
        presented = form.get("csrf") or request.headers.get(CSRF_HEADER)
        if not session.csrf_ok(presented):
            # Only the path: the form's fields are of the sender's choosing.
            await call(
                audit(request, session, "csrf_refused", request.url.path, outcome=CsrfRefused.key)
            )
            raise CsrfRefused("this form's CSRF token is missing or wrong: reload the page")
        return form

    def page(
        request: Request[Any, Any, Any],
        session: Session | None,
        template: str,
        *,
        status: int = 200,
        partial: str | None = None,
        **context: Any,
    ) -> Template:
        """``name`` (a full page), or only its ``partial`` for an htmx request."""
        nav = [
            (PREFIX + path, label)
            for path, label, permission in NAV + BOOKS_NAV
            if session is not None and session.may(permission)
        ]
        context.update(me=session, nav=nav, prefix=PREFIX, path=request.url.path, role_may=ROLE_MAY)
        chosen = partial if partial is not None and _htmx(request) else template
        return Template(template_name=chosen, context=context, status_code=status)

    def failed(
        request: Request[Any, Any, Any],
        session: Session | None,
        error: LedgerError,
        **context: Any,
    ) -> Template:
        """The error page: what was refused and, for an unknown user, bet or tournament, the
        search it came from (``context`` holds what was asked); an htmx request gets only the
        notice."""
        return page(
            request,
            session,
            "error.html",
            partial="_error.html",
            status=error.status,
            error=error.to_dict(),
            **context,
        )

    def audit(
        request: Request[Any, Any, Any],
        session: Session | None,
        action: str,
        target: str | None = None,
        **details: Any,
    ) -> Callable[[Ledger], None]:
        """The audit entry of ``session``'s ``action``, to write on a worker thread."""
        ip = request_address(request, runtime)

        def write(ledger: Ledger) -> None:
            who = session.operator if session else None
            operators(ledger).record(who, ip, action, target, **details)

        return write

    # --- sign-in --------------------------------------------------------------------------------

    @get("/", include_in_schema=False)
    async def home() -> Redirect:
        return Redirect(PREFIX + "/overview")

    @get("/{rest:path}", include_in_schema=False)
    async def unknown(
        request: Request[Any, Any, Any], rest: Annotated[str, PathParameter()]
    ) -> Template:
        """Any other path under the console: a console page saying so, with the navigation
        (or the way to sign in), never the API's JSON."""
        token = request.cookies.get(COOKIE)
        session = await call(lambda ledger: operators(ledger).session(token))
        missing = PageNotFound(f"no console page at {PREFIX}{rest}")
        return failed(request, session, missing)

    @get("/sign-in", include_in_schema=False)
    async def sign_in_form(request: Request[Any, Any, Any]) -> Template:
        token = secrets.token_urlsafe(32)
        response = page(request, None, "sign_in.html", csrf=token)
        response.cookies.append(_cookie(request, SIGN_IN_COOKIE, token, 3600))
        return response

    @post("/sign-in", include_in_schema=False)
    async def sign_in(request: Request[Any, Any, Any]) -> Response[Any]:
        ip = request_address(request, runtime)
        try:
            # Before the body is read: a refused attempt costs no parsing and no hash.
            gate.admit(ip)
        except SignInThrottled as error:
            return await throttled(request, error)
        form = {name: str(value) for name, value in (await request.form()).items()}
        expected = request.cookies.get(SIGN_IN_COOKIE) or ""
        presented = form.get("csrf", "")
        if not expected or not secrets.compare_digest(expected.encode(), presented.encode()):
            return failed(request, None, CsrfRefused("the sign-in form expired: reload the page"))
        name, password = form.get("name", ""), form.get("password", "")
        # Whatever session cookie came with the request is ended, never reused (no fixation).
        planted = request.cookies.get(COOKIE)

        def work() -> Session:
            found = operators(runtime.ledger())
            return found.sign_in(name, password, ip, planted=planted)

        try:
            # On the hashing pool, never the runtime's workers (ledger.http.limits).
            session = await gate.run(work)
        except SignInThrottled as error:
            return await throttled(request, error)
        except SignInFailed as error:
            token = secrets.token_urlsafe(32)
            again = page(
                request,
                None,
                "sign_in.html",
                status=401,
                csrf=token,
                error=error.to_dict(),
                name=name,
            )
            again.cookies.append(_cookie(request, SIGN_IN_COOKIE, token, 3600))
            return again
        assert session.token is not None
        response: Response[Any] = Redirect(PREFIX + "/overview", status_code=303)
        response.cookies.append(_cookie(request, COOKIE, session.token, None))
        response.cookies.append(_cookie(request, SIGN_IN_COOKIE, "", 0))
        return response

    @post("/sign-out", include_in_schema=False)
    async def sign_out(request: Request[Any, Any, Any]) -> Response[Any]:
        session = await signed_in(request)
        await form_of(request, session)
        token, ip = request.cookies.get(COOKIE), request_address(request, runtime)
        await call(lambda ledger: operators(ledger).sign_out(token, ip))
        response: Response[Any] = Redirect(PREFIX + "/sign-in", status_code=303)
        response.cookies.append(_cookie(request, COOKIE, "", 0))
        return response

    # --- pages ----------------------------------------------------------------------------------

    @get("/overview", include_in_schema=False)
    async def overview(request: Request[Any, Any, Any]) -> Template:
        session = await signed_in(request)

        def read(ledger: Ledger) -> dict[str, Any]:
            found = operators(ledger).overview(ledger.currencies.scale)
            return {**found, **overview_books(ledger)}

        return page(request, session, "overview.html", **(await call(read)))

    async def throttled(_: Request[Any, Any, Any], error: SignInThrottled) -> Response[Any]:
        # Answered after a pause, with the error body alone (no page): each connection of a
        # flood then costs the event loop one cheap answer a second instead of as many as it
        # can send. A throttled sign-in cost 0.6 ms of the loop's CPU against /health's 0.2;
        # answered at once, 64 connections kept the loop busy and /ready went from 1.5 ms to
        # 290 ms (tests/reliability/test_sign_in_flood.py).
        await anyio.sleep(THROTTLE_PAUSE)
        return Response(
            error.to_dict(),
            status_code=error.status,
            headers={"retry-after": str(error.retry_after)},
        )

    def sign_in_needed(request: Request[Any, Any, Any], _: SignInNeeded) -> Response[Any]:
        if _htmx(request):
            return Response(b"", status_code=200, headers={"HX-Redirect": PREFIX + "/sign-in"})
        return Redirect(PREFIX + "/sign-in", status_code=303)

    def refused(request: Request[Any, Any, Any], error: CsrfRefused) -> Response[Any]:
        return failed(request, None, error)

    handlers: list[Any] = [
        home,
        unknown,
        sign_in_form,
        sign_in,
        sign_out,
        overview,
        *pages(Kit(runtime, call, signed_in, form_of, page, failed, audit)),
    ]
    return [
        # The server's own root is the console's door.
        Router(
            path="/",
            route_handlers=[root],
            include_in_schema=False,
            middleware=[secure_headers(settings)],
        ),
        Router(
            path=PREFIX,
            route_handlers=handlers,
            exception_handlers={SignInNeeded: sign_in_needed, CsrfRefused: refused},
            include_in_schema=False,
            request_max_body_size=FORM_MAX_BYTES,
            middleware=[secure_headers(settings)],
        ),
        create_static_files_router(
            path=PREFIX + "/static",
            directories=[HERE / "static"],
            name="console_static",
            include_in_schema=False,
            middleware=[secure_headers(settings), nul_refused],
        ),
    ]
