"""What a replay did, micro-batch by micro-batch, for whoever asks: the pane pictures of ``sqlwin.plotting``.

A recording belongs to the thread that opens it (a context variable): a replay records only while the thread
running it has a recording open, so live streaming tables, which step in Spark's own threads, never do. The
operator reports each step (``step``) and the statement runner each replay (``replayed``); nothing is
wrapped or patched, and with no recording open a step costs one context-variable lookup."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Step:
    """One step of the replay operator: its micro-batch number (None: it did nothing and took none)."""

    micro_batch: int | None
    has_data: bool
    watermark: int  # in force during the step (epoch micros; MIN_TIME / MAX_TIME for -/+ infinity)


@dataclass
class ReplayRun:
    """One replayed query: its shape, the statement's text as the script runner ran it (to position errors
    in the script), the operator's steps, and the panes it returned."""

    shape: Any
    statement: str = ""
    steps: list[Step] = field(default_factory=list)
    result: Any = None


_recordings: ContextVar[tuple[list[ReplayRun], ...]] = ContextVar("sqlwin_recordings", default=())
_current: ContextVar[ReplayRun | None] = ContextVar("sqlwin_replay_run", default=None)


@contextmanager
def recording() -> Iterator[list[ReplayRun]]:
    """While open, every replay this thread runs is appended, once it has returned, to the list yielded (and
    to those of the recordings it is nested in)."""
    runs: list[ReplayRun] = []
    token = _recordings.set((*_recordings.get(), runs))
    try:
        yield runs
    finally:
        _recordings.reset(token)


@contextmanager
def replayed(shape: Any, statement: str) -> Iterator[ReplayRun | None]:
    """Around one replay: the run its steps go to (None when nothing records); the caller sets ``result``.
    A replay that fails is not recorded."""
    recordings = _recordings.get()
    if not recordings:
        yield None
        return
    run = ReplayRun(shape, statement)
    token = _current.set(run)
    try:
        yield run
    finally:
        _current.reset(token)
    for runs in recordings:
        runs.append(run)


@contextmanager
def unrecorded() -> Iterator[None]:
    """Steps of the operator that are not the replay's own (a planned replay's pass for the watermarks alone)."""
    token = _current.set(None)
    try:
        yield
    finally:
        _current.reset(token)


def step(micro_batch: int | None, has_data: bool, watermark: int) -> None:
    """The operator finished a step (see ``Step``)."""
    run = _current.get()
    if run is not None:
        run.steps.append(Step(micro_batch, has_data, watermark))
