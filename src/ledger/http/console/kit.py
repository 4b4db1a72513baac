"""What the console's core (:func:`ledger.http.console.console_handlers`) lends its pages:
sessions, rendering, the audit, and the CSV exports every list shares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from litestar import Request, Response
from litestar.response import Stream, Template

from ...errors import InvalidRequest, LedgerError
from ...operators import Session
from ...paging import EXPORT_PAGE, Page
from ...service import Ledger
from ..filenames import CSV, attachment
from ..runtime import Runtime

__all__ = ["LIST_PAGE", "Kit", "csv_stream", "integer"]

LIST_PAGE = 25  # rows per page of every list


@dataclass(frozen=True, slots=True)
class Kit:
    """The console's core, as the pages reach it."""

    runtime: Runtime
    call: Callable[[Callable[[Ledger], Any]], Awaitable[Any]]
    signed_in: Callable[[Request[Any, Any, Any]], Awaitable[Session]]
    form_of: Callable[[Request[Any, Any, Any], Session], Awaitable[dict[str, str]]]
    page: Callable[..., Template]
    failed: Callable[..., Template]
    audit: Callable[..., Callable[[Ledger], None]]
    export_page: int = EXPORT_PAGE

    def beside(
        self, request: Request[Any, Any, Any], session: Session, error: LedgerError, target: str
    ) -> Template:
        """A form's refusal, shown in ``target`` beside the form (htmx); the page stays as it
        was."""
        refused = self.failed(request, session, error)
        refused.headers["HX-Retarget"] = target
        refused.headers["HX-Reswap"] = "innerHTML"
        return refused

    async def shown(
        self,
        request: Request[Any, Any, Any],
        session: Session,
        template: str,
        read: Callable[[Ledger], dict[str, Any]],
        partial: str | None = None,
        **context: Any,
    ) -> Template:
        """``template`` with what ``read`` found, or the error page (with ``context``, so that
        it can offer the search it came from) when it refused."""
        try:
            found = await self.call(read)
        except LedgerError as error:
            return self.failed(request, session, error, **context)
        return self.page(request, session, template, partial=partial, **context, **found)

    async def exported(
        self,
        request: Request[Any, Any, Any],
        name: str,
        read: Callable[[Ledger, str | None, int], Page[Any]],
        columns: Sequence[str],
        **filters: Any,
    ) -> Response[Any]:
        """Every row of a list as CSV, through the API's own export path; audited."""
        session = await self.signed_in(request)
        # Imported here: the directory's module imports the operator API, which imports the
        # console (its audit route).
        from ..directory import _listed

        chosen = {key: value for key, value in filters.items() if value not in (None, "")}
        try:
            answer = await _listed(self.runtime, name, read, EXPORT_PAGE, None, "csv", columns)
        except LedgerError as error:
            await self.call(
                self.audit(request, session, "export", name, outcome=error.key, **chosen)
            )
            return self.failed(request, session, error)
        await self.call(self.audit(request, session, "export", name, **chosen))
        return answer


def csv_stream(name: str, lines: Iterable[str]) -> Stream:
    """``lines`` of CSV, downloaded as ``name.csv``."""
    return Stream(
        lines,
        media_type=CSV,
        headers={"Content-Disposition": attachment(f"{name}.csv")},
    )


def integer(text: str | None, name: str) -> int | None:
    """A whole number typed in a field (``None`` when empty), else a 400 naming it."""
    if text is None or not text.strip():
        return None
    try:
        return int(text.strip())
    except ValueError:
        raise InvalidRequest(f"{name}: expected an integer, got {text[:64]!r}") from None
