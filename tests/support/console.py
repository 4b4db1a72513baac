"""The console's test operators and sign-in through a test client (tests/http)."""

from __future__ import annotations

import re
from typing import Any

from litestar.testing import TestClient

PASSWORD = "correct horse battery"
ROLES = {"vic": "viewer", "cal": "cashier", "ada": "admin"}


def csrf_of(html: str) -> str:
    """The CSRF token a page's form carries."""
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


def sign_in(client: TestClient[Any], name: str, password: str = PASSWORD) -> Any:
    """Post the sign-in form as a browser would (with the form's own token): the answer."""
    form = client.get("/console/sign-in")
    data = {"name": name, "password": password, "csrf": csrf_of(form.text)}
    return client.post("/console/sign-in", data=data, follow_redirects=False)
