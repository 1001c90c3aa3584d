"""Errors name the user's SQL, never sqlwin's: a corpus of wrong queries (tests/fixtures/
wrong_queries.yaml) run on a real SparkSession through the Python API, the CLI runner and the
JDBC server, each with its expected message fragment and position in the text as written."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import pytest
import yaml

import sqlwin
from sqlwin.diagnostics import clean_message, from_spark
from sqlwin.errors import SqlwinError

CORPUS = yaml.safe_load((Path(__file__).parent / "fixtures" / "wrong_queries.yaml").read_text())
IDS = [f"{i:02d}-{re.sub(r'[^a-z]+', '_', c['message'].lower())[:30]}" for i, c in enumerate(CORPUS)]
INTERNAL = re.compile(r"(?<![\w`])`?__\w")  # a sqlwin-generated name (``__w3``, ``__r``, ``__q``...)


@pytest.fixture(scope="module")
def tables(spark):
    t = dt.datetime
    spark.createDataFrame([(t(2024, 5, 1, 10, 1), "x", 1, 1.0), (t(2024, 5, 1, 10, 12), "y", 2, 2.5)],
                          "ts timestamp, k string, v int, price double").createOrReplaceTempView("bids")
    spark.createDataFrame([(1, "ann")], "id int, name string").createOrReplaceTempView("people")
    return spark


def assert_user_terms(message: str) -> None:
    assert not INTERNAL.search(message), message
    assert "SQLSTATE" not in message and not re.search(r"line \d+ pos \d+", message), message
    assert "\n" not in message, message


@pytest.mark.parametrize("case", CORPUS, ids=IDS)
def test_wrong_query_through_the_api(tables, case, capfd) -> None:
    with pytest.raises(SqlwinError) as info:
        sqlwin.sql(tables, case["sql"])
    # the error as sqlwin reports it, not also pyspark's JSON record of the Spark error with its Java stack
    assert "QueryContextLogger" not in capfd.readouterr().err
    err = info.value
    assert case["message"] in err.message
    assert [err.line, err.col] == case["at"], str(err)
    assert_user_terms(err.message)


def test_wrong_queries_through_the_cli(tables) -> None:
    """The CLI prints each error in file coordinates (the file has a header line) with a caret."""
    from rich.console import Console

    from sqlwin.cli import Failed, Runner, Source

    for case in CORPUS:
        out, err = io.StringIO(), io.StringIO()
        runner = Runner(tables, Console(file=out, width=10_000), Console(file=err, width=10_000),
                        progress=False)
        with pytest.raises(Failed):
            runner.run_source(Source("wrong.sql", "-- header\n" + case["sql"] + ";\n", "."))
        text = err.getvalue()
        line, col = case["at"]
        assert f"error: line {line + 1}, col {col}: " in text, text
        assert case["message"] in text and f"--> wrong.sql:{line + 1}:{col}" in text, text
        assert_user_terms(text.splitlines()[0])


def test_suggestions_drop_internal_names() -> None:
    spark_text = ("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name "
                  "`x`.`k` cannot be resolved. Did you mean one of the following? [`__w5`.`k`, `__w`, "
                  "`__w5`.`window_end`, `p`.`name`]. SQLSTATE: 42703; line 1 pos 731;\n'Project ['x.k]")
    text = "SELECT x.k FROM TUMBLE(TABLE(SELECT * FROM t), DESCRIPTOR(ts), INTERVAL '1' HOUR), people p"
    err = from_spark(spark_text, text, generated="SELECT ...")
    assert err.message.endswith("Did you mean one of the following? [`k`, `window_end`, `p`.`name`].")
    assert (err.line, err.col) == (1, 8)


def test_internal_names_the_user_wrote_stay() -> None:
    message = "Did you mean one of the following? [`__mine`.`a`, `__w2`.`b`]."
    own = "SELECT * FROM t AS __mine"
    assert clean_message(message, own) == "Did you mean one of the following? [`__mine`.`a`, `b`]."
    assert clean_message("Did you mean one of the following? [`__w`]. More.", "SELECT 1") == "More."


def test_grouped_window_struct_reads_as_window_bounds() -> None:
    assert clean_message('expression "__w.start" is odd', "SELECT 1") == 'expression "window_start" is odd'


def test_a_file_that_cannot_be_read_says_why() -> None:
    """Spark's FAILED_READ_FILE names the file only; its cause (as Spark 4.3 words it, from a streaming table's
    failure: the wrappers, the cause, the plan) says why, and the file is not named twice."""
    from sqlwin.diagnostics import runtime_failure

    text = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
            "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch "
            "sink. Reason: ...\npy4j.protocol.Py4JJavaError: An error occurred while calling o87.count.\n"
            ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
            "file:///data/in/x.parquet.  SQLSTATE: KD001\n"
            "Caused by: java.lang.RuntimeException: file:/data/in/x.parquet is not a Parquet file. Expected magic "
            "number at tail, but found [117, 101, 116, 10]\n\t... 26 more\n\n SQLSTATE: 39000\n"
            "=== Streaming Query ===\nIdentifier: [id = 1]\n")
    assert str(runtime_failure(text, "SELECT 1")) == (
        "line 1, col 1: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///data/in/x.parquet: "
        "it is not a Parquet file. Expected magic number at tail, but found [117, 101, 116, 10]")
    gone = text.replace("java.lang.RuntimeException: file:/data/in/x.parquet is not",
                        "java.io.FileNotFoundException: /data/other is not")
    assert str(runtime_failure(gone, "SELECT 1")).endswith(
        "reading file file:///data/in/x.parquet: FileNotFoundException: /data/other is not a Parquet file. Expected "
        "magic number at tail, but found [117, 101, 116, 10]")


def test_errors_without_a_spark_position_point_at_the_statement() -> None:
    err = from_spark("[SOMETHING] went wrong.", "\n\n  SELECT 1", generated="SELECT 1")
    assert (err.line, err.col, err.message) == (3, 3, "[SOMETHING] went wrong.")


@pytest.mark.slow
def test_wrong_query_over_jdbc(request) -> None:
    """The JDBC client sees the same positioned message (the server analyses the rewrite first)."""
    from pyhive.exc import OperationalError

    from tests.test_server import _error_text, bench, shared_server

    server = shared_server(request.config)
    conn = bench.connect(server.host, server.port)
    try:
        cur = conn.cursor()
        cur.execute(bench.BIDS_VIEW)
        with pytest.raises(OperationalError) as info:
            cur.execute("SELECT window_start,\n  SUM(prise) FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), "
                        "INTERVAL '10' MINUTES) GROUP BY window_start, window_end")
        text = _error_text(info.value)
        assert "line 2, col 7: " in text and "`prise` cannot be resolved" in text, text
        assert "`price`" in text and not INTERNAL.search(text.split("line 2, col 7: ", 1)[1]), text
        cur.execute("SELECT 'alive'")
        assert cur.fetchall() == [("alive",)]
    finally:
        conn.close()


def test_an_unconverted_java_error_is_sparks_message(tables) -> None:
    """pyspark leaves some Java exceptions unconverted (a ``SparkClassNotFoundException``, the ``SparkException``
    of a failed job): its error reads "An error occurred while calling oNN.sql" and then the Java stack. The user
    gets the innermost failure instead, on one line."""
    with pytest.raises(SqlwinError) as err:
        sqlwin.sql(tables, "CREATE TABLE diag_nosuch USING nosuch AS SELECT 1 AS a")
    assert str(err.value) == (
        "line 1, col 1: [DATA_SOURCE_NOT_FOUND] Failed to find the data source: nosuch. Make sure the provider name "
        "is correct and the package is properly registered and compatible with your Spark version.")


def test_a_rate_streams_wrong_options_are_an_error_at_the_statement(tables) -> None:
    """Spark checks the rate source's options when the stream is made: a SqlwinError, not pyspark's exception."""
    for option, message in [("'abc'", 'For input string: "abc"'),
                            ("'-1'", "Invalid value '-1'. The option 'rowsPerSecond' must be positive")]:
        with pytest.raises(SqlwinError) as err:
            sqlwin.sql(tables, f"CREATE STREAM diag_rate (ts TIMESTAMP) USING rate OPTIONS (rowsPerSecond {option})")
        assert str(err.value) == f"line 1, col 1: CREATE STREAM diag_rate USING rate: {message}"
