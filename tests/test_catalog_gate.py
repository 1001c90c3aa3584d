"""The stop's gate before a micro-batch's catalog change (``sqlwin.streaming.stopping.CatalogGate``)."""

from __future__ import annotations

import pickle
import threading

import pytest

from sqlwin.streaming.stopping import CatalogGate, MicroBatchStopped


def test_a_stop_waits_for_the_change_in_flight(spark) -> None:
    gate = CatalogGate()
    order: list[str] = []
    inside, release = threading.Event(), threading.Event()

    def change() -> None:
        with gate.passage(spark):
            inside.set()
            assert release.wait(60)
            order.append("changed")

    def stop() -> None:
        with gate.closed():
            order.append("stopped")

    changer = threading.Thread(target=change)
    changer.start()
    assert inside.wait(60)
    stopper = threading.Thread(target=stop)
    stopper.start()
    release.set()
    changer.join(60)
    stopper.join(60)
    assert order == ["changed", "stopped"]


def test_a_micro_batch_at_a_closed_gate_leaves_as_stopped_without_changing_anything(spark) -> None:
    gate = CatalogGate()
    ran: list[str] = []
    with gate.closed(), pytest.raises(MicroBatchStopped), gate.passage(spark):  # no query on this thread: no wait
        ran.append("changed")
    assert ran == []
    with gate.passage(spark):  # open again once the stop is done, for the stopper's own view change
        ran.append("changed")
    assert ran == ["changed"]


def test_a_pickled_gate_is_a_new_open_one(spark) -> None:
    gate = CatalogGate()
    with gate.closed():
        copy = pickle.loads(pickle.dumps(gate))
    with copy.passage(spark):
        pass
