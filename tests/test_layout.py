"""How sqlwin's modules import each other (read from their source, nothing is run).

The facade (``sqlwin.api``) sits on top of the pipeline: what it reaches must never import it back. No two
modules import each other, not even inside a function or under ``if TYPE_CHECKING`` (such an import hides
a cycle, as ``pipeline`` <-> ``api`` once did, and ``operator`` <-> ``sessions``, ``catalog`` <-> ``tables``
and ``evictors`` <-> ``shape`` did): a collaborator of the streaming operator sees it through the protocols
of ``sqlwin.streaming.context``, which the operator, its collaborators and the query's shape must keep to.
``sqlwin.core`` imports only what docs/ARCHITECTURE.md says it does.
"""

from __future__ import annotations

import ast
import sys
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


def tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(encoding="utf-8"))


def imported(name: str, *, lazy: bool) -> set[str]:
    """Every module ``name`` imports (of the project or not): when it is imported (not in functions, not
    under ``if TYPE_CHECKING``), or anywhere (``lazy``: also in functions and for type checkers).
    ``from package import x`` imports ``package.x`` when that is a project module, else ``package``."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.module and not node.level, f"{name}: relative import"
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & MODULES.keys()
            found.update(submodules if len(submodules) == len(node.names) else submodules | {node.module})
        elif lazy or not (type_checking(node) or isinstance(node, FUNCTIONS)):
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(tree(name))
    return found


def imports(name: str, *, lazy: bool) -> set[str]:
    """The project modules ``name`` imports (see ``imported``)."""
    return imported(name, lazy=lazy) & MODULES.keys()


def test_nothing_the_facade_reaches_imports_it_back() -> None:
    reached, todo = set(), ["sqlwin.api"]
    while todo:
        for module in imports(todo.pop(), lazy=True) - reached:
            reached.add(module)
            todo.append(module)
    assert "sqlwin.pipeline" in reached and "sqlwin.streaming.statements" in reached
    back = {m: sorted(imports(m, lazy=True) & {"sqlwin", "sqlwin.api"}) for m in sorted(reached)}
    assert {m: found for m, found in back.items() if found} == {}


def cycle(graph: dict[str, set[str]]) -> str | None:
    """A cycle of ``graph`` (``a -> b -> a``), if it has one."""
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> str | None:
        if module in path:
            return " -> ".join((*path[path.index(module):], module))
        if module not in done:
            for dependency in sorted(graph[module]):
                found = visit(dependency, (*path, module))
                if found:
                    return found
            done.add(module)
        return None

    return next(filter(None, (visit(module, ()) for module in sorted(graph))), None)


def test_imports_have_no_cycle_even_in_functions_or_for_type_checkers() -> None:
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == "b -> c -> b"  # the search finds one
    assert cycle({name: imports(name, lazy=True) for name in MODULES}) is None


# -- the streaming operator and its collaborators ---------------------------------------------------------
CONTEXT = "sqlwin.streaming.context"
# the operator's roles and their helpers (the operator wires them: they never import it)
COLLABORATORS = ("assigner", "timewindows", "sessions", "maxsessions", "countwindows", "countsql", "engines",
                 "rowstore", "outputs", "batchinput", "evictors", "fusedscan", "committer", "keyedstate")
# a protocol (module, class) -> the classes (module, class) that must define every member the protocol declares
PROTOCOLS = {
    (CONTEXT, "OperatorContext"): [("sqlwin.streaming.operator", "MicroBatchOperator")],
    (CONTEXT, "QueryShape"): [("sqlwin.streaming.shape", "StreamingShape")],
    (CONTEXT, "PaneQueries"): [("sqlwin.streaming.panequery", "PaneQuery")],
    (CONTEXT, "PaneEngine"): [("sqlwin.streaming.engines", "WindowStates"),
                              ("sqlwin.streaming.engines", "ColumnarEngine"),
                              ("sqlwin.streaming.keyedstate", "KeyedPanes")],
    (CONTEXT, "RowStore"): [("sqlwin.streaming.rowstore", "StoredRows")],
    (CONTEXT, "BatchReader"): [("sqlwin.streaming.batchinput", "BatchInput")],
    ("sqlwin.streaming.catalog", "RegisteredTable"): [("sqlwin.streaming.tables", "StreamingTable")],
    ("sqlwin.dialect.clauses", "_Base"): [("sqlwin.dialect.parser", "SqlwinParser")],
}


def class_def(module: str, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(tree(module)) if isinstance(n, ast.ClassDef) and n.name == name)


def members(module: str, name: str) -> set[str]:
    """What class ``name`` defines: its methods and class attributes, and what its methods assign to ``self``
    (with what its base classes of the same module define)."""
    cls = class_def(module, name)
    found = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    local = {n.name for n in tree(module).body if isinstance(n, ast.ClassDef)}
    for base in cls.bases:
        if isinstance(base, ast.Name) and base.id in local:
            found |= members(module, base.id)
    found |= {t.id for n in cls.body if isinstance(n, (ast.Assign, ast.AnnAssign))
              for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        found |= {t.attr for t in targets
                  if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return found


def used(module: str, receivers: set[str]) -> set[str]:
    """The attributes ``module`` reads or calls on any of ``receivers`` (e.g. ``self.op``)."""
    return {n.attr for n in ast.walk(tree(module))
            if isinstance(n, ast.Attribute) and ast.unparse(n.value) in receivers}


def test_the_operator_collaborators_see_it_through_its_context() -> None:
    names = [f"sqlwin.streaming.{c}" for c in COLLABORATORS]
    assert {m: sorted(imports(m, lazy=True) & {"sqlwin.streaming.operator", "sqlwin.streaming.shape"})
            for m in names} == {m: [] for m in names}
    operator = {"self.op", "op", "operator"}
    shape = {f"{o}.shape" for o in operator} | {"self.shape", "shape"}
    query = {f"{o}.query" for o in operator}
    rows = {f"{o}.rows" for o in operator}
    batch = {f"{o}.input" for o in operator}
    wanted = {"OperatorContext": operator, "QueryShape": shape, "PaneQueries": query, "RowStore": rows,
              "BatchReader": batch}
    for protocol, receivers in wanted.items():  # each protocol declares what they use, and nothing more
        undeclared = {m: sorted(used(m, receivers) - members(CONTEXT, protocol)) for m in names}
        assert {m: found for m, found in undeclared.items() if found} == {}, protocol
        assert set().union(*(used(m, receivers) for m in names)) == members(CONTEXT, protocol), protocol


def test_protocols_are_what_their_classes_define() -> None:
    missing = {f"{impl[1]} as {protocol[1]}": sorted(members(*protocol) - members(*impl))
               for protocol, impls in PROTOCOLS.items() for impl in impls}
    assert {k: found for k, found in missing.items() if found} == {}
    assert members(CONTEXT, "OperatorContext") >= {"input", "write_late", "windows"}  # the reader works


def test_drop_reasons_are_defined_once() -> None:
    """``late`` and ``window closed`` (LATE ROWS TO's reasons) are named in ``sqlwin.core.panes`` only."""
    named = {(name, ast.unparse(target)) for name in MODULES for node in ast.walk(tree(name))
             if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant)
             and node.value.value in ("late", "window closed")
             for target in (node.targets if isinstance(node, ast.Assign) else [node.target])}
    assert named == {("sqlwin.core.panes", "DROP_LATE"), ("sqlwin.core.panes", "DROP_CLOSED")}
    spelt = sorted(name for name in MODULES for node in ast.walk(tree(name))
                   if isinstance(node, ast.Constant) and node.value == "window closed")
    assert spelt == ["sqlwin.core.panes"]


