"""The state committer: every role's state in one micro-batch's commit, and every role restored from it.

A micro-batch is committed by ``state/<n>.json`` (``sqlwin.streaming.state``): the operator's own keys (source
batch, watermark, counters) and those of each role that keeps state (``Durable``): the pane engine's windows,
the stored rows, an assigner's own state, the evictor's evicted sets. Each role names its own keys, so the file
keeps one flat shape whichever roles a query has (the shape checkpoints written before the roles were split
have, tests/test_committed_state.py). Tables that belong to the commit (the columnar windows) are written
beside it first (``Commit.save_table``).

The operator never enumerates its roles' state by hand: it hands the committer its roles, as Flink's window
operator leaves checkpointing its state to the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sqlwin.streaming.state import StateStore


@dataclass
class Commit:
    """One micro-batch's committed state: ``state/<n>.json`` (``data``, every role's keys) and its tables."""

    store: Any  # a StateStore, or a Spark Connect client's read-only view of the server's (``connect``)
    batch: int
    data: dict

    def table(self, name: str) -> Any:
        return self.store.load_table(self.batch, name)

    def save_table(self, name: str, table: Any) -> None:
        self.store.save_table(self.batch, name, table)


class Durable:
    """A role whose state is part of every commit; by default it keeps none."""

    def snapshot(self, commit: Commit) -> dict:
        """Its keys of ``state/<n>.json`` (it may save tables with ``commit.save_table`` first)."""
        return {}

    def restore(self, commit: Commit) -> None:
        """Its state as ``commit`` holds it."""

    def delete_uncommitted(self) -> None:
        """After a restore: the files an attempt that did not commit wrote (none of them is read again)."""

    def committed(self) -> None:
        """Once the commit is on disk: delete what it no longer refers to (a re-run before it still reads it)."""


_VOLATILE: ContextVar[bool] = ContextVar("sqlwin_volatile_state", default=False)


@contextmanager
def volatile() -> Iterator[None]:
    """Micro-batches whose state is never restored (a replay's, in a scratch folder deleted after it) commit
    without writing their snapshot: a replay with 200,000 open windows spent a sixth of its time on it."""
    token = _VOLATILE.set(True)
    try:
        yield
    finally:
        _VOLATILE.reset(token)


class StateCommitter:
    """Snapshots every role into the commit of a micro-batch, and restores every role from the last one."""

    def __init__(self, roles: Callable[[], Sequence[Durable]]):
        self.roles = roles  # the roles as they are now (the pane engine is chosen again at each restore)

    def snapshot(self, store: Any, batch: int, own: dict) -> dict:
        """``state/<batch>.json``: ``own`` (the operator's keys), then every role's."""
        commit = Commit(store, batch, dict(own))
        for role in self.roles():
            commit.data.update(role.snapshot(commit))
        return commit.data

    def commit(self, store: StateStore, batch: int, own: dict) -> None:
        if not _VOLATILE.get():
            store.commit(batch, self.snapshot(store, batch, own))
        for role in self.roles():
            role.committed()

    @staticmethod
    def last(store: Any) -> Commit | None:
        """The newest whole commit, if any."""
        batch = store.last_committed()
        return Commit(store, batch, store.load(batch)) if batch >= 0 else None

    def restore(self, store: Any, commit: Commit | None) -> None:
        """Every role from ``commit`` (None: nothing committed yet); then, by the process that runs the
        micro-batches only, the files of an attempt that did not commit are deleted (a Spark Connect client
        restores the server's commit to report status while the server may be writing the next one)."""
        roles = self.roles()
        if commit is not None:
            for role in roles:
                role.restore(commit)
        if isinstance(store, StateStore):
            for role in roles:
                role.delete_uncommitted()
