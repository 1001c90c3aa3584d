"""The Spark SQL of count windows in the custom streaming path (``sqlwin.streaming.countwindows``).

Built once per query, like ``panequery``; rows never reach Python:

- ``arrivals``: the micro-batch's rows of the window's input relation, with ``__ts`` (epoch microseconds)
  and ``__part`` (the PARTITION BY values as JSON); rows whose ``ts`` is NULL are in no window.
- ``numbering``: waiting rows get their row number ``__rn`` per partition, in the batch backend's order
  (``ts``, then every other column), continuing from each partition's count so far (``__base``).
- ``assignment``: each numbered row with the window(s) it belongs to (``__wk``, GRAMMAR 1's k); the forms
  whose windows are known only once complete read the held rows from a join (``closing_windows``).
- ``keyed``: the window relation as the carrier sees it (relation columns, ``window_*``) with the carrier's
  WHERE as ``__keep``, the pane keys ``__k<i>`` and ``__key``, the window's name: the keys as JSON plus
  the window's number, so that one count window is one pane unit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from sqlwin.backends.sqlbuild import col
from sqlwin.dialect.nodes import TableArg
from sqlwin.plan.windows import CountForm, Rows

if TYPE_CHECKING:
    from sqlwin.backends.spark_batch import SparkBatchCompiler
    from sqlwin.streaming.context import QueryShape, Views

D = "spark"
MS = 1000  # count windows end 1 ms after their last row (GRAMMAR 1)


class CountWindowSql:
    def __init__(self, shape: QueryShape, compiler: SparkBatchCompiler, views: Views):
        self.shape = shape
        self.spec = shape.window
        self.compiler = compiler
        self.views = views
        self.form: CountForm = self.spec.count_form

    # -- arrivals -----------------------------------------------------------------------------
    def arrivals(self, as_json: bool = True) -> str:
        """The micro-batch's rows of the TVF's input relation, timed and partitioned (``__part``: the PARTITION
        BY values as JSON, a key in Python; else as a struct, where Spark alone reads it); NULL times dropped."""
        spec = self.spec
        data = spec.node.find(TableArg) if spec.node is not None else None
        relation = (data.this if data is not None else spec.relation.node).copy()
        streams = self.shape.streams or [self.shape.stream]
        names = {s.name.lower(): self.views.batch_of(i) for i, s in enumerate(streams)}
        if isinstance(relation, exp.Table):
            relation = exp.select(exp.Star()).from_(relation).subquery()
        for table in list(relation.find_all(exp.Table)):
            if table.name.lower() in names:
                table.replace(exp.Table(this=exp.to_identifier(names[table.name.lower()]),
                                        alias=exp.TableAlias(this=exp.to_identifier(table.alias_or_name))))
        relation.set("alias", exp.TableAlias(this=exp.to_identifier("__r")))
        ts = col(spec.time_col, "__r")
        parts = [a for i, p in enumerate(spec.partition_by) for a in (exp.Literal.string(f"p{i}"), col(p, "__r"))]
        part = exp.func("NAMED_STRUCT", *parts) if parts else exp.Literal.string("{}")
        if parts and as_json:
            part = exp.func("TO_JSON", part)
        select = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("__r")),
                            exp.alias_(self.compiler.to_us(ts.copy(), spec), "__ts"),
                            exp.alias_(part, "__part")).from_(relation).where(exp.Not(this=exp.Is(
                                this=ts.copy(), expression=exp.Null())))
        return self.compiler.render(self.compiler.compile_node(select))

    # -- numbering ----------------------------------------------------------------------------
    def numbering(self, waiting: str, bases: str | None) -> str:
        """``__rn`` per partition, in ts order with the batch backend's tie-break, after ``__base`` rows (none
        before: from 0)."""
        order = ", ".join(o.sql(D) for o in self.compiler.order_keys(self.spec, "w"))
        number = f"ROW_NUMBER() OVER (PARTITION BY w.__part ORDER BY {order}) - 1"
        if bases is None:
            return f"SELECT w.*, {number} AS __rn FROM {waiting} AS w"
        return (f"SELECT w.*, COALESCE(b.__base, 0) + {number} AS __rn FROM {waiting} AS w "
                f"LEFT JOIN {bases} AS b ON w.__part = b.__part")

    # -- assignment ---------------------------------------------------------------------------
    def growing_assignment(self, numbered: str, outer: bool = False) -> str:
        """TUMBLE ROWS n and HOP ROWS m, ROWS n: a row's windows follow from its number alone (``outer``: a row
        of no window, between hopping windows, kept once with ``__wk`` NULL)."""
        size = self.spec.size
        assert isinstance(size, Rows)
        if self.form is CountForm.TUMBLE_ROWS:
            return f"SELECT *, DIV(__rn, {size.n}) AS __wk FROM {numbered}"
        slide = self.spec.slide
        assert isinstance(slide, Rows)
        m, n = slide.n, size.n
        first, last = f"DIV(__rn, {m}) + 1", f"DIV(__rn + {n}, {m})"
        return (f"SELECT __n.*, __wk FROM {numbered} AS __n LATERAL VIEW {'OUTER ' if outer else ''}"
                f"EXPLODE(IF({first} <= {last}, "
                f"SEQUENCE({first}, {last}), ARRAY())) __h AS __wk")

    def is_complete(self, k: int, numbered: int) -> bool:
        """Whether window k of a growing form has its last row numbered, ``numbered`` rows being numbered."""
        size, slide = self.spec.size, self.spec.slide
        if self.form is CountForm.TUMBLE_ROWS:
            return (k + 1) * size.n <= numbered  # type: ignore[union-attr]
        return k * slide.n <= numbered  # type: ignore[union-attr]

    def closing_rows(self, numbered: str) -> str:
        """HOP ROWS m, d: the rows that close a window (number k*m - 1) among the newly numbered ones."""
        m = self.spec.slide.n  # type: ignore[union-attr]
        return (f"SELECT __part, DIV(__rn + 1, {m}) AS __wk, __rn AS __c, __ts + {MS} AS __we, "
                f"__ts + {MS - self.spec.size} AS __ws FROM {numbered} WHERE PMOD(__rn + 1, {m}) = 0")

    def rows_to_time_windows(self, held: str, closers: str) -> str:
        """HOP ROWS m, d: window k holds the rows up to its closing row whose ts is in [end - d, end)."""
        return (f"SELECT h.*, c.__wk, c.__ws, c.__we FROM {held} AS h JOIN {closers} AS c "
                f"ON h.__part = c.__part AND h.__rn <= c.__c AND h.__ts >= c.__ws")

    def boundary(self) -> str:
        """HOP s, ROWS n: the boundary a row is before (aligned like TUMBLE(s, offset), then + s)."""
        s, off = self.spec.slide, self.spec.offset
        return f"__ts - PMOD(__ts - {off}, {s}) + {s}"

    def rows_before(self, numbered: str, boundaries: str) -> str:
        """HOP s, ROWS n: per completing boundary, how many newly numbered rows of its partition precede it."""
        return (f"SELECT b.__part, b.__we, COUNT(n.__rn) AS __before FROM {boundaries} AS b LEFT JOIN {numbered} AS n "
                f"ON n.__part = b.__part AND n.__ts < b.__we GROUP BY b.__part, b.__we")

    def last_rows_windows(self, held: str, windows: str) -> str:
        """HOP s, ROWS n: window at boundary b holds the rows numbered [R_b - n, R_b), R_b rows being before b."""
        return (f"SELECT h.*, c.__wk, c.__we FROM {held} AS h JOIN {windows} AS c "
                f"ON h.__part = c.__part AND h.__rn >= c.__lo AND h.__rn < c.__hi")

    # -- the carrier's view -------------------------------------------------------------------
    def keyed(self, windowed: str, null_bounds: dict[str, str], internal: list[str]) -> str:
        """Windowed rows as the carrier reads the TVF: its WHERE as ``__keep``, the keys and ``__key``; the
        ``internal`` columns of ``windowed`` (``__part``, ``__wk``, ...) pass through."""
        shape = self.shape
        alias = shape.source_alias
        relation = [exp.column(c.name, "__x", quoted=True) for c in self.spec.relation.columns or ()]
        bounds = [exp.alias_(exp.cast(exp.Null(), dtype), name) for name, dtype in null_bounds.items()]
        tvf = exp.select(*relation, *bounds, exp.alias_(exp.column("__wk", "__x"), "window_index"),
                         *[exp.column(c, "__x") for c in internal]).from_(
            exp.Table(this=exp.to_identifier(windowed), alias=exp.TableAlias(this=exp.to_identifier("__x"))))
        select = exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(alias))).from_(
            tvf.subquery(alias))
        for i, key in enumerate(shape.keys):
            select.select(exp.alias_(key.copy(), f"__k{i}"), copy=False)
        where = shape.carrier.args.get("where")
        keep = exp.func("COALESCE", where.this.copy(), exp.false()) if where is not None else exp.true()
        select.select(exp.alias_(keep, "__keep"), copy=False)
        fields = [a for i in range(len(shape.keys)) for a in (exp.Literal.string(f"__k{i}"), exp.column(f"__k{i}"))]
        fields += [exp.Literal.string("__w"), exp.column("__wk")]
        outer = exp.select(exp.Star(), exp.alias_(exp.func("TO_JSON", exp.func("NAMED_STRUCT", *fields)), "__key")
                           ).from_(select.subquery("__y"))
        return outer.sql(dialect=D)

