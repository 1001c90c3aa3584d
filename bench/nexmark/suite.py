"""The Nexmark suite: queries, the engines that run them, the equality check and the timed rounds.

Extension points:
- ``ENGINES``: name -> ``Engine`` (``bench.nexmark.engines``: batch; ``bench.nexmark.streams``: streaming). An
  engine runs a ``Query`` to completion (``run``, timed) and returns its full result for the check
  (``result``), which must equal its ``reference`` engine's (``duckdb`` for batch engines, ``expected`` for
  streaming ones) before a timing counts.
- ``Query.engines``: which engines run that query; a query with a ``stream`` form (the hand-written Structured
  Streaming job, how its final panes are found, its streaming text where it differs) runs the streaming engines
  too.
- ``RATIOS``: the (numerator, denominator) engine pairs printed and saved as ratios.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.nexmark import flink_stream, native, native_stream, streams
from bench.nexmark.engines import (  # noqa: F401  (the suite's public names)
    REFERENCE,
    TABLES,
    Context,
    DuckDB,
    Engine,
    NativeSpark,
    SparkEngine,
    SqlwinSpark,
    register_tables,
)

QUERY_DIR = Path(__file__).parent / "queries"
BATCH_ENGINES = ("sqlwin", "native", "duckdb")
STREAM_ENGINES = ("sqlwin-stream", "native-stream", "flink-stream", "replay")
RATIOS: list[tuple[str, str]] = [("sqlwin", "native"), ("sqlwin", "duckdb"), ("sqlwin-stream", "native-stream"),
                                 ("sqlwin-stream", "flink-stream"), ("replay", "sqlwin")]


@dataclass(frozen=True)
class StreamForm:
    """How a query runs over a stream: the hand-written Structured Streaming job (None: ``native_skip`` says why
    there is none), which columns name a window and key when its panes update (early/late firings: the last
    pane is the result), and the streaming text when sqlwin streaming runs another form of the batch query
    (a file under ``queries/streaming/``; default: the batch text)."""

    native: native_stream.NativeStream | None
    final_keys: tuple[str, ...] = ()
    native_skip: str = ""
    text: str | None = None


@dataclass
class Query:
    """One benchmark query: its sqlwin text (a file under ``queries/``) and its native Spark version."""

    name: str
    kind: str  # the window kind it exercises, for the table
    native: native.Native
    stream: StreamForm | None = None  # None: sqlwin streaming does not run it (see the README)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def engines(self) -> tuple[str, ...]:
        return BATCH_ENGINES + (STREAM_ENGINES if self.stream else ())

    @property
    def path(self) -> Path:
        return QUERY_DIR / f"{self.name}.sql"

    @property
    def sql(self) -> str:
        return self.path.read_text()

    @property
    def stream_sql(self) -> str:
        """The text the streaming engines run (and ``expected`` runs over the kept rows)."""
        if self.stream is not None and self.stream.text is not None:
            return (QUERY_DIR / "streaming" / self.stream.text).read_text()
        return self.sql


WINDOW_AUCTION = ("window_start", "window_end", "auction")
QUERIES: list[Query] = [
    Query("q5_hot_items", "HOP", native.q5_hot_items, StreamForm(native_stream.q5_hot_items)),
    # q7 streams as a window join (the bids' TUMBLE joined with the window's MAX): its batch form, the bids
    # joined to the window MAX by a time range (Flink's interval join), is batch only in sqlwin (README)
    Query("q7_highest_bid", "TUMBLE", native.q7_highest_bid,
          StreamForm(native_stream.q7_highest_bid, text="q7_highest_bid.sql")),
    Query("q8_new_users", "TUMBLE join", native.q8_new_users, StreamForm(native_stream.q8_new_users)),
    Query("q11_user_sessions", "SESSION", native.q11_user_sessions, StreamForm(native_stream.q11_user_sessions)),
    Query("cumulate_channel", "CUMULATE", native.cumulate_channel, StreamForm(native_stream.cumulate_channel)),
    Query("count_window", "ROWS 10", native.count_window, StreamForm(native_stream.count_window)),
    Query("topn_auctions", "Top-N", native.topn_auctions, StreamForm(native_stream.topn_auctions)),
    Query("trigger_early_late", "EMIT early/late", native.trigger_early_late,
          StreamForm(native_stream.trigger_early_late, final_keys=WINDOW_AUCTION)),
]

ENGINES: dict[str, Engine] = ({e.name: e for e in (SqlwinSpark(), NativeSpark(), DuckDB())} | streams.ENGINES
                               | {"flink-stream": flink_stream.FlinkStream()})


# ---- the equality check -------------------------------------------------------------------------

def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Engine-neutral values, columns by position, rows sorted: timestamps as UTC micros, numbers as float."""
    cols: dict[str, pd.Series] = {}
    for i, name in enumerate(df.columns):
        s = df.iloc[:, i]
        if isinstance(s.dtype, pd.DatetimeTZDtype):
            s = s.dt.tz_convert("UTC").dt.tz_localize(None)
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            s = s.astype("datetime64[us]").astype("int64").astype("float64").where(s.notna())
        elif pd.api.types.is_bool_dtype(s.dtype):
            s = s.astype("float64")
        elif pd.api.types.is_numeric_dtype(s.dtype) or s.map(lambda v: hasattr(v, "as_tuple")).any():
            s = pd.to_numeric(s, errors="coerce").astype("float64")
        else:
            s = s.astype("string")
        cols[f"c{i}_{name}"] = s.reset_index(drop=True)
    out = pd.DataFrame(cols)
    if out.empty:
        return out
    keys = pd.DataFrame({c: (v.round(6) if v.dtype == "float64" else v) for c, v in out.items()})
    order = keys.sort_values(list(keys.columns), na_position="first", kind="mergesort").index
    return out.loc[order].reset_index(drop=True)


