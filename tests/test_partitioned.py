"""The pane statement partitioned by the micro-batch (``sqlwin.streaming.partitioned``), as SQL: which operators
gain the micro-batch, and which statements are refused (then replay computes each micro-batch on its own).
That the partitioned query gives each micro-batch's panes as a streaming table does is checked through Spark
in ``tests/test_replay_planned.py`` (the ``hot_keys`` and ``topn*`` queries against stepped replays)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from sqlwin.streaming.partitioned import NotPartitionable, partition_by, relation_reads

# the carrier reads the pane relation ``rel`` (as PaneQuery writes it: its GROUP BY and output already hold
# micro_batch); ``micro_batch`` unqualified in the selects above it, as PaneQuery passes pane columns up
AGG = ("SELECT k, COUNT(*) AS c, p.window_start AS ws, p.micro_batch FROM rel AS p "
       "GROUP BY k, p.window_start, p.micro_batch")


def partitioned(sql: str) -> tuple[str, int]:
    root = sqlglot.parse_one(sql, read="spark")
    carrier = next(s for s in root.find_all(exp.Select)
                   if isinstance(s.args["from_"].this, exp.Table) and s.args["from_"].this.name == "rel")
    reads = relation_reads(root, carrier)
    partition_by(root, carrier, "micro_batch")
    return root.sql("spark"), reads


def test_a_cte_read_twice_is_joined_on_its_micro_batch_and_its_aggregate_grouped_by_it():
    """Nexmark q5's shape: the maximum per window is taken within a micro-batch, and the join back meets the
    same micro-batch's panes only; the pane relation is read twice."""
    sql, reads = partitioned(f"WITH agg AS ({AGG}), top AS (SELECT ws, MAX(c) AS m FROM agg GROUP BY ws) "
                             "SELECT a.k, a.c, micro_batch FROM agg AS a JOIN top AS t ON a.ws = t.ws AND a.c = t.m")
    assert sql == (f"WITH agg AS ({AGG}), top AS (SELECT ws, MAX(c) AS m, agg.micro_batch AS micro_batch FROM agg "
                   "GROUP BY ws, agg.micro_batch) SELECT a.k, a.c, a.micro_batch AS micro_batch FROM agg AS a "
                   "JOIN top AS t ON (a.ws = t.ws AND a.c = t.m) AND a.micro_batch = t.micro_batch")
    assert reads == 2


def test_window_functions_are_partitioned_by_the_micro_batch_in_the_carrier_and_above():
    sql, reads = partitioned("SELECT *, RANK() OVER (PARTITION BY ws ORDER BY c DESC) AS r FROM ("
                             "SELECT k, p.window_start AS ws, ROW_NUMBER() OVER (ORDER BY v) AS n, p.micro_batch "
                             "FROM rel AS p) AS x")
    assert sql == ("SELECT *, RANK() OVER (PARTITION BY ws, x.micro_batch ORDER BY c DESC) AS r FROM ("
                   "SELECT k, p.window_start AS ws, ROW_NUMBER() OVER (PARTITION BY p.micro_batch ORDER BY v) AS n, "
                   "p.micro_batch FROM rel AS p) AS x")
    assert reads == 1


def test_an_aggregate_without_group_by_is_grouped_by_the_micro_batch():
    sql, _ = partitioned(f"SELECT COUNT(*) AS n, micro_batch FROM ({AGG}) AS a")
    assert sql == f"SELECT COUNT(*) AS n, a.micro_batch AS micro_batch FROM ({AGG}) AS a GROUP BY a.micro_batch"


def test_a_static_table_joined_on_the_preserved_side_or_inner_is_left_as_it_is():
    for join in ("LEFT JOIN", "JOIN"):
        sql, _ = partitioned(f"SELECT a.k, d.name, micro_batch FROM ({AGG}) AS a {join} dims AS d ON a.k = d.k")
        assert sql == (f"SELECT a.k, d.name, a.micro_batch AS micro_batch FROM ({AGG}) AS a {join} dims AS d "
                       "ON a.k = d.k")


@pytest.mark.parametrize("sql", [
    f"SELECT d.k, a.c, micro_batch FROM dims AS d LEFT JOIN ({AGG}) AS a ON a.k = d.k",
    f"SELECT a.k, d.name, micro_batch FROM ({AGG}) AS a FULL JOIN dims AS d ON a.k = d.k",
    f"WITH agg AS ({AGG}) SELECT * FROM agg AS a JOIN agg AS b ON a.k = b.k",
    f"WITH agg AS ({AGG}) SELECT a.k, micro_batch FROM agg AS a RIGHT JOIN agg AS b ON a.k = b.k",
    f"WITH agg AS ({AGG}) SELECT k, micro_batch FROM agg WHERE c > (SELECT AVG(c) FROM agg)",
    f"SELECT k, micro_batch FROM ({AGG}) UNION ALL SELECT k, 0 FROM dims",
    f"SELECT k, micro_batch FROM ({AGG}) AS a LIMIT 3",
], ids=["null-supplying-side", "full-join-with-static", "star-over-two", "right-join-of-panes", "subquery",
        "union", "limit"])
def test_what_one_partitioned_query_cannot_reproduce_is_refused(sql):
    with pytest.raises(NotPartitionable):
        partitioned(sql)
