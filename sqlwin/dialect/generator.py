"""Generator of the sqlwin dialect: prints every node of ``nodes.py`` back as sqlwin SQL.

Plain Spark SQL prints exactly as the stock Spark generator prints it. The sqlwin nodes are not
known to sqlglot's ``<key>_sql`` dispatch (it only covers sqlglot's own classes), so they are
registered in ``TRANSFORMS``; the Select clauses print after HAVING/QUALIFY, before ORDER BY.
Backends replace WindowTVF nodes before generating Spark SQL; this is for sqlwin SQL only.
"""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.generators.spark import SparkGenerator

from sqlwin.dialect import nodes as n


def _by_key(key: str) -> t.Callable[[SparkGenerator, exp.Expr], str]:
    def handler(self: SparkGenerator, expression: exp.Expr) -> str:
        return getattr(self, f"{key}_sql")(expression)

    return handler


def _clause(key: str) -> t.Callable[[SparkGenerator, exp.Expr], str]:
    def handler(self: SparkGenerator, expression: exp.Expr) -> str:
        value = expression.args.get(key)
        return self.seg(self.sql(value)) if value else ""

    return handler


class SqlwinGenerator(SparkGenerator):
    TRANSFORMS = {
        **SparkGenerator.TRANSFORMS,
        **{node: _by_key(node.key) for node in n.ALL_NODES},
    }

    AFTER_HAVING_MODIFIER_TRANSFORMS = {
        **SparkGenerator.AFTER_HAVING_MODIFIER_TRANSFORMS,
        **{key: _clause(key) for key in n.SELECT_CLAUSE_KEYS},
    }

    # ------------------------------------------------------------------ window TVFs

    def windowtvf_sql(self, expression: n.WindowTVF) -> str:
        sql = f"{expression.kind}({self.expressions(expression, flat=True)})"
        if expression.args.get("wrapped"):
            sql = f"TABLE({sql})"
        alias = self.sql(expression, "alias")
        return f"{sql} AS {alias}" if alias else sql

    def tablearg_sql(self, expression: n.TableArg) -> str:
        this = expression.this
        if isinstance(this, exp.Subquery):
            sql = f"TABLE{self.sql(this)}"
        elif expression.args.get("wrapped"):
            sql = f"TABLE({self.sql(this)})"
        else:
            sql = f"TABLE {self.sql(this)}"
        partition = self.expressions(expression, key="partition_by", flat=True)
        order = self.expressions(expression, key="order_by", flat=True)
        sql += f" PARTITION BY {partition}" if partition else ""
        sql += f" ORDER BY {order}" if order else ""
        return sql

    def descriptor_sql(self, expression: n.Descriptor) -> str:
        return f"DESCRIPTOR({self.expressions(expression, flat=True)})"

    def rowsextent_sql(self, expression: n.RowsExtent) -> str:
        return f"ROWS {self.sql(expression, 'this')}"

    # ------------------------------------------------------------------ Select clauses

    def allowedlateness_sql(self, expression: n.AllowedLateness) -> str:
        keyword = "GRACE PERIOD" if expression.args.get("grace") else "ALLOWED LATENESS"
        return f"{keyword} {self.sql(expression, 'this')}"

    def laterowsto_sql(self, expression: n.LateRowsTo) -> str:
        return f"LATE ROWS TO {self.sql(expression, 'this')}"

    def evict_sql(self, expression: n.Evict) -> str:
        after = expression.args.get("after")
        side = "" if after is None else (" AFTER" if after else " BEFORE")
        return f"EVICT{side} {self.sql(expression, 'this')}"

    def evictkeeplastrows_sql(self, expression: n.EvictKeepLastRows) -> str:
        return f"KEEP LAST {self.sql(expression, 'this')} ROWS"

    def evictkeeplastinterval_sql(self, expression: n.EvictKeepLastInterval) -> str:
        return f"KEEP LAST {self.sql(expression, 'this')}"

    def evictdelta_sql(self, expression: n.EvictDelta) -> str:
        return f"DELTA({self.sql(expression, 'this')}) < {self.sql(expression, 'expression')}"

    def emit_sql(self, expression: n.Emit) -> str:
        sugar = expression.args.get("sugar")
        if sugar:
            return f"EMIT {sugar}"
        mode = expression.args.get("mode")
        mode = f" {mode}" if mode else ""
        return f"EMIT WITH TRIGGER {self.sql(expression, 'trigger')}{mode}"

    # ------------------------------------------------------------------ triggers

    def _sub_trigger(self, trigger: exp.Expr | None, *wrap_if: type[exp.Expr]) -> str:
        """A child trigger, parenthesized when printing it bare would change the tree."""
        sql = self.sql(trigger)
        return f"({sql})" if isinstance(trigger, (n.TriggerUntil, *wrap_if)) else sql

    def triggerafterwatermark_sql(self, expression: n.TriggerAfterWatermark) -> str:
        sql = "AFTER WATERMARK"
        early, late = expression.args.get("early"), expression.args.get("late")
        if early:
            # An unparenthesized AFTER WATERMARK in EARLY would take our LATE as its own.
            sql += f" EARLY {self._sub_trigger(early, n.TriggerAfterWatermark)}"
        if late:
            sql += f" LATE {self._sub_trigger(late)}"
        return sql

    def triggerafterprocessingtime_sql(self, expression: n.TriggerAfterProcessingTime) -> str:
        sql = "AFTER PROCESSING TIME"
        if expression.args.get("delay"):
            sql += f" DELAY {self.sql(expression, 'delay')}"
        if expression.args.get("aligned_to"):
            sql += f" ALIGNED TO {self.sql(expression, 'aligned_to')}"
            if expression.args.get("align_offset"):
                sql += f" OFFSET {self.sql(expression, 'align_offset')}"
        return sql

    def triggeraftercount_sql(self, expression: n.TriggerAfterCount) -> str:
        return f"AFTER COUNT {self.sql(expression, 'this')}"

    def _after_list(self, kind: str, expression: exp.Expr) -> str:
        return f"AFTER {kind} ({', '.join(self.sql(e) for e in expression.expressions)})"

    def triggerafterany_sql(self, expression: n.TriggerAfterAny) -> str:
        return self._after_list("ANY", expression)

    def triggerafterall_sql(self, expression: n.TriggerAfterAll) -> str:
        return self._after_list("ALL", expression)

    def triggeraftereach_sql(self, expression: n.TriggerAfterEach) -> str:
        return self._after_list("EACH", expression)

    def triggerrepeatedly_sql(self, expression: n.TriggerRepeatedly) -> str:
        return f"REPEATEDLY {self._sub_trigger(expression.this)}"

    def triggeruntil_sql(self, expression: n.TriggerUntil) -> str:
        # Left-associative: only a right-hand UNTIL needs parentheses.
        return f"{self.sql(expression, 'this')} UNTIL {self._sub_trigger(expression.expression)}"

    def triggernever_sql(self, expression: n.TriggerNever) -> str:
        return "NEVER"

    def triggereveryrows_sql(self, expression: n.TriggerEveryRows) -> str:
        return f"EVERY {self.sql(expression, 'this')} ROWS"

    def triggereveryinterval_sql(self, expression: n.TriggerEveryInterval) -> str:
        return f"EVERY {self.sql(expression, 'this')}"

    def triggerparen_sql(self, expression: n.TriggerParen) -> str:
        return f"({self.sql(expression, 'this')})"

    # ------------------------------------------------------------------ statements

    def _options(self, expression: exp.Expr) -> str:
        sql = ""
        if expression.args.get("format"):
            sql += f" USING {self.sql(expression, 'format')}"
        options = expression.args.get("options")
        if options is not None:
            items = ", ".join(f"{self.sql(o, 'this')} {self.sql(o, 'value')}" for o in options)
            sql += f" OPTIONS ({items})"
        return sql

    def watermarkdef_sql(self, expression: n.WatermarkDef) -> str:
        sql = f"WATERMARK FOR {self.sql(expression, 'this')} AS {self.sql(expression, 'expression')}"
        if expression.args.get("where"):
            sql += f" ON ROWS WHERE {self.sql(expression, 'where')}"
        return sql

    def computedcolumn_sql(self, expression: n.ComputedColumn) -> str:
        return f"{self.sql(expression, 'this')} AS {self.sql(expression, 'expression')}"

    def proctime_sql(self, expression: n.Proctime) -> str:
        return "PROCTIME()"

    def createstream_sql(self, expression: n.CreateStream) -> str:
        items = [self.sql(e) for e in expression.expressions]
        if expression.args.get("watermark"):
            items.append(self.sql(expression, "watermark"))
        sql = f"CREATE STREAM {self.sql(expression, 'this')} ({', '.join(items)}){self._options(expression)}"
        if expression.args.get("idle_timeout"):
            sql += f" WITH IDLE TIMEOUT {self.sql(expression, 'idle_timeout')}"
        if expression.args.get("alignment"):
            sql += f" {self.sql(expression, 'alignment')}"
        return sql

    def watermarkalignment_sql(self, expression: n.WatermarkAlignment) -> str:
        return (f"WITH WATERMARK ALIGNMENT GROUP {self.sql(expression, 'this')} "
                f"MAX DRIFT {self.sql(expression, 'expression')}")

    def createreplaystream_sql(self, expression: n.CreateReplayStream) -> str:
        sql = (
            f"CREATE STREAM {self.sql(expression, 'this')} FROM {self.sql(expression, 'source')}"
            f" ARRIVAL ORDER BY {self.expressions(expression, key='arrival_order', flat=True)}"
        )
        if expression.args.get("micro_batch"):
            sql += f" MICRO BATCH BY {self.sql(expression, 'micro_batch')}"
        if expression.args.get("processing_time"):
            sql += f" PROCESSING TIME BY {self.sql(expression, 'processing_time')}"
        sql = f"{sql} {self.sql(expression, 'watermark')}"
        if expression.args.get("idle_timeout"):
            sql += f" WITH IDLE TIMEOUT {self.sql(expression, 'idle_timeout')}"
        return sql

    def createstreamingtable_sql(self, expression: n.CreateStreamingTable) -> str:
        return (
            f"CREATE STREAMING TABLE {self.sql(expression, 'this')}{self._options(expression)}"
            f" AS {self.sql(expression, 'expression')}"
        )

    def showstreamingtables_sql(self, expression: n.ShowStreamingTables) -> str:
        return "SHOW STREAMING TABLES"

    def stopstreamingtable_sql(self, expression: n.StopStreamingTable) -> str:
        return f"STOP STREAMING TABLE {self.sql(expression, 'this')}"

    def dropstreamingtable_sql(self, expression: n.DropStreamingTable) -> str:
        purge = " PURGE" if expression.args.get("purge") else ""
        return f"DROP STREAMING TABLE {self.sql(expression, 'this')}{purge}"

    def explainstatement_sql(self, expression: n.ExplainStatement) -> str:
        mode = expression.args.get("mode")
        return f"EXPLAIN {mode + ' ' if mode else ''}{self.sql(expression, 'this')}"
