"""The contracts between the micro-batch operator and its roles, without Spark.

- Pane engines (``sqlwin.streaming.engines``): over the same accepted counts, ``WindowStates`` (PaneDriver
  per window) and ``ColumnarEngine`` fire the same panes, expire, close and keep the same windows, agree on
  timers and keep every stored micro-batch a later pane reads; each engine's snapshot, restored into a new
  engine, takes the same next step (Flink's ``WindowOperatorContractTest`` idea: every variant passes one
  contract).
- The state committer (``sqlwin.streaming.committer``): one commit holds the operator's keys and every
  role's, each role hears of it once it is on disk, and a restore gives every role its state back (deleting
  uncommitted files only in the process that owns the store); state in the shape earlier versions committed
  comes back and commits again unchanged.
- The operator itself only wires roles: no branch on the kind of window, engine or evictor.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqlwin.core.columnar import UNSET, ColumnarPanes
from sqlwin.core.panes import MAX_TIME, MIN_TIME, PaneDriver, WindowState
from sqlwin.core.triggers import TriggerState
from sqlwin.plan import triggers as plan
from sqlwin.streaming.committer import Commit, Durable, StateCommitter
from sqlwin.streaming.engines import ColumnarEngine, WindowStates
from sqlwin.streaming.evictors import NoEvictor, SparkEvictor
from sqlwin.streaming.maxsessions import MaxDurationSessions
from sqlwin.streaming.outputs import fired_table
from sqlwin.streaming.rowstore import StoredRows
from sqlwin.streaming.state import StateStore
from tests.statecompat import as_v1
from tests.test_columnar_panes import MODES, TRIGGERS, history

ROOT = Path(__file__).resolve().parents[1]
OLD = json.loads((ROOT / "tests" / "fixtures" / "committed_state_v1.json").read_text(encoding="utf-8"))


class Tables:
    """The part of a StateStore a commit's tables use, in memory."""

    def __init__(self):
        self.tables: dict = {}

    def save_table(self, batch: int, name: str, table) -> None:
        self.tables[(batch, name)] = table

    def load_table(self, batch: int, name: str):
        return self.tables[(batch, name)]


# -- pane engines ---------------------------------------------------------------------------------------------
def accepted_by(engine, new: dict):
    """``new`` as an assigner hands it to ``engine``: Arrow columns (key, start, end, n) in the engine's form."""
    windows = list(new)
    columns = [pa.array([w[0] for w in windows], pa.string()), pa.array([w[1] for w in windows], pa.int64()),
               pa.array([w[2] for w in windows], pa.int64()), pa.array([new[w] for w in windows], pa.int64())]
    return engine.accepted(*columns) if windows else engine.accepted()


def panes_of(fired, batch: int, stored: dict) -> list:
    """The panes as the pane query reads them: the tokens a pane names, of those that stored its window's rows."""
    rows = fired_table(fired, batch).to_pylist()
    return sorted((r["__key"], r["__ws"], r["__we"], r["pane_index"], r["pane_timing"], r["is_final"],
                   sorted(set(r["tokens"]) & stored.get((r["__key"], r["__ws"], r["__we"]), set()))) for r in rows)


def restored(engine, batch: int):
    """A new engine of the same kind, restored from ``engine``'s snapshot (JSON and tables, as committed); its
    own snapshot is the same."""
    store = Tables()
    data = json.loads(json.dumps(engine.snapshot(Commit(store, batch, {}))))
    if isinstance(engine, WindowStates):
        fresh = WindowStates(engine.driver)
    else:
        fresh = ColumnarEngine(ColumnarPanes(engine.panes.trigger, engine.panes.lateness, engine.panes.accumulating))
    fresh.restore(Commit(store, batch, data))
    again = Tables()
    assert json.loads(json.dumps(fresh.snapshot(Commit(again, batch, {})))) == data
    assert again.tables.keys() == store.tables.keys()
    assert all(again.tables[k].equals(t) for k, t in store.tables.items())
    return fresh


