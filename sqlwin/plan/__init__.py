"""The typed logical plan between the dialect and the backends."""

from sqlwin.plan.statements import (
    CreateReplayStream,
    CreateStream,
    CreateStreamingTable,
    Explain,
    Passthrough,
    ShowStreamingTables,
    StopStreamingTable,
    StreamColumn,
    WatermarkSpec,
    WindowedQuery,
)
from sqlwin.plan.triggers import (
    AccumulationMode,
    AfterAll,
    AfterAny,
    AfterCount,
    AfterEach,
    AfterProcessingTime,
    AfterWatermark,
    DeltaEvictor,
    EmitFinal,
    EmitSpec,
    EvictSpec,
    KeepLastInterval,
    KeepLastRows,
    LatenessSpec,
    Never,
    OrFinally,
    PaneTiming,
    Repeatedly,
    Trigger,
)
from sqlwin.plan.windows import Column, CountForm, Relation, Rows, TimeType, WindowKind, WindowSpec

__all__ = [
    "AccumulationMode", "AfterAll", "AfterAny", "AfterCount", "AfterEach", "AfterProcessingTime",
    "AfterWatermark", "Column", "CountForm", "CreateReplayStream", "CreateStream",
    "CreateStreamingTable", "DeltaEvictor", "EmitFinal", "EmitSpec", "EvictSpec", "Explain",
    "KeepLastInterval", "KeepLastRows", "LatenessSpec", "Never", "OrFinally", "PaneTiming",
    "Passthrough", "Relation", "Repeatedly", "Rows", "ShowStreamingTables", "StopStreamingTable",
    "StreamColumn", "TimeType", "Trigger", "WatermarkSpec", "WindowKind", "WindowSpec",
    "WindowedQuery",
]
