"""Compaction of a sink: many micro-batch folders merged into few files, readers never seeing a row twice.

A sink (``sqlwin.streaming.sinks.BatchSink``) writes each micro-batch to its own folder ``micro_batch=<n>``;
with a trigger of a second that is a folder (and a file or more) a second. Compaction merges the folders of
committed micro-batches into a few files in which ``micro_batch`` is a column, and names them in a manifest.

Files, under the sink's folder (every one through ``sqlwin.streaming.storage``; Spark writes the data files):

- ``micro_batch=<n>/``: micro-batch n, as written (Spark's writer, the sink's format);
- ``_sqlwin_sink/compacted/<first>-<last>/``: the rows of micro-batches first..last, ``micro_batch`` a data
  column, in the sink's format. The name is a function of the range, so a compaction run again after a crash
  writes (overwrites) the same folder;
- ``_sqlwin_sink/manifest-<k>.json``: compaction k, written once and checked whole (``storage.write_json``):
  ``through`` (every micro-batch up to it is in ``files``) and ``files`` (the compacted folders, with their
  ranges, bytes, rows and level). The newest whole manifest is the sink; a torn one (a crash while writing it)
  is not, and the compaction that wrote it runs again.

What a reader sees (``BatchSink.read``: the table's view, ``StreamingTable.read()``): the files of the newest
whole manifest, plus the folders ``micro_batch=<m>`` with m above its ``through``, named one by one (partition
discovery with the sink's folder as ``basePath``; a Spark Connect client, which may not see the server's disk,
has Spark list the sink's folder and prune it to those). Every row is in exactly one of the two: compacted rows
are never read from their old folders, and the folders' rows are in no compacted file yet. The view is made
again at every commit (a new listing); a DataFrame made before a compaction keeps its listing, whose files stay
(below).

When: after micro-batch n is written (``BatchSink.write``, before any commit of n), if the folders of
micro-batches below n that no manifest covers number ``compaction_batches`` (default 50) or weigh
``compaction_target`` (default 128MB), they are merged, ``through`` becomes n - 1. Only micro-batches below n
are compacted: they are committed (sqlwin's ``state/<m>.json`` on the custom path, Spark's commit log on the
native path, both written before micro-batch n runs), so no re-run ever writes them again. Compacted files
below the target are merged again, a few at a time (``FANIN`` of one level make one of the next), so the files
stay few: at most ``FANIN - 1`` below the target per level, the rest at least the target each (a compaction
writes one file per target's worth of input).

Order within micro-batch n, and what a crash (SIGKILL) at each point leaves:

1. the sink writes ``micro_batch=<n>`` (replacing what an earlier attempt wrote there);
2. compaction writes ``compacted/<first>-<last>`` (crash: a folder no manifest names; the re-run of n, with
   the same committed folders and the same newest manifest, writes the same folder again, and a later clean-up
   deletes any folder no manifest names);
3. it writes ``manifest-<k>.json`` (crash while writing: torn, ignored, written again by the re-run; crash after
   it: the re-run of n finds those micro-batches compacted and compacts nothing, it only writes folder n again);
4. it deletes the files that earlier manifests superseded (below), then the micro-batch's view is registered;
5. the micro-batch commits: sqlwin's ``state/<n>.json`` (custom path; ``operator._commit``), or Spark's commit
   log once ``foreachBatch`` returns (native path). A crash before it re-runs micro-batch n: back to 1.

Step 1 to 3 may run twice for a micro-batch, never for a committed one, and never change what a reader of the
newest manifest reads: a row is written in its folder, then in a compacted file that only a whole manifest
(naming ``through``) makes a reader take instead of the folder.

Retention: the files a manifest supersedes (the folders it compacted, the compacted files it merged) are
deleted by a later compaction, and not before that manifest is ``compaction_retention`` old (default 0: the
next compaction deletes them): a reader that listed the files before a compaction can read them until the
compaction after it (``compaction_batches`` micro-batches later at least), or for the retention if longer.
Old manifests go with them. Superseded folders are never listed by readers, so keeping them costs disk only.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from sqlwin.errors import SqlwinError
from sqlwin.streaming import storage
from sqlwin.streaming.state import now_micros

META = "_sqlwin_sink"  # Spark's file listing skips names starting with "_": readers of the folder never see it
FANIN = 4  # this many compacted files of one level below the target become one file of the next level
MB = 1 << 20
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_UNITS = {"": 1_000_000, "s": 1_000_000, "sec": 1_000_000, "second": 1_000_000, "ms": 1_000,
          "millisecond": 1_000, "m": 60_000_000, "min": 60_000_000, "minute": 60_000_000, "h": 3_600_000_000,
          "hour": 3_600_000_000, "d": 86_400_000_000, "day": 86_400_000_000}


@dataclass(frozen=True)
class CompactionPolicy:
    """A table's compaction options: ``compaction`` ('true' | 'false'), ``compaction_target`` (a size: '128MB'),
    ``compaction_batches`` (a count: '50'), ``compaction_retention`` (an interval: '0 seconds')."""

    enabled: bool = True
    target_bytes: int = 128 * MB
    max_batches: int = 50
    retention_micros: int = 0

    @classmethod
    def from_options(cls, options: dict[str, str], table: str) -> CompactionPolicy:
        default = cls()
        enabled = options.get("compaction", "true").strip().lower()
        if enabled not in ("true", "false"):
            raise SqlwinError(f"streaming table {table}: OPTIONS (compaction '{options['compaction']}'): expected "
                              "'true' or 'false'")
        return cls(enabled == "true",
                   _option(options, "compaction_target", table, parse_size, default.target_bytes, "a size such "
                           "as '128MB'"),
                   _option(options, "compaction_batches", table, _count, default.max_batches, "a number of "
                           "micro-batches, at least 1"),
                   _option(options, "compaction_retention", table, parse_interval, default.retention_micros,
                           "an interval such as '0 seconds' or '10 minutes'"))


OFF = CompactionPolicy(enabled=False)


def _option(options: dict[str, str], key: str, table: str, parse: Any, default: int, expected: str) -> int:
    text = options.get(key)
    if text is None:
        return default
    value = parse(text)
    if value is None:
        raise SqlwinError(f"streaming table {table}: OPTIONS ({key} '{text}'): expected {expected}")
    return value


def parse_size(text: str) -> int | None:
    """'128MB', '1 KB', '1.5g', '4096' (bytes; units of 1024), or None; at least one byte."""
    match = _SIZE.match(text)
    if not match:
        return None
    value = float(match.group(1)) * 1024 ** "bkmgt".index(match.group(2).lower() or "b")
    return int(value) if value >= 1 else None


def parse_interval(text: str) -> int | None:
    """'10 minutes', '30 s', '1 hour', '0 seconds' in microseconds, or None."""
    match = _INTERVAL.match(text)
    if not match:
        return None
    unit = match.group(2).lower()
    if unit not in _UNITS and unit.endswith("s"):  # minutes, seconds, ...
        unit = unit[:-1]
    return int(float(match.group(1)) * _UNITS[unit]) if unit in _UNITS else None


def _count(text: str) -> int | None:
    return int(text) if text.strip().isdigit() and int(text) >= 1 else None


# -- manifests ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Compacted:
    """One compacted folder: the rows of micro-batches ``first`` to ``last``."""

    name: str
    first: int
    last: int
    bytes: int
    rows: int
    level: int


@dataclass(frozen=True)
class Manifest:
    sequence: int
    through: int  # every micro-batch up to here is in ``files``; folders micro_batch=<m> above it are read
    files: tuple[Compacted, ...]
    written_at: int  # wall clock, epoch microseconds (retention)

    def to_dict(self) -> dict:
        return {"sequence": self.sequence, "through": self.through, "written_at": self.written_at,
                "files": [asdict(f) for f in self.files]}

    @classmethod
    def from_dict(cls, data: dict) -> Manifest:
        return cls(int(data["sequence"]), int(data["through"]), tuple(Compacted(**f) for f in data["files"]),
                   int(data["written_at"]))


class SinkLog:
    """The manifests of the sink in folder ``path`` (read by every reader; written by the one writer)."""

    def __init__(self, path: str):
        self.path = path
        self.meta = storage.join(path, META)
        self._whole: dict[int, Manifest] = {}  # a whole manifest never changes: read once

    def manifest_path(self, sequence: int) -> str:
        return storage.join(self.meta, f"manifest-{sequence}.json")

    def compacted_path(self, name: str) -> str:
        return storage.join(self.meta, "compacted", name)

    def sequences(self) -> list[int]:
        names = storage.listdir(self.meta)
        return sorted(int(n[9:-5]) for n in names if n.startswith("manifest-") and n.endswith(".json")
                      and n[9:-5].isdigit())

    def load(self, sequence: int) -> Manifest | None:
        if sequence not in self._whole:
            data = storage.read_json(self.manifest_path(sequence))
            if data is None:
                return None  # torn (or deleted meanwhile)
            self._whole[sequence] = Manifest.from_dict(data)
        return self._whole[sequence]

    def newest(self) -> Manifest | None:
        """The newest whole manifest, or None when no compaction is on disk."""
        for sequence in reversed(self.sequences()):
            manifest = self.load(sequence)
            if manifest is not None:
                return manifest
        return None

    def newest_through_spark(self, spark: Any) -> Manifest | None:
        """``newest`` for a Spark Connect client, which may not see the server's disk: Spark reads the files."""
        import json

        try:
            rows = (spark.read.option("wholetext", "true").option("pathGlobFilter", "manifest-*.json")
                    .option("ignoreMissingFiles", "true").text(self.meta)
                    .select("value", "_metadata.file_name").collect())
        except Exception:  # no manifest folder: never compacted
            return None
        found = sorted(((r["file_name"], r["value"]) for r in rows), reverse=True,
                       key=lambda item: int(item[0][9:-5]) if item[0][9:-5].isdigit() else -1)
        for _, text in found:
            try:
                data = json.loads(text)
            except ValueError:
                continue
            if isinstance(data, dict) and data.pop("end", None) is True:
                return Manifest.from_dict(data)
        return None

    def write(self, manifest: Manifest) -> None:
        storage.write_json(self.manifest_path(manifest.sequence), manifest.to_dict())
        self._whole[manifest.sequence] = manifest

    def delete(self, sequence: int) -> None:
        storage.delete(self.manifest_path(sequence))
        self._whole.pop(sequence, None)


