"""Every ``sql_examples/streaming/*.sql`` replay script returns the panes its ``-- expect:`` blocks list,
and the picture of the panes (``sqlwin replay --plot``, ``sqlwin.plotting``) draws exactly the replay's data.

The expected panes are hand-worked from GRAMMAR 3-4 (the comments of each file walk through every
micro-batch: the watermark in force, what is late or dropped, which window fires in which micro-batch).
A replay returns its panes as a table whose row order Spark does not keep, so rows are compared as
multisets; the files list them in micro-batch order, as ``sqlwin run`` prints them.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import sqlwin
from sqlwin import cli, plotting
from sqlwin.core.panes import MAX_TIME, MIN_TIME
from tests.test_examples import expectations, render, rows_of

STREAMING = Path(__file__).resolve().parent.parent / "sql_examples" / "streaming"
FILES = sorted(STREAMING.glob("*.sql"))
REQUIRED = {"tumble_lateness.sql", "hop_default.sql", "cumulate.sql", "session_merge.sql",
            "global_every_2_rows.sql", "emit_final.sql", "early_late.sql", "dataflow_panes.sql"}


@pytest.fixture(autouse=True)
def own_streaming_root(tmp_path, monkeypatch):
    """Replay's scratch folders under this test's own root, not a ``./sqlwin_streaming`` other runs share."""
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "streaming"))


def test_every_streaming_example_is_there_and_well_formed():
    assert {f.name for f in FILES} >= REQUIRED
    for path in FILES:
        blocks = expectations(path.read_text(encoding="utf-8"))
        assert blocks, path.name
        for block in blocks:
            assert block.header and all(len(r) == len(block.header) for r in block.rows), f"{path.name}:{block.line}"
            if "micro_batch" in block.header:  # listed as a timeline
                at = block.header.index("micro_batch")
                batches = [int(r[at]) for r in block.rows]
                assert batches == sorted(batches), f"{path.name}:{block.line}: rows not in micro-batch order"


@pytest.mark.slow
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_streaming_example(spark, path):
    text = path.read_text(encoding="utf-8")
    expected = expectations(text)
    spark.conf.set("sqlwin.file_dir", str(STREAMING))
    results = [r for r in sqlwin.run_script(spark, text) if r.dataframe is not None and r.dataframe.columns]
    assert len(results) == len(expected), f"{path.name}: {len(results)} queries, {len(expected)} expect blocks"
    for result, want in zip(results, expected, strict=True):
        where = f"{path.name}:{want.line}"
        assert result.dataframe.columns == want.header, where
        assert sorted(rows_of(result.dataframe)) == sorted(want.rows), where


def at(text: str) -> int:
    """Epoch micros of ``2020-04-15 <text>`` (UTC)."""
    moment = dt.datetime.fromisoformat(f"2020-04-15 {text}").replace(tzinfo=dt.timezone.utc)
    return int(moment.timestamp()) * 1_000_000


@pytest.mark.slow
def test_plotted_data_is_the_replay(spark, tmp_path):
    """Panes, watermark steps, arrivals and dropped rows drawn for tumble_lateness.sql, hand-worked."""
    path = STREAMING / "tumble_lateness.sql"
    text = path.read_text(encoding="utf-8")
    png = tmp_path / "panes.png"
    [picture] = plotting.plot_panes(spark, text, str(png))
    assert png.stat().st_size > 20_000
    want = expectations(text)[0]
    assert sorted([render(p[c]) for c in want.header] for p in picture.panes) == sorted(want.rows)
    assert picture.value_column == "total" and "allowed lateness 5 minute" in picture.title
    # W in force per numbered micro-batch (mb 3 and 6 are the no-data batches that fire; mb 8 the end)
    assert picture.watermark == [(0, MIN_TIME), (1, at("08:01")), (2, at("08:06")), (3, at("08:12")),
                                 (4, at("08:12")), (5, at("08:12")), (6, at("08:20")), (7, at("08:20")),
                                 (8, MAX_TIME)]
    assert [(b, ts.strftime("%H:%M"), s) for b, ts, s in picture.rows] == [
        (0, "08:02", "on time"), (1, "08:07", "on time"), (2, "08:13", "on time"), (4, "08:09", "late"),
        (5, "08:21", "on time"), (7, "08:04", "dropped")]
    assert [(r["item"], r["micro_batch"], r["reason"]) for r in picture.late_rows] == [("F", 7, "late")]


@pytest.mark.slow
def test_cli_replay_draws_accumulating_and_discarding(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "start_spark", lambda conf=None: spark)
    png = tmp_path / "dataflow.png"
    with plotting.recording() as runs:
        assert cli.main(["replay", str(STREAMING / "dataflow_panes.sql"), "--plot", str(png), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"panes drawn to {png}" in out
    assert png.stat().st_size > 30_000
    # the two panels: accumulating 16, 73, 105 and discarding 16, 57, 32, printed in micro-batch order
    assert [[r["total"] for r in run.result.orderBy("micro_batch").collect()] for run in runs] == [
        [16, 73, 105], [16, 57, 32]]
    assert out.index("│    16 │") < out.index("│    73 │") < out.index("│   105 │")
