"""Every ``sql_examples/*.sql`` runs through ``sqlwin.run_script`` and returns the rows that its
``-- expect:`` blocks list.

The expected rows are worked out by hand from the Flink documentation's Bid examples and the
definitions in GRAMMAR.md (the comments in each file show the reasoning); they are never a copy
of what the program printed. Every query of an example must be followed by an expect block, and
every ``EXPLAIN REWRITE`` must produce SQL that returns the rows expected of the next query.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import sqlwin

EXAMPLES = Path(__file__).resolve().parent.parent / "sql_examples"
FILES = sorted(EXAMPLES.glob("*.sql"))
REQUIRED = {
    "tumble_bids.sql", "tumble_offset.sql", "hop_bids.sql", "cumulate_bids.sql", "session_bids.sql",
    "session_dynamic_gap.sql", "topn_bids.sql", "dedup_bids.sql", "window_join.sql",
    "storm_count_windows.sql", "emit_batch.sql", "explain_rewrite.sql",
}


@dataclass
class Expected:
    line: int
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)


def expectations(text: str) -> list[Expected]:
    """The ``-- expect:`` blocks of a file: a header line, then one line per row, cells split on |."""
    blocks: list[Expected] = []
    current: Expected | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if re.fullmatch(r"--\s*expect:\s*", stripped):
            current = Expected(number, [])
            blocks.append(current)
        elif current is not None and stripped.startswith("--") and "|" in stripped:
            cells = [c.strip() for c in stripped[2:].split("|")]
            if current.header:
                current.rows.append(cells)
            else:
                current.header = cells
        else:
            current = None
    return blocks


def render(value: Any) -> str:
    """A cell as the expect blocks write it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return text + (f".{value.microsecond // 1000:03d}" if value.microsecond else "")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render(v) for v in value) + "]"
    if isinstance(value, (int, Decimal, str)):
        return str(value)
    return repr(value)


def is_explain_rewrite(statement: str) -> bool:
    code = re.sub(r"--[^\n]*", " ", statement)
    return re.match(r"\s*EXPLAIN\s+REWRITE\b", code, re.IGNORECASE) is not None


def rows_of(df: Any) -> list[list[str]]:
    return [[render(v) for v in row] for row in df.collect()]


def test_every_window_kind_has_an_example():
    assert {f.name for f in FILES} >= REQUIRED


def test_expect_blocks_are_well_formed():
    for path in FILES:
        for block in expectations(path.read_text(encoding="utf-8")):
            assert block.header, f"{path.name}:{block.line}: expect block without a header"
            assert all(len(r) == len(block.header) for r in block.rows), f"{path.name}:{block.line}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example(spark, path):
    text = path.read_text(encoding="utf-8")
    expected = expectations(text)
    assert expected, f"{path.name} has no -- expect: block"
    spark.conf.set("sqlwin.file_dir", str(EXAMPLES))

    queries: list[tuple[str, list[str], list[list[str]]]] = []
    rewrites: list[tuple[int, str]] = []  # (index of the next query, produced SQL)
    for result in sqlwin.run_script(spark, text):
        if is_explain_rewrite(result.statement):
            sql = result.message or result.dataframe.collect()[0][0]
            rewrites.append((len(queries), sql))
        elif result.dataframe is not None and result.dataframe.columns:
            df = result.dataframe
            queries.append((result.statement, df.columns, rows_of(df)))

    assert len(queries) == len(expected), f"{path.name}: {len(queries)} queries, {len(expected)} expect blocks"
    for (statement, columns, rows), want in zip(queries, expected, strict=True):
        where = f"{path.name}:{want.line}"
        assert columns == want.header, f"{where}: columns\n{statement}"
        assert rows == want.rows, f"{where}: rows\n{statement}"

    for index, sql in rewrites:
        assert not re.search(r"\b(TUMBLE|HOP|CUMULATE|SESSION)\s*\(|DESCRIPTOR", sql, re.IGNORECASE), sql
        assert rows_of(spark.sql(sql)) == expected[index].rows, f"{path.name}: EXPLAIN REWRITE output\n{sql}"
