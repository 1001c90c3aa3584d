"""Plan the streaming clauses of a query (GRAMMAR 4): EMIT, lateness, late rows, eviction."""

from __future__ import annotations

from sqlglot import exp

from sqlwin.dialect import nodes as n
from sqlwin.errors import SqlwinError
from sqlwin.plan import triggers as t
from sqlwin.planner.values import interval_micros, positive_int


def plan_trigger(node: exp.Expr) -> t.Trigger:
    """Trigger AST -> trigger plan, desugaring EVERY and dropping parentheses."""
    if isinstance(node, n.TriggerParen):
        return plan_trigger(node.this)
    if isinstance(node, n.TriggerAfterWatermark):
        early, late = node.args.get("early"), node.args.get("late")
        return t.AfterWatermark(early=_repeating(plan_trigger(early)) if early else None,
                                late=_repeating(plan_trigger(late)) if late else None)
    if isinstance(node, n.TriggerAfterProcessingTime):
        delay = node.args.get("delay")
        aligned = node.args.get("aligned_to")
        offset = node.args.get("align_offset")
        plan = t.AfterProcessingTime(
            delay=interval_micros(delay, "AFTER PROCESSING TIME DELAY") if delay else 0,
            align_to=interval_micros(aligned, "ALIGNED TO") if aligned else None,
            align_offset=interval_micros(offset, "ALIGNED TO ... OFFSET") if offset else 0)
        if plan.delay < 0:
            raise SqlwinError.at(delay, "AFTER PROCESSING TIME DELAY must not be negative")
        if plan.align_to is not None and plan.align_to <= 0:
            raise SqlwinError.at(aligned, "ALIGNED TO must be a positive interval")
        return plan
    if isinstance(node, n.TriggerAfterCount):
        return t.AfterCount(positive_int(node.this, "AFTER COUNT"))
    if isinstance(node, n.TriggerEveryRows):
        return t.Repeatedly(t.AfterCount(positive_int(node.this, "EVERY n ROWS")))
    if isinstance(node, n.TriggerEveryInterval):
        delay = interval_micros(node.this, "EVERY interval")
        if delay <= 0:
            raise SqlwinError.at(node.this, "EVERY interval must be positive")
        return t.Repeatedly(t.AfterProcessingTime(delay=delay))
    composites = {n.TriggerAfterAny: t.AfterAny, n.TriggerAfterAll: t.AfterAll, n.TriggerAfterEach: t.AfterEach}
    for node_type, plan_type in composites.items():
        if isinstance(node, node_type):
            children = tuple(plan_trigger(c) for c in node.expressions)
            if not children:
                raise SqlwinError.at(node, "a composite trigger needs at least one sub-trigger")
            return plan_type(children)
    if isinstance(node, n.TriggerRepeatedly):
        return t.Repeatedly(plan_trigger(node.this))
    if isinstance(node, n.TriggerUntil):
        return t.OrFinally(plan_trigger(node.this), plan_trigger(node.expression))
    if isinstance(node, n.TriggerNever):
        return t.Never()
    raise SqlwinError.at(node, f"unknown trigger {node.sql('sqlwin') if isinstance(node, exp.Expr) else node}")


def _repeating(trigger: t.Trigger) -> t.Trigger:
    """Early/late sub-triggers fire repeatedly (Beam ``withEarlyFirings``)."""
    return trigger if isinstance(trigger, t.Repeatedly) else t.Repeatedly(trigger)


def plan_emit(node: n.Emit | None) -> t.EmitSpec:
    if node is None:
        return t.EmitSpec()
    sugar = (node.args.get("sugar") or "").upper()
    if sugar == "CHANGES":
        return t.emit_changes()
    if sugar in ("FINAL", "ON WINDOW CLOSE"):
        return t.EmitSpec(t.EmitFinal(), t.AccumulationMode.ACCUMULATING, True)
    mode = (node.args.get("mode") or "ACCUMULATING").upper()
    return t.EmitSpec(plan_trigger(node.args["trigger"]), t.AccumulationMode(mode), True)


def plan_lateness(select: exp.Expr) -> t.LatenessSpec:
    lateness = select.args.get("lateness")
    late_to = select.args.get("late_rows_to")
    allowed = interval_micros(lateness.this, "ALLOWED LATENESS") if lateness else 0
    if allowed < 0:
        raise SqlwinError.at(lateness, "ALLOWED LATENESS must not be negative")
    return t.LatenessSpec(allowed=allowed, late_rows_to=late_to.this.sql("spark") if late_to else None)


def plan_evict(node: n.Evict | None) -> t.EvictSpec | None:
    if node is None:
        return None
    ev = node.this
    evictor: t.Evictor
    if isinstance(ev, n.EvictKeepLastRows):
        evictor = t.KeepLastRows(positive_int(ev.this, "KEEP LAST n ROWS"))
    elif isinstance(ev, n.EvictKeepLastInterval):
        micros = interval_micros(ev.this, "KEEP LAST interval")
        if micros <= 0:
            raise SqlwinError.at(ev, "KEEP LAST interval must be positive")
        evictor = t.KeepLastInterval(micros)
    elif isinstance(ev, n.EvictDelta):
        evictor = t.DeltaEvictor(ev.this, ev.expression)
    else:
        raise SqlwinError.at(node, "unknown evictor")
    return t.EvictSpec(evictor, before=not node.args.get("after"))
