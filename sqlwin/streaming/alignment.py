"""Watermark alignment in a live run (GRAMMAR 3, ``WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT d``): the files of a
stream that runs ahead of its group stay in its folder until the others catch up.

Spark's file source cannot be paused from outside, so an aligned stream is read through a source of sqlwin's own
(``AlignedFiles``, a Python streaming data source): its ``latestOffset`` lists the stream's folder, logs new files
in the order they are admitted (modification time, then name, as Spark's file source orders them) and admits the
next ``maxFilesPerTrigger`` of them (default 1) unless the stream is paused. Its rows are the admitted files'
names only; the operator reads the files with Spark's own reader (``AlignedInput``: the declared schema, format and
options, any Hadoop file system), so the rows are exactly what Spark's file source would give.

Which streams are paused is decided once per micro-batch, by the operator that knows the streams' watermarks: after
each micro-batch it writes ``admit-<n>.json`` (``Admission``) with the paused streams (``sqlwin.core.alignment``),
and the sources read the latest before admitting more. So admission follows the committed watermarks, and a
restart reads the same file. Spark keeps polling the sources between micro-batches, so a stream that was paused
reads on as soon as a micro-batch moved the others.

The source's offsets are positions in its log of admitted files (``FileLog``), kept under the table's folder, so a
re-run micro-batch reads the same files. The source runs in Python processes without Spark's JVM: the stream's
folder and the table's folder must be on a file system pyarrow reaches (local, s3, gs, hdfs, abfs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from sqlwin.core.alignment import StreamMark, paused
from sqlwin.errors import SqlwinError
from sqlwin.plan.statements import Alignment, CreateStream
from sqlwin.streaming import storage
from sqlwin.streaming.sources import (
    FILE_FORMATS,
    SOURCE_COLUMN,
    expand_conf,
    numbered,
    read_files,
    schema_ddl,
    with_computed,
)

FILE_COLUMN = "__sqlwin_file"
SOURCE_NAME = "sqlwin_aligned_files"
DEFAULT_MAX_FILES = 1


# -- which streams of a query are aligned -----------------------------------------------------------------------
def aligned_streams(streams: list[Any]) -> dict[int, Alignment]:
    """The streams of a query read under alignment, by their index in the query: those of a group with at least two
    of the query's streams (a stream alone in its group is never paused)."""
    by_group: dict[str, list[int]] = {}
    for i, stream in enumerate(streams):
        if isinstance(stream, CreateStream) and stream.alignment is not None:
            by_group.setdefault(stream.alignment.group, []).append(i)
    out: dict[int, Alignment] = {}
    for group, members in by_group.items():
        drifts = {streams[i].alignment.drift for i in members}
        if len(drifts) > 1:
            names = ", ".join(f"{streams[i].name} ({streams[i].alignment.drift // 1_000_000} s)" for i in members)
            raise SqlwinError(f"the streams of alignment group '{group}' disagree on MAX DRIFT: {names}")
        if len(members) > 1:
            out.update({i: streams[i].alignment for i in members})
    return out


def check_stream(stream: CreateStream, others: list[Any], path: str | None) -> None:
    """CREATE STREAM's checks of its alignment clause: a file stream whose folder a Python process reaches, with the
    drift its group's other streams have."""
    alignment = stream.alignment
    if alignment is None:
        return
    if stream.format not in FILE_FORMATS:
        formats = " | ".join(FILE_FORMATS)
        raise SqlwinError.at(alignment.node, f"WITH WATERMARK ALIGNMENT: sqlwin holds a stream back by admitting its "
                                             f"files itself (Spark's sources cannot be paused), so the stream must "
                                             f"read files (USING {formats}), not USING {stream.format}")
    if path is not None and not storage.reachable_without_jvm(path):
        raise SqlwinError.at(alignment.node, f"WITH WATERMARK ALIGNMENT: sqlwin lists an aligned stream's folder from "
                                             f"a Python process without Spark's JVM, through pyarrow, which does not "
                                             f"reach {path} (local, s3://, gs://, hdfs://, abfs:// folders do)")
    for other in others:
        mine = other.alignment if isinstance(other, CreateStream) else None
        if mine is not None and other.name.lower() != stream.name.lower() and mine.group == alignment.group \
                and mine.drift != alignment.drift:
            raise SqlwinError.at(alignment.node.expression, f"alignment group '{alignment.group}' has MAX DRIFT "
                                                            f"{mine.drift // 1_000_000} s (stream {other.name}); every "
                                                            "stream of a group needs the same drift")


