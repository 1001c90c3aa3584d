"""Tables (rich, CSV, Markdown) and charts (matplotlib PNG) from the suite's measurements."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

from bench.nexmark.suite import RATIOS, STREAM_ENGINES, Measurement

STREAMING = set(STREAM_ENGINES)


def size_label(events: int) -> str:
    for unit, div in (("M", 1_000_000), ("k", 1_000)):
        if events >= div and events % (div // 10 or 1) == 0:
            value = events / div
            return f"{value:g}{unit}"
    return str(events)


def _by_key(ms: Sequence[Measurement]) -> dict[tuple[int, str], dict[str, Measurement]]:
    out: dict[tuple[int, str], dict[str, Measurement]] = {}
    for m in ms:
        out.setdefault((m.events, m.query), {})[m.engine] = m
    return out


def _engines(ms: Sequence[Measurement]) -> list[str]:
    return list(dict.fromkeys(m.engine for m in ms))


def _cell(m: Measurement | None) -> str:
    if m is None:
        return "-"
    return f"{m.median:.2f}" if m.median is not None else m.status.upper()


def _ratio(row: dict[str, Measurement], num: str, den: str, stat: str = "median") -> float | None:
    a, b = row.get(num), row.get(den)
    x, y = (getattr(a, stat) if a else None), (getattr(b, stat) if b else None)
    return x / y if x is not None and y else None


def _pairs(ms: Sequence[Measurement]) -> list[tuple[str, str]]:
    """The ratios of ``RATIOS`` whose two engines both ran."""
    engines = set(_engines(ms))
    return [(a, b) for a, b in RATIOS if a in engines and b in engines]


def rows(ms: Sequence[Measurement]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the wide table: one row per size and query, seconds per engine, then ratios."""
    engines, pairs = _engines(ms), _pairs(ms)
    num, den = RATIOS[0]
    header = ["events", "query", "window", *[f"{e} s" for e in engines], *[f"{a}/{b}" for a, b in pairs],
              f"{num}/{den} best", f"{num} compile s"]
    out = []
    for (events, query), row in _by_key(ms).items():
        ratios = [*(_ratio(row, a, b) for a, b in pairs), _ratio(row, num, den, "best")]
        kind = next(iter(row.values())).kind
        out.append([size_label(events), query, kind, *[_cell(row.get(e)) for e in engines],
                    *[f"{r:.2f}" if r is not None else "-" for r in ratios],
                    f"{row[num].compile_s:.2f}" if num in row and row[num].compile_s is not None else "-"])
    return header, out


def print_table(ms: Sequence[Measurement], console) -> None:
    from rich.table import Table

    header, body = rows(ms)
    table = Table(title="Nexmark: median seconds and ratios")
    for i, h in enumerate(header):
        table.add_column(h, justify="left" if i < 3 else "right")
    for r in body:
        table.add_row(*r)
    console.print(table)
    for m in ms:
        if m.status != "ok":
            console.print(f"[bold red]{size_label(m.events)} {m.query} {m.engine}: {m.status}[/] {m.detail}")


def markdown(ms: Sequence[Measurement]) -> str:
    header, body = rows(ms)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in body]
    return "\n".join(lines) + "\n"


def write_csv(ms: Sequence[Measurement], path: Path) -> None:
    """Long format: one line per size, query and engine, with every round's time."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["events", "query", "window", "engine", "status", "rows", "median_s", "rounds", "times_s",
                    "compile_s", "load1", "detail"])
        for m in ms:
            w.writerow([m.events, m.query, m.kind, m.engine, m.status, m.rows,
                        f"{m.median:.4f}" if m.median is not None else "", len(m.times),
                        " ".join(f"{t:.4f}" for t in m.times),
                        f"{m.compile_s:.4f}" if m.compile_s is not None else "",
                        f"{m.load:.1f}" if m.load is not None else "", m.detail])


def read_csv(path: Path) -> list[Measurement]:
    """The measurements of a saved run (to redraw its table and charts without running it again)."""
    with path.open(newline="") as f:
        return [Measurement(int(r["events"]), r["query"], r["window"], r["engine"], r["status"],
                            int(r["rows"]) if r["rows"] else None, [float(t) for t in r["times_s"].split()],
                            r["detail"], float(r["compile_s"]) if r.get("compile_s") else None,
                            float(r["load1"]) if r.get("load1") else None)
                for r in csv.DictReader(f)]


TARGETS = {("sqlwin", "native"): 1.1, ("sqlwin-stream", "native-stream"): 2.0}  # issue 9: batch, custom path
RATIO_COLORS = ("C7", "C8", "C9", "C5", "C6")


def color(engine: str) -> str:
    """One colour per engine in every chart."""
    known = ["sqlwin", "native", "duckdb", *STREAM_ENGINES]
    return f"C{known.index(engine)}" if engine in known else "C7"


def bar_chart(ms: Sequence[Measurement], events: int, path: Path, title: str) -> None:
    """Median seconds per query and engine (batch engines, then streaming engines), and the ratios to Spark."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [m for m in ms if m.events == events]
    table = _by_key(mine)
    groups = [(label, [e for e in _engines(mine) if (e in STREAMING) == streaming])
              for label, streaming in (("batch", False), ("streaming", True))]
    groups = [(label, engines) for label, engines in groups if engines]
    pairs = [p for p in _pairs(mine) if p[1] != "duckdb"]  # ratios to a Spark baseline
    heights = [3] * len(groups) + ([2] if pairs else [])
    fig, axes = plt.subplots(len(heights), 1, figsize=(11, 3.2 * len(heights) + 0.8), height_ratios=heights,
                             constrained_layout=True, squeeze=False)
    for ax, (label, engines) in zip(axes[:, 0], groups, strict=False):
        queries = [q for (e, q), row in table.items() if e == events and any(n in row for n in engines)]
        _bars(ax, queries, engines, [[_median(table[(events, q)].get(n)) for q in queries] for n in engines],
              [color(n) for n in engines])
        ax.set_ylabel(f"{label}: median s (lower is better)")
    axes[0, 0].set_title(title)
    if pairs:
        ax = axes[-1, 0]
        queries = [q for (e, q) in table if e == events]
        values = [[_ratio(table[(events, q)], a, b) for q in queries] for a, b in pairs]
        _bars(ax, queries, [f"{a} / {b}" for a, b in pairs], values, list(RATIO_COLORS[:len(pairs)]))
        ax.set_yscale("log")
        top = max((v for vals in values for v in vals if v), default=1.0)
        ax.set_ylim(top=max(top, 2.0) * 6)  # room for the legend above the bars
        ax.axhline(1.0, color="black", linewidth=0.8)
        for pair, target in TARGETS.items():
            if pair in pairs:
                ax.axhline(target, color=RATIO_COLORS[pairs.index(pair)], linewidth=0.8, linestyle="--",
                           label=f"target {target:g}x ({pair[0]})")
        ax.set_ylabel("time ratio (log)")
        ax.legend(fontsize=7, ncol=2)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _median(m: Measurement | None) -> float | None:
    return m.median if m is not None else None


