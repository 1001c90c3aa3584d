"""What the micro-batch operator's collaborators see of it, and of the query it runs.

The window assigners (``assigner``, ``timewindows``, ``sessions``, ``maxsessions``, ``countwindows``), the
stored rows (``rowstore``), the outputs (``outputs``: panes and late rows), the evictor (``evictors``) and the fused
scan (``fusedscan``) work on one operator's micro-batch: they read its input, views, state, pane driver and
pane engine and hand rows back to it.
They are given the operator typed as ``OperatorContext``, never ``MicroBatchOperator`` itself: the operator
imports them, so they do not import it (nor ``shape``, which imports the query checks of ``countwindows``
and ``evictors``); this module is the leaf both sides import. ``MicroBatchOperator`` (and replay's operator,
its subclass) is an ``OperatorContext``, ``StreamingShape`` a ``QueryShape``, the pane engines
(``engines``) ``PaneEngine``s, ``rowstore.StoredRows`` a ``RowStore``, ``batchinput.BatchInput`` a
``BatchReader``: ``tests/test_layout.py`` checks that each defines every member, and that the collaborators
use no other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sqlglot import exp

    from sqlwin.backends.spark_batch import SparkBatchCompiler
    from sqlwin.core.panes import PaneDriver, WindowKey, WindowState
    from sqlwin.plan.statements import CreateReplayStream, CreateStream, WindowedQuery
    from sqlwin.plan.windows import WindowSpec
    from sqlwin.streaming.committer import Commit
    from sqlwin.streaming.partials import Decomposition
    from sqlwin.streaming.state import StateStore


@dataclass(frozen=True)
class Views:
    """Temp view names of one streaming table (unique per table: several may run in one session)."""

    batch: str  # the micro-batch's rows, read where the query reads the stream
    fired: str
    rows: str
    relation: str

    @property
    def annotated(self) -> str:
        """The micro-batch's rows with their windows and ``__status`` (NULL: kept; else why dropped)."""
        return f"{self.batch}_annotated"

    def batch_of(self, index: int) -> str:
        """The micro-batch rows of the query's ``index``-th stream."""
        return self.batch if index == 0 else f"{self.batch}_{index}"

    @classmethod
    def for_table(cls, tag: str) -> Views:
        return cls(f"__sqlwin_batch_{tag}", f"__sqlwin_fired_{tag}", f"__sqlwin_rows_{tag}", f"__sqlwin_panes_{tag}")


class QueryShape(Protocol):
    """A streaming query, analysed (``shape.StreamingShape``), as the query checks and collaborators read it."""

    query: WindowedQuery
    stream: CreateStream | CreateReplayStream
    window: WindowSpec | None  # None: the global window
    carrier: exp.Select
    source_alias: str
    keys: list[exp.Expr]
    aggregated: bool
    streams: list  # every stream the query reads (``stream`` is the first), or none: just ``stream``
    processing_time: bool
    top_rows: Any  # ``shape.TopRows``: the only rows a pane can output, where the statement keeps a window's top
    text: str  # the statement as written: the user's names, which an error may speak of

    @property
    def time_column(self) -> str: ...

    @property
    def lateness(self) -> int: ...


class PaneQueries(Protocol):
    """The Spark SQL of the operator's micro-batches (``panequery.PaneQuery``) that the collaborators run."""

    assign_sql: str
    key_json_sql: str
    compiler: SparkBatchCompiler
    decomposition: Decomposition | None

    def session_partials_sql(self, decomposition: Decomposition) -> str: ...


class PaneEngine(Protocol):
    """Which panes a micro-batch fires (``engines.WindowStates``, ``engines.ColumnarEngine``), as the operator
    and its assigners use it; its state is committed with the micro-batch (``committer.Durable``)."""

    def __len__(self) -> int: ...  # the open windows

    def accepted(self, *columns: Any) -> Any: ...  # new-row counts per window, in the form ``drive`` takes

    def drive(self, accepted: Any, batch: int, watermark: int, processing_time: int,
              token: int) -> tuple[Any, int]: ...  # (the panes fired, how many windows expired)

    changed: bool  # the last ``drive`` changed some window's state (the micro-batch must commit)

    def closed(self) -> Any: ...  # windows whose trigger finished (their late rows: window closed)

    def live_batches(self, stored: set[int]) -> set[int]: ...  # the stored micro-batches a later pane may read

    def any_due(self, watermark: int, processing_time: int) -> bool: ...

    def timers(self, now: int) -> tuple[list[int], list[int]]: ...  # (processing-time, event-time) timers

    def snapshot(self, commit: Commit) -> dict: ...

    def restore(self, commit: Commit) -> None: ...


class RowStore(Protocol):
    """The rows micro-batches added to open windows (``rowstore.StoredRows``): kept by the assigners, read
    by the window function."""

    def write(self, rows: Any, batch: int, count: int) -> None: ...

    def write_arrow(self, table: Any, batch: int, count: int) -> None: ...

    def written(self, batch: int, count: int) -> None: ...

    def read(self, spark: Any, batches: set[int] | None) -> Any: ...


class BatchReader(Protocol):
    """A micro-batch's rows under the views the queries read, and its statistics (``batchinput.BatchInput``)."""

    def register(self, data: Any, processing_time: int) -> list: ...

    def statistics(self, row: Any) -> tuple[int, list[int | None]]: ...


class OperatorContext(Protocol):
    """One micro-batch operator (``operator.MicroBatchOperator``), as its collaborators use it."""

    shape: QueryShape
    query: PaneQueries
    views: Views
    store: StateStore
    driver: PaneDriver
    input: BatchReader
    panes: PaneEngine
    rows: RowStore
    streams: list  # the streams the query reads
    relation_columns: list[str]  # the window relation's columns (known once the schemas are: LATE ROWS TO)
    assigned_schema: Any  # Spark's schema of the assigned rows (``query.assign_sql``)
    rows_schema: Any  # Spark's schema of the stored rows
    relation_sql: str  # the pane relation over the stored rows
    pane_sql: str  # the user's query over the pane relation
    arrow_rows: bool  # whether pyarrow writes the stored rows (else Spark does)
    placement: Any  # where the columnar engine's windows live (``keyedstate.Placement``): driver or Spark
    current_processing_time: int

    @property
    def windows(self) -> dict[WindowKey, WindowState]: ...  # the open windows' pane state (per window)

    def partials_of(self, spark: Any, rows: Any) -> Any: ...

    def write_late(self, parts: list, batch: int, watermark: int, count: int) -> None: ...
