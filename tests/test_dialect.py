"""The sqlwin dialect: round trips (fixture corpus), GRAMMAR examples, tree shapes, positions,
errors with exact line/col, and the stock spark dialect left unchanged. Pure: no Spark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from sqlwin.dialect import Sqlwin, generate, parse, parse_one
from sqlwin.dialect import nodes as n
from sqlwin.errors import SqlwinError, position_of

CORPUS = Path(__file__).parent / "fixtures" / "dialect_roundtrip.sql"


def _corpus() -> list[tuple[str, str]]:
    section, cases = "", []
    for raw in CORPUS.read_text().splitlines():
        line = raw.strip()
        if match := re.match(r"-- @(\w+)", line):
            section = match.group(1)
        elif line and not line.startswith("--"):
            cases.append((section, line))
    return cases


def q(clauses: str, base: str = "SELECT k, COUNT(*) FROM t GROUP BY k") -> exp.Select:
    return parse_one(f"{base} {clauses}")


def trigger(text: str) -> n.Trigger:
    return q(f"EMIT WITH TRIGGER {text}").args["emit"].args["trigger"]


def tvf(sql: str) -> n.WindowTVF:
    return parse_one(f"SELECT * FROM {sql}").args["from_"].this


def shape(node: exp.Expr | None) -> object:
    """A compact tree shape of a trigger: ('Until', ('Repeatedly', ('AfterCount', 2)), ...)."""
    if node is None:
        return None
    name = type(node).__name__.removeprefix("Trigger")
    if isinstance(node, (n.TriggerAfterCount, n.TriggerEveryRows)):
        return (name, int(node.this.name))
    if isinstance(node, n.TriggerAfterWatermark):
        return (name, shape(node.args.get("early")), shape(node.args.get("late")))
    if isinstance(node, (n.TriggerAfterAny, n.TriggerAfterAll, n.TriggerAfterEach)):
        return (name, *[shape(e) for e in node.expressions])
    if isinstance(node, n.TriggerUntil):
        return (name, shape(node.this), shape(node.expression))
    if isinstance(node, (n.TriggerRepeatedly, n.TriggerParen)):
        return (name, shape(node.this))
    return (name,)


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize(("section", "sql"), _corpus(), ids=lambda v: v[:70] if isinstance(v, str) else v)
def test_corpus_round_trip(section: str, sql: str) -> None:
    tree = parse_one(sql)
    out = generate(tree)
    if section == "spark":  # as stock spark prints it (whose own trees need not round-trip)
        assert out == sqlglot.transpile(sql, read="spark", write="spark")[0]
        assert generate(parse_one(out)) == out
        return
    assert parse_one(out) == tree
    if section == "identity":
        assert out == sql


def test_corpus_covers_every_section() -> None:
    sections = {s for s, _ in _corpus()}
    assert sections == {"spark", "identity", "equivalent"}


def test_registered_with_sqlglot() -> None:
    tree = sqlglot.parse_one("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)", read="sqlwin")
    assert isinstance(tree.args["from_"].this, n.WindowTVF)
    assert sqlglot.Dialect.get_or_raise("sqlwin").__class__ is Sqlwin
    assert tree.sql(dialect="sqlwin") == "SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)"


# ---------------------------------------------------------------- GRAMMAR section 1: window TVFs

STORM_ROWS = [
    "TUMBLE(TABLE t, DESCRIPTOR(ts), ROWS 10)",
    "HOP(TABLE t, DESCRIPTOR(ts), ROWS 2, ROWS 10)",
    "HOP(TABLE t, DESCRIPTOR(ts), ROWS 1, ROWS 10)",
    "HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECONDS, ROWS 10)",
    "HOP(TABLE t, DESCRIPTOR(ts), ROWS 2, INTERVAL '10' SECONDS)",
    "HOP(TABLE t, DESCRIPTOR(ts), ROWS 1, INTERVAL '10' SECONDS)",
    "HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECONDS, INTERVAL '10' SECONDS)",
    "TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECONDS)",
]


@pytest.mark.parametrize("call", STORM_ROWS)
def test_storm_table_rows(call: str) -> None:
    node = tvf(call)
    assert generate(node) == call
    assert isinstance(node.expressions[0], n.TableArg)
    assert isinstance(node.expressions[1], n.Descriptor)
    kinds = [type(a) for a in node.expressions[2:]]
    assert all(k in (n.RowsExtent, exp.Interval) for k in kinds)


@pytest.mark.parametrize(
    ("sql", "kind", "wrapped", "nargs"),
    [
        ("TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' MINUTES)", "TUMBLE", None, 3),
        ("TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' MINUTES))", "TUMBLE", True, 3),
        ("tumble(TABLE t, DESCRIPTOR(ts), INTERVAL '1' DAY, INTERVAL '-8' HOUR)", "TUMBLE", None, 4),
        ("Hop(TABLE t, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)", "HOP", None, 4),
        ("cumulate(TABLE t, DESCRIPTOR(ts), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES)", "CUMULATE", None, 4),
        ("session(TABLE t, DESCRIPTOR(ts), INTERVAL '5' MINUTES)", "SESSION", None, 3),
        ("table(Session(TABLE t, DESCRIPTOR(ts), INTERVAL '5' MINUTES))", "SESSION", True, 3),
        ("TUMBLE(TABLE t)", "TUMBLE", None, 1),  # wrong arity: the planner reports it
        ("HOP(t, ts)", "HOP", None, 2),  # no TABLE argument: still a WindowTVF in FROM
    ],
)
def test_tvf_kinds_and_forms(sql: str, kind: str, wrapped: bool | None, nargs: int) -> None:
    node = tvf(sql)
    assert isinstance(node, n.WindowTVF)
    assert node.kind == kind and node.this == kind
    assert node.args.get("wrapped") is wrapped
    assert len(node.expressions) == nargs


@pytest.mark.parametrize("alias_sql", ["AS w", "w"])
def test_tvf_alias(alias_sql: str) -> None:
    node = tvf(f"TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE)) {alias_sql}")
    assert node.alias == "w"


def test_named_arguments_are_kwargs_in_written_order() -> None:
    node = tvf("HOP(data => TABLE t, TimeCol => DESCRIPTOR(ts), SIZE => INTERVAL '10' MINUTES, "
               "slide => INTERVAL '5' MINUTES, offset => INTERVAL '1' MINUTE)")
    names = [a.this.name for a in node.expressions]
    assert names == ["DATA", "TIMECOL", "SIZE", "SLIDE", "OFFSET"]
    assert all(isinstance(a, exp.Kwarg) for a in node.expressions)
    assert isinstance(node.expressions[0].expression, n.TableArg)
    assert isinstance(node.expressions[1].expression, n.Descriptor)


def test_mixed_positional_and_named() -> None:
    node = tvf("SESSION(TABLE t, DESCRIPTOR(ts), GAP => INTERVAL '5' MINUTES, MAX_DURATION => INTERVAL '1' HOUR)")
    assert [type(a) for a in node.expressions] == [n.TableArg, n.Descriptor, exp.Kwarg, exp.Kwarg]
    assert [a.this.name for a in node.expressions[2:]] == ["GAP", "MAX_DURATION"]


@pytest.mark.parametrize(
    ("arg", "this_type", "wrapped"),
    [
        ("TABLE t", exp.Table, None),
        ("TABLE(t)", exp.Table, True),
        ("TABLE db.t", exp.Table, None),
        ("TABLE(SELECT * FROM t WHERE a > 1)", exp.Subquery, True),
        ("TABLE(WITH x AS (SELECT 1 AS a) SELECT * FROM x)", exp.Subquery, True),
    ],
)
def test_table_argument_forms(arg: str, this_type: type, wrapped: bool | None) -> None:
    data = tvf(f"TUMBLE({arg}, DESCRIPTOR(ts), INTERVAL '1' MINUTE)").expressions[0]
    assert isinstance(data, n.TableArg)
    assert isinstance(data.this, this_type)
    assert data.args.get("wrapped") is wrapped


@pytest.mark.parametrize(
    ("call", "keys"),
    [
        ("SESSION(TABLE Bid PARTITION BY item, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)", ["item"]),
        ("SESSION(TABLE Bid PARTITION BY item, supplier, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)",
         ["item", "supplier"]),
        ("SESSION(TABLE Bid PARTITION BY (item, supplier), DESCRIPTOR(bidtime), INTERVAL '5' MINUTES)",
         ["item", "supplier"]),
        ("SESSION(TABLE(Bid) PARTITION BY item, 'bidtime', INTERVAL '5' MINUTES)", ["item"]),
        ("SESSION(DATA => TABLE Bid PARTITION BY item, k, TIMECOL => DESCRIPTOR(bidtime), "
         "GAP => INTERVAL '5' MINUTES)", ["item", "k"]),
        ("TUMBLE(TABLE t PARTITION BY k, DESCRIPTOR(ts), ROWS 3)", ["k"]),
        ("TUMBLE(TABLE t PARTITION BY k, j DESCRIPTOR(ts), ROWS 3)", None),  # missing comma
    ],
)
def test_partition_by_forms(call: str, keys: list[str] | None) -> None:
    if keys is None:
        with pytest.raises(SqlwinError):
            tvf(call)
        return
    node = tvf(call)
    data = node.expressions[0]
    data = data.expression if isinstance(data, exp.Kwarg) else data
    assert [k.name for k in data.args["partition_by"]] == keys
    assert len(node.expressions) == 3 + ("MAX" in call)


def test_string_time_column_udtf_spelling() -> None:
    node = tvf("tumble(TABLE(t), 'ts', INTERVAL 10 MINUTES)")
    assert isinstance(node, n.WindowTVF)
    assert node.expressions[1] == exp.Literal.string("ts")
    assert generate(node) == "TUMBLE(TABLE(t), 'ts', INTERVAL '10' MINUTES)"


@pytest.mark.parametrize(
    ("interval", "value", "unit"),
    [
        ("INTERVAL '10' MINUTES", "10", "MINUTES"),
        ("INTERVAL '1' HOUR", "1", "HOUR"),
        ("INTERVAL 5 SECONDS", "5", "SECONDS"),
        ("INTERVAL '-8' HOUR", "-8", "HOUR"),
        ("INTERVAL '1 day'", "1", "DAY"),
    ],
)
def test_interval_spellings(interval: str, value: str, unit: str) -> None:
    size = tvf(f"TUMBLE(TABLE t, DESCRIPTOR(ts), {interval})").expressions[2]
    assert isinstance(size, exp.Interval)
    assert (size.this.name, size.unit.name) == (value, unit)


def test_dynamic_gap_is_any_expression() -> None:
    gap = tvf("SESSION(TABLE t, DESCRIPTOR(ts), CASE WHEN item = 'A' THEN INTERVAL '5' MINUTES "
              "ELSE INTERVAL '10' MINUTES END)").expressions[2]
    assert isinstance(gap, exp.Case)


def test_rows_extent() -> None:
    node = tvf("HOP(TABLE t, DESCRIPTOR(ts), ROWS 2, ROWS 5)")
    assert [int(a.this.name) for a in node.expressions[2:]] == [2, 5]
    assert all(isinstance(a, n.RowsExtent) for a in node.expressions[2:])


@pytest.mark.parametrize(
    "sql",
    [
        "WITH w AS (SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) SELECT * FROM w",
        "SELECT * FROM (SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) AS s",
        "SELECT * FROM TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' MINUTE) l JOIN TUMBLE(TABLE b, "
        "DESCRIPTOR(ts), INTERVAL '1' MINUTE) r ON l.window_start = r.window_start AND l.window_end = r.window_end",
        "SELECT * FROM t, HOP(TABLE u, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS h",
        "SELECT * FROM TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' MINUTE) UNION SELECT * FROM "
        "SESSION(TABLE b, DESCRIPTOR(ts), INTERVAL '1' MINUTE)",
        "SELECT a FROM t WHERE a IN (SELECT a FROM CUMULATE(TABLE u, DESCRIPTOR(ts), INTERVAL '1' MINUTE, "
        "INTERVAL '2' MINUTE))",
        "INSERT INTO out SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)",
    ],
)
def test_tvf_in_every_query_position(sql: str) -> None:
    tree = parse_one(sql)
    assert len(list(tree.find_all(n.WindowTVF))) >= 1
    assert parse_one(generate(tree)) == tree


def test_tvf_join_aliases() -> None:
    tree = parse_one("SELECT * FROM TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' MINUTE) l JOIN "
                     "TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '1' MINUTE) r ON l.window_start = r.window_start")
    assert [t.alias for t in tree.find_all(n.WindowTVF)] == ["l", "r"]
    assert isinstance(tree.args["joins"][0].args["on"], exp.EQ)


def test_tumble_elsewhere_stays_a_function() -> None:
    tree = parse_one("SELECT tumble(a, b) FROM t")
    assert not list(tree.find_all(n.WindowTVF))
    assert generate(tree) == "SELECT TUMBLE(a, b) FROM t"


# ---------------------------------------------------------------- GRAMMAR section 4: clauses


def test_all_clauses_any_order_stored_on_select() -> None:
    a = q("EMIT FINAL EVICT KEEP LAST 5 ROWS LATE ROWS TO lr ALLOWED LATENESS INTERVAL '1' MINUTE")
    b = q("ALLOWED LATENESS INTERVAL '1' MINUTE LATE ROWS TO lr EVICT KEEP LAST 5 ROWS EMIT FINAL")
    assert a == b
    assert isinstance(a.args["lateness"], n.AllowedLateness)
    assert isinstance(a.args["late_rows_to"], n.LateRowsTo)
    assert a.args["late_rows_to"].this.name == "lr"
    assert isinstance(a.args["evict"], n.Evict)
    assert isinstance(a.args["emit"], n.Emit)
    assert set(n.SELECT_CLAUSE_KEYS) <= set(a.args)


@pytest.mark.parametrize("trigger", ["AFTER WATERMARK", "AFTER WATERMARK EARLY EVERY 2 ROWS",
                                     "AFTER WATERMARK LATE EVERY 1 ROWS", "REPEATEDLY AFTER WATERMARK",
                                     "EVERY 1 ROWS UNTIL AFTER WATERMARK",
                                     "AFTER WATERMARK EARLY AFTER WATERMARK LATE AFTER COUNT 2"])
def test_late_rows_to_after_a_trigger_that_ends_in_after_watermark(trigger: str) -> None:
    """LATE after AFTER WATERMARK starts its LATE sub-trigger, but LATE ROWS TO is the clause (no trigger starts
    with ROWS): the same statement as with the clauses the other way round."""
    after = q(f"EMIT WITH TRIGGER {trigger} LATE ROWS TO lr")
    before = q(f"LATE ROWS TO lr EMIT WITH TRIGGER {trigger}")
    assert after.args["emit"] == before.args["emit"] and after.args["late_rows_to"].this.name == "lr"
    assert generate(after) == generate(before) == generate(parse_one(generate(after)))


def test_clauses_print_between_having_and_order_by() -> None:
    tree = parse_one("SELECT k FROM t GROUP BY k HAVING COUNT(*) > 1 LIMIT 3 EMIT FINAL")
    assert generate(tree) == "SELECT k FROM t GROUP BY k HAVING COUNT(*) > 1 EMIT FINAL LIMIT 3"
    pretty = generate(parse_one("SELECT k FROM t GROUP BY k EMIT FINAL ORDER BY k"), pretty=True)
    assert pretty.splitlines()[-4:] == ["  k", "EMIT FINAL", "ORDER BY", "  k"]


@pytest.mark.parametrize(
    "base",
    [
        "SELECT k, COUNT(*) FROM t GROUP BY k",  # no HAVING
        "SELECT k, COUNT(*) FROM t GROUP BY k HAVING COUNT(*) > 2",
        "SELECT COUNT(*) FROM t",  # global window, FROM only
        "SELECT k FROM t WHERE k > 1",  # WHERE, no GROUP BY (planner rejects later)
        "SELECT COUNT(*) FROM t AS a",
        "SELECT COUNT(*) FROM t AS a JOIN u AS b ON a.k = b.k",
        "SELECT COUNT(*) FROM (SELECT * FROM t) AS s",
        "SELECT COUNT(*) FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)",
        "SELECT COUNT(*) FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE) w",
    ],
)
@pytest.mark.parametrize("word", ["EMIT FINAL", "ALLOWED LATENESS INTERVAL '1' MINUTE",
                                  "GRACE PERIOD INTERVAL 1 MINUTE", "LATE ROWS TO lr", "EVICT KEEP LAST 3 ROWS"])
def test_clause_words_are_not_aliases(base: str, word: str) -> None:
    tree = parse_one(f"{base} {word}")
    keys = [k for k in n.SELECT_CLAUSE_KEYS if tree.args.get(k)]
    assert len(keys) == 1
    assert tree.args["from_"].this.alias in ("", "a", "s", "w")
    assert parse_one(generate(tree)) == tree


def test_clause_inside_cte_and_subquery() -> None:
    tree = parse_one("WITH a AS (SELECT k, COUNT(*) FROM t GROUP BY k EMIT FINAL) SELECT * FROM a")
    assert tree.find(n.Emit).parent.key == "select"
    tree = parse_one("SELECT * FROM (SELECT k FROM t GROUP BY k EMIT CHANGES) AS s")
    assert tree.find(n.Emit).args["sugar"] == "CHANGES"


def test_lateness_and_grace() -> None:
    assert q("ALLOWED LATENESS INTERVAL '1' MINUTE").args["lateness"].args.get("grace") is None
    grace = q("GRACE PERIOD INTERVAL '1' MINUTE").args["lateness"]
    assert grace.args["grace"] is True
    assert isinstance(grace.this, exp.Interval)


@pytest.mark.parametrize(
    ("text", "evictor", "after"),
    [
        ("EVICT KEEP LAST 5 ROWS", n.EvictKeepLastRows, None),
        ("EVICT BEFORE KEEP LAST 5 ROWS", n.EvictKeepLastRows, False),
        ("EVICT AFTER KEEP LAST INTERVAL '10' SECONDS", n.EvictKeepLastInterval, True),
        ("EVICT DELTA(price) < 10", n.EvictDelta, None),
        ("EVICT AFTER DELTA(price * 2) < 0.5", n.EvictDelta, True),
    ],
)
def test_evictors(text: str, evictor: type, after: bool | None) -> None:
    node = q(text).args["evict"]
    assert isinstance(node.this, evictor)
    assert node.args.get("after") is after
    assert generate(node) == text


@pytest.mark.parametrize(
    ("text", "sugar", "mode"),
    [
        ("EMIT FINAL", "FINAL", None),
        ("EMIT ON WINDOW CLOSE", "ON WINDOW CLOSE", None),
        ("EMIT CHANGES", "CHANGES", None),
        ("EMIT WITH TRIGGER AFTER COUNT 1", None, None),
        ("EMIT WITH TRIGGER AFTER COUNT 1 ACCUMULATING", None, "ACCUMULATING"),
        ("EMIT WITH TRIGGER AFTER COUNT 1 DISCARDING", None, "DISCARDING"),
    ],
)
def test_emit_forms(text: str, sugar: str | None, mode: str | None) -> None:
    node = q(text).args["emit"]
    assert node.args.get("sugar") == sugar
    assert node.args.get("mode") == mode
    assert (node.args.get("trigger") is None) == (sugar is not None)
    assert generate(node) == text


# ---------------------------------------------------------------- triggers: every grammar line

TRIGGERS = [
    ("AFTER WATERMARK", ("AfterWatermark", None, None)),
    ("AFTER WATERMARK EARLY AFTER COUNT 1", ("AfterWatermark", ("AfterCount", 1), None)),
    ("AFTER WATERMARK LATE AFTER COUNT 1", ("AfterWatermark", None, ("AfterCount", 1))),
    ("AFTER WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROWS",
     ("AfterWatermark", ("EveryRows", 2), ("EveryRows", 1))),
    ("AFTER PROCESSING TIME", ("AfterProcessingTime",)),
    ("AFTER PROCESSING TIME DELAY INTERVAL '1' MINUTE", ("AfterProcessingTime",)),
    ("AFTER PROCESSING TIME ALIGNED TO INTERVAL '1' HOUR", ("AfterProcessingTime",)),
    ("AFTER PROCESSING TIME DELAY INTERVAL '1' MINUTE ALIGNED TO INTERVAL '1' HOUR OFFSET INTERVAL '5' MINUTES",
     ("AfterProcessingTime",)),
    ("AFTER COUNT 3", ("AfterCount", 3)),
    ("AFTER ANY (AFTER COUNT 3, AFTER WATERMARK)", ("AfterAny", ("AfterCount", 3), ("AfterWatermark", None, None))),
    ("AFTER ALL (AFTER COUNT 3, AFTER COUNT 4)", ("AfterAll", ("AfterCount", 3), ("AfterCount", 4))),
    ("AFTER EACH (AFTER COUNT 3, NEVER)", ("AfterEach", ("AfterCount", 3), ("Never",))),
    ("REPEATEDLY AFTER COUNT 2", ("Repeatedly", ("AfterCount", 2))),
    ("AFTER COUNT 2 UNTIL AFTER COUNT 5", ("Until", ("AfterCount", 2), ("AfterCount", 5))),
    ("NEVER", ("Never",)),
    ("(AFTER COUNT 2)", ("Paren", ("AfterCount", 2))),
    ("EVERY 5 ROWS", ("EveryRows", 5)),
    ("EVERY INTERVAL '10' SECONDS", ("EveryInterval",)),
    # precedence (GRAMMAR section 4)
    ("REPEATEDLY AFTER COUNT 2 UNTIL AFTER COUNT 5",
     ("Until", ("Repeatedly", ("AfterCount", 2)), ("AfterCount", 5))),
    ("AFTER COUNT 1 UNTIL AFTER COUNT 2 UNTIL AFTER COUNT 3",
     ("Until", ("Until", ("AfterCount", 1), ("AfterCount", 2)), ("AfterCount", 3))),
    ("AFTER WATERMARK EARLY AFTER COUNT 1 UNTIL AFTER COUNT 5",
     ("Until", ("AfterWatermark", ("AfterCount", 1), None), ("AfterCount", 5))),
    ("AFTER WATERMARK LATE AFTER COUNT 1 UNTIL AFTER COUNT 5",
     ("Until", ("AfterWatermark", None, ("AfterCount", 1)), ("AfterCount", 5))),
    ("AFTER WATERMARK EARLY REPEATEDLY AFTER COUNT 2 LATE NEVER",
     ("AfterWatermark", ("Repeatedly", ("AfterCount", 2)), ("Never",))),
    ("REPEATEDLY (AFTER COUNT 2 UNTIL AFTER COUNT 5)",
     ("Repeatedly", ("Paren", ("Until", ("AfterCount", 2), ("AfterCount", 5))))),
    ("REPEATEDLY REPEATEDLY AFTER COUNT 1", ("Repeatedly", ("Repeatedly", ("AfterCount", 1)))),
    ("AFTER ANY (AFTER COUNT 1 UNTIL AFTER COUNT 2, (AFTER WATERMARK EARLY NEVER))",
     ("AfterAny", ("Until", ("AfterCount", 1), ("AfterCount", 2)), ("Paren", ("AfterWatermark", ("Never",), None)))),
    ("AFTER WATERMARK EARLY (AFTER COUNT 1 UNTIL AFTER COUNT 2) LATE AFTER COUNT 1",
     ("AfterWatermark", ("Paren", ("Until", ("AfterCount", 1), ("AfterCount", 2))), ("AfterCount", 1))),
]


@pytest.mark.parametrize(("text", "expected"), TRIGGERS, ids=[t for t, _ in TRIGGERS])
def test_trigger_grammar_and_precedence(text: str, expected: object) -> None:
    node = trigger(text)
    assert shape(node) == expected
    assert generate(node) == text


def test_trigger_details() -> None:
    pt = trigger("AFTER PROCESSING TIME DELAY INTERVAL '1' MINUTE ALIGNED TO INTERVAL '1' HOUR "
                 "OFFSET INTERVAL '5' MINUTES")
    assert [pt.args[k].this.name for k in ("delay", "aligned_to", "align_offset")] == ["1", "1", "5"]
    assert trigger("EVERY INTERVAL 10 SECONDS").this == exp.Interval(
        this=exp.Literal.string("10"), unit=exp.var("SECONDS"))


@pytest.mark.parametrize("mode", ["ACCUMULATING", "DISCARDING"])
def test_unitless_interval_does_not_swallow_mode(mode: str) -> None:
    emit = q(f"EMIT WITH TRIGGER EVERY INTERVAL '10' {mode}").args["emit"]
    assert emit.args["mode"] == mode
    assert emit.args["trigger"].this.unit is None


def test_generator_parenthesizes_built_trees() -> None:
    c = [n.TriggerAfterCount(this=exp.Literal.number(i)) for i in range(3)]
    right = n.TriggerUntil(this=c[0], expression=n.TriggerUntil(this=c[1], expression=c[2]))
    assert generate(right) == "AFTER COUNT 0 UNTIL (AFTER COUNT 1 UNTIL AFTER COUNT 2)"
    rep = n.TriggerRepeatedly(this=n.TriggerUntil(this=c[0].copy(), expression=c[1].copy()))
    assert generate(rep) == "REPEATEDLY (AFTER COUNT 0 UNTIL AFTER COUNT 1)"
    inner = n.TriggerAfterWatermark(late=n.TriggerNever())
    outer = n.TriggerAfterWatermark(early=inner, late=n.TriggerNever())
    assert generate(outer) == "AFTER WATERMARK EARLY (AFTER WATERMARK LATE NEVER) LATE NEVER"
    sql = f"SELECT k FROM t GROUP BY k EMIT WITH TRIGGER {generate(right)}"
    assert generate(parse_one(sql).args["emit"].args["trigger"]) == generate(right)


# ---------------------------------------------------------------- statements (GRAMMAR 3 and 5)


def test_create_stream() -> None:
    node = parse_one(
        "CREATE STREAM bids (item STRING, price DECIMAL(10, 2), bidtime TIMESTAMP, pt AS PROCTIME(),\n"
        "  WATERMARK FOR bidtime AS bidtime - INTERVAL '5' SECOND)\n"
        "USING JSON OPTIONS (path '/data/bids', 'multiLine' 'true', kafka.bootstrap.servers = 'h:9092')\n"
        "WITH IDLE TIMEOUT INTERVAL '30' SECONDS;"
    )
    assert isinstance(node, n.CreateStream)
    assert node.this.name == "bids"
    cols = node.expressions
    assert [type(c) for c in cols] == [exp.ColumnDef, exp.ColumnDef, exp.ColumnDef, n.ComputedColumn]
    assert cols[1].args["kind"].is_type("decimal")
    assert isinstance(cols[3].expression, n.Proctime)
    wm = node.args["watermark"]
    assert isinstance(wm, n.WatermarkDef) and wm.this.name == "bidtime"
    assert isinstance(wm.expression, exp.Sub)
    assert node.args["format"] == exp.var("json")
    assert {o.name: o.args["value"].name for o in node.args["options"]} == {
        "path": "/data/bids", "multiLine": "true", "kafka.bootstrap.servers": "h:9092"}
    assert isinstance(node.args["idle_timeout"], exp.Interval)


def test_create_stream_strictly_ascending_watermark() -> None:
    node = parse_one("CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING rate")
    assert node.args["watermark"].expression == exp.column("ts")
    assert node.args.get("options") is None


def test_create_replay_stream() -> None:
    node = parse_one("CREATE STREAM r FROM TABLE bids ARRIVAL ORDER BY arrival, id MICRO BATCH BY arrival_minute\n"
                     "WATERMARK FOR bidtime AS bidtime - INTERVAL '5' SECOND")
    assert isinstance(node, n.CreateReplayStream)
    assert isinstance(node.args["source"], n.TableArg)
    assert node.args["source"].this.name == "bids"
    assert [o.this.name for o in node.args["arrival_order"]] == ["arrival", "id"]
    assert all(isinstance(o, exp.Ordered) for o in node.args["arrival_order"])
    assert node.args["micro_batch"] == exp.column("arrival_minute")
    assert node.args["watermark"].this.name == "bidtime"
    assert parse_one("CREATE STREAM r FROM TABLE(t) ARRIVAL ORDER BY ts WATERMARK FOR ts AS ts").args.get(
        "micro_batch") is None


def test_create_streaming_table_and_insert() -> None:
    node = parse_one("CREATE STREAMING TABLE out USING parquet OPTIONS (path '/o') AS\n"
                     "SELECT k, COUNT(*) FROM t GROUP BY k EMIT FINAL")
    assert isinstance(node, n.CreateStreamingTable)
    assert node.this.name == "out" and node.args["format"] == exp.var("parquet")
    assert isinstance(node.expression, exp.Select) and node.expression.args["emit"]
    ins = parse_one("INSERT INTO out SELECT k, COUNT(*) FROM t GROUP BY k EMIT WITH TRIGGER EVERY 1 ROWS")
    assert isinstance(ins, exp.Insert) and ins.expression.args["emit"]


def test_show_stop_explain() -> None:
    assert isinstance(parse_one("SHOW STREAMING TABLES"), n.ShowStreamingTables)
    assert isinstance(parse_one("show  streaming tables;"), n.ShowStreamingTables)
    stop = parse_one("STOP STREAMING TABLE db.out")
    assert isinstance(stop, n.StopStreamingTable) and stop.this.name == "out"
    for mode in (None, "REWRITE", "EXTENDED", "CODEGEN", "COST", "FORMATTED"):
        node = parse_one(f"EXPLAIN {mode or ''} SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)")
        assert isinstance(node, n.ExplainStatement)
        assert node.args.get("mode") == mode
        assert isinstance(node.this.args["from_"].this, n.WindowTVF)
    assert isinstance(parse_one("EXPLAIN CREATE STREAMING TABLE o AS SELECT 1").this, n.CreateStreamingTable)


def test_show_tables_stays_spark() -> None:
    assert generate(parse_one("SHOW TABLES")) == "SHOW TABLES"
    assert not isinstance(parse_one("SHOW TABLES"), n.ShowStreamingTables)


# ---------------------------------------------------------------- scripts


def test_parse_script_with_comments_and_semicolons() -> None:
    trees = parse("-- a script\nCREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING rate;\n"
                  "/* block */ SELECT COUNT(*) FROM s EMIT FINAL; ;\nSHOW STREAMING TABLES;\n")
    assert [type(t) for t in trees] == [n.CreateStream, exp.Select, n.ShowStreamingTables]


def test_parse_one_wants_one_statement() -> None:
    with pytest.raises(SqlwinError, match="expected one statement, got 2"):
        parse_one("SELECT 1; SELECT 2")
    with pytest.raises(SqlwinError, match="got 0"):
        parse_one("-- nothing")


# ---------------------------------------------------------------- positions


def test_node_start_positions() -> None:
    sql = ("SELECT *\n"
           "FROM t1,\n"
           "     TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' MINUTES)) AS w\n"
           "GROUP BY k\n"
           "EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 2 ROWS")
    tree = parse_one(sql)
    hop = tree.find(n.WindowTVF)
    assert (hop.meta["start_line"], hop.meta["start_col"]) == (3, 6)
    args = hop.expressions
    assert [position_of(a) for a in args] == [(3, 16), (3, 28), (3, 44)]
    emit = tree.args["emit"]
    assert position_of(emit) == (5, 1)
    assert position_of(emit.args["trigger"]) == (5, 19)
    assert position_of(emit.args["trigger"].args["early"]) == (5, 41)
    for node in tree.walk():
        if isinstance(node, n.ALL_NODES):
            assert "start_line" in node.meta and "start_col" in node.meta, type(node).__name__


def test_named_argument_positions() -> None:
    hop = parse_one("SELECT * FROM\n  HOP(DATA => TABLE t,\n      SIZE => INTERVAL '1' HOUR)").find(n.WindowTVF)
    assert [position_of(a) for a in hop.expressions] == [(2, 7), (3, 7)]
    assert position_of(hop.expressions[1].expression) == (3, 15)


def test_limit_and_offset_positions_are_their_keywords() -> None:
    """An error at LIMIT / OFFSET points at the keyword, not at the value; a query holding one keeps its own
    position (its first column's), not the LIMIT's at its end."""
    tree = parse_one("SELECT a + 1 AS b FROM t\n  LIMIT\n    2 OFFSET 3")
    assert position_of(tree.args["limit"]) == (2, 3)
    assert position_of(tree.args["offset"]) == (3, 7)
    assert position_of(tree) == (1, 17)  # as before LIMIT had a position: the alias b
    union = parse_one("(SELECT 1) UNION (SELECT 2) LIMIT 3")
    assert position_of(union.args["limit"]) == (1, 29)


def test_statement_positions() -> None:
    trees = parse("SELECT 1;\n  CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS ts) USING rate")
    assert position_of(trees[1]) == (2, 3)
    assert position_of(trees[1].args["watermark"]) == (2, 34)


# ---------------------------------------------------------------- errors: message, line, col


ERRORS = [
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER COUNTS 3", 1, 52,
     "expected WATERMARK, PROCESSING TIME, COUNT, ANY, ALL or EACH after AFTER"),
    ("SELECT k\nFROM t\nGROUP BY k\nEMIT WITH TRIGGER AFTER COUNT", 4, 30, "expected a number after AFTER COUNT"),
    ("SELECT k FROM t GROUP BY k EMIT FINALLY", 1, 33,
     "expected WITH TRIGGER, FINAL, ON WINDOW CLOSE or CHANGES after EMIT"),
    ("SELECT k FROM t GROUP BY k EMIT WITH AFTER COUNT 1", 1, 38, "expected TRIGGER after EMIT WITH"),
    ("SELECT k FROM t GROUP BY k EMIT ON WINDOW", 1, 42, "expected CLOSE after EMIT ON WINDOW"),
    ("SELECT k FROM t GROUP BY k EMIT ON CLOSE", 1, 36, "expected WINDOW CLOSE after EMIT ON"),
    ("SELECT k FROM t GROUP BY k EMIT FINAL\nEMIT CHANGES", 2, 1, "duplicate EMIT clause"),
    ("SELECT k FROM t GROUP BY k\n  ALLOWED LATENESS INTERVAL '1' MINUTE GRACE PERIOD INTERVAL '1' MINUTE", 2, 40,
     "duplicate ALLOWED LATENESS clause"),
    ("SELECT *\nFROM TUMBLE(TABLE t, DESCRIPTOR(ts) INTERVAL '1' MINUTE)", 2, 37,
     "expected ')' to close the arguments of TUMBLE"),
    ("SELECT *\nFROM t,\n  HOP(TABLE t, DESCRIPTOR(), INTERVAL '1' MINUTE)", 3, 27, "expected DESCRIPTOR(column)"),
    ("SELECT *\nFROM TUMBLE()", 2, 13, "expected the arguments of TUMBLE"),
    ("SELECT * FROM TUMBLE(TABLE, DESCRIPTOR(ts))", 1, 27, "expected a table name or '(' after TABLE"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE) AS w", 1, 74,
     "expected ')' to close TABLE(TUMBLE(...)"),
    ("SELECT * FROM HOP(SIZE => )", 1, 27, "expected a value after SIZE =>"),
    ("SELECT * FROM TUMBLE(TABLE t, ROWS)", 1, 35, "expected a row count after ROWS"),
    ("SELECT * FROM SESSION(TABLE t PARTITION BY , DESCRIPTOR(ts))", 1, 44, "expected a column after PARTITION BY"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER ANY AFTER COUNT 1", 1, 56, "expected '(' after AFTER ANY"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER ALL (AFTER COUNT 1 NEVER)", 1, 71,
     "expected ')' or ',' in AFTER ALL (...)"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER (AFTER COUNT 1", 1, 60,
     "expected ')' to close the parenthesized trigger"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER WATERMARK EARLY LATE NEVER", 1, 68,
     "expected a trigger (AFTER ..., REPEATEDLY, EVERY, NEVER or '(')"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER PROCESSING DELAY INTERVAL '1' MINUTE", 1, 63,
     "expected TIME after AFTER PROCESSING"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER PROCESSING TIME ALIGNED INTERVAL '1' MINUTE", 1, 76,
     "expected TO after ALIGNED"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER EVERY 5", 1, 53, "expected ROWS after EVERY n"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER EVERY ROWS", 1, 52, "expected n ROWS or an interval after EVERY"),
    ("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER COUNT 1 ACCUMULATING DISCARDING", 1, 73,
     "unexpected 'DISCARDING'"),
    ("SELECT k FROM t GROUP BY k EVICT KEEP LAST 5", 1, 45, "expected ROWS after KEEP LAST n"),
    ("SELECT k FROM t GROUP BY k EVICT KEEP 5 ROWS", 1, 39, "expected LAST after KEEP"),
    ("SELECT k FROM t GROUP BY k EVICT FOO", 1, 34,
     "expected KEEP LAST n ROWS, KEEP LAST interval or DELTA(expr) < threshold after EVICT"),
    ("SELECT k FROM t GROUP BY k EVICT DELTA(x) > 1", 1, 43, "expected '<' threshold after DELTA(expr)"),
    ("SELECT k FROM t GROUP BY k LATE ROWS x", 1, 38, "expected TO after LATE ROWS"),
    ("SELECT k FROM t GROUP BY k LATE ROWS TO", 1, 40, "expected a table name"),
    ("SELECT k FROM t GROUP BY k ALLOWED LATENCY INTERVAL '1' MINUTE", 1, 36, "expected LATENESS after ALLOWED"),
    ("SELECT k FROM t GROUP BY k GRACE INTERVAL '1' MINUTE", 1, 34, "expected PERIOD after GRACE"),
    ("SELECT k FROM t GROUP BY k LATE TO x", 1, 33, "expected ROWS TO after LATE"),
    ("SELECT k FROM t GROUP BY k EVICT", 1, 33, "expected KEEP LAST n ROWS"),
    ("SELECT k FROM t GROUP BY k ALLOWED LATENESS", 1, 44, "expected an interval after ALLOWED LATENESS"),
    ("CREATE STREAM s (a INT,\n  WATERMARK FOR a) USING json", 2, 18, "expected AS after WATERMARK FOR column"),
    ("CREATE STREAM s (a INT, b) USING json", 1, 25, "expected a column definition (name type)"),
    ("CREATE STREAM s (a INT, WATERMARK FOR a AS a, WATERMARK FOR a AS a)", 1, 47, "duplicate WATERMARK definition"),
    ("CREATE STREAM s USING json", 1, 17, "expected '(' with the columns, or FROM TABLE, after CREATE STREAM name"),
    ("CREATE STREAM s (a INT) USING json OPTIONS (path)", 1, 49, "expected a value for option path"),
    ("CREATE STREAM s FROM TABLE t WATERMARK FOR ts AS ts", 1, 30, "expected ARRIVAL ORDER BY after FROM TABLE t"),
    ("CREATE STREAM s FROM TABLE t ARRIVAL ORDER BY ts", 1, 49, "expected WATERMARK FOR column AS expression"),
    ("CREATE STREAMING TABLE o SELECT 1", 1, 26, "expected AS <query> in CREATE STREAMING TABLE"),
    ("CREATE STREAMING o AS SELECT 1", 1, 18, "expected TABLE after CREATE STREAMING"),
    ("STOP STREAMING out", 1, 16, "expected TABLE after STOP STREAMING"),
    ("EXPLAIN", 1, 8, "expected a statement after EXPLAIN"),
    ("SELECT 1;\nSELECT a FROM WHERE", 2, 15, "expected a table name"),
    ("SELECT (1", 1, 10, "expected ')'"),
    ("SELECT a\nFROM t WHERE b = 'x", 2, 18, "unterminated literal or comment: missing the closing '"),
    ("SELECT a FROM t GROUP BY a EMITT FINAL", 1, 28, "unexpected 'EMITT'"),
    # a string literal over two lines, found by tests/test_streaming_errors.py's mutations: one line, shortened
    ("SELECT window_start ' , window_end , SUM ( k ) AS e0\n' FROM t", 1, 21,
     "unexpected string ' , window_end , SUM ( k ) AS e0...'"),
    ("SELECT a FROM t\nWHERE", 2, 6, "expected a condition after WHERE"),
    ("SELECT 1 +", 1, 11, "expected an expression"),
    ("SELECT 1 /* open\n comment", 1, 10, "unterminated comment: missing the closing */"),
]


@pytest.mark.parametrize(("sql", "line", "col", "message"), ERRORS, ids=[e[3][:60] for e in ERRORS])
def test_errors_have_position_and_expectation(sql: str, line: int, col: int, message: str) -> None:
    with pytest.raises(SqlwinError) as info:
        parse(sql)
    err = info.value
    assert (err.line, err.col) == (line, col), str(err)
    assert err.message.startswith(message), err.message
    assert str(err).startswith(f"line {line}, col {col}: {message}")
    assert "\x1b" not in str(err) and "Traceback" not in str(err) and "\n" not in err.message


def test_error_names_what_was_found() -> None:
    with pytest.raises(SqlwinError, match=r"after AFTER, got 'COUNTS'$"):
        parse("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER COUNTS 3")
    with pytest.raises(SqlwinError, match=r"got end of statement$"):
        parse("SELECT k FROM t GROUP BY k EMIT WITH TRIGGER AFTER COUNT")


def test_no_sqlglot_error_escapes() -> None:
    for bad in ["SELECT 1 /* unterminated", "SELECT * FROM", ")", "SELECT CAST(a AS) FROM t", "CREATE STREAM"]:
        with pytest.raises(SqlwinError):
            parse(bad)


# ---------------------------------------------------------------- the stock spark dialect is unchanged


def test_stock_spark_dialect_unaffected() -> None:
    tree = sqlglot.parse_one("SELECT * FROM t emit", read="spark")
    assert tree.args["from_"].this.alias == "emit"
    with pytest.raises(sqlglot.errors.ParseError):
        sqlglot.parse_one("SELECT * FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)", read="spark")
    assert isinstance(sqlglot.parse_one("EXPLAIN SELECT 1", read="spark"), exp.Command)
    assert isinstance(sqlglot.parse_one("SELECT PROCTIME()", read="spark").selects[0], exp.Anonymous)
    assert "lateness" not in exp.Select.arg_types and "emit" not in exp.Select.arg_types
    spark = sqlglot.Dialect.get_or_raise("spark")
    assert spark.parser_class.__name__ == "SparkParser"
    assert spark.generator_class.__name__ == "SparkGenerator"
    assert "EXPLAIN" in spark.tokenizer_class.KEYWORDS


def test_a_comment_after_the_last_semicolon_is_no_statement() -> None:
    """``SELECT ...; -- note`` is one statement (sqlglot keeps the trailing comment as a Semicolon tree: sqlwin.sql
    refused it as two statements, while ``sqlwin run``, which splits scripts itself, ran it)."""
    from sqlwin.pipeline import parse_single

    text = "SELECT window_start, COUNT(*) AS n FROM TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)"
    expected = parse_one(text)
    for tail in (";\r\n -- note\r\n", "; /* note */", ";"):
        assert parse_single(text + tail) == expected, tail
    assert len(parse("SELECT 1;\n-- a\nSELECT 2; -- b")) == 2
