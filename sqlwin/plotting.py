"""The picture of a replay's panes: event time against processing time, as in the Dataflow and Streaming 101
papers, so a user sees *when* each window fired and why (the watermark crossing its end, a count, lateness).

``plot_panes(spark, text, path)`` runs a script; every query over a replay stream becomes one panel (side
by side): x is processing time (sqlwin's micro-batch number), y event time; each row is a dot at the
micro-batch that brought it (hollow when it was behind the watermark, a red cross when dropped and written
to LATE ROWS TO), the watermark in force in each micro-batch is a step line, each window is a light band,
and each pane a bar over its window at the micro-batch that emitted it, labelled with its timing and value.

The data comes from the replay itself: the real operator's steps are recorded while the script runs
(``recording``, from ``sqlwin.streaming.trace``), so the micro-batch numbers and watermark steps drawn are
exactly the replay's.
matplotlib is an optional dependency (``pip install 'sqlwin[plot]'``).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from sqlwin.core.panes import MAX_TIME, MIN_TIME
from sqlwin.errors import SqlwinError
from sqlwin.streaming.trace import ReplayRun, recording

PANE_COLUMNS = ("window_start", "window_end", "window_time", "pane_index", "pane_timing", "is_final", "micro_batch")
BOUND_COLUMNS = ("window_start", "window_end", "window_time")
TIMING_COLORS = {"EARLY": "#1f77b4", "ON_TIME": "#2ca02c", "LATE": "#ff7f0e"}


@dataclass
class PanePicture:
    """What one panel shows; ``panes`` and ``late_rows`` are the replay's own result rows (as dicts)."""

    title: str
    time_column: str
    value_column: str | None
    rows: list[tuple[int, dt.datetime, str]]  # (micro_batch, ts, 'on time' | 'late' | 'dropped')
    watermark: list[tuple[int, int]]  # (micro_batch, W in force), numbered micro-batches only
    panes: list[dict[str, Any]] = field(default_factory=list)
    late_rows: list[dict[str, Any]] = field(default_factory=list)
    windowed: bool = True  # False: the global window, whose panes span the whole drawn range


def pane_pictures(spark: Any, text: str, value: str | None = None) -> list[PanePicture]:
    """Run the script ``text`` and return one picture per query over a replay stream."""
    from sqlwin.api import run_script  # the facade runs the script; it does not import this module

    with recording() as runs:
        for _ in run_script(spark, text):
            pass
    if not runs:
        raise SqlwinError("nothing to draw: the script has no query over a replay stream "
                          "(CREATE STREAM s FROM TABLE t ... then a windowed query over s)")
    return pictures_of(spark, runs, text, value)


def pictures_of(spark: Any, runs: list[ReplayRun], script: str, value: str | None = None) -> list[PanePicture]:
    """One picture per recorded replay of ``script``; a query that cannot be drawn is a SqlwinError
    positioned in ``script``."""
    pictures = []
    for run in runs:
        try:
            pictures.append(picture(spark, run, value))
        except SqlwinError as err:
            raise in_script(err, script, run.statement) from None
    return pictures


def in_script(err: SqlwinError, script: str, statement: str) -> SqlwinError:
    """``err``, positioned in ``statement``, re-positioned in the ``script`` that holds it."""
    at = script.find(statement) if statement else -1
    if err.line is None or at < 0:
        return err
    line, col = script.count("\n", 0, at), at - (script.rfind("\n", 0, at) + 1)
    return SqlwinError(err.message, err.line + line, (err.col or 1) + col if err.line == 1 else err.col)


def picture(spark: Any, run: ReplayRun, value: str | None = None) -> PanePicture:
    """The panel of one recorded replay: arrival of every row, watermark steps, panes and dropped rows.

    A pane is drawn over its window as far as the query selects its bounds (``window_start``, and
    ``window_end`` or ``window_time``): a bar over both, a tick at the one selected; a windowed query
    that selects none of them has no place in event time for its panes, and is a SqlwinError (positioned
    in the statement that ran it)."""
    shape = run.shape
    time_column = shape.time_column
    if shape.window is not None and not set(BOUND_COLUMNS) & {c.lower() for c in run.result.columns}:
        raise SqlwinError.at(shape.carrier, "cannot draw the panes of this query: it selects none of window_start, "
                                            "window_end, window_time, so its panes have no place in event time; "
                                            "select window_start and window_end")
    panes = [r.asDict() for r in run.result.collect()]
    panes.sort(key=lambda p: (p["micro_batch"], str(p.get("window_start")), p["pane_index"]))
    late = [r.asDict() for r in spark.table(shape.late_rows_to).collect()] if shape.late_rows_to else []
    data_batches = [s.micro_batch for s in run.steps if s.has_data]
    watermark = [(s.micro_batch, s.watermark) for s in run.steps if s.micro_batch is not None]
    in_force = dict(watermark)
    dropped = {(r["micro_batch"], r[time_column]) for r in late}
    rows = []
    for source_batch, ts in _arrivals(spark, shape.stream, time_column):
        batch = data_batches[source_batch]
        if batch is None or ts is None:
            continue
        w = in_force.get(batch, MIN_TIME)
        status = "dropped" if (batch, ts) in dropped else ("late" if w > MIN_TIME and _micros(ts) < w else "on time")
        rows.append((batch, ts, status))
    return PanePicture(_title(shape), time_column, value or _value_column(run.result), rows, watermark, panes, late,
                       windowed=shape.window is not None)


