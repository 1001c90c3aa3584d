"""Spark UDTFs built on the pure assigners (``sqlwin.core.assigners``); import only pure modules.

- ``register_all(spark)``: the generic table functions ``tumble``, ``hop``, ``cumulate`` and
  ``session`` for plain Spark SQL over any table (``udtfs.generic``).
- ``register_for_spec(spark, spec) -> name`` and ``udtf_call_sql(spec, name, relation_sql)``: the
  per-spec vectorized arrow UDTFs of sqlwin's UDTF plan and their calling convention (``udtfs.spec``).

The UDTF code and the assigners are shipped to the Python workers by value (cloudpickle), so the
workers need numpy and pyarrow but not an installed sqlwin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from udtfs.shipping import ship_by_value
from udtfs.spec import GAP_COLUMN, register_for_spec, udtf_call_sql

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["GAP_COLUMN", "register_all", "register_for_spec", "ship_by_value", "udtf_call_sql"]


def register_all(spark: SparkSession) -> None:
    """Register the generic window table functions (see ``udtfs.generic``) in ``spark``."""
    from pyspark.sql.functions import udtf

    from udtfs.generic import GENERIC

    ship_by_value()
    for name, cls in GENERIC.items():
        spark.udtf.register(name, udtf(cls, useArrow=False))
