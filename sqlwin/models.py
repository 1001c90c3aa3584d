"""`sqlwin run models/`: a folder of dbt-style ``.sql`` models on the embedded Spark.

Each ``<name>.sql`` is a Jinja template (sandboxed) whose SELECT may use sqlwin syntax.
``{{ ref('m') }}`` names another model, ``{{ source('s', 't') }}`` an input table,
``{{ config(materialized='view'|'table'|'streaming_table') }}`` how the result is kept (default ``view``: a
temporary view; ``streaming_table``, dbt-databricks' name: a sqlwin streaming table, started and left running,
``options`` its OPTIONS), ``{{ var('k', default) }}`` a value from ``vars``. Models run in dependency
order; each query goes through :func:`sqlwin.sql`, so it is rewritten exactly as the CLI and
the JDBC server would.

Sources come from ``sources.yml`` (any ``*.yml`` in the folder, dbt's format). A source table
with ``meta: {sqlwin: {path: ..., format: csv, schema: "...", options: {...}}}`` is loaded from
that file (path relative to the yml) into a temporary view ``<source>__<table>``; otherwise it
names ``<schema>.<identifier>`` as in dbt (schema defaults to the source name). A source not
declared anywhere resolves to an existing table ``s.t``, else ``t``. A source with ``meta: {sqlwin: {stream:
"<columns, WATERMARK ...>", format: json, path: ..., options: {...}}}`` is a stream: ``CREATE STREAM
<source>__<table> (<stream>) USING <format> OPTIONS (path ..., ...)``, for streaming-table models to read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlwin.errors import SqlwinError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MATERIALIZATIONS = ("view", "table", "streaming_table")


@dataclass
class ModelResult:
    """One model that ran: what it became and how long it took."""

    model: str
    materialized: str
    relation: str
    depends_on: str  # comma-separated model names
    seconds: float


@dataclass
class _Model:
    name: str
    path: Path
    sql: str = ""
    refs: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)


def _read_sources(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(source, table) -> its entry, with ``_schema`` and ``_dir`` filled in, from every yml."""
    import yaml

    out: dict[tuple[str, str], dict[str, Any]] = {}
    for yml in sorted([*folder.rglob("*.yml"), *folder.rglob("*.yaml")]):
        doc = yaml.safe_load(yml.read_text()) or {}
        for src in doc.get("sources") or []:
            for table in src.get("tables") or []:
                entry = dict(table)
                entry["_schema"] = src.get("schema", src["name"])
                entry["_dir"] = yml.parent
                out[(src["name"], table["name"])] = entry
    return out