def pane_bounds(pane: dict[str, Any]) -> tuple[dt.datetime | None, dt.datetime | None]:
    """The (start, end) of a pane's window, as far as the query selected them (window_time = end - 1 ms)."""
    bounds = {k.lower(): v for k, v in pane.items() if k.lower() in BOUND_COLUMNS}
    end = bounds.get("window_end")
    if end is None and bounds.get("window_time") is not None:
        end = bounds["window_time"] + dt.timedelta(milliseconds=1)
    return bounds.get("window_start"), end


def _arrivals(spark: Any, stream: Any, time_column: str) -> list[tuple[int, dt.datetime]]:
    """(index of the micro-batch among the replay's data batches, ts) per row, cut as replay cuts them."""
    order = ", ".join(o.sql("spark") for o in stream.arrival_order)
    group = stream.micro_batch_by.sql("spark") if stream.micro_batch_by is not None else "__arrival"
    sql = f"""
        SELECT __b, __t FROM (
          SELECT __t, DENSE_RANK() OVER (ORDER BY __first) - 1 AS __b FROM (
            SELECT __t, MIN(__arrival) OVER (PARTITION BY __g) AS __first FROM (
              SELECT `{time_column}` AS __t, __arrival, {group} AS __g FROM (
                SELECT *, ROW_NUMBER() OVER (ORDER BY {order}) AS __arrival FROM `{stream.name}`))))"""
    return [(r["__b"], r["__t"]) for r in spark.sql(sql).collect()]


def _value_column(result: Any) -> str | None:
    """The query's first aggregate column: the first numeric output column that is not a pane column."""
    from pyspark.sql.types import NumericType

    for f in result.schema.fields:
        if f.name not in PANE_COLUMNS and isinstance(f.dataType, NumericType):
            return f.name
    return None


def _title(shape: Any) -> str:
    """The query's EMIT clause (or "default emission") and its allowed lateness: what the panel compares."""
    text = shape.query.node.sql(dialect="sqlwin")
    emit = re.search(r"\bEMIT\b.*", text, re.IGNORECASE | re.DOTALL)
    lateness = re.search(r"\b(?:ALLOWED\s+LATENESS|GRACE\s+PERIOD)\s+INTERVAL\s+'?(\d+)'?\s+(\w+)", text,
                         re.IGNORECASE)
    title = " ".join(emit.group(0).split()) if emit else "default emission"
    if lateness:
        title += f"\nallowed lateness {lateness.group(1)} {lateness.group(2).lower()}"
    return title


def _micros(ts: dt.datetime) -> int:
    epoch = dt.datetime(1970, 1, 1, tzinfo=ts.tzinfo)
    delta = ts - epoch
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _from_micros(us: int, like: dt.datetime) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=like.tzinfo) + dt.timedelta(microseconds=us)


def plot_panes(spark: Any, text: str, path: str, value: str | None = None) -> list[PanePicture]:
    """Run the script ``text`` and draw its replay queries' panes to ``path`` (PNG, SVG, PDF: by suffix)."""
    pictures = pane_pictures(spark, text, value)
    draw(pictures, path)
    return pictures