def run_engines(emit: plan.EmitSpec, mode: plan.AccumulationMode, lateness: int, steps: list) -> None:
    emit = plan.EmitSpec(emit.trigger, mode, emit.explicit)
    driver = PaneDriver(emit, lateness)
    engines = [WindowStates(driver), ColumnarEngine.of(driver)]
    assert engines[1] is not None
    stored: dict = {}  # window -> micro-batches that stored rows of it
    watermark, now = MIN_TIME, 0
    for batch, (advance, new, *clock) in enumerate(steps):
        watermark = MAX_TIME if advance is None else (advance if watermark == MIN_TIME else watermark + advance)
        now += clock[0] if clock else 1  # the processing time (a step of 0: the same moment)
        # the assigner's rule: rows of a window past its lateness, or closed, are dropped before the engine
        closed = set(engines[0].closed())
        assert closed == set(engines[1].closed())
        kept = {w: n for w, n in new.items() if w not in closed and not w[2] <= watermark - lateness}
        for window in kept:
            stored.setdefault(window, set()).add(batch)
        results, live = [], []
        for engine in engines:
            fired, expired = engine.drive(accepted_by(engine, kept), batch, watermark, now, batch)
            proc, events = engine.timers(now)  # the operator asks for the earliest of each
            results.append((panes_of(fired, batch, stored), expired, len(engine), engine.any_due(watermark, now),
                            engine.any_due(watermark, now + 4), min(proc, default=None), min(events, default=None)))
            live.append(engine.live_batches(set().union(*stored.values())))
        assert results[0] == results[1], f"micro-batch {batch} at watermark {watermark}"
        # every micro-batch a later pane reads is kept (the columnar engine keeps each window's whole range)
        assert live[0] <= live[1] <= set().union(*stored.values())
        # a snapshot restored takes the same next step: go on with the restored engines
        engines = [restored(e, batch) for e in engines]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(TRIGGERS)), mode=st.sampled_from(MODES), lateness=st.sampled_from([0, 5, 15]),
       steps=history)
def test_pane_engines_keep_one_contract(name, mode, lateness, steps) -> None:
    run_engines(TRIGGERS[name], mode, lateness, steps)


@pytest.mark.parametrize("name", sorted(TRIGGERS))
def test_pane_engines_on_a_hand_made_history(name) -> None:
    """Rows before the end, the end reached, late rows, rows after expiry, the end of input."""
    a, b = ("a", 0, 10), ("b", 5, 15)
    for mode in MODES:
        run_engines(TRIGGERS[name], mode, 5, [(1, {a: 1, b: 2}), (2, {a: 3}), (0, {}), (9, {a: 1, b: 1}),
                                              (0, {a: 2}), (3, {b: 1}), (4, {a: 1, b: 1}), (0, {}),
                                              (None, {("a", 20, 30): 1}), (0, {})])


def test_the_columnar_engine_hands_windows_saved_by_pane_driver_back() -> None:
    """State PaneDriver committed (an earlier version) goes on with it; its own, or none, with the columnar."""
    assert ColumnarEngine.continues(None) and ColumnarEngine.continues({"columnar": True, "windows": []})
    assert ColumnarEngine.continues({"windows": []})
    assert not ColumnarEngine.continues({"columnar": False, "windows": [["k", 0, 10, {}]]})


# -- the state committer --------------------------------------------------------------------------------------
class Recorder(Durable):
    def __init__(self, key: str, value, log: list, store=None):
        self.key, self.value, self.log, self.store = key, value, log, store

    def snapshot(self, commit: Commit) -> dict:
        self.log.append(("snapshot", self.key))
        return {self.key: self.value}

    def restore(self, commit: Commit) -> None:
        self.log.append(("restore", self.key))
        self.value = commit.data[self.key]

    def delete_uncommitted(self) -> None:
        self.log.append(("delete_uncommitted", self.key))

    def committed(self) -> None:
        assert self.store is not None and self.store.last_committed() == 3  # the commit is on disk
        self.log.append(("committed", self.key))


def test_the_committer_commits_and_restores_every_role(tmp_path) -> None:
    log: list = []
    store = StateStore(str(tmp_path / "ck"))
    roles = [Recorder("a", [1, 2], log, store), Recorder("b", {"x": 1}, log, store)]
    committer = StateCommitter(lambda: roles)
    committer.commit(store, 3, {"watermark": 7})
    assert store.load(3) == {"watermark": 7, "a": [1, 2], "b": {"x": 1}}
    assert log == [("snapshot", "a"), ("snapshot", "b"), ("committed", "a"), ("committed", "b")]

    log.clear()
    roles = [Recorder("a", None, log), Recorder("b", None, log)]
    commit = committer.last(StateStore(str(tmp_path / "ck")))
    assert commit is not None and commit.batch == 3
    committer.restore(commit.store, commit)
    assert [r.value for r in roles] == [[1, 2], {"x": 1}]
    assert log == [("restore", "a"), ("restore", "b"), ("delete_uncommitted", "a"), ("delete_uncommitted", "b")]

    log.clear()  # a Spark Connect client's view of the server's commit: restored, nothing deleted
    view = SimpleNamespace(last_committed=lambda: 3, load=lambda batch: store.load(batch))
    committer.restore(view, committer.last(view))
    assert log == [("restore", "a"), ("restore", "b")]

    log.clear()  # nothing committed yet: no role restored, an uncommitted attempt's files deleted
    committer.restore(StateStore(str(tmp_path / "new")), None)
    assert log == [("delete_uncommitted", "a"), ("delete_uncommitted", "b")]


