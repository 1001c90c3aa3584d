"""How sqlwin's modules import each other (read from their source, nothing is run).

The facade (``sqlwin.api``) sits on top of the pipeline: what it reaches must never import it back,
not even inside a function (such a lazy import hides a cycle, as ``pipeline`` <-> ``api`` once did),
and the modules import each other at top level without a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sqlwin", "udtfs")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(name: str, *, lazy: bool) -> set[str]:
    """The project modules ``name`` imports: when it is imported (not in functions, not under ``if
    TYPE_CHECKING``), or also inside functions (``lazy``). ``from package import x`` imports ``package.x``
    when that is a module, else ``package``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & MODULES.keys()
            found.update(submodules if len(submodules) == len(node.names) else submodules | {node.module})
        elif not (type_checking(node) or (not lazy and isinstance(node, FUNCTIONS))):
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(ast.parse(MODULES[name].read_text(encoding="utf-8")))
    return found & MODULES.keys()


def test_nothing_the_facade_reaches_imports_it_back() -> None:
    reached, todo = set(), ["sqlwin.api"]
    while todo:
        for module in imports(todo.pop(), lazy=True) - reached:
            reached.add(module)
            todo.append(module)
    assert "sqlwin.pipeline" in reached and "sqlwin.streaming.statements" in reached
    back = {m: sorted(imports(m, lazy=True) & {"sqlwin", "sqlwin.api"}) for m in sorted(reached)}
    assert {m: found for m, found in back.items() if found} == {}


def test_top_level_imports_have_no_cycle() -> None:
    graph = {name: imports(name, lazy=False) for name in MODULES}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path[path.index(module):], module))
        if module not in done:
            for dependency in sorted(graph[module]):
                visit(dependency, (*path, module))
            done.add(module)

    for module in sorted(graph):
        visit(module, ())