# -- sqlwin.core --------------------------------------------------------------------------------------------
# what docs/ARCHITECTURE.md says core/ imports, beside the standard library
CORE_PROJECT = {"sqlwin.errors", "sqlwin.plan.triggers"}
CORE_LIBRARIES = {"numpy", "pandas"}  # when imported
CORE_LAZY = {"pyarrow"}  # inside functions only
CORE_THROUGH_PLAN = {"sqlglot"}  # what sqlwin.plan.triggers imports


def core_paragraph() -> str:
    lines = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  core/"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i][2:3].strip())
    return " ".join(" ".join(lines[start:end]).split())


def external(names: set[str]) -> set[str]:
    """The top-level names of the imported modules that are neither the project's nor the standard library's."""
    return {n.split(".")[0] for n in names if n not in MODULES} - set(sys.stdlib_module_names)


def test_core_imports_what_the_architecture_says() -> None:
    core = [name for name in MODULES if name.startswith("sqlwin.core.")]
    assert "sqlwin.core.panes" in core and "sqlwin.core.columnar" in core
    project = set().union(*(imports(m, lazy=True) for m in core)) - {"sqlwin.core", *core}
    assert project == CORE_PROJECT
    assert set().union(*(external(imported(m, lazy=False)) for m in core)) == CORE_LIBRARIES
    assert set().union(*(external(imported(m, lazy=True)) for m in core)) == CORE_LIBRARIES | CORE_LAZY
    reached, todo = set(core), [*core]
    while todo:
        for module in imports(todo.pop(), lazy=True) - reached:
            reached.add(module)
            todo.append(module)
    assert reached == {*core, *CORE_PROJECT}
    beyond = set().union(*(external(imported(m, lazy=True)) for m in reached))
    assert "pyspark" not in beyond and beyond == CORE_LIBRARIES | CORE_LAZY | CORE_THROUGH_PLAN
    text = core_paragraph()
    for name in (*CORE_LIBRARIES, *CORE_LAZY, *CORE_THROUGH_PLAN, "errors", "plan.triggers", "pyspark"):
        assert name in text, name
