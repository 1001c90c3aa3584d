"""What running one statement gives back, to every entry point (API, CLI, server, streaming).

Its own module so that the facade (``sqlwin.api``), the pipeline under it and the streaming
statements all import it at top level without importing each other in a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class StatementResult:
    """The outcome of one statement of a script: a DataFrame to show, or a message."""

    statement: str  # the statement text as written
    dataframe: DataFrame | None = None
    message: str | None = None
    rewritten: str | None = None  # the Spark SQL that ran, when sqlwin rewrote it