# -- the admitted files and the admission decision, under the table's folder ------------------------------------
class FileLog:
    """A stream's files in admission order: ``files-<k>.json`` holds the names found by one listing, ``k`` being the
    number of names logged before them; positions in the whole log are the source's offsets."""

    def __init__(self, folder: str):
        self.folder = folder
        self.names: list[str] = []  # the parts read so far (a source polls often: each part is read once)

    def known(self) -> list[str]:
        parts = {k: name for name in storage.listdir(self.folder) if (k := numbered(name, "files-")) is not None}
        while len(self.names) in parts:  # a torn part (a crash while logging) ends the log: it is logged again
            data = storage.read_json(storage.join(self.folder, parts[len(self.names)]))
            if data is None:
                break
            self.names.extend(data["names"])
        return list(self.names)

    def extend(self, listed: list[tuple[str, int]]) -> list[str]:
        """The log with the listed files it did not have appended (oldest first, then by name)."""
        names = self.known()
        seen = set(names)
        new = [name for _, name in sorted((mtime, name) for name, mtime in listed
                                          if name not in seen and not name.startswith(("_", ".")))]
        if new:
            storage.write_json(storage.join(self.folder, f"files-{len(names)}.json"), {"names": new})
            self.names.extend(new)
        return names + new


class Admission:
    """The paused streams as of the operator's last micro-batch: ``admit-<n>.json`` (the highest whole one)."""

    def __init__(self, folder: str):
        self.folder = folder
        self.published: tuple | None = None

    def _numbers(self) -> list[int]:
        return sorted(k for name in storage.listdir(self.folder) if (k := numbered(name, "admit-")) is not None)

    def latest(self) -> dict:
        """The last decision: ``paused`` streams and the ``watermarks`` it was made from (none yet: nothing paused)."""
        for number in reversed(self._numbers()):
            data = storage.read_json(storage.join(self.folder, f"admit-{number}.json"))
            if data is not None:
                return data
        return {"paused": [], "watermarks": {}}

    def paused(self) -> set[str]:
        return set(self.latest()["paused"])

    def publish(self, marks: dict[str, StreamMark], groups: dict[str, Alignment]) -> None:
        """Decide and write which streams are paused (when it changed), from the streams' watermarks."""
        stopped: set[str] = set()
        for group in {a.group: a for a in groups.values()}.values():
            members = {name: mark for name, mark in marks.items() if groups[name].group == group.group}
            stopped |= paused(members, group.drift)
        record = (tuple(sorted(stopped)), tuple(sorted((n, m.watermark, m.idle) for n, m in marks.items())))
        if record == self.published:
            return
        numbers = self._numbers()
        number = numbers[-1] + 1 if numbers else 0
        storage.write_json(storage.join(self.folder, f"admit-{number}.json"),
                           {"paused": sorted(stopped), "watermarks": {n: m.watermark for n, m in marks.items()}})
        for old in numbers[:-1]:  # the last one stays until the new one is whole
            storage.delete(storage.join(self.folder, f"admit-{old}.json"))
        self.published = record


# -- the source ---------------------------------------------------------------------------------------------------
@dataclass
class FilesPartition(InputPartition):
    files: list[str]


