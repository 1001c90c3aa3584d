"""The Nexmark benchmark's queries give the same rows on sqlwin/Spark, hand-written Spark and DuckDB.

A correctness test, not a timing: a benchmark whose engines disagree measures nothing, so every
query of ``bench/nexmark`` runs here on a tiny generated data set with much disorder and lateness.
"""

from __future__ import annotations

import duckdb
import pytest

from bench.nexmark import generator, suite

# 2k events over 100 s of event time: several windows, sessions and count windows per key
CONFIG = generator.Config(events=2000, seed=7, rate=20, disorder_fraction=0.2, late_fraction=0.02)


@pytest.fixture(scope="module")
def ctx(spark, tmp_path_factory):
    root = generator.generate(tmp_path_factory.mktemp("nexmark"), CONFIG)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    context = suite.Context(spark, con, root, CONFIG.events)
    suite.register_tables(context)
    yield context
    con.close()
    for table in suite.TABLES:  # other modules name their own tables "bids" too
        spark.catalog.dropTempView(table)


def test_generator_is_deterministic_and_disordered(tmp_path) -> None:
    import pyarrow.parquet as pq

    a = generator.generate(tmp_path / "a", CONFIG)
    b = generator.generate(tmp_path / "b", CONFIG)
    for table in suite.TABLES:
        ta, tb = pq.read_table(a / table), pq.read_table(b / table)
        assert ta.equals(tb), table
    bids = pq.read_table(a / "bids").to_pandas()
    assert len(bids) == CONFIG.events * 46 // 50
    assert bids["seq"].is_monotonic_increasing and not bids["date_time"].is_monotonic_increasing
    behind = bids["date_time"].cummax() - bids["date_time"]
    assert (behind.dt.total_seconds() >= CONFIG.late_min_s - 5).sum() > 0  # some late rows


@pytest.mark.parametrize("query", suite.QUERIES, ids=[q.name for q in suite.QUERIES])
def test_engines_agree(ctx, query: suite.Query) -> None:
    suite.register_tables(ctx)  # in case another module replaced a view of the same name
    results = {name: suite.normalize(suite.ENGINES[name].result(query, ctx)) for name in suite.BATCH_ENGINES}
    reference = results[suite.REFERENCE]
    assert len(reference) > 0, f"{query.name} is empty on this data: the comparison would prove nothing"
    for name, got in results.items():
        assert suite.differences(got, reference) is None, \
            f"{query.name}: {name} differs from {suite.REFERENCE}: {suite.differences(got, reference)}"
