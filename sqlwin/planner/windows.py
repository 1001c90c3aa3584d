"""Bind and validate one window TVF call into a ``WindowSpec`` (GRAMMAR 1 and 6)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from sqlwin.dialect.nodes import Descriptor, RowsExtent, TableArg, WindowTVF
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import (
    COUNT_WINDOW_COLUMNS,
    Column,
    CountForm,
    Relation,
    Rows,
    TimeType,
    WindowKind,
    WindowSpec,
)
from sqlwin.planner.values import extent, interval_micros, is_constant_interval

# Parameter names in positional order, and how many are required, per kind (Flink's signatures).
SIGNATURES: dict[WindowKind, tuple[tuple[str, ...], int, str]] = {
    WindowKind.TUMBLE: (("data", "timecol", "size", "offset"), 3,
                        "(TABLE t, DESCRIPTOR(col), size [, offset])"),
    WindowKind.HOP: (("data", "timecol", "slide", "size", "offset"), 4,
                     "(TABLE t, DESCRIPTOR(col), slide, size [, offset])"),
    WindowKind.CUMULATE: (("data", "timecol", "step", "size", "offset"), 4,
                          "(TABLE t, DESCRIPTOR(col), step, size [, offset])"),
    WindowKind.SESSION: (("data", "timecol", "gap", "max_duration"), 3,
                         "(TABLE t [PARTITION BY k, ...], DESCRIPTOR(col), gap [, max_duration])"),
}

TIME_TYPES = {"timestamp": TimeType.TIMESTAMP, "timestamp_ntz": TimeType.TIMESTAMP_NTZ}


@dataclass
class BoundArgs:
    values: dict[str, exp.Expr]
    call: WindowTVF


def bind_arguments(call: WindowTVF) -> BoundArgs:
    """Match positional and named arguments to the kind's parameters."""
    try:
        kind = WindowKind(call.kind)
    except ValueError:
        raise SqlwinError.at(call, f"unknown window function {call.kind}") from None
    names, required, signature = SIGNATURES[kind]
    args = list(call.expressions)
    values: dict[str, exp.Expr] = {}
    named_seen = False
    for i, arg in enumerate(args):
        if isinstance(arg, (exp.Kwarg, exp.PropertyEQ)):
            named_seen = True
            name = arg.this.name.lower()
            if name not in names:
                raise SqlwinError.at(arg, f"{kind.value} has no parameter {name.upper()}; "
                                          f"expected {kind.value}{signature}")
            if name in values:
                raise SqlwinError.at(arg, f"{kind.value}: parameter {name.upper()} given twice")
            values[name] = arg.expression
        else:
            if named_seen:
                raise SqlwinError.at(arg, f"{kind.value}: positional argument after a named one")
            if i >= len(names):
                raise SqlwinError.at(call, f"{kind.value} expects {signature}; got {len(args)} arguments")
            values[names[i]] = arg
    missing = [n for n in names[:required] if n not in values]
    if missing:
        raise SqlwinError.at(call, f"{kind.value} expects {signature}; got {len(args)} arguments"
                                   if not named_seen else
                                   f"{kind.value} expects {signature}; missing {', '.join(m.upper() for m in missing)}")
    return BoundArgs(values, call)


def time_column_name(node: exp.Expr, kind: str) -> str:
    if isinstance(node, Descriptor):
        cols = node.expressions
        if len(cols) != 1:
            raise SqlwinError.at(node, f"{kind}: DESCRIPTOR takes exactly one time column, got {len(cols)}")
        return cols[0].name
    if isinstance(node, exp.Literal) and node.is_string:  # the plain-Spark UDTF spelling 'ts'
        return node.name
    raise SqlwinError.at(node, f"{kind}: expected DESCRIPTOR(time_column) as the second argument, "
                               f"got {node.sql('sqlwin')}")


def data_argument(node: exp.Expr, kind: str) -> TableArg:
    if isinstance(node, TableArg):
        return node
    raise SqlwinError.at(node, f"{kind}: expected TABLE name or TABLE(subquery) as the first argument, "
                               f"got {node.sql('sqlwin')}")


def partition_columns(data: TableArg, relation: Relation, kind: str) -> tuple[str, ...]:
    keys: list[str] = []
    for key in data.args.get("partition_by") or []:
        if isinstance(key, exp.Paren):
            key = key.this
        items = key.expressions if isinstance(key, exp.Tuple) else [key]
        for item in items:
            if not isinstance(item, exp.Column):
                raise SqlwinError.at(item, f"{kind}: PARTITION BY takes column names, got {item.sql('sqlwin')}")
            if relation.columns is not None and relation.column(item.name) is None:
                raise SqlwinError.at(item, f"{kind}: PARTITION BY column {item.name!r} is not a column of the "
                                           f"input; it has {', '.join(relation.column_names)}")
            col = relation.column(item.name)
            keys.append(col.name if col else item.name)
    return tuple(keys)


