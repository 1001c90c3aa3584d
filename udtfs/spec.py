"""Per-spec vectorized arrow UDTFs: the FAST path of sqlwin's UDTF plan (spark_batch backend).

``register_for_spec(spark, spec)`` registers, once per distinct window parameters + input schema,
a ``pyspark.sql.functions.arrow_udtf`` named ``__sqlwin_w_<hash>`` with the window parameters baked
in and a fixed output schema. ``udtf_call_sql(spec, name, relation_sql)`` gives the FROM-clause text
that calls it. Calling convention (what the backend must generate):

- one TABLE argument whose columns are ``spec.relation.columns`` in order, plus, when
  ``spec.dynamic_gap``, one trailing BIGINT column ``__sqlwin_gap_us`` (the gap in microseconds;
  NULL or <= 0: the row belongs to no window), which the UDTF drops from its output;
- ``PARTITION BY (<spec.partition_by>)`` when the kind needs whole partitions (SESSION and count
  windows) and ``spec.partition_by`` is non-empty; ``WITH SINGLE PARTITION`` for those kinds
  without ``partition_by``; nothing for time-based TUMBLE/HOP/CUMULATE (row-local: each batch is
  assigned as it comes; a ``partition_by`` is irrelevant to them and is not sent);
- output: the relation's columns, then window_start, window_end, window_time with the type of
  the time column (TIMESTAMP or TIMESTAMP_NTZ) [, window_index BIGINT for count windows].

Rows with a NULL time belong to no window; NULL partition keys form a partition of their own
(Spark's PARTITION BY groups them). Whole-partition kinds buffer the partition's batches in
``eval`` and assign in ``terminate`` (Spark calls it once per PARTITION BY partition).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from sqlwin.plan.windows import Rows, TimeType, WindowSpec
from udtfs._worker import Params, make_udtf_class
from udtfs.shipping import ship_by_value

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

GAP_COLUMN = "__sqlwin_gap_us"
NAME_PREFIX = "__sqlwin_w_"


def _extent(e: int | Rows | None) -> int | None:
    return e.n if isinstance(e, Rows) else e


def params_of(spec: WindowSpec) -> Params:
    columns = spec.relation.columns
    if not columns:
        raise ValueError("register_for_spec needs the relation's columns (spec.relation.columns)")
    names = [c.name.lower() for c in columns]
    if spec.time_col.lower() not in names:
        raise ValueError(f"time column {spec.time_col!r} is not a column of the relation: {names}")
    ts_col = names.index(spec.time_col.lower())
    time_type = spec.time_type or TimeType(columns[ts_col].type.lower())
    return Params(kind=spec.kind.value, count_form=spec.count_form.value if spec.count_form else None,
                  ts_col=ts_col, ntz=time_type is TimeType.TIMESTAMP_NTZ, size=_extent(spec.size),
                  slide=_extent(spec.slide), step=spec.step, offset=spec.offset,
                  gap=None if spec.dynamic_gap else spec.gap, max_duration=spec.max_duration,
                  dynamic_gap=spec.dynamic_gap)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def return_ddl(spec: WindowSpec) -> str:
    p = params_of(spec)
    time_t = "timestamp_ntz" if p.ntz else "timestamp"
    cols = [f"{_quote(c.name)} {c.type}" for c in spec.relation.columns or ()]
    cols += [f"{name} {time_t}" for name in ("window_start", "window_end", "window_time")]
    if p.count_form is not None:
        cols.append("window_index bigint")
    return ", ".join(cols)


def udtf_name(spec: WindowSpec) -> str:
    """Deterministic: a hash of the window parameters and the input schema."""
    key = repr((params_of(spec), tuple((c.name, c.type.lower()) for c in spec.relation.columns or ())))
    return NAME_PREFIX + hashlib.sha1(key.encode()).hexdigest()[:16]


def register_for_spec(spark: SparkSession, spec: WindowSpec) -> str:
    """Register (once per session and distinct parameters + schema) the arrow UDTF for ``spec``;
    return its name. See the module docstring for how to call it (or ``udtf_call_sql``)."""
    from pyspark.sql.functions import arrow_udtf

    name = udtf_name(spec)
    done: set[str] = spark.__dict__.setdefault("_sqlwin_spec_udtfs", set())
    if name not in done:
        from sqlwin.workers import check_python_workers

        check_python_workers(spark)  # once per session: a clear error instead of a worker's stack trace
        ship_by_value()
        spark.udtf.register(name, arrow_udtf(make_udtf_class(params_of(spec)), returnType=return_ddl(spec)))
        done.add(name)
    return name


def udtf_call_sql(spec: WindowSpec, name: str, relation_sql: str) -> str:
    """The FROM-clause SQL calling UDTF ``name`` on ``relation_sql`` (a table name or a query,
    without outer parentheses; its columns as the module docstring says), e.g.
    ``__sqlwin_w_0123(TABLE(SELECT * FROM bids) PARTITION BY (`item`))``."""
    clause = ""
    if params_of(spec).whole_partition:
        if spec.partition_by:
            clause = " PARTITION BY (" + ", ".join(_quote(c) for c in spec.partition_by) + ")"
        else:
            clause = " WITH SINGLE PARTITION"
    return f"{name}(TABLE({relation_sql}){clause})"