@pytest.mark.parametrize("case", ["rows", "max_sessions", "columnar"])
def test_state_in_the_shape_earlier_versions_committed_commits_again_unchanged(tmp_path, case) -> None:
    """``state/<n>.json`` as sqlwin wrote it before its operator was split into roles (the fixture), restored
    into the roles and committed again: the same keys and values, and the same columnar windows table."""
    old = OLD[case]
    store = StateStore(str(tmp_path / "ck"))
    tables = Tables()
    if old["windows_table"] is not None:
        tables.save_table(old["batch"], "windows", pa.Table.from_pylist(old["windows_table"]))
    op = SimpleNamespace(store=store, views=SimpleNamespace(batch="v"))
    driver = PaneDriver(plan.EmitSpec(), 5)
    engine = ColumnarEngine.of(driver) if old["state"]["columnar"] else WindowStates(driver)
    roles = [engine, StoredRows(op, NoEvictor()), NoEvictor()]
    if case == "max_sessions":
        roles.append(MaxDurationSessions(op))
    committer = StateCommitter(lambda: roles)
    commit = Commit(tables, old["batch"], old["state"])
    committer.restore(store, commit)
    own = {k: old["state"][k] for k in ("source_batch", "watermark", "counters")}
    again = Tables()
    # the same state, as v1 wrote it (this version writes a window's state as a row: tests/statecompat.py)
    assert as_v1(json.loads(json.dumps(committer.snapshot(again, old["batch"], own)))) == old["state"]
    if old["windows_table"] is not None:  # and the processing-time timer columns added since, unset
        table = again.load_table(old["batch"], "windows").to_pylist()
        assert all(row[c] == unset for row in table for c, unset in UNSET.items())
        assert [{c: v for c, v in row.items() if c not in UNSET} for row in table] == old["windows_table"]


def test_a_window_state_commits_as_a_row_and_comes_back_whole() -> None:
    """``WindowStates`` commits each window as ``WindowState.to_row`` (positional, flags as bits, an untouched
    trigger as null): every combination of the flags, with and without trigger state, through JSON, comes back
    equal, and a commit of rows restores as one of dicts does."""
    states = []
    for flags in range(32):
        trigger = TriggerState({"0": {"count": 3}, "0.1": {"fired": 1}}, {"0.1"}) if flags % 3 else TriggerState()
        states.append(WindowState(flags, MAX_TIME, trigger, [1, 2] if flags & 4 else [], [3], flags % 5,
                                  *[bool(flags >> i & 1) for i in range(5)]))
    for state in states:
        assert WindowState.from_row(json.loads(json.dumps(state.to_row()))) == state
    assert states[0].to_row() == [0, MAX_TIME, None, [], [3], 0, 0]  # nothing set: no trigger, no flag
    engine = WindowStates(PaneDriver(plan.EmitSpec(), 5))
    engine.windows = {("k", s.start, s.end): s for s in states}
    committed = json.loads(json.dumps(engine.snapshot(Commit(Tables(), 0, {}))))
    as_dicts = {**committed, "windows": [[k, s, e, WindowState.from_row(st).to_dict()]
                                         for k, s, e, st in committed["windows"]]}
    for data in (committed, as_dicts):
        again = WindowStates(engine.driver)
        again.restore(Commit(Tables(), 0, data))
        assert again.windows == engine.windows


def test_evictors_have_one_interface() -> None:
    """``NoEvictor`` stands where a query has no EVICT: every method the roles call on an evictor."""
    called = {"prepare", "annotate", "surviving", "at_firing", "collect_garbage", "snapshot", "restore",
              "delete_uncommitted", "committed"}
    assert called <= set(dir(NoEvictor)) and called <= set(dir(SparkEvictor))
    assert NoEvictor().snapshot(Commit(Tables(), 0, {})) == {}


# -- the operator wires roles ---------------------------------------------------------------------------------
def test_the_operator_does_not_branch_on_its_roles() -> None:
    """No test of which assigner, engine or evictor it has: each role answers for itself."""
    source = (ROOT / "sqlwin" / "streaming" / "operator.py").read_text(encoding="utf-8")
    names = {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute)}
    assert not names & {"columnar", "counts", "sessions", "stateful", "fused"}
    for role in ("assigner", "panes", "evictor", "rows"):
        assert f"self.{role} is" not in source and f"isinstance(self.{role}" not in source