def differences(got: pd.DataFrame, want: pd.DataFrame) -> str | None:
    """None when equal (floats within 1e-9 relative), else a short description of the first difference."""
    if got.shape[1] != want.shape[1]:
        return f"{got.shape[1]} columns, expected {want.shape[1]}"
    if len(got) != len(want):
        return f"{len(got)} rows, expected {len(want)}"
    for (gc, g), (_, w) in zip(got.items(), want.items(), strict=True):
        if g.dtype == "float64" and w.dtype == "float64":
            bad = ~(np.isclose(g.to_numpy(), w.to_numpy(), rtol=1e-9, atol=1e-9, equal_nan=True))
        else:
            bad = (g.astype("string").fillna("<NULL>") != w.astype("string").fillna("<NULL>")).to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            return (f"{int(bad.sum())} rows differ in column {gc}; first at sorted row {i}: "
                    f"{got.iloc[i].to_dict()} != {want.iloc[i].to_dict()}")
    return None


# ---- one query at one size: check, then interleaved timed rounds --------------------------------

@dataclass
class Measurement:
    events: int
    query: str
    kind: str
    engine: str
    status: str  # "ok", "mismatch", "error"
    rows: int | None = None
    times: list[float] = field(default_factory=list)
    detail: str = ""
    compile_s: float | None = None  # of ``times``, what went to compiling (sqlwin: parse, plan, rewrite)
    load: float | None = None  # the machine's 1-minute load average while it was measured (a shared machine)

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    @property
    def best(self) -> float | None:
        """The fastest round: on a loaded machine, the run least disturbed by other work."""
        return min(self.times) if self.times else None


