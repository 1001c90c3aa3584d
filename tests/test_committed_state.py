"""A checkpoint committed by sqlwin before its operator was split into roles resumes with this one.

tests/fixtures/committed_state_v1.json holds, per case of tests/statecompat.py, what that sqlwin committed
after the first micro-batches and every pane and late row of its whole run. Here the same micro-batches run
again with the windows' state in the driver, as then: they must commit exactly that state (the format is
unchanged; but a query whose windows the columnar engine drives since commits its own), and an operator (by
default one whose windows' state is in Spark, ``keyedstate``) that resumes from the old commit in its place
must give exactly the old run's panes, micro-batch numbers and late rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sqlwin.session import DEFAULT_CONF
from sqlwin.streaming.keyedstate import KeyedPanes
from sqlwin.streaming.operator import STATE_CONF
from tests.statecompat import CASES, CUT, as_v1, committed, drive, operator, outputs, prepare

pytestmark = pytest.mark.slow

# the queries whose windows the columnar engine drives since v1 (the global window: session 43; SESSION windows
# with partial aggregates, whose merges it does since session 45)
COLUMNAR_SINCE_V1 = {"global", "sessions"}
OLD = json.loads((Path(__file__).parent / "fixtures" / "committed_state_v1.json").read_text(encoding="utf-8"))


def put_commit(op, old: dict) -> None:
    """The old commit (``state/<n>.json`` and its columnar windows table) in place of this one's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(op.store.root) / "state"
    batch = old["batch"]
    if old["windows_table"] is not None:
        path = folder / f"{batch}.windows.parquet"
        schema = pq.read_schema(path)
        os.remove(path)
        pq.write_table(pa.Table.from_pylist(old["windows_table"], schema=schema), path)
    os.remove(folder / f"{batch}.json")
    (folder / f"{batch}.json").write_text(json.dumps({**old["state"], "end": True}), encoding="utf-8")


def since_v1(commit: dict) -> dict:
    """A commit as v1 wrote the same state (``tests/statecompat.py``, ``as_v1``; the columnar windows without
    the processing-time timer columns added since, which v1's triggers never set and a v1 table reads as unset)."""
    from sqlwin.core.columnar import UNSET

    table = commit["windows_table"]
    if table is not None:
        assert all(row[c] == unset for row in table for c, unset in UNSET.items()), table
        table = [{c: v for c, v in row.items() if c not in UNSET} for row in table]
    return {**commit, "state": as_v1(commit["state"]), "windows_table": table}


@pytest.fixture()
def recorded_partitions(spark):
    """The shuffle partitions the old commits were written with (sqlwin's default; the test session runs with one,
    tests/proctools.py, ``SESSION_PARTITIONS``): the order of a commit's windows and the stored rows' files follow
    them."""
    key = "spark.sql.shuffle.partitions"
    session = spark.conf.get(key)
    spark.conf.set(key, DEFAULT_CONF[key])
    yield
    spark.conf.set(key, session)


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_old_commit_resumes_to_the_old_results(spark, tmp_path, name, recorded_partitions):
    old = OLD[name]
    prepare(spark, name)
    folder = str(tmp_path / name)
    spark.conf.set(STATE_CONF, "driver")  # the engines of that version: the windows' state in the driver
    try:
        first = operator(spark, name, folder)
        drive(spark, first, name, range(CUT + 1), end=False)
    finally:
        spark.conf.unset(STATE_CONF)
    now, then = since_v1(committed(first)), {k: old[k] for k in ("batch", "state", "windows_table")}
    if name in COLUMNAR_SINCE_V1:  # the commit is the columnar engine's now; v1's (PaneDriver's) must still resume
        assert now["state"]["columnar"] and not then["state"]["columnar"] and now["batch"] == then["batch"]
        assert now["state"]["counters"] == then["state"]["counters"]
    else:
        assert now == then
    put_commit(first, old)
    resumed = operator(spark, name, folder)  # keyed state by default: the old commit's windows go on in the driver
    assert not isinstance(resumed.panes, KeyedPanes)
    assert resumed.next_batch == old["batch"] + 1
    drive(spark, resumed, name, range(CUT + 1, 5), end=True)
    assert outputs(spark, resumed) == {"panes": old["panes"], "late": old["late"]}
