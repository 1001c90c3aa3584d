"""Check, once per SparkSession, that Spark's Python workers can run sqlwin's UDTFs.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (else ``python3`` from PATH), not with
the driver's interpreter. When that interpreter lacks pyarrow or numpy (a script run as
``venv/bin/python x.py`` without activating the venv), every arrow-UDTF plan fails deep in a Java
stack trace. A one-row probe job, run the first time a plan needs a Python worker, turns that into
a ``SqlwinError`` that names the workers' interpreter and the fix. The probe is a plain pickled
UDF (no Arrow), so it runs on exactly the workers that would fail and works over Spark Connect.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from sqlwin.errors import SqlwinError

REQUIRED = ("numpy", "pyarrow")
_CHECKED = "_sqlwin_workers_checked"


def _probe() -> str:
    """Runs on a Python worker: its interpreter and which required modules are not installed there
    (``find_spec``, not an import: the probe stays cheap)."""
    import importlib.util
    import json
    import sys

    missing = [name for name in ("numpy", "pyarrow") if importlib.util.find_spec(name) is None]
    return json.dumps({"executable": sys.executable, "version": sys.version.split()[0], "missing": missing})


def _cause(error: Exception) -> str:
    """The line of a (Java-wrapped) failure that says why the worker did not run."""
    text = str(error)
    found = (re.search(r'Cannot run program "[^"]*"[^\n]*', text)  # no such interpreter
             or re.search(r"^[A-Za-z]*(?:Error|Exception): [^\n]*", text, re.M))  # the Python worker's own error
    line = found.group(0) if found else next((s for s in text.splitlines() if s.strip()), type(error).__name__)
    return line.strip()[:400]


def configured_python(spark: Any) -> str:
    """The interpreter this driver asks Spark to start workers with (for messages only)."""
    sc = getattr(spark, "_sc", None)
    return str(getattr(sc, "pythonExec", None) or os.environ.get("PYSPARK_PYTHON") or "python3")


def _fix(executable: str) -> str:
    return (f"Fix: set PYSPARK_PYTHON to an interpreter that has them before Spark starts (this driver's: "
            f"export PYSPARK_PYTHON={sys.executable}, or activate its venv), or install them for the workers' "
            f"interpreter ({executable} -m pip install pyarrow numpy)")


def check_python_workers(spark: Any) -> None:
    """Raise ``SqlwinError`` unless Spark's Python workers can import numpy and pyarrow.

    Runs one tiny job the first time per session; a session that passed is not probed again.
    """
    if spark.__dict__.get(_CHECKED):
        return
    from pyspark import cloudpickle
    from pyspark.sql.functions import udf

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the probe must not need sqlwin on workers
    probe = udf(_probe, "string", useArrow=False)
    try:
        report = json.loads(spark.range(1).select(probe().alias("r")).collect()[0][0])
    except Exception as e:  # the worker could not start or crashed before running the probe
        raise SqlwinError(
            f"Spark's Python workers failed to start ({configured_python(spark)}): {_cause(e)}. "
            f"sqlwin's UDTF plans need a worker interpreter with {', '.join(REQUIRED)}. "
            + _fix(configured_python(spark))) from e
    if report["missing"]:
        exe = report["executable"]
        raise SqlwinError(
            f"Spark's Python workers run {exe} (Python {report['version']}), which lacks "
            f"{', '.join(report['missing'])}: sqlwin's UDTF plans need {', '.join(REQUIRED)} on the workers. "
            + _fix(exe))
    spark.__dict__[_CHECKED] = True