def measure(query: Query, ctx: Context, rounds: int, engines: dict[str, Engine] | None = None,
            say: Callable[[str], None] = print, stream_rounds: int | None = None) -> list[Measurement]:
    """Check that every engine returns its reference's result, then time the ones that do.

    The check run is also the warm-up. Rounds are interleaved (one run of each engine per round, in
    alternating order) so a busy moment on a shared machine hits every engine alike; the medians are
    reported. Streaming engines run in the first ``stream_rounds`` rounds only (default: all; they take
    far longer); with ``stream_rounds`` 0 their checked run is their one timing (for the largest sizes: it
    then includes the warm-up and reading the final panes back, seconds against tens of minutes). A
    reference engine that is not timed (``expected``) runs for the check only.
    """
    engines = engines or ENGINES
    loads = [os.getloadavg()[0]]
    names = [n for n in query.engines if n in engines and engines[n].timed]
    for n in list(names):
        if why := engines[n].skip(query):
            say(f"  {n}: skipped: {why}")
            names.remove(n)
    stream_rounds = rounds if stream_rounds is None else stream_rounds
    for n in names:
        if engines[n].self_timed:  # its timed runs are made by the process that makes its checked result
            engines[n].rounds = stream_rounds if engines[n].mode == "streaming" else rounds
    ms = {n: Measurement(ctx.events, query.name, query.kind, n, "ok") for n in names}
    results: dict[str, pd.DataFrame] = {}
    failures: dict[str, str] = {}
    checked_in: dict[str, float] = {}

    def check_run(n: str) -> None:
        start = time.perf_counter()
        try:
            results[n] = normalize((engines.get(n) or ENGINES[n]).result(query, ctx))
            checked_in[n] = time.perf_counter() - start
            say(f"  {n}: {len(results[n])} rows ({checked_in[n]:.1f}s)")
        except Exception as exc:  # keep going: the report says which engine failed and why
            failures[n] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"

    for n in names:
        check_run(n)
        if n in failures:
            ms[n].status, ms[n].detail = "error", failures[n]
        else:
            ms[n].rows = len(results[n])
    for n in names:
        ref = engines[n].reference
        if ms[n].status != "ok" or ref == n:
            continue
        if ref not in results and ref not in failures:
            check_run(ref)
        if ref in failures:
            ms[n].status, ms[n].detail = "error", f"reference {ref} failed: {failures[ref]}"
        elif diff := differences(results[n], results[ref]):
            ms[n].status, ms[n].detail = "mismatch", f"vs {ref}: {diff}"
    for m in ms.values():
        if m.status != "ok":
            say(f"[bold red]{query.name}: {m.engine} {m.status.upper()}[/] {m.detail}")
    timed = [n for n in names if ms[n].status == "ok"]
    if stream_rounds == 0:
        for n in timed:
            if engines[n].mode == "streaming":
                ms[n].times.append(engines[n].checked_s if engines[n].self_timed else checked_in[n])
                ms[n].detail = "timed: the checked run"
    for r in range(max(rounds, stream_rounds)):
        now = [n for n in timed if r < (stream_rounds if engines[n].mode == "streaming" else rounds)]
        for n in now if r % 2 == 0 else now[::-1]:  # alternate the order: no engine always runs first
            start = time.perf_counter()
            try:
                took = engines[n].run(query, ctx)
            except Exception as exc:  # a long run keeps going; this engine's timings stop here
                ms[n].status, ms[n].detail = "error", f"round {r + 1}: {type(exc).__name__}: {str(exc)[:300]}"
                say(f"[bold red]{query.name}: {n} ERROR in round {r + 1}[/] {ms[n].detail}")
                timed.remove(n)
                continue
            ms[n].times.append(took if engines[n].self_timed else time.perf_counter() - start)
        loads.append(os.getloadavg()[0])
        say(f"  {query.name} round {r + 1}: "
            + "  ".join(f"{n} {ms[n].times[-1]:.2f}s" for n in now if n in timed) + f" (load {loads[-1]:.1f})")
    for n in timed:
        ms[n].compile_s = engines[n].compile_time(query, ctx)
    for m in ms.values():
        m.load = statistics.median(loads)
    return list(ms.values())
