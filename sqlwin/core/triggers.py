"""Trigger state machines: *when* a window fires (GRAMMAR 4), Beam's protocol in plain Python.

One small machine per node of the frozen trigger plan (``sqlwin.plan.triggers``), with Beam's five
methods: ``on_element``, ``on_merge``, ``should_fire``, ``on_fire`` (returns whether the node has
*finished*) and ``clear``. Machines hold no state themselves: everything lives in a ``TriggerState``
of plain dicts, ints and strings, namespaced by the node's path (``""`` for the root, ``"/0"``,
``"/early"`` ...), so a Spark stateful operator can store it per (key, window) and resume.

What fires as a pane, and with which rows, is decided by ``sqlwin.core.panes`` (the pane driver).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlwin.plan import triggers as plan

Timer = int | None


@dataclass
class TriggerState:
    """The serializable state of a whole trigger tree for one (key, window)."""

    nodes: dict[str, dict[str, int]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)

    def node(self, path: str) -> dict[str, int]:
        return self.nodes.setdefault(path, {})

    def to_dict(self) -> dict:
        return {"nodes": {p: dict(v) for p, v in sorted(self.nodes.items())},
                "finished": sorted(self.finished)}

    @classmethod
    def from_dict(cls, data: dict) -> TriggerState:
        return cls({p: dict(v) for p, v in data.get("nodes", {}).items()}, set(data.get("finished", ())))


@dataclass
class TriggerContext:
    """What a machine may look at: its state, the window end and the two clocks of this micro-batch."""

    state: TriggerState
    window_end: int
    watermark: int
    processing_time: int
    new_rows: int = 0  # rows delivered by the current on_element call (a whole micro-batch at once)
    end_of_window: bool = False  # set by AFTER WATERMARK when this firing is its end-of-window firing


class TriggerMachine:
    """Base: a node at ``path`` with ``children``; finished bits live in the state, as Beam's bitset."""

    def __init__(self, path: str, children: Sequence[TriggerMachine] = ()):
        self.path = path
        self.children = tuple(children)

    # --- finished bits ---------------------------------------------------------------------------
    def is_finished(self, ctx: TriggerContext) -> bool:
        return self.path in ctx.state.finished

    def set_finished(self, ctx: TriggerContext, finished: bool = True) -> None:
        if finished:
            ctx.state.finished.add(self.path)
        else:
            ctx.state.finished.discard(self.path)

    def unfinished(self, ctx: TriggerContext) -> list[TriggerMachine]:
        return [c for c in self.children if not c.is_finished(ctx)]

    # --- protocol --------------------------------------------------------------------------------
    def on_element(self, ctx: TriggerContext) -> None:
        for child in self.unfinished(ctx):
            child.on_element(ctx)

    def should_fire(self, ctx: TriggerContext) -> bool:
        raise NotImplementedError

    def on_fire(self, ctx: TriggerContext) -> bool:
        """Called when the window fires; returns whether this node has now finished."""
        raise NotImplementedError

    def on_merge(self, ctx: TriggerContext, merging: Sequence[TriggerState]) -> None:
        """Combine the states of merging windows (sessions) into ``ctx.state``: a node finished in
        any merging window stays finished (Beam ORs the finished bits); children merge likewise."""
        self.set_finished(ctx, any(self.path in s.finished for s in merging))
        for child in self.children:
            child.on_merge(ctx, merging)

    def on_time_passed(self, ctx: TriggerContext) -> None:
        """After a micro-batch: note the processing-time timers that have gone off (a timer goes off once)."""
        for child in self.children:
            child.on_time_passed(ctx)

    def clear(self, ctx: TriggerContext) -> None:
        """Forget this subtree: its state and its finished bits (used to repeat and to reset)."""
        ctx.state.nodes.pop(self.path, None)
        self.set_finished(ctx, False)
        for child in self.children:
            child.clear(ctx)

    def timers(self, ctx: TriggerContext) -> tuple[Timer, Timer]:
        """Earliest (event-time, processing-time) instant at which this subtree may fire without new rows."""
        return _earliest(c.timers(ctx) for c in self.unfinished(ctx))


def _earliest(pairs) -> tuple[Timer, Timer]:
    event: Timer = None
    proc: Timer = None
    for e, p in pairs:
        event = e if event is None or (e is not None and e < event) else event
        proc = p if proc is None or (p is not None and p < proc) else proc
    return event, proc