class _Context:
    """The functions a model template can call; records what each model refers to."""

    def __init__(self, spark: SparkSession, models: dict[str, _Model],
                 sources: dict[tuple[str, str], dict[str, Any]], variables: dict[str, Any]):
        self.spark = spark
        self.models = models
        self.sources = sources
        self.variables = variables
        self.loaded: dict[tuple[str, str], str] = {}
        self.current: _Model | None = None

    def ref(self, name: str, *more: str) -> str:
        name = more[-1] if more else name  # ref('package', 'model') -> model
        assert self.current is not None
        if name not in self.models:
            raise SqlwinError(f"model {self.current.name}: ref('{name}') names no model in this folder")
        if name not in self.current.refs:
            self.current.refs.append(name)
        return _quote(name)

    def source(self, source_name: str, table_name: str) -> str:
        key = (source_name, table_name)
        entry = self.sources.get(key)
        if entry is None:
            qualified = f"{source_name}.{table_name}"
            if self.spark.catalog.tableExists(qualified):
                return ".".join(map(_quote, key))
            return _quote(table_name)
        spec = (entry.get("meta") or {}).get("sqlwin") or {}
        if "stream" in spec:
            if key not in self.loaded:
                self.loaded[key] = self._stream(source_name, table_name, entry["_dir"], spec)
            return self.loaded[key]
        if "path" not in spec:
            return f"{_quote(entry['_schema'])}.{_quote(entry.get('identifier', table_name))}"
        if key not in self.loaded:
            self.loaded[key] = self._load(source_name, table_name, entry["_dir"], spec)
        return self.loaded[key]

    def _load(self, source_name: str, table_name: str, folder: Path, spec: dict[str, Any]) -> str:
        """Read a file-backed source into a temporary view; return the view's name."""
        reader = self.spark.read.format(spec.get("format", "csv"))
        options = {"header": "true"} if spec.get("format", "csv") == "csv" else {}
        options.update({k: str(v).lower() if isinstance(v, bool) else str(v)
                        for k, v in (spec.get("options") or {}).items()})
        reader = reader.options(**options)
        if spec.get("schema"):
            reader = reader.schema(spec["schema"])
        view = f"{source_name}__{table_name}"
        reader.load(str((folder / spec["path"]).resolve())).createOrReplaceTempView(view)
        return _quote(view)

    def _stream(self, source_name: str, table_name: str, folder: Path, spec: dict[str, Any]) -> str:
        """Declare a stream source (``CREATE STREAM``) once; return its name."""
        from sqlwin.api import sql as sqlwin_sql

        name = f"{source_name}__{table_name}"
        options = {"path": str((folder / spec["path"]).resolve())} if "path" in spec else {}
        options.update({k: str(v).lower() if isinstance(v, bool) else str(v)
                        for k, v in (spec.get("options") or {}).items()})
        listed = ", ".join(f"'{k}' '{v}'" for k, v in options.items())
        statement = (f"CREATE STREAM {name} ({spec['stream']}) USING {spec.get('format', 'json')}"
                     + (f" OPTIONS ({listed})" if listed else ""))
        try:
            sqlwin_sql(self.spark, statement)
        except SqlwinError as e:
            raise SqlwinError(f"source {source_name}.{table_name} (stream): {e}") from None
        return name  # as declared: a streaming query names its stream

    def config(self, **kwargs: Any) -> str:
        assert self.current is not None
        self.current.config.update(kwargs)
        return ""

    def var(self, name: str, default: Any = None) -> Any:
        if name in self.variables:
            return self.variables[name]
        if default is None:
            raise SqlwinError(f"model {self.current.name if self.current else '?'}: "
                              f"var('{name}') is not set and has no default")
        return default


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _render_all(ctx: _Context) -> None:
    from jinja2 import StrictUndefined, TemplateError
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
    env.globals.update(ref=ctx.ref, source=ctx.source, config=ctx.config, var=ctx.var)
    for model in ctx.models.values():
        ctx.current = model
        try:
            model.sql = env.from_string(model.path.read_text()).render().strip().rstrip(";").strip()
        except TemplateError as e:
            line = getattr(e, "lineno", None)
            raise SqlwinError(f"model {model.name} ({model.path.name}): {e}", line, 1 if line else None) from None
        kind = model.config.get("materialized", "view")
        if kind not in MATERIALIZATIONS:
            raise SqlwinError(f"model {model.name}: materialized={kind!r}; expected one of {MATERIALIZATIONS}")


def _order(models: dict[str, _Model]) -> list[_Model]:
    """Models after everything they ref (depth-first); a cycle is an error that names it."""
    done: dict[str, bool] = {}  # name -> finished (False while on the stack)
    order: list[_Model] = []

    def visit(name: str, stack: list[str]) -> None:
        if done.get(name) is True:
            return
        if name in done:
            cycle = [*stack[stack.index(name):], name]
            raise SqlwinError("models refer to each other in a cycle: " + " -> ".join(cycle))
        done[name] = False
        for dep in models[name].refs:
            visit(dep, [*stack, name])
        done[name] = True
        order.append(models[name])

    for name in sorted(models):
        visit(name, [])
    return order


