"""DuckDB backend: the reference oracle for every window form of GRAMMAR section 1.

The same query compiled here must give the same answer as the Spark backend, so each form is
written the way DuckDB SQL naturally expresses it, independently of the Spark arithmetic:
``time_bucket`` for alignment, ``generate_series`` unnested per row for HOP/CUMULATE,
gaps-and-islands window functions for SESSION, a recursive CTE (one row per step) for SESSION
with ``max_duration``, and for the count (Storm) forms ``row_number()`` then, per row, the
range of window indexes that hold it (unnested; window functions then span each window). The
per-row ranges avoid the range joins DuckDB would run as per-partition cross products.

Every form is one query whose CTEs carry helper columns named ``__sw_*`` (microseconds since
the epoch; TIMESTAMP and TIMESTAMP_NTZ both map to DuckDB TIMESTAMP read as UTC wall clock)
and whose last step yields ``__sw_ws``/``__sw_we`` (and ``__sw_idx``); one final projection
turns them into ``window_start``, ``window_end``, ``window_time`` (and ``window_index``).
Templates are filled by ``sqlbuild.fill`` (parsed once; ``:name`` placeholders become sqlglot nodes).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from sqlwin.backends.base import WindowCompiler
from sqlwin.backends.sqlbuild import col, fill, num
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import CountForm, Rows, WindowKind, WindowSpec

D = "duckdb"
DEFAULT_ALIAS = "__sw_window"

# ------------------------------------------------------------------------------- templates

# Rows with a NULL time belong to no window; ``__sw_pid`` numbers the partitions (NULL keys
# included, as one partition of their own) so later steps can join on a single non-NULL key.
_BASE = """SELECT *, EPOCH_US(:ts) AS __sw_us, :pid AS __sw_pid FROM :src WHERE NOT :ts IS NULL"""

# The start (in us) of the width-``:w`` bucket holding ``:x``, aligned on the epoch + offset.
_BUCKET = "EPOCH_US(TIME_BUCKET(TO_MICROSECONDS(:w), MAKE_TIMESTAMP(:x), MAKE_TIMESTAMP(:offset)))"

_TUMBLE = """
WITH __sw_b AS (:base), __sw_t AS (SELECT *, :bucket AS __sw_ws FROM __sw_b)
SELECT *, __sw_ws + :size AS __sw_we FROM __sw_t"""

# HOP: every aligned start in (ts - size, ts]; empty when ts falls in a gap (slide > size).
_HOP = """
WITH __sw_b AS (:base),
__sw_h AS (SELECT *, UNNEST(GENERATE_SERIES(:first + :slide, :last, :slide)) AS __sw_ws FROM __sw_b)
SELECT *, __sw_ws + :size AS __sw_we FROM __sw_h"""

# CUMULATE: every step-aligned end after ts, up to the end of ts's size bucket.
_CUMULATE = """
WITH __sw_b AS (:base),
__sw_c AS (SELECT *, :start AS __sw_ws, UNNEST(GENERATE_SERIES(:step_start + :step, :start + :size, :step))
           AS __sw_we FROM __sw_b)
SELECT * FROM __sw_c"""

# SESSION: a row opens a new session unless an earlier row's [ts, ts+gap) reaches it (overlap or
# touch). Comparing only with strictly earlier timestamps (RANGE ... 1 PRECEDING) makes the
# flag, and so the session ids, independent of the order among equal timestamps.
_SESSION = """
WITH __sw_b AS (SELECT *, EPOCH_US(:ts) AS __sw_us, :end AS __sw_end, :pid AS __sw_pid
                FROM :src WHERE NOT :ts IS NULL),
__sw_f AS (SELECT *, CASE WHEN MAX(__sw_end) OVER (PARTITION BY __sw_pid ORDER BY __sw_us
                      RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) >= __sw_us THEN 0 ELSE 1 END
                  AS __sw_new
           FROM __sw_b WHERE __sw_end > __sw_us),