class AfterCountMachine(TriggerMachine):
    """``AFTER COUNT n``: at least n rows in the current pane (Beam ``elementCountAtLeast``)."""

    def __init__(self, path: str, n: int):
        super().__init__(path)
        self.n = n

    def on_element(self, ctx: TriggerContext) -> None:
        node = ctx.state.node(self.path)
        node["count"] = node.get("count", 0) + ctx.new_rows

    def should_fire(self, ctx: TriggerContext) -> bool:
        return ctx.state.nodes.get(self.path, {}).get("count", 0) >= self.n

    def on_fire(self, ctx: TriggerContext) -> bool:
        self.set_finished(ctx)
        return True

    def on_merge(self, ctx: TriggerContext, merging: Sequence[TriggerState]) -> None:
        super().on_merge(ctx, merging)
        total = sum(s.nodes.get(self.path, {}).get("count", 0) for s in merging)
        if total:
            ctx.state.node(self.path)["count"] = total

    def timers(self, ctx: TriggerContext) -> tuple[Timer, Timer]:
        return None, None


def align_up(instant: int, period: int, offset: int = 0) -> int:
    """The first instant >= ``instant`` on the grid ``offset + k * period`` (Beam ``alignedTo``)."""
    return instant + (offset - instant) % period


class AfterProcessingTimeMachine(TriggerMachine):
    """``AFTER PROCESSING TIME [DELAY d] [ALIGNED TO p [OFFSET o]]``: a processing-time timer set by the
    first row of the pane at (its micro-batch's processing time + d), then rounded up to the grid."""

    def __init__(self, path: str, spec: plan.AfterProcessingTime):
        super().__init__(path)
        self.spec = spec

    def on_element(self, ctx: TriggerContext) -> None:
        node = ctx.state.node(self.path)
        if "fire_at" not in node:
            at = ctx.processing_time + self.spec.delay
            if self.spec.align_to is not None:
                at = align_up(at, self.spec.align_to, self.spec.align_offset)
            node["fire_at"] = at

    def should_fire(self, ctx: TriggerContext) -> bool:
        at = ctx.state.nodes.get(self.path, {}).get("fire_at")
        return at is not None and ctx.processing_time >= at

    def on_fire(self, ctx: TriggerContext) -> bool:
        self.set_finished(ctx)
        return True

    def on_time_passed(self, ctx: TriggerContext) -> None:
        """A timer that went off without its trigger firing (an AFTER ALL waiting for its other children) stays
        satisfied but is no timer any more: Beam calls it back once, and asking again would spin no-data
        micro-batches until a row comes."""
        node = ctx.state.nodes.get(self.path)
        if node is not None and "fire_at" in node and ctx.processing_time is not None and \
                ctx.processing_time >= node["fire_at"]:
            node["gone_off"] = True

    def on_merge(self, ctx: TriggerContext, merging: Sequence[TriggerState]) -> None:
        super().on_merge(ctx, merging)
        nodes = [s.nodes[self.path] for s in merging if "fire_at" in s.nodes.get(self.path, {})]
        if nodes:
            earliest = min(nodes, key=lambda n: n["fire_at"])
            ctx.state.node(self.path).update({k: earliest[k] for k in ("fire_at", "gone_off") if k in earliest})

    def timers(self, ctx: TriggerContext) -> tuple[Timer, Timer]:
        node = ctx.state.nodes.get(self.path, {})
        return None, None if node.get("gone_off") else node.get("fire_at")


class NeverMachine(TriggerMachine):
    """``NEVER``: does not fire; the pane driver still emits what is left when the window expires."""

    def should_fire(self, ctx: TriggerContext) -> bool:
        return False

    def on_fire(self, ctx: TriggerContext) -> bool:
        return False

    def timers(self, ctx: TriggerContext) -> tuple[Timer, Timer]:
        return None, None


