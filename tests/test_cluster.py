"""The core differential subset on a real Spark standalone cluster: a master and two workers started
from the pyspark wheel on loopback, whose executors are separate JVMs with their own Python workers.

The executors' Python cannot import sqlwin (a package that shadows it raises ImportError, first on
their PYTHONPATH), so this also tests how sqlwin reaches executors: its UDTF code travels pickled by
value with each plan (``udtfs.ship_by_value``); executors need only numpy and pyarrow. The driver
runs in a subprocess (its own SparkContext); the cluster (the session's, shared with tests/test_exactly_once.py:
tests/conftest.py, ``standalone``) is always torn down, even on failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.proctools import ROOT, SHORT_LIVED_ENV, StandaloneCluster, base_env, run_json

pytestmark = pytest.mark.slow

DRIVER = r'''
import json, os, sys, time
t0 = time.monotonic()
sys.path.insert(0, sys.argv[2])  # the repo: the driver imports the tests' data and tools
from sqlwin.session import local_session
from tests.proctools import CLUSTER_CONF
from tests.difftools import EVENTS, load, on_duckdb, on_spark
from tests.test_differential import BID_COLUMNS, BIDS, EDGE, agg
import duckdb

spark = local_session("sqlwin-cluster", master=sys.argv[1], conf=CLUSTER_CONF)
sc = spark.sparkContext
deadline = time.monotonic() + 60
while sc._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:  # driver + 2
    time.sleep(0.2)
out = {"executors": sc._jsc.sc().getExecutorMemoryStatus().size() - 1, "t_start": time.monotonic() - t0}


def where(_):
    import os
    try:
        import sqlwin  # noqa: F401
        importable = True
    except ImportError:
        importable = False
    return [(os.path.basename(os.path.dirname(os.path.dirname(os.getcwd()))), importable)]


out["python_workers"] = sorted(set(sc.parallelize(range(8), 8).mapPartitions(where).collect()))
duck = duckdb.connect()
duck.execute("SET TimeZone = 'UTC'")
load(spark, duck, "bids", BID_COLUMNS, BIDS)
load(spark, duck, "edge", EVENTS, EDGE)
# (query, plans): every window kind natively, the UDTF plan where auto uses it or forced on two kinds
queries = [
    ("SELECT * FROM TUMBLE(TABLE edge, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '3' MINUTES)", ("auto", "udtf")),
    ("SELECT * FROM HOP(TABLE edge, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)", ("auto",)),
    ("SELECT * FROM CUMULATE(TABLE edge, DESCRIPTOR(ts), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES)", ("auto",)),
    ("SELECT * FROM SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' MINUTES)", ("auto", "udtf")),
    ("SELECT * FROM SESSION(TABLE edge PARTITION BY k, DESCRIPTOR(ts), INTERVAL '4' MINUTES, "
     "INTERVAL '6' MINUTES)", ("auto",)),  # max_duration: the arrow UDTF
    ("SELECT * FROM TUMBLE(TABLE edge PARTITION BY k, DESCRIPTOR(ts), ROWS 2)", ("auto",)),
    ("SELECT * FROM HOP(TABLE edge, DESCRIPTOR(ts), ROWS 1, INTERVAL '5' MINUTES)", ("auto",)),  # arrow UDTF
    (agg("HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)", "supplier_id")
     .replace("SUM(v)", "SUM(price)"), ("auto",)),
]
out["results"] = []
for sql, plans in queries:
    oracle = on_duckdb(duck, sql)
    for plan in plans:
        t = time.monotonic()
        got = on_spark(spark, sql, plan)
        out["results"].append({"sql": sql, "plan": plan, "t": time.monotonic() - t, "rows": len(oracle),
                               "same": got == oracle, "spark": repr(got) if got != oracle else None,
                               "duckdb": repr(oracle)})
out["t_total"] = time.monotonic() - t0
print("RESULT " + json.dumps(out))
spark.stop()
'''

BLOCKER = 'raise ImportError("sqlwin is not installed on this executor")\n'


def test_differential_subset_on_a_standalone_cluster(standalone: StandaloneCluster, tmp_path: Path) -> None:
    """On the session's standalone cluster (tests/conftest.py, ``standalone``: a master and two 1-core workers)."""
    blocker = tmp_path / "blocker"
    for package in ("sqlwin", "udtfs"):
        (blocker / package).mkdir(parents=True)
        (blocker / package / "__init__.py").write_text(BLOCKER)
    python = tmp_path / "executor-python"  # the executors' interpreter: the venv's, without sqlwin
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{blocker}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = base_env(PYSPARK_PYTHON=str(python), **SHORT_LIVED_ENV)
    out = run_json(DRIVER, env, tmp_path, timeout=240, args=[standalone.master, str(ROOT)])

    assert out["executors"] == 2
    # tasks ran in both workers' executors, whose Python could not import sqlwin
    assert out["python_workers"] == [["worker1", False], ["worker2", False]]
    assert len(out["results"]) == 10
    for r in out["results"]:
        assert r["same"], f"plan={r['plan']} differs from DuckDB:\n{r['sql']}\n{r['spark']}\n{r['duckdb']}"
    assert sum(r["rows"] for r in out["results"]) > 60