class WindowBuilder:
    """Turns bound arguments plus the relation's schema into a validated ``WindowSpec``."""

    def __init__(self, call: WindowTVF, relation: Relation, alias: str):
        self.call = call
        self.kind = WindowKind(call.kind)
        self.relation = relation
        self.alias = alias

    def build(self) -> WindowSpec:
        bound = bind_arguments(self.call).values
        data = data_argument(bound["data"], self.kind.value)
        time_col = self._time_column(bound["timecol"])
        partition_by = partition_columns(data, self.relation, self.kind.value)
        spec = WindowSpec(kind=self.kind, relation=self.relation, time_col=time_col,
                          time_type=self._time_type(bound["timecol"], time_col),
                          partition_by=partition_by, alias=self.alias, node=self.call,
                          **self._parameters(bound))
        self._check(spec, bound)
        return spec

    def _time_column(self, node: exp.Expr) -> str:
        name = time_column_name(node, self.kind.value)
        if self.relation.columns is not None:
            col = self.relation.column(name)
            if col is None:
                raise SqlwinError.at(node, f"{self.kind.value}: DESCRIPTOR column {name!r} is not a column of "
                                           f"the input; it has {', '.join(self.relation.column_names)}")
            return col.name
        return name

    def _time_type(self, node: exp.Expr, name: str) -> TimeType | None:
        col: Column | None = self.relation.column(name)
        if col is None:
            return None
        if col.type not in TIME_TYPES:
            raise SqlwinError.at(node, f"{self.kind.value}: time column {name!r} must be TIMESTAMP or "
                                       f"TIMESTAMP_NTZ, but it is {col.type.upper()}; cast it first")
        return TIME_TYPES[col.type]

    def _parameters(self, bound: dict[str, exp.Expr]) -> dict[str, object]:
        k = self.kind.value
        params: dict[str, object] = {}
        for name in ("size", "slide"):
            if name in bound:
                params[name] = extent(bound[name], f"{k} {name}")
        if "step" in bound:
            if isinstance(bound["step"], RowsExtent):
                raise SqlwinError.at(bound["step"], "CUMULATE counts time, not rows: step must be an INTERVAL")
            params["step"] = interval_micros(bound["step"], f"{k} step")
        if "offset" in bound:
            params["offset"] = interval_micros(bound["offset"], f"{k} offset")
        if "gap" in bound:
            gap = bound["gap"]
            if isinstance(gap, RowsExtent):
                raise SqlwinError.at(gap, "SESSION gap must be an INTERVAL or an interval expression, not ROWS")
            if isinstance(gap, exp.Literal) and not gap.is_string:
                raise SqlwinError.at(gap, "SESSION gap must be an INTERVAL, got a number")
            params["gap"] = interval_micros(gap, "SESSION gap") if is_constant_interval(gap) else gap
        if "max_duration" in bound:
            params["max_duration"] = interval_micros(bound["max_duration"], "SESSION max_duration")
        return params

    def _check(self, spec: WindowSpec, bound: dict[str, exp.Expr]) -> None:
        k = self.kind.value

        def positive(name: str, value: object) -> None:
            if isinstance(value, int) and value <= 0:
                raise SqlwinError.at(bound[name], f"{k} {name} must be positive, got {_show(value)}")

        for name in ("size", "slide", "step", "max_duration"):
            if name in bound:
                positive(name, getattr(spec, name))
        if isinstance(spec.gap, int):
            positive("gap", spec.gap)
        if self.kind is WindowKind.CUMULATE:
            if not isinstance(spec.size, int):
                raise SqlwinError.at(bound["size"], "CUMULATE counts time, not rows: size must be an INTERVAL")
            assert spec.step is not None
            if spec.size % spec.step:
                raise SqlwinError.at(bound["size"], f"CUMULATE size ({_show(spec.size)}) must be a multiple of "
                                                    f"step ({_show(spec.step)})")
        form = spec.count_form
        if "offset" in bound:
            if form is not None and form is not CountForm.HOP_TIME_ROWS:
                raise SqlwinError.at(bound["offset"], f"{k}: offset applies to time-based windows, not to "
                                                      "windows that end at a row count")
            align = spec.slide if form is CountForm.HOP_TIME_ROWS else spec.size
            if isinstance(align, int) and abs(spec.offset) >= align:
                raise SqlwinError.at(bound["offset"], f"{k}: |offset| ({_show(abs(spec.offset))}) must be less "
                                                      f"than the window size ({_show(align)})")
        if spec.partition_by and self.kind is not WindowKind.SESSION and form is None:
            raise SqlwinError.at(self.call, f"{k}: PARTITION BY applies to SESSION and count (ROWS) windows; "
                                            "group time windows with GROUP BY instead")
        if self.relation.columns is not None:
            taken = {c.lower() for c in self.relation.column_names} & set(COUNT_WINDOW_COLUMNS)
            if taken & set(spec.output_window_columns):
                raise SqlwinError.at(self.call, f"{k}: the input already has column(s) "
                                                f"{', '.join(sorted(taken))}; rename them before windowing")
        if spec.dynamic_gap and self.relation.columns is not None:
            known = {c.lower() for c in self.relation.column_names}
            for col in spec.gap.find_all(exp.Column):  # type: ignore[union-attr]
                if col.name.lower() not in known:
                    raise SqlwinError.at(col, f"SESSION gap refers to {col.name!r}, which is not a column of "
                                              "the input")


def _show(micros: int | Rows) -> str:
    if isinstance(micros, Rows):
        return f"ROWS {micros.n}"
    for unit, size in (("DAY", 86_400_000_000), ("HOUR", 3_600_000_000), ("MINUTE", 60_000_000),
                       ("SECOND", 1_000_000), ("MILLISECOND", 1_000)):
        if micros % size == 0:
            return f"INTERVAL '{micros // size}' {unit}"
    return f"{micros} microseconds"