class AlignedFiles(DataSource):
    """``spark.readStream.format("sqlwin_aligned_files")``: the admitted files' names of one aligned stream.
    Options: ``path`` (the stream's folder), ``state`` (its table's alignment folder), ``stream`` (its name),
    ``maxFilesPerTrigger``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return f"{FILE_COLUMN} string"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return AdmittingReader(dict(self.options))


class AdmittingReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]):
        options = {k.lower(): v for k, v in options.items()}  # Spark hands them case-insensitive
        self.path = options["path"]
        self.stream = options["stream"]
        self.log = FileLog(storage.join(options["state"], "files", self.stream.lower()))
        self.admission = Admission(options["state"])
        self.max_files = int(options.get("maxfilespertrigger", DEFAULT_MAX_FILES))

    def initialOffset(self) -> dict:
        return {"files": 0}

    def latestOffset(self, start: dict, limit: Any = None) -> dict:
        listed = storage.list_files(self.path)
        folders = set(storage.listdir(self.path)) - {name for name, _ in listed}
        visible = sorted(f for f in folders if not f.startswith(("_", ".")))
        if visible:  # Spark's file source would read partition folders (k=v/); missing them would lose rows
            raise ValueError(f"stream {self.stream} is aligned (WITH WATERMARK ALIGNMENT), and sqlwin admits the "
                             f"files directly in {self.path}, not in folders below it: {', '.join(visible[:3])}")
        files = self.log.extend(listed)
        if self.stream in self.admission.paused():
            return start
        most = getattr(limit, "max_files", None) or self.max_files
        return {"files": min(len(files), start["files"] + most)}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        names = self.log.known()[start["files"]:end["files"]]
        return [FilesPartition([storage.join(self.path, n) for n in names])] if names else []

    def read(self, partition: InputPartition) -> Any:
        for path in partition.files:  # type: ignore[attr-defined]
            yield (path,)

    def commit(self, end: dict) -> None:
        pass


# -- the operator's side: the admitted files read as rows, the decision published -------------------------------
class StreamAdmission:
    """For an operator over aligned streams: ``expand`` turns a micro-batch's admitted file names into the files'
    rows (each tagged with its stream, as the other streams' rows are), ``publish`` writes which streams are paused
    after it."""

    def __init__(self, spark: Any, streams: list[Any], aligned: dict[int, Alignment], location: str):
        self.spark = spark
        self.streams = streams
        self.aligned = aligned
        self.admission = Admission(storage.join(location, "alignment"))
        self.groups = {streams[i].name: a for i, a in aligned.items()}

    @property
    def folder(self) -> str:
        return self.admission.folder

    def source(self, stream: CreateStream) -> Any:
        """The streaming DataFrame of an aligned stream's admitted file names."""
        from pyspark.sql import functions as F

        given = expand_conf(self.spark, stream.options)  # ${sqlwin.file_dir} in the path, as its file source reads it
        options = {k: v for k, v in given.items() if k.lower() == "maxfilespertrigger"}
        path = next(v for k, v in given.items() if k.lower() == "path")

        self.spark.dataSource.register(AlignedFiles)
        storage.makedirs(path)
        names = self.spark.readStream.format(SOURCE_NAME).options(**options) \
            .option("path", storage.qualify(path)).option("state", self.folder).option("stream", stream.name).load()
        # the stream's columns, NULL here, so that the query's micro-batches have them whatever was admitted
        columns = with_computed(self.spark.createDataFrame([], schema_ddl(stream)), stream, with_proctime=False)
        return names.select(FILE_COLUMN, *[F.lit(None).cast(f.dataType).alias(f.name) for f in columns.schema.fields])

    def expand(self, batch_df: Any) -> Any:
        from functools import reduce

        from pyspark.sql import functions as F

        if FILE_COLUMN not in batch_df.columns:
            return batch_df
        named = batch_df.where(F.col(FILE_COLUMN).isNotNull()).select(SOURCE_COLUMN, FILE_COLUMN).collect()
        rows = batch_df.where(F.col(FILE_COLUMN).isNull()).drop(FILE_COLUMN)
        parts = [rows]
        for index in sorted({r[0] for r in named}):
            files = [r[1] for r in named if r[0] == index]
            part = read_files(self.spark, self.streams[index], files).withColumn(SOURCE_COLUMN, F.lit(index))
            parts.append(part)
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), parts)

    def publish(self, marks: dict[str, StreamMark]) -> None:
        self.admission.publish({n: m for n, m in marks.items() if n in self.groups}, self.groups)