def _bars(ax, queries: list[str], labels: list[str], values: list[list[float | None]], colors: list[str]) -> None:
    """Grouped bars (one group per query, one bar per label), each with its value; missing values are gaps."""
    width = 0.8 / max(len(labels), 1)
    for i, (label, vals) in enumerate(zip(labels, values, strict=True)):
        xs = [x + (i - (len(labels) - 1) / 2) * width for x in range(len(queries))]
        bars = ax.bar(xs, [v or 0.0 for v in vals], width, label=label, color=colors[i])
        ax.bar_label(bars, labels=[f"{v:.2f}" if v else "" for v in vals], fontsize=6, padding=1)
    ax.set_xticks(range(len(queries)), queries, rotation=12, fontsize=8)
    ax.legend(fontsize=7, ncol=3)


def scaling_chart(ms: Sequence[Measurement], path: Path, title: str) -> None:
    """Median seconds against events, one panel per query, one line per engine (log-log: slope 1 is linear)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    engines, table = _engines(ms), _by_key(ms)
    queries = list(dict.fromkeys(q for (_, q) in table))
    sizes = sorted({e for (e, _) in table})
    cols = 4
    nrows = math.ceil(len(queries) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3.2 * nrows), squeeze=False, constrained_layout=True)
    for ax, q in zip(axes.flat, queries, strict=False):
        for eng in engines:
            pts = [(s, table[(s, q)][eng].median) for s in sizes
                   if eng in table.get((s, q), {}) and table[(s, q)][eng].median is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", label=eng, color=color(eng))
        if len(sizes) > 1:  # linear cost: slope 1, through the first point of each Spark baseline
            for base_name in ("native", "native-stream"):
                base = table.get((sizes[0], q), {}).get(base_name)
                if base is not None and base.median is not None:
                    ax.plot(sizes, [base.median * s / sizes[0] for s in sizes], color="grey", linestyle=":",
                            linewidth=0.8, label="linear" if base_name == "native" else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [size_label(s) for s in sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_title(q, fontsize=9)
        ax.set_xlabel("events", fontsize=8)
        ax.set_ylabel("median s", fontsize=8)
    for ax in list(axes.flat)[len(queries):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def growth(ms: Sequence[Measurement]) -> str:
    """Markdown: per query and engine, the median at each size and the exponent of time against events
    (``log(t_last / t_first) / log(n_last / n_first)``: 1 is linear, below 1 fixed costs weigh, above 1 the
    cost per event grows)."""
    table = _by_key(ms)
    sizes = sorted({e for (e, _) in table})
    header = ["query", "engine", *[f"{size_label(s)} s" for s in sizes], "exponent"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for q in dict.fromkeys(q for (_, q) in table):
        for eng in _engines(ms):
            ts = [_median(table.get((s, q), {}).get(eng)) for s in sizes]
            known = [(s, t) for s, t in zip(sizes, ts, strict=True) if t]
            if not known:
                continue
            exponent = "-"
            if len(known) > 1:
                (s0, t0), (s1, t1) = known[0], known[-1]
                exponent = f"{math.log(t1 / t0) / math.log(s1 / s0):.2f}"
            lines.append("| " + " | ".join([q, eng, *[f"{t:.2f}" if t else "-" for t in ts], exponent]) + " |")
    return "\n".join(lines) + "\n"


def load_summary(ms: Sequence[Measurement]) -> str:
    """The load the measurements ran under (medians per query of the 1-minute load average)."""
    loads = sorted(m.load for m in ms if m.load is not None)
    if not loads:
        return "load during the run not recorded"
    mid = loads[len(loads) // 2]
    return f"1-minute load average during the run {loads[0]:.1f} to {loads[-1]:.1f} (median {mid:.1f})"


def rounds_summary(ms: Sequence[Measurement]) -> str:
    """How many timed rounds the medians are of, per kind of engine (streaming engines may run fewer)."""
    def counts(streaming: bool) -> str:
        found = sorted({len(m.times) for m in ms if m.times and (m.engine in STREAMING) == streaming})
        return "/".join(map(str, found))

    batch, stream = counts(False), counts(True)
    text = f"medians of {batch or stream} interleaved rounds"
    return text + (f" (streaming engines: {stream})" if batch and stream and stream != batch else "")