__sw_s AS (SELECT *, SUM(__sw_new) OVER (PARTITION BY __sw_pid ORDER BY __sw_us) AS __sw_sid FROM __sw_f)
SELECT *, MIN(__sw_us) OVER (PARTITION BY __sw_pid, __sw_sid) AS __sw_ws,
       MAX(__sw_end) OVER (PARTITION BY __sw_pid, __sw_sid) AS __sw_we
FROM __sw_s"""

# SESSION with max_duration is sequential: walk each partition row by row in ts order, keeping the
# session start and the furthest end so far. (Equal timestamps always land in the same session,
# so the order among them does not matter.)
_NEW_SESSION = "(n.__sw_us >= r.__sw_s + :maxd OR n.__sw_us > r.__sw_me)"
_SESSION_MAX = f"""
WITH RECURSIVE __sw_b AS (SELECT *, EPOCH_US(:ts) AS __sw_us, :end AS __sw_end, :pid AS __sw_pid
                          FROM :src WHERE NOT :ts IS NULL),
__sw_n AS MATERIALIZED (SELECT *, ROW_NUMBER() OVER (PARTITION BY __sw_pid ORDER BY __sw_us) AS __sw_rn
                        FROM __sw_b WHERE __sw_end > __sw_us),
__sw_r AS (
  SELECT __sw_pid AS __sw_rpid, __sw_rn AS __sw_rrn, __sw_us AS __sw_s, __sw_end AS __sw_me,
         CAST(0 AS BIGINT) AS __sw_sid
  FROM __sw_n WHERE __sw_rn = 1
  UNION ALL
  SELECT n.__sw_pid, n.__sw_rn,
         CASE WHEN {_NEW_SESSION} THEN n.__sw_us ELSE r.__sw_s END,
         CASE WHEN {_NEW_SESSION} THEN n.__sw_end ELSE GREATEST(r.__sw_me, n.__sw_end) END,
         r.__sw_sid + CASE WHEN {_NEW_SESSION} THEN 1 ELSE 0 END
  FROM __sw_r AS r JOIN __sw_n AS n ON n.__sw_pid = r.__sw_rpid AND n.__sw_rn = r.__sw_rrn + 1),
__sw_j AS (SELECT * FROM __sw_n JOIN __sw_r ON __sw_pid = __sw_rpid AND __sw_rn = __sw_rrn)
SELECT * EXCLUDE (__sw_rpid, __sw_rrn), __sw_s AS __sw_ws,
       LEAST(MAX(__sw_me) OVER (PARTITION BY __sw_pid, __sw_sid), __sw_s + :maxd) AS __sw_we
