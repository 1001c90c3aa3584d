"""Typed plans for whole statements (GRAMMAR sections 2-5).

``plan_statement`` in ``sqlwin.planner`` turns one parsed statement into exactly one of these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from sqlwin.plan.triggers import EmitSpec, EvictSpec, LatenessSpec
from sqlwin.plan.windows import WindowSpec


@dataclass(frozen=True)
class WatermarkSpec:
    """How a stream's watermark moves (GRAMMAR 3): max ``column`` minus ``delay`` (bounded out-of-orderness);
    or, punctuated (``where`` set), the largest ``expression`` over the rows ``where`` holds for; or, with
    ``lag`` set, each micro-batch's processing time minus the lag, whatever the rows say."""

    column: str
    delay: int  # microseconds; 0 for ``WATERMARK FOR ts AS ts``
    expression: exp.Expr | None = field(default=None, compare=False)  # punctuated: the marker rows' watermark
    where: exp.Expr | None = field(default=None, compare=False)  # punctuated: which rows are markers
    lag: int | None = None  # microseconds: ``PROCTIME() - INTERVAL lag``

    @property
    def punctuated(self) -> bool:
        return self.where is not None

    @property
    def follows_clock(self) -> bool:
        return self.lag is not None

    @property
    def from_rows(self) -> bool:
        """The bounded out-of-orderness form: every row moves it by its own ``column``."""
        return not self.punctuated and not self.follows_clock


@dataclass
class WindowedQuery:
    """A query whose FROM clauses may hold window TVFs, plus its streaming clauses.

    ``node`` is the statement AST; each ``WindowSpec.node`` is the TVF node inside it that a
    backend replaces with a derived table. ``global_window`` is an aggregation with an EMIT
    clause and no window TVF (GRAMMAR 2).
    """

    node: exp.Expr
    windows: list[WindowSpec] = field(default_factory=list)
    emit: EmitSpec = field(default_factory=EmitSpec)
    lateness: LatenessSpec = field(default_factory=LatenessSpec)
    evict: EvictSpec | None = None
    aggregated: bool = False
    global_window: bool = False
    streams: tuple[str, ...] = ()  # names of CREATE STREAM sources it reads (streaming query)


@dataclass(frozen=True)
class StreamColumn:
    name: str
    type: str | None  # None for computed columns
    expr: exp.Expr | None = None  # ``pt AS PROCTIME()`` or another computed column


@dataclass(frozen=True)
class Alignment:
    """``WITH WATERMARK ALIGNMENT GROUP 'group' MAX DRIFT interval`` (GRAMMAR 3)."""

    group: str
    drift: int  # microseconds
    node: exp.Expr | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CreateStream:
    name: str
    columns: tuple[StreamColumn, ...]
    watermark: WatermarkSpec | None
    proctime_column: str | None
    format: str  # json | csv | parquet | rate
    options: dict[str, str]
    idle_timeout: int | None  # microseconds
    node: exp.Expr | None = field(default=None, compare=False, repr=False)
    alignment: Alignment | None = None


@dataclass(frozen=True)
class CreateReplayStream:
    """``CREATE STREAM name FROM TABLE t ARRIVAL ORDER BY ... [MICRO BATCH BY e] WATERMARK ...``."""

    name: str
    source: exp.Expr
    arrival_order: tuple[exp.Expr, ...]
    micro_batch_by: exp.Expr | None
    watermark: WatermarkSpec
    processing_time_by: exp.Expr | None = None
    idle_timeout: int | None = None  # microseconds, on the PROCESSING TIME BY clock
    node: exp.Expr | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CreateStreamingTable:
    name: str
    format: str | None
    options: dict[str, str]
    query: WindowedQuery
    insert: bool = False  # INSERT INTO out <query>
    node: exp.Expr | None = None  # where the statement names the table (error positions)


@dataclass(frozen=True)
class ShowStreamingTables:
    pass


@dataclass(frozen=True)
class StopStreamingTable:
    name: str


@dataclass(frozen=True)
class DropStreamingTable:
    name: str
    purge: bool = False  # also delete its folders


@dataclass(frozen=True)
class Explain:
    rewrite: bool  # EXPLAIN REWRITE shows the produced SQL; EXPLAIN shows Spark's plan of it
    statement: object  # another plan


@dataclass(frozen=True)
class Passthrough:
    """Plain Spark SQL with nothing of sqlwin in it: sent to Spark as the user wrote it."""

    sql: str
    node: exp.Expr | None = None
