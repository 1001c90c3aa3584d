"""What the Python workers run, shipped with each plan: the UDTF code and sqlwin's pure assigners.

Kept apart from the package's ``__init__`` (which re-exports ``ship_by_value``) so that ``udtfs.spec``, which
ships before it registers a UDTF, need not import the package that imports it.
"""

from __future__ import annotations


def ship_by_value() -> None:
    """Pickle sqlwin's assigner code by value so executors need not import sqlwin."""
    from pyspark import cloudpickle

    import sqlwin.core.assigners
    import sqlwin.core.timeunits
    import udtfs._arrow
    import udtfs._worker
    import udtfs.generic

    for module in (sqlwin.core.assigners, sqlwin.core.timeunits, udtfs._arrow, udtfs._worker, udtfs.generic):
        cloudpickle.register_pickle_by_value(module)