class AfterWatermarkMachine(TriggerMachine):
    """``AFTER WATERMARK [EARLY t] [LATE t]`` (Beam ``AfterWatermarkEarlyAndLate``).

    Before the end of the window rows feed the early trigger; the first firing at watermark >= end is
    the end-of-window firing, after which rows feed the late trigger. Early and late triggers repeat:
    a sub-trigger that finished is cleared. Without a late trigger the node finishes at the end of
    the window (Beam ``FromEndOfWindow`` is a once-trigger), which closes the window.
    """

    def __init__(self, path: str, early: TriggerMachine | None, late: TriggerMachine | None):
        super().__init__(path, [c for c in (early, late) if c is not None])
        self.early = early
        self.late = late

    def _is_late(self, ctx: TriggerContext) -> bool:
        return bool(ctx.state.nodes.get(self.path, {}).get("late"))

    def _reached_end(self, ctx: TriggerContext) -> bool:
        return ctx.watermark >= ctx.window_end

    def on_element(self, ctx: TriggerContext) -> None:
        active = self.late if self._is_late(ctx) else self.early
        if active is not None:
            active.on_element(ctx)

    def should_fire(self, ctx: TriggerContext) -> bool:
        if self._is_late(ctx):
            return self.late is not None and self.late.should_fire(ctx)
        return self._reached_end(ctx) or (self.early is not None and self.early.should_fire(ctx))

    def on_fire(self, ctx: TriggerContext) -> bool:
        if self._is_late(ctx):
            if self.late is not None:
                _fire_and_repeat(self.late, ctx)
            return False
        if not self._reached_end(ctx):
            if self.early is not None:
                _fire_and_repeat(self.early, ctx)
            return False
        # The end-of-window firing: the early trigger is done for good, the late one starts fresh.
        ctx.end_of_window = True
        if self.early is not None:
            self.early.clear(ctx)
        ctx.state.node(self.path)["late"] = 1
        if self.late is None:
            self.set_finished(ctx)
            return True
        self.late.clear(ctx)
        return False

    def on_merge(self, ctx: TriggerContext, merging: Sequence[TriggerState]) -> None:
        # As Beam: the merged window is still before its end if any merging window was, or if the
        # watermark has not reached the (new, later) end; then the early trigger merges.
        self.set_finished(ctx, any(self.path in s.finished for s in merging))
        all_late = all(s.nodes.get(self.path, {}).get("late") for s in merging)
        if all_late and self._reached_end(ctx):
            ctx.state.node(self.path)["late"] = 1
            if self.late is not None:
                self.late.on_merge(ctx, merging)
        elif self.early is not None:
            self.early.on_merge(ctx, merging)

    def timers(self, ctx: TriggerContext) -> tuple[Timer, Timer]:
        if self._is_late(ctx):
            return self.late.timers(ctx) if self.late is not None else (None, None)
        early = self.early.timers(ctx) if self.early is not None else (None, None)
        return _earliest([early, (ctx.window_end, None)])


def _fire_and_repeat(machine: TriggerMachine, ctx: TriggerContext) -> None:
    """Fire a sub-trigger that repeats implicitly (early/late firings): reset it once finished."""
    if machine.on_fire(ctx):
        machine.clear(ctx)


class AfterAnyMachine(TriggerMachine):
    """``AFTER ANY (t, ...)`` (Beam ``AfterFirst``): fires when any child would; the children ready to fire
    are fired, the others cleared (the pane they tracked is gone). A once-trigger: it finishes when it
    fires, even over repeating children (Beam Java; wrap it in REPEATEDLY to go on)."""

    def should_fire(self, ctx: TriggerContext) -> bool:
        return any(c.is_finished(ctx) or c.should_fire(ctx) for c in self.children)

    def on_fire(self, ctx: TriggerContext) -> bool:
        for child in self.children:
            if child.should_fire(ctx):
                child.on_fire(ctx)
            else:
                child.clear(ctx)
        self.set_finished(ctx)
        return True

    def on_merge(self, ctx: TriggerContext, merging: Sequence[TriggerState]) -> None:
        super().on_merge(ctx, merging)
        self.set_finished(ctx, any(c.is_finished(ctx) for c in self.children))


class AfterAllMachine(TriggerMachine):
    """``AFTER ALL (t, ...)``: fires once every unfinished child would fire; a once-trigger (Beam Java)."""

    def should_fire(self, ctx: TriggerContext) -> bool:
        return all(c.should_fire(ctx) for c in self.unfinished(ctx))

    def on_fire(self, ctx: TriggerContext) -> bool:
        for child in self.children:
            child.on_fire(ctx)
        self.set_finished(ctx)
        return True

    def on_merge(self, ctx: TriggerContext, merging: Sequence[TriggerState]) -> None:
        super().on_merge(ctx, merging)
        self.set_finished(ctx, all(c.is_finished(ctx) for c in self.children))


