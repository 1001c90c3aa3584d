"""What every backend compiler shares: walk the statement AST and replace each window TVF
by the backend's derived table. Backends differ only in ``window_relation`` (Ibis-style: one
compiler per target, one method per plan node kind)."""

from __future__ import annotations

from sqlglot import exp

from sqlwin.dialect.nodes import SELECT_CLAUSE_KEYS, TableArg, WindowTVF
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import CountForm, WindowKind, WindowSpec


class WindowCompiler:
    """Base class of the per-backend compilers.

    ``dialect`` is the sqlglot dialect the output is generated in. Subclasses implement
    ``window_relation(spec)``, returning an ``exp.Subquery`` aliased ``spec.alias`` whose
    columns are the relation's columns followed by ``spec.output_window_columns``.
    ``unsupported`` lists (kind, count_form) pairs the backend cannot compile: they fail at
    compile time with a named error, never at run time.
    """

    dialect: str = "spark"
    name: str = "base"
    unsupported: frozenset[tuple[WindowKind, CountForm | None]] = frozenset()

    def __init__(self) -> None:
        self._specs: dict[int, WindowSpec] = {}
        self._relations: dict[int, exp.Expr] = {}

    # -- the shared walk ----------------------------------------------------------------------
    def compile(self, node: exp.Expr, specs: list[WindowSpec]) -> exp.Expr:
        """Replace every window TVF in ``node`` (in place) and drop the streaming clauses,
        which have no meaning for a bounded input: a batch query returns the final results."""
        self._specs = {spec_key(s.node): s for s in specs if s.node is not None}
        return self.compile_node(node)

    def compile_node(self, node: exp.Expr) -> exp.Expr:
        placed: list[exp.Expr] = []

        def replace(n: exp.Expr) -> exp.Expr:
            if isinstance(n, WindowTVF):
                key = spec_key(n)
                spec = self._specs.get(key)
                if spec is None:
                    raise SqlwinError.at(n, "internal: window TVF was not planned")
                self.check_supported(spec)
                data = n.find(TableArg)
                self._relations[key] = self.compile_node(data.this if data else spec.relation.node)
                derived = self.window_relation(spec)
                placed.append(derived)
                return derived
            if isinstance(n, exp.Select):
                for key in SELECT_CLAUSE_KEYS:
                    n.set(key, None)
            return n

        compiled = node.transform(replace, copy=False)
        self.relations_placed(placed)
        return compiled

    def relations_placed(self, derived: list[exp.Expr]) -> None:
        """Called once per compiled tree with the derived tables just put in place of its window TVFs
        (before an enclosing TVF copies the tree), so a backend can adapt the queries that read them
        without searching the whole statement."""

    def render(self, node: exp.Expr) -> str:
        """The compiled tree as SQL text of this backend."""
        return node.sql(dialect=self.dialect)

    def compile_relation(self, spec: WindowSpec) -> exp.Expr:
        """The spec's data argument (table or subquery) with any window TVF inside compiled too."""
        key = spec_key(spec.node)
        if key in self._relations:
            return self._relations[key]
        return self.compile_node(spec.relation.node.copy())

    def check_supported(self, spec: WindowSpec) -> None:
        if (spec.kind, spec.count_form) in self.unsupported:
            form = spec.count_form.value if spec.count_form else spec.kind.value
            raise SqlwinError.at(spec.node, f"the {self.name} backend does not support {form} windows")

    def window_relation(self, spec: WindowSpec) -> exp.Expr:  # pragma: no cover - abstract
        raise NotImplementedError


SPEC_KEY = "sqlwin_window"


def spec_key(node: exp.Expr | None) -> int:
    """The planner numbers each window TVF in ``node.meta``; the number survives AST copies."""
    if node is None:
        return -1
    return int(node.meta.get(SPEC_KEY, id(node)))
