"""sqlwin: Flink/Beam/Storm streaming-window SQL on Apache Spark.

    import sqlwin
    df = sqlwin.sql(spark, "SELECT window_start, COUNT(*) FROM TUMBLE(TABLE t, DESCRIPTOR(ts), "
                           "INTERVAL '10' MINUTES) GROUP BY window_start, window_end")
"""

from sqlwin.api import StatementResult, register, rewrite, run_script, sql
from sqlwin.errors import SqlwinError
from sqlwin.plotting import plot_panes
from sqlwin.version import __version__

__all__ = ["SqlwinError", "StatementResult", "__version__", "plot_panes", "register", "rewrite", "run_script", "sql"]
