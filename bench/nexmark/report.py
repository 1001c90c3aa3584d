"""Tables (rich, CSV, Markdown) and charts (matplotlib PNG) from the suite's measurements."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

from bench.nexmark.suite import RATIOS, Measurement


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


def rows(ms: Sequence[Measurement]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the wide table: one row per size and query, seconds per engine, then ratios."""
    engines = _engines(ms)
    num, den = RATIOS[0]
    header = ["events", "query", "window", *[f"{e} s" for e in engines], *[f"{a}/{b}" for a, b in RATIOS],
              f"{num}/{den} best", f"{num} compile s"]
    out = []
    for (events, query), row in _by_key(ms).items():
        ratios = [*(_ratio(row, a, b) for a, b in RATIOS), _ratio(row, num, den, "best")]
        kind = next(iter(row.values())).kind
        out.append([size_label(events), query, kind, *[_cell(row.get(e)) for e in engines],
                    *[f"{r:.2f}" if r is not None else "-" for r in ratios],
                    f"{row[num].compile_s:.2f}" if num in row and row[num].compile_s is not None else "-"])
    return header, out


def print_table(ms: Sequence[Measurement], console) -> None:
    from rich.table import Table

    header, body = rows(ms)
    table = Table(title="Nexmark batch: median seconds and ratios")
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
                    "compile_s", "detail"])
        for m in ms:
            w.writerow([m.events, m.query, m.kind, m.engine, m.status, m.rows,
                        f"{m.median:.4f}" if m.median is not None else "", len(m.times),
                        " ".join(f"{t:.4f}" for t in m.times),
                        f"{m.compile_s:.4f}" if m.compile_s is not None else "", m.detail])


def read_csv(path: Path) -> list[Measurement]:
    """The measurements of a saved run (to redraw its table and charts without running it again)."""
    with path.open(newline="") as f:
        return [Measurement(int(r["events"]), r["query"], r["window"], r["engine"], r["status"],
                            int(r["rows"]) if r["rows"] else None, [float(t) for t in r["times_s"].split()],
                            r["detail"], float(r["compile_s"]) if r.get("compile_s") else None)
                for r in csv.DictReader(f)]


def bar_chart(ms: Sequence[Measurement], events: int, path: Path, title: str) -> None:
    """Grouped bars of median seconds per query and engine, and the sqlwin/native ratio per query."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [m for m in ms if m.events == events]
    engines, table = _engines(mine), _by_key(mine)
    queries = [q for (e, q) in table if e == events]
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(11, 7.5), height_ratios=[3, 2], constrained_layout=True)
    width = 0.8 / max(len(engines), 1)
    for i, eng in enumerate(engines):
        ys = [table[(events, q)].get(eng) for q in queries]
        vals = [m.median if m is not None and m.median is not None else 0.0 for m in ys]
        bars = ax.bar([x + (i - (len(engines) - 1) / 2) * width for x in range(len(queries))], vals, width, label=eng)
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
    ax.set_xticks(range(len(queries)), queries, rotation=15, fontsize=8)
    ax.set_ylabel("median seconds (lower is better)")
    ax.set_title(title)
    ax.legend()
    num, den = RATIOS[0]
    ratios = [_ratio(table[(events, q)], num, den) for q in queries]
    bars = ax2.bar(range(len(queries)), [r or 0.0 for r in ratios], 0.6, color="tab:blue")
    ax2.bar_label(bars, labels=[f"{r:.2f}" if r else "n/a" for r in ratios], fontsize=8)
    ax2.axhline(1.0, color="black", linewidth=0.8)
    ax2.axhline(1.1, color="tab:red", linewidth=0.8, linestyle="--", label="1.1x target")
    ax2.set_xticks(range(len(queries)), queries, rotation=15, fontsize=8)
    ax2.set_ylabel(f"{num} / {den} time")
    ax2.legend(fontsize=8)
    fig.savefig(path, dpi=90)
    plt.close(fig)


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
                ax.plot(*zip(*pts, strict=True), marker="o", label=eng)
        if len(sizes) > 1:  # the linear-cost reference through the first native point
            base = table.get((sizes[0], q), {}).get("native")
            if base is not None and base.median is not None:
                ax.plot(sizes, [base.median * s / sizes[0] for s in sizes], color="grey", linestyle=":",
                        linewidth=0.8, label="linear")
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
