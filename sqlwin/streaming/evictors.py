"""EVICT on the custom streaming path and in replay (GRAMMAR 4; Flink's ``EvictingWindowOperator``).

The pane driver (``sqlwin.core.panes``) decides when a window fires and what its contents are; here Spark
evicts, since the rows stay in Spark (the operator's tokens are micro-batch numbers, ``rows/<n>``):

- **Arrival order.** Every stored row carries ``__pos``, its place among the rows its micro-batch brought
  to the same window (to the same key, for sessions, whose windows merge); arrival order is
  ``(__mb, __pos)``. Within a micro-batch: in replay, the stream's ``ARRIVAL ORDER BY``; on a live stream,
  where Spark gives rows no order, the window's time column, then every other (non-nested) column, ASC
  NULLS FIRST (the rule count windows use). Both depend on the rows only, so a micro-batch re-run after a
  crash evicts exactly the same rows.
- **At each firing** (every pane of an evicting query), over the pane's contents (the rows of its tokens
  that are not evicted yet): CountEvictor keeps the last n rows in arrival order, TimeEvictor the rows with
  ``ts > max ts - interval``, DeltaEvictor the rows with ``|expr - expr of the last row| < threshold``.
  A row is kept only when its condition is true (NULL time or DELTA value: evicted).
- **For good.** The rows evicted in micro-batch n are recorded in ``evicted/<n>`` (parquet, their
  identities ``(__key, __ws, __we, __mb, __pos)``) and every later pane reads the stored rows minus every
  live evicted set. A window forgets the tokens none of whose rows it keeps (``PaneDriver.retain``), so
  state shrinks as rows are evicted; an evicted set goes once no stored rows it names are left.
- **Atomic with the micro-batch.** ``evicted/<n>`` is replaced on a re-run, and which sets are live is part
  of ``state/<n>.json``: the micro-batch's commit. A set written by an attempt that did not commit is
  deleted on restart, as its rows are.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from sqlwin import diagnostics
from sqlwin.errors import SqlwinError
from sqlwin.plan import triggers as tp
from sqlwin.plan.statements import CreateReplayStream
from sqlwin.plan.windows import NESTED_TYPE_PREFIXES, TimeType, WindowKind
from sqlwin.streaming import storage
from sqlwin.streaming.committer import Commit, Durable
from sqlwin.streaming.context import OperatorContext, QueryShape

if TYPE_CHECKING:
    from sqlwin.core.panes import FiredPaneList

D = "spark"
IDENTITY = ["__key", "__ws", "__we", "__mb", "__pos"]  # one stored row (a HOP row is stored once per window)
IDENTITY_DDL = "__key string, __ws bigint, __we bigint, __mb bigint, __pos bigint"
PANE = "PARTITION BY __pk, __pws, __pwe"
LATEST_FIRST = "ORDER BY __mb DESC, __pos DESC"


def evict_clause(shape: QueryShape) -> exp.Expr:
    return next(s.args["evict"] for s in shape.query.node.find_all(exp.Select) if s.args.get("evict"))


def check_evictor(shape: QueryShape) -> None:
    """What only a streaming query can get wrong with EVICT, before anything runs (the DELTA expression's
    type is checked by Spark when the operator starts)."""
    spec = shape.query.evict
    node = evict_clause(shape)
    ev = spec.evictor
    if isinstance(ev, tp.KeepLastInterval) and shape.window is None and shape.stream.watermark is None:
        raise SqlwinError.at(node, "KEEP LAST interval keeps rows by their event time, and the global window has "
                                   f"none here: declare a WATERMARK on stream {shape.stream.name} (its column is "
                                   "the rows' time) or use KEEP LAST n ROWS")
    if isinstance(ev, tp.DeltaEvictor):
        delta_threshold(ev.threshold)
        if ev.expr.find(exp.AggFunc, exp.Window) is not None:
            raise SqlwinError.at(ev.expr, "DELTA(expr) is computed per row: no aggregate or window function")


def delta_threshold(node: exp.Expr) -> float:
    """The threshold of ``DELTA(expr) < threshold``: a number, possibly negative."""
    inner, sign = (node.this, -1) if isinstance(node, exp.Neg) else (node, 1)
    if isinstance(inner, exp.Paren):
        return delta_threshold(inner.this) * sign
    if isinstance(inner, exp.Literal) and inner.is_number:
        return sign * float(inner.this)
    raise SqlwinError.at(node, "DELTA(expr) < threshold: the threshold must be a number, e.g. DELTA(price) < 10")


class NoEvictor(Durable):
    """A query without EVICT: stored rows need no arrival order, panes read every stored row, nothing is
    evicted (Flink's window operator without an evictor)."""

    @staticmethod
    def prepare(rows: Any) -> Any:
        return rows

    @staticmethod
    def annotate(rows: Any) -> Any:
        return rows

    @staticmethod
    def surviving(spark: Any, rows: Any, tokens: set[int] | None) -> Any:
        return rows

    def at_firing(self, spark: Any, fired: Any, batch: int) -> None:
        return None

    def collect_garbage(self, stored: set[int]) -> None:
        return None


class SparkEvictor(Durable):
    """The evictor of one streaming table or replay, on the operator's stored rows (see the module doc)."""

    def __init__(self, operator: OperatorContext):
        self.op = operator
        self.shape: QueryShape = operator.shape
        self.spec: tp.EvictSpec = self.shape.query.evict
        self.folder = storage.join(operator.store.root, "evicted")
        self.live: dict[int, list[int]] = {}  # evicted/<n> -> the tokens (micro-batches) whose rows it names
        self.dead: list[int] = []  # evicted sets to delete once the micro-batch is committed
        self.sessions = self.shape.window is not None and self.shape.window.kind is WindowKind.SESSION
        self._rows: Any = None  # the stored rows the current micro-batch's panes read, minus evicted ones

    @classmethod
    def of(cls, operator: OperatorContext) -> SparkEvictor | NoEvictor:
        return cls(operator) if operator.shape.query.evict is not None else NoEvictor()

    def __getstate__(self) -> dict:
        """Pickled with its operator to a Spark Connect server (``sqlwin.streaming.connect``): no DataFrame."""
        return {k: v for k, v in self.__dict__.items() if k != "_rows"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._rows = None

    # -- stored rows --------------------------------------------------------------------------
    def prepare(self, rows: Any) -> Any:
        """At start: the stored rows' schema (with ``__pos``), and DELTA's expression checked by Spark."""
        if isinstance(self.spec.evictor, tp.DeltaEvictor):
            self._check_delta(rows)
        return self.annotate(rows)

    def annotate(self, rows: Any) -> Any:
        """``__pos``: each row's place in arrival order among its micro-batch's rows of the same window (of the
        same key, for sessions, whose windows merge)."""
        from pyspark.sql import functions as F

        partition = "__key" if self.sessions else "__key, __ws, __we"
        order = ", ".join(self._arrival_order())
        return rows.withColumn("__pos", F.expr(f"ROW_NUMBER() OVER (PARTITION BY {partition} ORDER BY {order})")
                               .cast("bigint"))

    def _arrival_order(self) -> list[str]:
        stream = self.shape.stream
        order: list[str] = []
        if isinstance(stream, CreateReplayStream):
            for item in stream.arrival_order:
                unqualified = item.copy().transform(
                    lambda n: exp.column(n.name, quoted=True) if isinstance(n, exp.Column) and n.table else n)
                order.append(unqualified.sql(D))
        time_col = self.shape.time_column
        types = {f.name: f.dataType.simpleString() for f in self.op.assigned_schema.fields}
        columns = [time_col] if time_col else []
        columns += [c for c in self.op.relation_columns if c.lower() != time_col.lower()
                    and c in types and not types[c].startswith(NESTED_TYPE_PREFIXES)]
        return order + [f"`{c}` ASC NULLS FIRST" for c in columns]

    def _check_delta(self, rows: Any) -> None:
        from pyspark.sql.types import NumericType

        ev = self.spec.evictor
        try:
            field = rows.alias(self.shape.source_alias).selectExpr(ev.expr.sql(D)).schema.fields[0]
        except Exception as err:
            if not diagnostics.is_spark_error(err):
                raise
            raise SqlwinError.at(ev.expr, f"DELTA({ev.expr.sql(D)}): {self._delta_failure(rows, err)}") from None
        if not isinstance(field.dataType, NumericType):
            raise SqlwinError.at(ev.expr, f"DELTA(expr) needs a number; {ev.expr.sql(D)} is "
                                          f"{field.dataType.simpleString().upper()} (for a time, use e.g. "
                                          "DELTA(unix_seconds(ts)) < 10)")

    def _delta_failure(self, rows: Any, err: BaseException) -> str:
        """Spark's message for DELTA's expression as the user's columns alone give it: the stored rows carry
        sqlwin's own (``__k0``, ``__mb``), which Spark's "did you mean" would list, crowding the user's out."""
        own = diagnostics.user_names(self.shape.text)
        columns = [f"`{c}`" for c in rows.columns if not diagnostics.INTERNAL.fullmatch(c) or c.lower() in own]
        try:
            rows.selectExpr(*columns).alias(self.shape.source_alias).selectExpr(self.spec.evictor.expr.sql(D))
        except Exception as user_err:
            if diagnostics.is_spark_error(user_err):
                err = user_err
        return diagnostics.clean_message(diagnostics.read_failure(err).message, self.shape.text)

    def surviving(self, spark: Any, rows: Any, tokens: set[int] | None) -> Any:
        """The stored rows of ``tokens`` minus every row evicted before; what the panes read."""
        paths = [self._path(n) for n, named in sorted(self.live.items()) if tokens and set(named) & tokens]
        if paths:
            rows = rows.join(spark.read.schema(IDENTITY_DDL).parquet(*paths), IDENTITY, "left_anti")
        self._rows = rows
        return rows

    # -- at each firing -----------------------------------------------------------------------
    def at_firing(self, spark: Any, fired: FiredPaneList, batch: int) -> None:
        """Evict over the fired panes' contents; the pane views then hold what each pane aggregates."""
        from pyspark.sql import functions as F

        if not self.op.driver.accumulating and not self.spec.before:
            return  # evicting after a discarding pane: the window is emptied anyway, no pane changes
        flags = spark.sql(self._flags_sql()).persist()
        try:
            stats = flags.groupBy("__pk", "__pws", "__pwe", "__mb").agg(
                F.count(F.lit(1)).alias("n"), F.sum(F.col("__keep").cast("int")).alias("kept")).collect()
            named = sorted({r["__mb"] for r in stats if r["kept"] < r["n"]})
            if named:
                flags.where(~F.col("__keep")).select(*IDENTITY).write.mode("overwrite").parquet(self._path(batch))
                self.live[batch] = named
            else:
                self._drop(batch)
        finally:
            flags.unpersist()
        if self.op.driver.accumulating:
            self._retain(fired, stats)
        if self.spec.before and named:
            evicted = spark.read.schema(IDENTITY_DDL).parquet(self._path(batch))
            self._rows.join(evicted, IDENTITY, "left_anti").createOrReplaceTempView(self.op.views.rows)
            spark.sql(self.op.relation_sql).createOrReplaceTempView(self.op.views.relation)

    def _retain(self, fired: FiredPaneList, stats: list) -> None:
        """Each window that stays open keeps the tokens that still hold a row it kept."""
        kept: dict[tuple, set[int]] = {}
        for r in stats:
            if r["kept"]:
                kept.setdefault((r["__pk"], r["__pws"], r["__pwe"]), set()).add(r["__mb"])
        for window, _pane in fired:
            state = self.op.windows.get(window)
            if state is None or state.closed or state.expired:
                continue
            tokens = kept.get(window, set())
            self.op.driver.retain(state, list(dict.fromkeys(t for t in state.emitted if t in tokens)))

    def _flags_sql(self) -> str:
        """Per fired pane, each row of its contents with ``__keep``, the evictor's verdict."""
        v = self.op.views
        alias = exp.to_identifier(self.shape.source_alias, quoted=True).sql(D)
        ev = self.spec.evictor
        values = [f"{alias}.*"]
        if isinstance(ev, tp.KeepLastRows):
            keep = f"ROW_NUMBER() OVER ({PANE} {LATEST_FIRST}) <= {ev.n}"
        elif isinstance(ev, tp.KeepLastInterval):
            values.append(f"{self._time_micros()} AS __tus")
            keep = f"COALESCE(__tus > MAX(__tus) OVER ({PANE}) - {ev.micros}, FALSE)"
        else:
            values.append(f"({ev.expr.sql(D)}) AS __dv")
            last = f"FIRST_VALUE(__dv) OVER ({PANE} {LATEST_FIRST})"
            keep = f"COALESCE(ABS(__dv - {last}) < ({ev.threshold.sql(D)}), FALSE)"
        bounds = "r.__ts >= p.__ws AND r.__ts < p.__we" if self.sessions else "r.__ws = p.__ws AND r.__we = p.__we"
        contents = (f"SELECT r.*, p.__key AS __pk, p.__ws AS __pws, p.__we AS __pwe FROM {v.fired} AS p "
                    f"JOIN (SELECT {', '.join(values)} FROM {v.rows} AS {alias}) AS r "
                    f"ON r.__key = p.__key AND {bounds} AND ARRAY_CONTAINS(p.tokens, r.__mb)")
        return f"SELECT {', '.join(IDENTITY)}, __pk, __pws, __pwe, {keep} AS __keep FROM ({contents}) AS c"

    def _time_micros(self) -> str:
        """Epoch microseconds of the rows' time: the window's time column (the watermark's, globally)."""
        column = exp.column(self.shape.time_column, quoted=True)
        spec: Any = self.shape.window
        if spec is None:
            types = {f.name.lower(): f.dataType.simpleString() for f in self.op.assigned_schema.fields}
            ntz = types.get(self.shape.time_column.lower()) == "timestamp_ntz"
            spec = SimpleNamespace(time_type=TimeType.TIMESTAMP_NTZ if ntz else TimeType.TIMESTAMP)
        return self.op.query.compiler.to_us(column, spec).sql(D)

    # -- durable state ------------------------------------------------------------------------
    def collect_garbage(self, stored: set[int]) -> None:
        """Evicted sets naming only rows that are gone (no window refers to their micro-batch) are dead."""
        for batch, named in list(self.live.items()):
            if not set(named) & stored:
                del self.live[batch]
                self.dead.append(batch)

    def snapshot(self, commit: Commit) -> dict:
        return {"evicted": {str(b): named for b, named in self.live.items()}}

    def committed(self) -> None:
        for batch in self.dead:
            self._drop(batch)
        self.dead = []

    def restore(self, commit: Commit) -> None:
        self.live = {int(b): list(named) for b, named in commit.data.get("evicted", {}).items()}

    def delete_uncommitted(self) -> None:
        """The evicted sets of an attempt that did not commit."""
        for name in storage.listdir(self.folder):
            if name.isdigit() and int(name) not in self.live:
                self._drop(int(name))

    def _path(self, batch: int) -> str:
        return storage.join(self.folder, str(batch))

    def _drop(self, batch: int) -> None:
        storage.delete(self._path(batch))
