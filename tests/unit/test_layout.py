"""The package's layout rules, read from its source: the kit sits on top of the library, the
library imports no package of the ``[server]`` or ``[kit]`` extras, and names do not collide."""

from __future__ import annotations

import ast
import sys
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
            for alias in node.names:
                # `from package import module` depends on that module; `from module import
                # name`, on the module. (Either way the package's __init__ runs first, but
                # that one only gathers names: it is no dependency of the module's.)
                module = f"{base}.{alias.name}"
                found.add(module if module in MODULES else base)
    return found


MODULES = {name for name, _ in modules()}


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
    assert [name for name in names if name.endswith(".commands")] == ["ledger.commands"]


# The layers, top first: a module imports only from its own layer and those below it. The cycle
# test keeps each layer's own imports one-way.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("entry points", ("ledger", "ledger.__main__", "ledger.cli")),
    ("conformance kit", ("ledger.kit",)),
    ("HTTP server", ("ledger.http",)),
    (
        "use cases",
        (
            "ledger.service",
            "ledger.settings",
            "ledger.variables",
            "ledger.operators",
            "ledger.views",
            "ledger.commands",
            "ledger.backup",
            "ledger.store_copy",
            "ledger.reconcile",
            "ledger.webhooks",
        ),
    ),
    ("writers", ("ledger.writer",)),
    ("stores", ("ledger.stores",)),
    (
        "domain and values",
        (
            "ledger.contract",
            "ledger.domain",
            "ledger.integrity",
            "ledger.deliveries",
            "ledger.directory",
            "ledger.events",
            "ledger.money",
            "ledger.currencies",
            "ledger.paging",
            "ledger.errors",
            "ledger.tokens",
            "ledger.logformat",
            "ledger._process",
            "ledger.testdata",
            "ledger.storable",
            "ledger.csv_safe",
        ),
    ),
]


def layer_of(module: str) -> int:
    """The index in LAYERS of ``module``'s layer (its longest matching name)."""
    found = [
        (len(name), index)
        for index, (_, names) in enumerate(LAYERS)
        for name in names
        if within(module, name)
    ]
    # `ledger` itself is the package root only, not everything below it.
    found = [item for item in found if item[0] > len("ledger") or module == "ledger"]
    assert found, f"{module} is in no layer: add it to LAYERS"
    return max(found)[1]


def module_graph() -> dict[str, set[str]]:
    """Every module of the package and the package's modules it imports (at any depth of its
    code: inside functions and under TYPE_CHECKING too)."""
    return {
        name: {found for found in imports(name, path) if found in MODULES and found != name}
        for name, path in modules()
    }


def test_every_module_belongs_to_a_layer() -> None:
    for name in MODULES:
        layer_of(name)


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = sorted(
        f"{name} ({LAYERS[layer_of(name)][0]}) imports {found} ({LAYERS[layer_of(found)][0]})"
        for name, found_all in module_graph().items()
        for found in found_all
        if layer_of(found) < layer_of(name)
    )
    assert upward == []


def test_the_modules_import_each_other_without_a_cycle() -> None:
    graph = module_graph()
    cycles = []
    # Tarjan's strongly connected components: any of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for found in sorted(graph[name]):
            if found not in index:
                visit(found)
                low[name] = min(low[name], low[found])
            elif found in on_stack:
                low[name] = min(low[name], index[found])
        if low[name] == index[name]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == name:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    assert cycles == []


def test_the_http_server_and_the_command_line_never_import_a_store() -> None:
    # They reach the database through the use cases only (ledger.service, ledger.operators,
    # ledger.webhooks): one place to change when a store changes.
    offenders = sorted(
        (name, found)
        for name, found_all in module_graph().items()
        if within(name, "ledger.http") or within(name, "ledger.cli")
        for found in found_all
        if within(found, "ledger.stores")
    )
    assert offenders == []


def test_no_package_exports_a_name_that_hides_one_of_its_modules() -> None:
    # `from .stage import stage` in a package's __init__ makes `package.stage` the function,
    # and the module `package.stage` is then out of reach for patching and for readers.
    hidden = []
    for name, path in modules():
        if path.name != "__init__.py":
            continue
        submodules = {child.stem for child in path.parent.glob("*.py")} | {
            child.name for child in path.parent.iterdir() if (child / "__init__.py").exists()
        }
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                hidden += [
                    f"{name}.{alias.asname or alias.name}"
                    for alias in node.names
                    if (alias.asname or alias.name) in submodules
                ]
    assert hidden == []


def test_the_domain_decides_with_the_standard_library_alone() -> None:
    """The domain never touches a database, a clock or a third-party package: it imports the
    standard library, exact amounts (``ledger.money``), ``ledger.errors`` and its own modules."""
    allowed = {"ledger.errors", "ledger.money"}
    found = {
        (name, imported)
        for name, path in modules()
        if within(name, "ledger.domain")
        for imported in imports(name, path)
        if (imported.startswith("ledger") or imported.split(".")[0] not in sys.stdlib_module_names)
        and imported != "__future__"
        and not within(imported, "ledger.domain")
        and imported not in allowed
    }
    assert sorted(found) == []
