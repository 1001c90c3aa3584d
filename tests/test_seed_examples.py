"""The seed documents' trigger and windowing examples, written in sqlwin SQL (sql_examples/triggers/), replayed.

Each file runs as tests/test_examples.py runs sql_examples/*.sql (its ``-- expect:`` blocks), and its
panes are also checked against the document's own tables, typed in below from the document, so that an
expect block cannot drift from its source.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import sqlwin
from tests.test_examples import expectations, render

pytestmark = pytest.mark.slow

TRIGGERS = Path(__file__).resolve().parent.parent / "sql_examples" / "triggers"
FILES = sorted(TRIGGERS.glob("*.sql"))

# Dataflow triggers document, "累積モード" / "破棄モード": key X, a pane every 3 elements.
DATAFLOW = {
    "ACCUMULATING": [[5, 8, 3], [5, 8, 3, 15, 19, 23], [5, 8, 3, 15, 19, 23, 9, 13, 10]],
    "DISCARDING": [[5, 8, 3], [15, 19, 23], [9, 13, 10]],
}
# ... and its averages per firing (Combine.perKey), to 3 decimals (the document prints 5.3 for 16 / 3)
DATAFLOW_AVERAGES = {"ACCUMULATING": [5.333, 12.167, 11.667], "DISCARDING": [5.333, 19.0, 10.667]}

# Storm windowing document, "Watermarks": what is evaluated at w1 = 6:00:31 and at w2 = 8:00:34.
STORM_W1 = {("05:59:50", "06:00:10"): ["e1", "e2", "e3"], ("06:00:00", "06:00:20"): ["e1", "e2", "e3", "e4"],
            ("06:00:10", "06:00:30"): ["e4", "e5"]}
STORM_W2 = {("06:00:20", "06:00:40"): ["e5", "e6"], ("06:00:30", "06:00:50"): ["e6"],
            ("08:00:10", "08:00:30"): ["e7", "e8", "e9"]}


def run_file(spark, path: Path) -> list[tuple[list[str], list]]:
    """(columns, rows) of every query of the file, in order."""
    out = []
    for result in sqlwin.run_script(spark, path.read_text(encoding="utf-8")):
        if result.dataframe is not None and result.dataframe.columns:
            out.append((result.dataframe.columns, result.dataframe.collect()))
    return out


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory) -> dict[str, list[tuple[list[str], list]]]:
    """Every file's results, replayed once, with replay state under a folder of this module's own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SQLWIN_STREAMING_DIR", str(tmp_path_factory.mktemp("seed_streaming")))
        return {path.name: run_file(spark, path) for path in FILES}


def test_both_seed_examples_exist():
    assert {f.name for f in FILES} >= {"dataflow_every_3_elements.sql", "storm_event_time_lag.sql"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_expect_blocks(results, path):
    expected = expectations(path.read_text(encoding="utf-8"))
    got = results[path.name]
    assert len(got) == len(expected) > 0
    for (columns, rows), want in zip(got, expected, strict=True):
        assert columns == want.header, f"{path.name}:{want.line}"
        # a replay's panes come by micro_batch, unordered within one
        assert sorted([render(v) for v in r] for r in rows) == sorted(want.rows), f"{path.name}:{want.line}"


def test_dataflow_panes_are_the_documents(results):
    (_, acc), (_, disc) = results["dataflow_every_3_elements.sql"]
    for mode, unordered in (("ACCUMULATING", acc), ("DISCARDING", disc)):
        rows = sorted(unordered, key=lambda r: r["pane_index"])
        assert [r["values"] for r in rows] == DATAFLOW[mode], mode
        assert [r["average"] for r in rows] == DATAFLOW_AVERAGES[mode], mode
        assert [(r["pane_index"], r["pane_timing"], r["is_final"]) for r in rows] == \
            [(0, "EARLY", False), (1, "EARLY", False), (2, "EARLY", False)]


def test_storm_windows_are_the_documents(results):
    [(_, rows)] = results["storm_event_time_lag.sql"]

    def evaluated(batch: int) -> dict:
        return {(r["window_start"].strftime("%H:%M:%S"), r["window_end"].strftime("%H:%M:%S")): r["tuples"]
                for r in rows if r["micro_batch"] == batch}

    # the no-data micro-batch after each of the two arrivals (0: e1..e6, 2: e7..e10) fires what Storm lists
    assert evaluated(1) == STORM_W1
    assert evaluated(3) == STORM_W2
    assert {r["micro_batch"] for r in rows} == {1, 3, 4}
    # e10's windows are still open after w2: they fire only at the end of the table (micro-batch 4)
    assert {b for r in rows if "e10" in r["tuples"] for b in [r["micro_batch"]]} == {4}
    assert evaluated(4) == {("08:00:20", "08:00:40"): ["e7", "e8", "e9", "e10"], ("08:00:30", "08:00:50"): ["e10"]}