def draw(pictures: list[PanePicture], path: str) -> None:
    """One panel per picture, side by side, sharing the event-time axis."""
    try:
        import matplotlib
    except ImportError:
        raise SqlwinError("drawing panes needs matplotlib: pip install 'sqlwin[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, len(pictures), figsize=(6.2 * len(pictures), 5.6), sharey=True, squeeze=False)
    for ax, pic in zip(axes[0], pictures, strict=True):
        _panel(ax, pic, mdates)
    axes[0][0].set_ylabel("event time")
    axes[0][0].yaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    handles = [
        Line2D([], [], marker="o", ls="", color="black", label="row (on time)"),
        Line2D([], [], marker="o", ls="", mfc="white", color="black", label="row behind the watermark"),
        Line2D([], [], marker="X", ls="", color="#d62728", ms=9, label="row dropped (LATE ROWS TO)"),
        Line2D([], [], color="#9467bd", lw=2, label="watermark"),
        *[Line2D([], [], color=c, lw=5, label=f"{t} pane") for t, c in TIMING_COLORS.items()],
    ]
    fig.legend(handles=handles, loc="lower center", ncol=4, frameon=False, fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _panel(ax: Any, pic: PanePicture, mdates: Any) -> None:
    batches = [b for b, _ in pic.watermark] + [r[0] for r in pic.rows] + [p["micro_batch"] for p in pic.panes]
    x_max = max(batches, default=0) + 0.6
    times = [r[1] for r in pic.rows] + [t for p in pic.panes for t in pane_bounds(p) if t is not None]
    like = times[0] if times else dt.datetime(1970, 1, 1)
    low, high = min(times, default=like), max(times, default=like)
    pad = (high - low) * 0.08 or dt.timedelta(minutes=1)
    low, high = low - pad, high + pad * 2.5
    for start, end in sorted({b for b in map(pane_bounds, pic.panes) if None not in b}):
        ax.axhspan(start, end, color="#000000", alpha=0.05, lw=0)
        ax.axhline(end, color="#999999", lw=0.6, ls=":")
    # watermark: a step per numbered micro-batch, held across it
    xs, ys = [], []
    for batch, w in pic.watermark:
        if w <= MIN_TIME:
            continue
        y = high if w >= MAX_TIME else _from_micros(w, like)
        xs += [batch - 0.5, batch + 0.5]
        ys += [y, y]
    if xs:
        ax.plot(xs, ys, color="#9467bd", lw=2, zorder=2)
        if any(w >= MAX_TIME for _, w in pic.watermark):
            ax.annotate("W = +inf", (xs[-1], high), textcoords="offset points", xytext=(-4, -12), ha="right",
                        fontsize=8, color="#9467bd")
    for batch, ts, status in pic.rows:
        if status == "dropped":
            ax.plot(batch, ts, marker="X", color="#d62728", ms=10, zorder=4, ls="")
        else:
            ax.plot(batch, ts, marker="o", color="black", mfc="white" if status == "late" else "black", ms=6,
                    zorder=4, ls="")
    # panes: a bar over the window at the micro-batch that emitted it, labelled "<TIMING> <value>"
    seen: dict[tuple[int, Any], int] = {}
    for p in pic.panes:
        start, end = pane_bounds(p) if pic.windowed else (low, high)  # global window: the whole drawn range
        if start is None and end is None:
            continue
        n = seen.get((p["micro_batch"], end or start), 0)
        seen[(p["micro_batch"], end or start)] = n + 1
        x = p["micro_batch"] + 0.12 * n
        color = TIMING_COLORS.get(p["pane_timing"], "grey")
        if start is not None and end is not None:
            ax.plot([x, x], [start, end], color=color, lw=5, alpha=0.75, solid_capstyle="butt", zorder=3)
        else:  # one bound selected: a tick at it
            ax.plot(x, start or end, marker="_", color=color, ms=14, mew=5, alpha=0.75, zorder=3, ls="")
        end = end or start
        value = p.get(pic.value_column) if pic.value_column else None
        keys = [str(v) for k, v in p.items() if k not in PANE_COLUMNS and k != pic.value_column
                and isinstance(v, str)]
        label = f"{p['pane_timing']} {'NULL' if value is None else value}" + ("*" if p["is_final"] else "")
        if len(keys) == 1 and len({tuple(str(v) for k, v in q.items() if isinstance(v, str) and k not in PANE_COLUMNS)
                                   for q in pic.panes}) > 1:
            label = f"{keys[0]}: {label}"
        ax.annotate(label, (x, end), textcoords="offset points", xytext=(3, 3 + 9 * n), fontsize=8, color=color,
                    fontweight="bold" if p["is_final"] else "normal", rotation=0)
    ax.set_xlim(-0.6, x_max + 0.8)
    ax.set_ylim(low, high)
    ax.set_xticks(range(0, int(x_max) + 1))
    ax.set_xlabel("processing time (micro-batch)")
    ax.set_title(pic.title + (f"\nvalue: {pic.value_column}" if pic.value_column else ""), fontsize=10)
    ax.grid(axis="x", color="#eeeeee")
    ax.yaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