FROM __sw_j"""

# Count forms: rows numbered 0, 1, ... per partition (``:rn`` carries the documented ordering).
_NUMBERED = """
WITH __sw_b AS (:base),
__sw_n AS (SELECT *, :rn AS __sw_rn, COUNT(*) OVER (PARTITION BY __sw_pid) AS __sw_cnt FROM __sw_b)
SELECT * FROM __sw_n"""

# Window k of the rows form: first held row's ts .. last held row's ts + 1 ms.
_HELD_SPAN = """SELECT *, MIN(__sw_us) OVER (PARTITION BY __sw_pid, __sw_idx) AS __sw_ws,
       MAX(__sw_us) OVER (PARTITION BY __sw_pid, __sw_idx) + 1000 AS __sw_we FROM __sw_k"""

# TUMBLE ROWS n: window k holds rows [k*n, (k+1)*n); only complete windows.
_TUMBLE_ROWS = f"""
WITH __sw_k AS (SELECT *, __sw_rn // :n AS __sw_idx FROM __sw_n WHERE __sw_rn < __sw_cnt // :n * :n)
{_HELD_SPAN}"""

# HOP ROWS m, ROWS n: row r is in windows k = r//m + 1 .. (r+n)//m that have closed (k*m <= count).
_HOP_ROWS_ROWS = f"""
WITH __sw_k AS (SELECT *, UNNEST(GENERATE_SERIES(__sw_rn // :m + 1, LEAST((__sw_rn + :n) // :m, __sw_cnt // :m)))
                AS __sw_idx FROM __sw_n)
{_HELD_SPAN}"""

# HOP ROWS m, d: window k closes at row c = k*m - 1, ends 1 ms after it and starts d before its end.
# Row r is held by the windows whose closing row c >= r has ts_c <= ts_r + d - 1 ms (then ts_r lies
# in [window_start, window_end)): k from ceil((r+1)/m) to (count of rows with ts <= ts_r + d - 1 ms)/m.
# With d >= 1 ms the closing row is held, so window_end is the latest held ts + 1 ms.
_HOP_ROWS_TIME = """
WITH __sw_m AS (SELECT *, COUNT(*) OVER (PARTITION BY __sw_pid ORDER BY __sw_us
                          RANGE BETWEEN UNBOUNDED PRECEDING AND :reach FOLLOWING) AS __sw_reach
                FROM __sw_n),
__sw_k AS (SELECT *, UNNEST(GENERATE_SERIES((__sw_rn + :m) // :m, __sw_reach // :m)) AS __sw_idx FROM __sw_m),
__sw_e AS (SELECT *, MAX(__sw_us) OVER (PARTITION BY __sw_pid, __sw_idx) + 1000 AS __sw_we FROM __sw_k)
SELECT *, __sw_we - :d AS __sw_ws FROM __sw_e"""

# HOP s, ROWS n: one window per boundary b ending a size-s bucket that holds a row (``__sw_own``:
# the 0-based ordinal of a row's bucket); it holds the last n rows before b. Row r is among them
# for the buckets from its own up to the one before row r+n's bucket (or the last bucket).
_HOP_TIME_ROWS = """
WITH __sw_m AS (SELECT *, :bucket + :s AS __sw_bnd FROM __sw_n),
__sw_i AS (SELECT *, DENSE_RANK() OVER (PARTITION BY __sw_pid ORDER BY __sw_bnd) - 1 AS __sw_own FROM __sw_m),
__sw_h AS (SELECT *, COALESCE(LEAD(__sw_own, :n) OVER (PARTITION BY __sw_pid ORDER BY __sw_rn) - 1,
                              MAX(__sw_own) OVER (PARTITION BY __sw_pid)) AS __sw_hi FROM __sw_i),
__sw_k AS (SELECT *, UNNEST(GENERATE_SERIES(__sw_own, __sw_hi)) AS __sw_idx FROM __sw_h)
SELECT *, MIN(__sw_us) OVER (PARTITION BY __sw_pid, __sw_idx) AS __sw_ws,
       MAX(__sw_bnd) OVER (PARTITION BY __sw_pid, __sw_idx) AS __sw_we FROM __sw_k"""

_FINAL = """SELECT MAKE_TIMESTAMP(__sw_ws) AS window_start, MAKE_TIMESTAMP(__sw_we) AS window_end,
MAKE_TIMESTAMP(__sw_we - 1000) AS window_time FROM :body AS __sw_o"""

# Helper columns the time forms leave in their last step (removed when the schema is unknown).
_TIME_HELPERS = ("__sw_us", "__sw_pid", "__sw_ws", "__sw_we")
_SESSION_HELPERS = ("__sw_us", "__sw_end", "__sw_pid", "__sw_new", "__sw_sid", "__sw_ws", "__sw_we")
_SESSION_MAX_HELPERS = ("__sw_us", "__sw_end", "__sw_pid", "__sw_rn", "__sw_s", "__sw_me", "__sw_sid",
                        "__sw_ws", "__sw_we")


# ------------------------------------------------------------------------------- compiler


class DuckDBCompiler(WindowCompiler):
    """Compiles each window TVF to a DuckDB derived table (GRAMMAR 1, ARCHITECTURE conventions)."""

    dialect = "duckdb"
    name = "duckdb"

    def window_relation(self, spec: WindowSpec) -> exp.Expr:
        form = spec.count_form
        if form is not None:
            inner = self._count_window(spec, form)
            helpers: tuple[str, ...] = ()
        else:
            builder: Callable[[WindowSpec], tuple[exp.Expr, tuple[str, ...]]] = {
                WindowKind.TUMBLE: self._tumble,
                WindowKind.HOP: self._hop,
                WindowKind.CUMULATE: self._cumulate,
                WindowKind.SESSION: self._session,
            }[spec.kind]
            inner, helpers = builder(spec)
        final = fill(_FINAL, D, body=inner)
        if spec.relation.columns is not None:
            columns: list[exp.Expr] = [col(c.name) for c in spec.relation.columns]
        else:
            columns = [exp.Star(except_=[exp.to_identifier(h) for h in helpers])]
        if form is not None:
            columns_after = [exp.alias_(exp.cast(exp.column("__sw_idx"), "BIGINT"), "window_index")]
        else:
            columns_after = []
        final.set("expressions", [*columns, *final.expressions, *columns_after])
        alias = exp.TableAlias(this=exp.to_identifier(spec.alias or DEFAULT_ALIAS))
        return exp.Subquery(this=final, alias=alias)

    # -- shared pieces ---------------------------------------------------------------------------
    def _source(self, spec: WindowSpec) -> exp.Expr:
        """The data relation as a FROM source (a subquery gets an alias if it has none)."""
        node = self.compile_relation(spec)
        if isinstance(node, exp.Query) and not isinstance(node, exp.Subquery):  # a bare SELECT/UNION
            node = node.subquery()
        if isinstance(node, exp.Subquery) and not node.alias:
            node = node.copy()
            node.set("alias", exp.TableAlias(this=exp.to_identifier("__sw_src")))
        return node

    def _partition_id(self, spec: WindowSpec) -> exp.Expr:
        """Sessions and count windows are per partition; time windows ignore PARTITION BY."""
        if not spec.partition_by or not (spec.kind is WindowKind.SESSION or spec.is_count_based):
            return num(0)
        order = [exp.Ordered(this=col(k), nulls_first=True) for k in spec.partition_by]
        return exp.Window(this=exp.DenseRank(), order=exp.Order(expressions=order))

    def _base(self, spec: WindowSpec) -> exp.Expr:
        return fill(_BASE, D, ts=col(spec.time_col), pid=self._partition_id(spec), src=self._source(spec))

    def _bucket(self, spec: WindowSpec, x: exp.Expr, width: int) -> exp.Expr:
        return fill(_BUCKET, D, x=x, w=num(width), offset=num(spec.offset))

    # -- time forms -----------------------------------------------------------------------------
    def _tumble(self, spec: WindowSpec) -> tuple[exp.Expr, tuple[str, ...]]:
        size = _extent(spec, spec.size)
        bucket = self._bucket(spec, exp.column("__sw_us"), size)
        return fill(_TUMBLE, D, base=self._base(spec), bucket=bucket, size=num(size)), _TIME_HELPERS

    def _hop(self, spec: WindowSpec) -> tuple[exp.Expr, tuple[str, ...]]:
        size, slide = _extent(spec, spec.size), _extent(spec, spec.slide)
        us = exp.column("__sw_us")
        first = self._bucket(spec, exp.Sub(this=us, expression=num(size)), slide)
        last = self._bucket(spec, us.copy(), slide)
        query = fill(_HOP, D, base=self._base(spec), first=first, last=last, slide=num(slide), size=num(size))
        return query, _TIME_HELPERS

    def _cumulate(self, spec: WindowSpec) -> tuple[exp.Expr, tuple[str, ...]]:
        size, step = _extent(spec, spec.size), _extent(spec, spec.step)
        us = exp.column("__sw_us")
        query = fill(_CUMULATE, D, base=self._base(spec), start=self._bucket(spec, us, size),
                      step_start=self._bucket(spec, us.copy(), step), size=num(size), step=num(step))
        return query, _TIME_HELPERS

    def _session(self, spec: WindowSpec) -> tuple[exp.Expr, tuple[str, ...]]:
        ts = col(spec.time_col)
        us = exp.Anonymous(this="EPOCH_US", expressions=[ts.copy()])
        if isinstance(spec.gap, exp.Expr):  # dynamic: add the row's INTERVAL to its (UTC) time
            at = exp.Anonymous(this="MAKE_TIMESTAMP", expressions=[us])
            end: exp.Expr = exp.Anonymous(
                this="EPOCH_US", expressions=[exp.Add(this=at, expression=exp.paren(spec.gap.copy()))])
        elif isinstance(spec.gap, int):
            end = exp.Add(this=us, expression=num(spec.gap))
        else:
            raise SqlwinError.at(spec.node, "SESSION needs a gap")
        values = {"ts": ts, "end": end, "pid": self._partition_id(spec), "src": self._source(spec)}
        if spec.max_duration is None:
            return fill(_SESSION, D, **values), _SESSION_HELPERS
        return fill(_SESSION_MAX, D, maxd=num(spec.max_duration), **values), _SESSION_MAX_HELPERS

    # -- count forms ----------------------------------------------------------------------------
    def _count_window(self, spec: WindowSpec, form: CountForm) -> exp.Expr:
        numbered = fill(_NUMBERED, D, base=self._base(spec), rn=self._row_number(spec))
        if form is CountForm.TUMBLE_ROWS:
            tail = fill(_TUMBLE_ROWS, D, n=num(_rows(spec, spec.size)))
        elif form is CountForm.HOP_ROWS_ROWS:
            tail = fill(_HOP_ROWS_ROWS, D, m=num(_rows(spec, spec.slide)), n=num(_rows(spec, spec.size)))
        elif form is CountForm.HOP_ROWS_TIME:
            d = _extent(spec, spec.size)
            tail = fill(_HOP_ROWS_TIME, D, m=num(_rows(spec, spec.slide)), d=num(d), reach=num(abs(d - 1000)))
            if d < 1000:  # ts_r + d - 1 ms is before ts_r: a window shorter than 1 ms holds no row
                frame = next(f for f in tail.find_all(exp.WindowSpec) if f.args.get("end_side") == "FOLLOWING")
                frame.set("end_side", "PRECEDING")
        else:
            s = _extent(spec, spec.slide)
            bucket = self._bucket(spec, exp.column("__sw_us"), s)
            tail = fill(_HOP_TIME_ROWS, D, bucket=bucket, s=num(s), n=num(_rows(spec, spec.size)))
        # One WITH: the numbering CTEs, then the form's own CTEs, then its final SELECT.
        ctes = [*numbered.args["with_"].expressions, *tail.args["with_"].expressions]
        tail.set("with_", exp.With(expressions=ctes))
        return tail

    def _row_number(self, spec: WindowSpec) -> exp.Expr:
        """0-based ordinal per partition: ts, then every other column in schema order,
        ascending, NULLS FIRST (ARCHITECTURE: identical on every backend)."""
        if spec.relation.columns is None:
            raise SqlwinError.at(spec.node, "count windows need the schema of their input relation "
                                            "(to order rows deterministically)")
        order = [exp.Ordered(this=exp.column("__sw_us"), nulls_first=True)]
        order += [exp.Ordered(this=col(name), nulls_first=True) for name in spec.tiebreak_columns]
        window = exp.Window(this=exp.RowNumber(), partition_by=[exp.column("__sw_pid")],
                            order=exp.Order(expressions=order))
        return exp.Sub(this=window, expression=num(1))


def _extent(spec: WindowSpec, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise SqlwinError.at(spec.node, f"{spec.kind.value} expects a positive duration here")
    return value


def _rows(spec: WindowSpec, value: object) -> int:
    if not isinstance(value, Rows) or value.n <= 0:
        raise SqlwinError.at(spec.node, f"{spec.kind.value} expects ROWS n with n > 0 here")
    return value.n