def _replace_table(spark: SparkSession, name: str, df: Any, file_format: str) -> None:
    """Overwrite table ``name`` with ``df``.

    With Spark's in-memory catalog a new process forgets the tables of the previous run while
    their files stay in the warehouse, and Spark then refuses to create the table there
    (LOCATION_ALREADY_EXISTS). Those files are this model's earlier output: remove them.
    """
    spark.sql(f"DROP VIEW IF EXISTS {_quote(name)}")  # a temp view of that name would shadow it
    if not spark.catalog.tableExists(name):
        jvm = spark.sparkContext._jvm
        database = spark.catalog.getDatabase(spark.catalog.currentDatabase())
        path = jvm.org.apache.hadoop.fs.Path(database.locationUri.rstrip("/") + "/" + name.lower())
        fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
        if fs.exists(path):
            fs.delete(path, True)
    df.write.mode("overwrite").format(file_format).saveAsTable(name)


def _start_streaming_table(spark: SparkSession, model: _Model) -> None:
    """``CREATE STREAMING TABLE <model> [OPTIONS (...)] AS <its query>``: its sink is read by name (``ref``).
    One already running (the folder run again in this process) goes on; a stopped one resumes from its folder."""
    from sqlwin.api import sql as sqlwin_sql
    from sqlwin.streaming import catalog

    running = catalog.find_table(model.name)
    if running is not None and running.is_active:
        return

    options = model.config.get("options") or {}
    listed = ", ".join(f"'{k}' '{v}'" for k, v in options.items())
    head = f"CREATE STREAMING TABLE {model.name}" + (f" OPTIONS ({listed})" if listed else "") + " AS\n"
    try:
        sqlwin_sql(spark, head + model.sql)
    except SqlwinError as e:  # positions in the model's own text, below the line sqlwin put on top
        if e.line is not None and e.line > 1:
            raise SqlwinError(e.message, e.line - 1, e.col) from None
        raise


def run_models(spark: SparkSession, path: str | Path, *, vars: dict[str, Any] | None = None,
               select: list[str] | None = None) -> list[ModelResult]:
    """Run every model of the folder ``path`` (or those in ``select`` and what they ref).

    Returns one :class:`ModelResult` per model, in the order they ran. Raises
    :class:`SqlwinError` for a missing ref, a cycle, a bad template or a bad query.
    """
    from sqlwin.api import sql as sqlwin_sql

    folder = Path(path)
    if not folder.is_dir():
        raise SqlwinError(f"{folder}: not a folder of models")
    models: dict[str, _Model] = {}
    for file in sorted(folder.rglob("*.sql")):
        if file.stem in models:
            raise SqlwinError(f"two models are named {file.stem}: {models[file.stem].path} and {file}")
        models[file.stem] = _Model(file.stem, file)
    if not models:
        raise SqlwinError(f"{folder}: no .sql models found")
    ctx = _Context(spark, models, _read_sources(folder), dict(vars or {}))
    _render_all(ctx)
    order = _order(models)
    if select:
        missing = [s for s in select if s not in models]
        if missing:
            raise SqlwinError(f"no such model: {', '.join(missing)}")
        wanted: set[str] = set()
        stack = list(select)
        while stack:
            name = stack.pop()
            if name not in wanted:
                wanted.add(name)
                stack.extend(models[name].refs)
        order = [m for m in order if m.name in wanted]
    from pyspark.errors import PySparkException

    results = []
    for model in order:
        started = time.perf_counter()
        kind = model.config.get("materialized", "view")
        try:
            if kind == "streaming_table":  # started, and left running (``sqlwin run`` watches it)
                _start_streaming_table(spark, model)
            elif kind == "table":
                df = sqlwin_sql(spark, model.sql)
                _replace_table(spark, model.name, df, model.config.get("file_format", "parquet"))
            else:
                sqlwin_sql(spark, model.sql).createOrReplaceTempView(model.name)
        except (SqlwinError, PySparkException) as e:
            raise SqlwinError(f"model {model.name} ({model.path.name}): {e}") from None
        results.append(ModelResult(model.name, kind, model.name, ", ".join(model.refs),
                                   round(time.perf_counter() - started, 3)))
    return results