def batch_numbers(path: str) -> list[int]:
    """The micro-batches whose folders ``micro_batch=<n>`` are in the sink's folder ``path``."""
    names = (n[len("micro_batch="):] for n in storage.listdir(path) if n.startswith("micro_batch="))
    return sorted(int(n) for n in names if n.isdigit())


def plan(files: list[Compacted], new_bytes: int, target: int) -> tuple[int, int]:
    """How many of the newest compacted ``files`` a compaction of ``new_bytes`` of micro-batch folders takes in,
    and the level of what it writes: its output is one more file of level 0, and ``FANIN`` files of one level
    below the target (the newest ones, the output among them) become one of the next level."""
    take, level, size = 0, 0, new_bytes
    while size < target:
        rest = files[:len(files) - take]
        run = 0
        for entry in reversed(rest):
            if entry.level != level or entry.bytes >= target:
                break
            run += 1
        if run + 1 < FANIN:
            break
        size += sum(e.bytes for e in rest[len(rest) - run:])
        take += run
        level += 1
    return take, level


class Compactor:
    """Compaction of one sink (the module docstring), run by the process that writes the sink."""

    def __init__(self, sink: Any, policy: CompactionPolicy):
        self.sink = sink
        self.policy = policy
        self._sizes: dict[int, int] | None = None  # bytes of each micro-batch folder no manifest covers

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_sizes": None}  # listed again where it runs (a Spark Connect server)

    # -- test hooks: a crash between the steps of a compaction (tests/test_sinks.py) --------------------------
    def files_written(self, entry: Compacted) -> None:
        """After the compacted files are written, before the manifest that names them."""

    def manifest_written(self, manifest: Manifest) -> None:
        """After the manifest, before the old files are deleted and the micro-batch commits."""

    # -- bookkeeping ----------------------------------------------------------------------------------------
    def wrote(self, batch: int) -> None:
        if self._sizes is not None:
            self._sizes[batch] = storage.tree_size(self.sink.batch_path(batch))

    def cleared(self, batch: int) -> None:
        if self._sizes is not None:
            self._sizes.pop(batch, None)

    def _pending(self, through: int) -> dict[int, int]:
        if self._sizes is None:  # first use since the sink started: the folders on disk
            self._sizes = {}
            for batch in batch_numbers(self.sink.path):
                if batch > through:
                    self._sizes[batch] = storage.tree_size(self.sink.batch_path(batch))
        return self._sizes

    # -- compaction -----------------------------------------------------------------------------------------
    def after_write(self, spark: Any, batch: int) -> Manifest | None:
        """Micro-batch ``batch`` is written (not committed): compact the committed folders below it if due."""
        log = self.sink.log
        newest = log.newest()
        through = newest.through if newest is not None else -1
        due = {m: b for m, b in self._pending(through).items() if through < m < batch}
        if not due or (len(due) < self.policy.max_batches and sum(due.values()) < self.policy.target_bytes):
            return None
        return self.compact(spark, batch, newest, due)

    def compact(self, spark: Any, batch: int, newest: Manifest | None, due: dict[int, int]) -> Manifest:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        sink, log = self.sink, self.sink.log
        through = newest.through if newest is not None else -1
        files = list(newest.files) if newest is not None else []
        new_bytes = sum(due.values())
        take, level = plan(files, new_bytes, self.policy.target_bytes)
        kept, merged = files[:len(files) - take], files[len(files) - take:]
        first = merged[0].first if merged else through + 1
        name = f"{first}-{batch - 1}"
        rows = sink.reader(spark).option("basePath", sink.path).load([sink.batch_path(m) for m in sorted(due)])
        if merged:
            rows = sink.reader(spark).load([log.compacted_path(f.name) for f in merged]).unionByName(rows)
        parts = max(1, math.ceil((new_bytes + sum(f.bytes for f in merged)) / self.policy.target_bytes))
        observation = Observation()
        target = log.compacted_path(name)
        sink.writer(rows.observe(observation, F.count(F.lit(1)).alias("rows")).coalesce(parts)).save(target)
        entry = Compacted(name, first, batch - 1, storage.tree_size(target), int(observation.get["rows"]), level)
        self.files_written(entry)
        manifest = Manifest((newest.sequence + 1) if newest is not None else 0, batch - 1, (*kept, entry),
                            now_micros())
        log.write(manifest)
        self.manifest_written(manifest)
        self._sizes = {m: b for m, b in (self._sizes or {}).items() if m >= batch}
        self.clean(manifest)
        return manifest

    def clean(self, newest: Manifest) -> None:
        """Delete what the manifests older than ``newest`` superseded, once the retention has passed since they
        were written: the newest such manifest ``s`` and those after it keep their files (the compacted folders
        they name, the folders above ``s``'s ``through``); everything else goes, older manifests last."""
        log = self.sink.log
        horizon = now_micros() - self.policy.retention_micros
        sequences = log.sequences()
        manifests = {j: log.load(j) for j in sequences}
        old = [j for j, m in manifests.items() if j < newest.sequence and m is not None and m.written_at <= horizon]
        if not old:
            return
        oldest_kept = max(old)
        keep = {f.name for j, m in manifests.items() if j >= oldest_kept and m is not None for f in m.files}
        through = manifests[oldest_kept].through  # type: ignore[union-attr]
        folder = storage.join(log.meta, "compacted")
        for name in storage.listdir(folder):
            if name not in keep:
                storage.delete(storage.join(folder, name))
        for batch in batch_numbers(self.sink.path):
            if batch <= through:
                storage.delete(self.sink.batch_path(batch))
        for j in sequences:
            if j < oldest_kept:
                log.delete(j)
