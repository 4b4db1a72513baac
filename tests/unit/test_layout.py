"""The package's layout rules, read from its source: the kit sits on top of the library, the
library imports no package of the ``[server]`` or ``[kit]`` extras, and names do not collide."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import ledger

PACKAGE = Path(ledger.__file__).parent

# Packages of the [server] and [kit] extras: `import ledger` must work without any of them.
EXTRA_PACKAGES = {
    "litestar",
    "uvicorn",
    "prometheus_client",
    "jwt",
    "httpx",
    "tqdm",
    "pydantic",
    "limits",
}


def modules() -> Iterator[tuple[str, Path]]:
    """Every module of the package as (dotted name, path)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def imports(name: str, path: Path) -> set[str]:
    """The absolute names of every module ``name`` imports, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_only_the_cli_imports_the_kit_from_outside_it() -> None:
    # The CLI names the kit's commands by a string (importlib), so no module may import it.
    offenders = {
        name
        for name, path in modules()
        if not within(name, "ledger.kit")
        and any(within(found, "ledger.kit") for found in imports(name, path))
    }
    assert offenders == set()


def test_the_library_imports_no_package_of_the_server_or_kit_extras() -> None:
    # ledger.tokens is shared by the server and the kit only (it needs PyJWT).
    outside = ("ledger.http", "ledger.kit", "ledger.tokens")
    offenders = {
        (name, found)
        for name, path in modules()
        if not any(within(name, package) for package in outside)
        for found in imports(name, path)
        if found.split(".")[0] in EXTRA_PACKAGES
    }
    assert offenders == set()


def test_the_shared_token_helper_is_imported_only_by_the_server_and_the_kit() -> None:
    importers = {
        name
        for name, path in modules()
        if any(within(found, "ledger.tokens") for found in imports(name, path))
    }
    assert importers
    assert all(within(name, "ledger.http") or within(name, "ledger.kit") for name in importers)


def test_jwts_are_signed_in_one_place() -> None:
    signers = {
        name for name, path in modules() if "jwt.encode(" in path.read_text().replace(" ", "")
    }
    assert signers == {"ledger.tokens"}


def test_there_is_one_operator_module_and_one_commands_module() -> None:
    names = [name for name, _ in modules()]
    assert [name for name in names if name.endswith(".operator")] == ["ledger.http.operator"]
    assert [name for name in names if name.endswith(".commands")] == ["ledger.kit.commands"]
