"""Trigger and emission plan (GRAMMAR section 4): Beam's trigger tree as frozen data.

These classes only *describe* a trigger; the state machine that runs them lives in
``sqlwin.core.triggers`` (pure Python), as Beam separates ``Trigger`` from ``TriggerStateMachine``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

from sqlglot import exp


@dataclass(frozen=True)
class AfterWatermark:
    early: Trigger | None = None  # fires repeatedly before the watermark passes the end
    late: Trigger | None = None  # fires repeatedly after it, within allowed lateness


@dataclass(frozen=True)
class AfterProcessingTime:
    delay: int = 0  # microseconds after the first element in the pane
    align_to: int | None = None  # period: fire at the next multiple (Beam alignedTo)
    align_offset: int = 0


@dataclass(frozen=True)
class AfterCount:
    n: int


@dataclass(frozen=True)
class AfterAny:
    triggers: tuple[Trigger, ...]


@dataclass(frozen=True)
class AfterAll:
    triggers: tuple[Trigger, ...]


@dataclass(frozen=True)
class AfterEach:
    triggers: tuple[Trigger, ...]


@dataclass(frozen=True)
class Repeatedly:
    trigger: Trigger


@dataclass(frozen=True)
class OrFinally:
    """``main UNTIL until`` (Beam ``orFinally``): fires as main; finishes when until fires."""

    main: Trigger
    until: Trigger


@dataclass(frozen=True)
class Never:
    """Fires only when the window expires (Beam ``Never.ever()``)."""


Trigger = Union[AfterWatermark, AfterProcessingTime, AfterCount, AfterAny, AfterAll, AfterEach,
                Repeatedly, OrFinally, Never]


class AccumulationMode(str, enum.Enum):
    ACCUMULATING = "ACCUMULATING"
    DISCARDING = "DISCARDING"


class PaneTiming(str, enum.Enum):
    EARLY = "EARLY"
    ON_TIME = "ON_TIME"
    LATE = "LATE"


@dataclass(frozen=True)
class EmitFinal:
    """``EMIT FINAL`` / ``EMIT ON WINDOW CLOSE``: one pane when watermark >= window_end + lateness."""


# The default of Flink's EventTimeTrigger and Beam's default trigger (GRAMMAR 4).
DEFAULT_TRIGGER: Trigger = AfterWatermark(late=AfterCount(1))


@dataclass(frozen=True)
class EmitSpec:
    trigger: Trigger | EmitFinal = DEFAULT_TRIGGER
    mode: AccumulationMode = AccumulationMode.ACCUMULATING
    explicit: bool = False  # False when the query had no EMIT clause


def emit_changes() -> EmitSpec:
    """``EMIT CHANGES`` sugar."""
    every_row = Repeatedly(AfterCount(1))
    return EmitSpec(AfterWatermark(early=every_row, late=every_row), AccumulationMode.ACCUMULATING, True)


def uses_watermark(trigger: Trigger | EmitFinal) -> bool:
    """Whether the trigger depends on event time (not allowed in the global window)."""
    if isinstance(trigger, (AfterWatermark, EmitFinal)):
        return True
    if isinstance(trigger, (AfterAny, AfterAll, AfterEach)):
        return any(uses_watermark(t) for t in trigger.triggers)
    if isinstance(trigger, Repeatedly):
        return uses_watermark(trigger.trigger)
    if isinstance(trigger, OrFinally):
        return uses_watermark(trigger.main) or uses_watermark(trigger.until)
    return False


# --- evictors (Flink) -------------------------------------------------------------------------

@dataclass(frozen=True)
class KeepLastRows:
    n: int


@dataclass(frozen=True)
class KeepLastInterval:
    micros: int


@dataclass(frozen=True)
class DeltaEvictor:
    expr: exp.Expr
    threshold: exp.Expr


Evictor = Union[KeepLastRows, KeepLastInterval, DeltaEvictor]


@dataclass(frozen=True)
class EvictSpec:
    evictor: Evictor
    before: bool = True  # EVICT BEFORE (default) or AFTER the window function


@dataclass(frozen=True)
class LatenessSpec:
    allowed: int = 0  # microseconds; ALLOWED LATENESS / GRACE PERIOD
    late_rows_to: str | None = None  # LATE ROWS TO name
