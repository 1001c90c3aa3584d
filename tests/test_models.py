"""`sqlwin run models/`: dbt-style model folders on the shared in-process Spark session."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from sqlwin.errors import SqlwinError
from sqlwin.models import run_models

EXAMPLE = Path(__file__).resolve().parents[1] / "sql_examples" / "models"
T = datetime.datetime


def _rows(spark, name: str) -> list[tuple]:
    df = spark.table(name)
    return [tuple(r) for r in df.orderBy(*df.columns).collect()]


@pytest.fixture()
def cleanup(spark):
    """Drop what a test materialized (tables live in the shared session's warehouse)."""
    yield
    for table in spark.catalog.listTables():
        if table.tableType != "TEMPORARY" and table.name in _TABLES:
            spark.sql(f"DROP TABLE IF EXISTS `{table.name}`")


_TABLES = {"tumble_sales", "top_suppliers", "t_out", "m_table"}


def test_example_folder(spark, cleanup) -> None:
    results = run_models(spark, EXAMPLE)
    order = [r.model for r in results]
    assert order[0] == "stg_bids" and order.index("supplier_window_sales") < order.index("top_suppliers")
    assert {r.model: r.materialized for r in results} == {
        "stg_bids": "view", "count_windows": "view", "hop_sales": "view", "supplier_sessions": "view",
        "supplier_window_sales": "view", "top_suppliers": "table", "tumble_sales": "table"}
    assert {r.model: r.depends_on for r in results}["top_suppliers"] == "supplier_window_sales"
    assert _rows(spark, "tumble_sales") == [(T(2020, 4, 15, 8, 0), T(2020, 4, 15, 8, 10), 3, Decimal("11.00")),
                                            (T(2020, 4, 15, 8, 10), T(2020, 4, 15, 8, 20), 3, Decimal("10.00"))]
    assert [r[2] for r in _rows(spark, "hop_sales")] == [Decimal(x) for x in ("11.00", "15.00", "10.00", "6.00")]
    assert _rows(spark, "supplier_sessions") == [
        ("supplier1", T(2020, 4, 15, 8, 5), T(2020, 4, 15, 8, 12), 2, Decimal("6.00")),
        ("supplier1", T(2020, 4, 15, 8, 13), T(2020, 4, 15, 8, 18), 1, Decimal("1.00")),
        ("supplier2", T(2020, 4, 15, 8, 9), T(2020, 4, 15, 8, 16), 2, Decimal("8.00")),
        ("supplier2", T(2020, 4, 15, 8, 17), T(2020, 4, 15, 8, 22), 1, Decimal("6.00"))]
    assert _rows(spark, "top_suppliers") == [
        (T(2020, 4, 15, 8, 0), T(2020, 4, 15, 8, 10), "supplier1", Decimal("6.00"), 1),
        (T(2020, 4, 15, 8, 10), T(2020, 4, 15, 8, 20), "supplier2", Decimal("9.00"), 1)]
    assert _rows(spark, "count_windows") == [
        (0, T(2020, 4, 15, 8, 5), T(2020, 4, 15, 8, 9, 0, 1000), 3, Decimal("11.00")),
        (1, T(2020, 4, 15, 8, 11), T(2020, 4, 15, 8, 17, 0, 1000), 3, Decimal("10.00"))]
    assert not spark.catalog.getTable("top_suppliers").isTemporary
    assert spark.catalog.getTable("hop_sales").isTemporary


def test_vars_and_select(spark, cleanup) -> None:
    results = run_models(spark, EXAMPLE, vars={"top_n": 2, "session_gap_minutes": 10},
                         select=["top_suppliers", "supplier_sessions"])
    assert [r.model for r in results] == ["stg_bids", "supplier_sessions", "supplier_window_sales",
                                          "top_suppliers"]
    assert [(r[2], r[4]) for r in _rows(spark, "top_suppliers")] == [
        ("supplier1", 1), ("supplier2", 2), ("supplier1", 2), ("supplier2", 1)]
    # a 10-minute gap joins each supplier's bids into one session
    assert [(r[0], r[3]) for r in _rows(spark, "supplier_sessions")] == [("supplier1", 3), ("supplier2", 3)]


def _folder(tmp_path: Path, models: dict[str, str]) -> Path:
    for name, text in models.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_sources_map_to_existing_tables_and_materialize(spark, tmp_path: Path, cleanup) -> None:
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW raw_events AS SELECT TIMESTAMP'2024-01-01 10:00:01' AS ts, 5 AS v "
              "UNION ALL SELECT TIMESTAMP'2024-01-01 10:00:07', 7")
    folder = _folder(tmp_path, {
        "m_table.sql": "{{ config(materialized='table') }}\nSELECT window_start, SUM(v) AS total "
                       "FROM TUMBLE(TABLE {{ source('lake', 'raw_events') }}, DESCRIPTOR(ts), INTERVAL '5' SECONDS) "
                       "GROUP BY window_start",
        "m_view.sql": "SELECT total * 10 AS t10 FROM {{ ref('m_table') }}",
    })
    results = run_models(spark, folder)
    assert [(r.model, r.materialized) for r in results] == [("m_table", "table"), ("m_view", "view")]
    assert _rows(spark, "m_view") == [(50,), (70,)]