class AfterEachMachine(TriggerMachine):
    """``AFTER EACH (t1, t2, ...)``: runs t1 until it finishes, then t2 (fresh: it sees only rows after
    t1's last firing), ...; finishes when the last child has (Beam ``AfterEach.inOrder``)."""

    def _current(self, ctx: TriggerContext) -> TriggerMachine | None:
        pending = self.unfinished(ctx)
        return pending[0] if pending else None

    def on_element(self, ctx: TriggerContext) -> None:
        current = self._current(ctx)
        if current is not None:
            current.on_element(ctx)

    def should_fire(self, ctx: TriggerContext) -> bool:
        current = self._current(ctx)
        return current is not None and current.should_fire(ctx)

    def on_fire(self, ctx: TriggerContext) -> bool:
        current = self._current(ctx)
        if current is not None:
            current.on_fire(ctx)
        finished = self._current(ctx) is None
        self.set_finished(ctx, finished)
        return finished

    def timers(self, ctx: TriggerContext) -> tuple[Timer, Timer]:
        current = self._current(ctx)
        return current.timers(ctx) if current is not None else (None, None)


class RepeatedlyMachine(TriggerMachine):
    """``REPEATEDLY t``: fires whenever t fires; a finished t is cleared and starts over. Never finishes."""

    def should_fire(self, ctx: TriggerContext) -> bool:
        return self.children[0].should_fire(ctx)

    def on_fire(self, ctx: TriggerContext) -> bool:
        _fire_and_repeat(self.children[0], ctx)
        return False


class OrFinallyMachine(TriggerMachine):
    """``main UNTIL until`` (Beam ``orFinally``): fires as main; when ``until`` fires, fires one last time
    and finishes. Both see every row; ``until`` is not reset by main's firings."""

    def should_fire(self, ctx: TriggerContext) -> bool:
        return any(c.should_fire(ctx) for c in self.unfinished(ctx))

    def on_fire(self, ctx: TriggerContext) -> bool:
        main, until = self.children
        if until.should_fire(ctx):
            until.on_fire(ctx)
            main.clear(ctx)
            finished = True
        else:
            finished = main.on_fire(ctx)
        self.set_finished(ctx, finished)
        return finished


def build_machine(trigger: plan.Trigger | plan.EmitFinal, path: str = "") -> TriggerMachine:
    """Plan node -> state machine. ``EMIT FINAL`` is ``NEVER``: its one pane is the expiry pane."""
    if isinstance(trigger, plan.AfterCount):
        return AfterCountMachine(path, trigger.n)
    if isinstance(trigger, plan.AfterProcessingTime):
        return AfterProcessingTimeMachine(path, trigger)
    if isinstance(trigger, (plan.Never, plan.EmitFinal)):
        return NeverMachine(path)
    if isinstance(trigger, plan.AfterWatermark):
        early = build_machine(_repeating(trigger.early), f"{path}/early") if trigger.early else None
        late = build_machine(_repeating(trigger.late), f"{path}/late") if trigger.late else None
        return AfterWatermarkMachine(path, early, late)
    if isinstance(trigger, plan.Repeatedly):
        return RepeatedlyMachine(path, [build_machine(trigger.trigger, f"{path}/0")])
    if isinstance(trigger, plan.OrFinally):
        return OrFinallyMachine(path, [build_machine(trigger.main, f"{path}/0"),
                                       build_machine(trigger.until, f"{path}/1")])
    composites = {plan.AfterAny: AfterAnyMachine, plan.AfterAll: AfterAllMachine, plan.AfterEach: AfterEachMachine}
    for plan_type, machine_type in composites.items():
        if isinstance(trigger, plan_type):
            if not trigger.triggers:
                raise ValueError(f"{plan_type.__name__} needs at least one sub-trigger")
            return machine_type(path, [build_machine(t, f"{path}/{i}") for i, t in enumerate(trigger.triggers)])
    raise TypeError(f"not a trigger plan node: {trigger!r}")


def _repeating(trigger: plan.Trigger) -> plan.Trigger:
    """Early/late sub-triggers repeat (GRAMMAR 4), also when a plan was built without the planner."""
    return trigger if isinstance(trigger, plan.Repeatedly) else plan.Repeatedly(trigger)
