"""Spark batch backend: each window TVF becomes a derived table in native Spark SQL.

Native plans (provably equal to the GRAMMAR semantics, and much faster than Python):
- TUMBLE: one projection, ``start = us - pmod(us - offset, size)``;
- HOP: Spark's own sliding ``window()`` (slide <= size), else the one aligned candidate;
- CUMULATE: ``LATERAL VIEW explode(sequence(...))`` over the candidate window ends;
- SESSION (no max_duration): gaps-and-islands with window functions; a row opens a new session
  when its ts is past every earlier row's ts + gap (so touching sessions merge, as in Flink);
  aggregations grouped by a static-gap session skip the per-row bounds (spark_groupby.SessionRoute);
- TUMBLE ROWS / HOP ROWS, ROWS: ``row_number()`` arithmetic; aggregations grouped by count window
  take the bounds as aggregates of the group instead of a second window pass
  (spark_groupby.CountRoute).
The vectorized arrow UDTF (``udtfs``) runs only where SQL cannot express the semantics
(SESSION with max_duration, HOP ROWS m, d and HOP s, ROWS n), or when ``plan='udtf'`` forces it.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from sqlwin.backends.base import WindowCompiler
from sqlwin.backends.spark_groupby import COUNT_MARK, SESSION_MARK, CountRoute, SessionRoute, group_by_window_struct
from sqlwin.backends.spark_groupby import MARK as STRUCT_MARK
from sqlwin.backends.sparksql import holds, spark_sql
from sqlwin.backends.sqlbuild import col, fill, num
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import CountForm, Rows, TimeType, WindowKind, WindowSpec

D = "spark"
SPARK = Dialect.get_or_raise(D)  # one instance: a dialect's name would build a new one per node
MS = 1000
GAP_COLUMN = "__sqlwin_gap_us"


class SparkBatchCompiler(WindowCompiler):
    dialect = D
    name = "spark"

    def __init__(self, spark: Any = None, plan: str = "auto"):
        super().__init__()
        if plan not in ("auto", "udtf"):
            raise SqlwinError(f"unknown plan {plan!r}; expected 'auto' or 'udtf'")
        self.spark = spark
        self.plan = plan
        self._calls: dict[str, str] = {}
        self._without_any: exp.Expr | None = None  # the last tree compile() returned, if it holds no ANY
        self.utc_session = spark is not None and _session_tz(spark) in ("UTC", "Etc/UTC", "Z", "+00:00", "GMT")

    def compile(self, node: exp.Expr, specs: list[WindowSpec]) -> exp.Expr:
        # sqlwin builds no ANY: the compiled tree holds one only if what it is built from does
        parts = [node, *(s.relation.node for s in specs), *(s.gap for s in specs if isinstance(s.gap, exp.Expr))]
        without_any = not any(holds(part, exp.Any) for part in parts)
        compiled = super().compile(node, specs)
        self._without_any = compiled if without_any else None
        return compiled

    def relations_placed(self, derived: list[exp.Expr]) -> None:
        group_by_window_struct(derived)

    def render(self, node: exp.Expr) -> str:
        """Spark SQL text; UDTF calls are spliced in here because their ``TABLE(...) PARTITION BY``
        argument syntax is Spark's own and has no sqlglot node."""
        # ours, rendered once: no copy; a tree compile() did not return (compile_node's) may hold an ANY
        sql = spark_sql(node, may_hold_any=node is not self._without_any)
        for marker, call in reversed(self._calls.items()):  # outer calls embed the inner markers
            sql = sql.replace(marker, call)
        return sql

    # -- dispatch -----------------------------------------------------------------------------
    def window_relation(self, spec: WindowSpec) -> exp.Expr:
        if self.plan == "udtf" or needs_udtf(spec):
            body = self._udtf(spec)
        elif spec.count_form in (CountForm.TUMBLE_ROWS, CountForm.HOP_ROWS_ROWS):
            tumble = spec.count_form is CountForm.TUMBLE_ROWS
            body = self._tumble_rows(spec) if tumble else self._hop_rows_rows(spec)
            derived = body.subquery(alias=spec.alias, copy=False)
            derived.meta[COUNT_MARK] = self._count_route(spec)
            return derived
        elif spec.kind in (WindowKind.TUMBLE, WindowKind.HOP):
            body = self._tumble(spec) if spec.kind is WindowKind.TUMBLE else self._hop(spec)
            derived = body.subquery(spec.alias, copy=False)
            derived.meta[STRUCT_MARK] = True  # see spark_groupby: aggregations may group by one struct
            return derived
        elif spec.kind is WindowKind.CUMULATE:
            body = self._cumulate(spec)
        else:
            derived = self._session(spec).subquery(alias=spec.alias, copy=False)
            if isinstance(spec.gap, int) and spec.relation.columns is not None:
                derived.meta[SESSION_MARK] = self._session_route(spec, spec.gap)
            return derived
        return body.subquery(alias=spec.alias, copy=False)

    # -- time arithmetic ----------------------------------------------------------------------
    def to_us(self, ts: exp.Expr, spec: WindowSpec) -> exp.Expr:
        """Epoch microseconds of a timestamp. TIMESTAMP: its UTC instant. TIMESTAMP_NTZ: its wall clock,
        read without any time zone (in a UTC session a cast is exact; elsewhere the date parts are
        added up, since Spark's casts and TIMESTAMPDIFF shift NTZ values by the session zone)."""
        if spec.time_type is not TimeType.TIMESTAMP_NTZ:
            return exp.func("UNIX_MICROS", ts, dialect=SPARK, copy=False)
        if self.utc_session:
            return fill("UNIX_MICROS(CAST(:ts AS TIMESTAMP))", D, ts=ts)
        return fill("CAST(DATEDIFF(CAST(:ts AS DATE), DATE '1970-01-01') AS BIGINT) * 86400000000 "
                    "+ CAST(HOUR(:ts) AS BIGINT) * 3600000000 + CAST(MINUTE(:ts) AS BIGINT) * 60000000 "
                    "+ CAST(DATE_PART('SECOND', :ts) * 1000000 AS BIGINT)", D, ts=ts)

    def from_us(self, us: exp.Expr, spec: WindowSpec) -> exp.Expr:
        if spec.time_type is not TimeType.TIMESTAMP_NTZ:
            return exp.func("TIMESTAMP_MICROS", us, dialect=SPARK, copy=False)
        if self.utc_session:
            return fill("CAST(TIMESTAMP_MICROS(:us) AS TIMESTAMP_NTZ)", D, us=us)
        return fill("TIMESTAMPADD(MICROSECOND, :us, CAST('1970-01-01 00:00:00' AS TIMESTAMP_NTZ))", D, us=us)

    def _columns(self, spec: WindowSpec, table: str) -> list[exp.Expr]:
        if spec.relation.columns is None:
            return [exp.Column(this=exp.Star(), table=exp.to_identifier(table))]
        return [col(c.name, table) for c in spec.relation.columns]

    def _require_columns(self, spec: WindowSpec) -> None:
        if spec.relation.columns is None:
            raise SqlwinError.at(spec.node, f"{spec.kind.value} over this input needs its schema: run it on Spark "
                                            "(sqlwin.sql) or pass catalog= to sqlwin.rewrite")

    def _window_cols(self, spec: WindowSpec, start_us: exp.Expr, end_us: exp.Expr) -> list[exp.Expr]:
        return [
            exp.alias_(self.from_us(start_us, spec), "window_start", copy=False),
            exp.alias_(self.from_us(end_us.copy(), spec), "window_end", copy=False),
            exp.alias_(self.from_us(exp.Sub(this=end_us, expression=num(MS)), spec), "window_time", copy=False),
        ]

    def _aligned_start(self, us: exp.Expr, size: int, offset: int) -> exp.Expr:
        return fill(":us - PMOD(:us - :off, :size)", D, us=us, off=num(offset), size=num(size))

    # -- time windows -------------------------------------------------------------------------
    def _tumble(self, spec: WindowSpec) -> exp.Expr:
        assert isinstance(spec.size, int)
        ts = col(spec.time_col, "__r")
        start = self._aligned_start(self.to_us(ts, spec), spec.size, spec.offset)
        end = exp.Add(this=start.copy(), expression=num(spec.size))
        q = fill("SELECT 1 FROM __rel AS __r WHERE :ts IS NOT NULL", D, self.compile_relation(spec), ts=ts)
        return q.select(*self._columns(spec, "__r"), *self._window_cols(spec, start, end), append=False, copy=False)

    def _exploded(self, spec: WindowSpec, sequence: exp.Expr, keep: exp.Expr,
                  start: exp.Expr, end: exp.Expr) -> exp.Expr:
        q = fill("SELECT 1 FROM __rel AS __r LATERAL VIEW EXPLODE(:seq) __w AS __x "
                 "WHERE :ts IS NOT NULL AND :keep", D, self.compile_relation(spec),
                 seq=sequence, ts=col(spec.time_col, "__r"), keep=keep)
        return q.select(*self._columns(spec, "__r"), *self._window_cols(spec, start, end), append=False, copy=False)

    def _hop(self, spec: WindowSpec) -> exp.Expr:
        """Spark's own sliding ``window()`` when slide <= size: its definition (windows
        ``[k*slide + offset, k*slide + offset + size)`` holding ts) is Flink's HOP, and Spark plans it
        as a codegen'd Expand. Otherwise (gaps when slide > size; or no schema to list the columns)
        the candidate starts are exploded."""
        assert isinstance(spec.size, int) and isinstance(spec.slide, int)
        if spec.slide <= spec.size and spec.relation.columns is not None:
            return self._spark_window(spec)
        us = self.to_us(col(spec.time_col, "__r"), spec)
        last = self._aligned_start(us, spec.slide, spec.offset)
        n = spec.windows_per_row()
        candidates = fill("SEQUENCE(:last - :back, :last, :slide)", D, last=last,
                          back=num((n - 1) * spec.slide), slide=num(spec.slide))
        x = exp.column("__x")
        keep = fill(":us < :x + :size", D, us=us.copy(), x=x, size=num(spec.size))
        return self._exploded(spec, candidates, keep, x.copy(), exp.Add(this=x.copy(), expression=num(spec.size)))

    def _spark_window(self, spec: WindowSpec) -> exp.Expr:
        assert isinstance(spec.size, int) and isinstance(spec.slide, int)
        start = spec.offset % spec.slide  # only the alignment matters; Spark wants 0 <= start < slide
        inner = fill("SELECT __r.*, WINDOW(:ts, :size, :slide, :start) AS __w FROM __rel AS __r "
                     "WHERE :ts IS NOT NULL", D, self.compile_relation(spec), ts=col(spec.time_col, "__r"),
                     size=_duration(spec.size), slide=_duration(spec.slide), start=_duration(start))
        w = exp.column("__w", "__s")
        end = exp.Dot(this=w.copy(), expression=exp.to_identifier("end"))
        return exp.select(
            *[col(c.name, "__s") for c in spec.relation.columns or ()],
            exp.alias_(exp.Dot(this=w, expression=exp.to_identifier("start")), "window_start", copy=False),
            exp.alias_(end, "window_end", copy=False),  # fill below copies it
            exp.alias_(fill(":end - INTERVAL '1' MILLISECOND", D, end=end), "window_time", copy=False),
        ).from_(inner.subquery(alias="__s", copy=False), copy=False)

    def _cumulate(self, spec: WindowSpec) -> exp.Expr:
        assert isinstance(spec.size, int) and spec.step
        us = self.to_us(col(spec.time_col, "__r"), spec)
        start = self._aligned_start(us, spec.size, spec.offset)
        seq = fill("SEQUENCE(DIV(:us - :start, :step) + 1, :n)", D, us=us.copy(), start=start,
                   step=num(spec.step), n=num(spec.size // spec.step))
        end = fill(":start + :x * :step", D, start=start.copy(), x=exp.column("__x"), step=num(spec.step))
        return self._exploded(spec, seq, exp.true(), start.copy(), end)

    # -- sessions -----------------------------------------------------------------------------
    def gap_us(self, spec: WindowSpec, ts: exp.Expr) -> exp.Expr:
        """The row's gap in microseconds: a literal, or the dynamic INTERVAL expression measured
        as (ts + gap) - ts, which is exact for day-time intervals."""
        if isinstance(spec.gap, int):
            return num(spec.gap)
        assert isinstance(spec.gap, exp.Expr)
        gap = spec.gap.copy()
        for c in gap.find_all(exp.Column):
            c.set("table", exp.to_identifier("__r"))
        return exp.Sub(this=self.to_us(exp.Add(this=ts.copy(), expression=exp.paren(gap)), spec),
                       expression=self.to_us(ts.copy(), spec))

    def _session(self, spec: WindowSpec) -> exp.Expr:
        self._require_columns(spec)
        ts = col(spec.time_col, "__r")
        inner = fill("SELECT __r.*, :us AS __us, :us + :gap AS __end FROM __rel AS __r "
                     "WHERE :ts IS NOT NULL AND :gap > 0", D, self.compile_relation(spec),
                     us=self.to_us(ts, spec), gap=self.gap_us(spec, ts), ts=ts)
        p, keys = partition_template(spec.partition_by)
        flagged = fill(
            f"SELECT *, CASE WHEN __us <= MAX(__end) OVER (PARTITION BY {p} ORDER BY __us "
            "ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS __new FROM :src AS __a",
            D, src=inner.subquery(), **keys)
        numbered = fill(f"SELECT *, SUM(__new) OVER (PARTITION BY {p} ORDER BY __us, __new DESC "
                        "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __sid FROM :src AS __b", D,
                        src=flagged.subquery(), **keys)
        bounds = fill(f"SELECT *, MIN(__us) OVER (PARTITION BY {p}, __sid) AS __ws, "
                      f"MAX(__end) OVER (PARTITION BY {p}, __sid) AS __we FROM :src AS __c", D,
                      src=numbered.subquery(), **keys)
        cols = [col(c.name, "__d") for c in spec.relation.columns or ()]
        return exp.select(*cols, *self._window_cols(spec, exp.column("__ws", "__d"), exp.column("__we", "__d"))
                          ).from_(bounds.subquery(alias="__d"))

    def _session_route(self, spec: WindowSpec, gap: int) -> SessionRoute:
        """Static gap, grouped by session (see spark_groupby): a row starts a session when it is more
        than ``gap`` after the previous row of its partition (ties and touching rows join), and
        ``__ws``, the running max of those starts, names the session and is its window_start."""
        ts = col(spec.time_col, "__r")
        inner = fill("SELECT __r.*, :us AS __us FROM __rel AS __r WHERE :ts IS NOT NULL", D,
                     self.compile_relation(spec), us=self.to_us(ts.copy(), spec), ts=ts)
        p, keys = partition_template(spec.partition_by)
        flagged = fill(f"SELECT *, COALESCE(__us - LAG(__us) OVER (PARTITION BY {p} ORDER BY __us) > :gap, TRUE) "
                       "AS __new FROM :src AS __a", D, src=inner.subquery(), gap=num(gap), **keys)
        body = fill(f"SELECT *, MAX(IF(__new, __us, NULL)) OVER (PARTITION BY {p} ORDER BY __us "
                    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __ws FROM :src AS __b", D,
                    src=flagged.subquery(), **keys)
        assert isinstance(body, exp.Select)
        last = fill("MAX(__us) + :gap", D, gap=num(gap))
        start = self.from_us(exp.column("__ws"), spec)
        return SessionRoute(
            body=body, key="__ws", partition_by=spec.partition_by,
            group_bounds={"window_start": start,
                          "window_end": self.from_us(last.copy(), spec),
                          "window_time": self.from_us(exp.Sub(this=last, expression=num(MS)), spec)},
            row_bounds={"window_start": start.copy()})

    # -- count windows ------------------------------------------------------------------------
    def order_keys(self, spec: WindowSpec, table: str | None) -> list[exp.Ordered]:
        """ts, then every other orderable column in schema order, ASC NULLS FIRST."""
        self._require_columns(spec)
        names = [spec.time_col, *spec.tiebreak_columns]
        return [exp.Ordered(this=col(n, table), nulls_first=True) for n in names]

    def _numbered(self, spec: WindowSpec, counted: bool = True) -> exp.Expr:
        """Rows with a time: ``__rn`` (0, 1, ... per partition in count-window order) and, if ``counted``,
        ``__cnt`` (the partition's row count)."""
        parts = [col(k, "__r") for k in spec.partition_by] or [num(1)]
        over = exp.Window(this=exp.RowNumber(), partition_by=parts,
                          order=exp.Order(expressions=self.order_keys(spec, "__r")))
        q = fill("SELECT __r.* FROM __rel AS __r WHERE :ts IS NOT NULL", D, self.compile_relation(spec),
                 ts=col(spec.time_col, "__r"))
        q = q.select(exp.alias_(exp.Sub(this=over, expression=num(1)), "__rn"), copy=False)
        if counted:
            count = exp.Window(this=exp.Count(this=exp.Star()), partition_by=[p.copy() for p in parts])
            q = q.select(exp.alias_(count, "__cnt"), copy=False)
        return q

    def _count_output(self, spec: WindowSpec, source: exp.Expr, where: exp.Expr | None) -> exp.Expr:
        parts = [col(k) for k in spec.partition_by]
        win = [*parts, exp.column("__k")]
        ts_us = self.to_us(col(spec.time_col), spec)
        first = exp.Window(this=exp.Min(this=ts_us), partition_by=win)
        last = exp.Window(this=exp.Max(this=ts_us.copy()), partition_by=[w.copy() for w in win])
        staged = exp.select(exp.Star(), exp.alias_(first, "__ws"),
                            exp.alias_(exp.Add(this=last, expression=num(MS)), "__we")).from_(source)
        if where is not None:
            staged = staged.where(where)
        cols = [col(c.name, "__e") for c in spec.relation.columns or ()]
        return exp.select(*cols, *self._window_cols(spec, exp.column("__ws", "__e"), exp.column("__we", "__e")),
                          exp.alias_(exp.cast(exp.column("__k", "__e"), "BIGINT"), "window_index")
                          ).from_(staged.subquery(alias="__e"))

    def _tumble_rows(self, spec: WindowSpec) -> exp.Expr:
        assert isinstance(spec.size, Rows)
        numbered = fill("SELECT *, DIV(__rn, :n) AS __k FROM :q AS __n WHERE __rn < DIV(__cnt, :n) * :n", D,
                        q=self._numbered(spec).subquery(), n=num(spec.size.n))
        return self._count_output(spec, numbered.subquery(alias="__f"), None)

    def _hop_rows_rows_keyed(self, spec: WindowSpec) -> exp.Expr:
        """Every row once per window holding it, with that window's number ``__k``."""
        assert isinstance(spec.size, Rows) and isinstance(spec.slide, Rows)
        m, n = spec.slide.n, spec.size.n
        return fill(
            "SELECT __n.*, __k FROM :q AS __n LATERAL VIEW EXPLODE(IF(DIV(__rn, :m) + 1 <= "
            "LEAST(DIV(__rn + :n, :m), DIV(__cnt, :m)), SEQUENCE(DIV(__rn, :m) + 1, "
            "LEAST(DIV(__rn + :n, :m), DIV(__cnt, :m))), ARRAY())) __h AS __k", D,
            q=self._numbered(spec).subquery(), m=num(m), n=num(n))

    def _hop_rows_rows(self, spec: WindowSpec) -> exp.Expr:
        return self._count_output(spec, self._hop_rows_rows_keyed(spec).subquery(alias="__f"), None)

    def _count_route(self, spec: WindowSpec) -> CountRoute:
        """An aggregation grouped by count window (see spark_groupby): the bounds over the group are the
        ones ``_count_output`` gives every row (MIN / MAX of the window's row times, end + 1 ms).
        TUMBLE ROWS n numbers the rows without counting each partition: a window is complete when it
        holds n rows (only the last one of a partition may hold fewer)."""
        if spec.count_form is CountForm.TUMBLE_ROWS:
            assert isinstance(spec.size, Rows)
            body = fill("SELECT *, DIV(__rn, :n) AS __k FROM :q AS __n", D,
                        q=self._numbered(spec, counted=False).subquery(), n=num(spec.size.n))
            having: exp.Expr | None = exp.EQ(this=exp.Count(this=exp.Star()), expression=num(spec.size.n))
        else:
            body, having = self._hop_rows_rows_keyed(spec), None
        assert isinstance(body, exp.Select)
        us = self.to_us(col(spec.time_col), spec)
        end = exp.Add(this=exp.Max(this=us.copy()), expression=num(MS))
        return CountRoute(
            body=body, key="__k", partition_by=spec.partition_by, having=having,
            bounds={"window_start": self.from_us(exp.Min(this=us), spec),
                    "window_end": self.from_us(end.copy(), spec),
                    "window_time": self.from_us(exp.Sub(this=end, expression=num(MS)), spec),
                    "window_index": exp.cast(exp.column("__k"), "BIGINT")})

    # -- the UDTF plan ------------------------------------------------------------------------
    def _udtf(self, spec: WindowSpec) -> exp.Expr:
        import udtfs

        self._require_columns(spec)
        if self.spark is None:
            raise SqlwinError.at(spec.node, "this window needs sqlwin's UDTF, which only runs on a SparkSession")
        name = udtfs.register_for_spec(self.spark, spec)
        relation = _aliased(self.compile_relation(spec), "__r")
        cols: list[exp.Expr] = [col(c.name, "__r") for c in spec.relation.columns or ()]
        if spec.dynamic_gap:
            cols.append(exp.alias_(self.gap_us(spec, col(spec.time_col, "__r")), GAP_COLUMN))
        source = exp.select(*cols).from_(relation)
        marker = f"__sqlwin_udtf_call_{len(self._calls)}_{name}"
        self._calls[marker] = udtfs.udtf_call_sql(spec, name, source.sql(D))
        return exp.select(exp.Star()).from_(exp.to_table(marker))


def _duration(micros: int) -> exp.Literal:
    """A duration string for Spark's ``window()``."""
    return exp.Literal.string(f"{micros} microseconds")


def _session_tz(spark: Any) -> str:
    try:
        return str(spark.conf.get("spark.sql.session.timeZone"))
    except Exception:  # a session that cannot answer: assume the general case
        return ""


def partition_template(keys: tuple[str, ...]) -> tuple[str, dict[str, exp.Expr]]:
    """``PARTITION BY`` placeholders for ``keys`` (a constant when there are none)."""
    if not keys:
        return "1", {}
    return ", ".join(f":p{i}" for i in range(len(keys))), {f"p{i}": col(k) for i, k in enumerate(keys)}


def _aliased(relation: exp.Expr, alias: str) -> exp.Expr:
    node = relation.copy()
    if isinstance(node, exp.Select):
        node = node.subquery()
    node.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    return node


def needs_udtf(spec: WindowSpec) -> bool:
    """Semantics no native Spark SQL plan expresses exactly (sequential or range-join forms)."""
    if spec.kind is WindowKind.SESSION and spec.max_duration is not None:
        return True
    return spec.count_form in (CountForm.HOP_ROWS_TIME, CountForm.HOP_TIME_ROWS)