def test_cycle_is_an_error_naming_it(spark, tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"a.sql": "SELECT * FROM {{ ref('b') }}", "b.sql": "SELECT * FROM {{ ref('c') }}",
                                "c.sql": "SELECT * FROM {{ ref('a') }}", "d.sql": "SELECT 1 AS x"})
    with pytest.raises(SqlwinError, match=r"cycle: a -> b -> c -> a"):
        run_models(spark, folder)


def test_unknown_ref_and_bad_sql_name_the_model(spark, tmp_path: Path) -> None:
    missing, bad = tmp_path / "missing", tmp_path / "bad"
    missing.mkdir()
    bad.mkdir()
    with pytest.raises(SqlwinError, match=r"model a: ref\('nope'\) names no model"):
        run_models(spark, _folder(missing, {"a.sql": "SELECT * FROM {{ ref('nope') }}"}))
    with pytest.raises(SqlwinError, match=r"model h \(h.sql\): line 2, col 6: HOP expects"):
        run_models(spark, _folder(bad, {"h.sql": "SELECT *\nFROM HOP(TABLE t, DESCRIPTOR(ts))"}))


def test_templates_are_sandboxed(spark, tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"evil.sql": "SELECT '{{ ''.__class__.__mro__[1].__subclasses__() }}' AS x"})
    with pytest.raises(SqlwinError, match="evil"):
        run_models(spark, folder)
    with pytest.raises(SqlwinError, match="materialized='incremental'"):
        run_models(spark, _folder(tmp_path, {"evil.sql": "{{ config(materialized='incremental') }}SELECT 1"}))


@pytest.mark.slow
def test_a_streaming_table_model_reads_a_stream_source_and_is_read_by_ref(spark, tmp_path: Path,
                                                                          monkeypatch) -> None:
    """``materialized='streaming_table'`` over a stream declared in sources.yml; a view model refs it. The
    panes are tests/test_streaming.py's hand-worked ones (10-second TUMBLE, delay 2 s, lateness 5 s)."""
    from sqlwin.streaming import catalog
    from tests.streamtools import Feeder
    from tests.test_streaming import BATCHES, at

    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    project = tmp_path / "models"
    project.mkdir()
    (project / "sources.yml").write_text("""
sources:
  - name: shop
    tables:
      - name: bids
        meta:
          sqlwin:
            stream: "k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS"
            format: json
            path: ../in
""")
    (project / "bid_totals.sql").write_text("""{{ config(materialized='streaming_table') }}
SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c
FROM TUMBLE(TABLE {{ source('shop', 'bids') }}, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
GROUP BY window_start, window_end, k
ALLOWED LATENESS INTERVAL 5 SECONDS
""")
    (project / "final_totals.sql").write_text("""SELECT window_start, k, s, pane_timing
FROM {{ ref('bid_totals') }} WHERE is_final OR pane_timing = 'ON_TIME'
""")
    feeder = Feeder(tmp_path / "in")
    try:
        results = run_models(spark, project)
        assert [(r.model, r.materialized) for r in results] == [("bid_totals", "streaming_table"),
                                                               ("final_totals", "view")]
        table = catalog.find_table("bid_totals")
        assert table.path == "custom"
        feeder.feed(BATCHES, table)
        run_models(spark, project, select=["final_totals"])  # the view again, over what the table holds now
        assert _rows(spark, "final_totals") == [(at(0), "a", 3, "ON_TIME"), (at(0), "b", 3, "ON_TIME"),
                                                (at(10), "a", 4, "ON_TIME")]
    finally:
        for table in catalog.all_tables():
            table.stop()
            catalog.remove_table(table.name)
