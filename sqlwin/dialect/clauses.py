"""Grammar of the sqlwin query clauses and triggers (GRAMMAR 4) and stream statements (GRAMMAR 3, 5).

A mixin of ``SqlwinParser`` (kept apart so that each module stays short); it uses the sqlglot
parser primitives (``_match``, ``_parse_bitwise``, ...) and the parser's ``_mark``/``_expect``.
Every node it builds records its start position (``meta["start_line"]``/``["start_col"]``).
"""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.tokens import TokenType

from sqlwin.dialect import nodes as n

if t.TYPE_CHECKING:
    from sqlglot.parsers.spark import SparkParser
    from sqlglot.tokens import Token

    class _Base(SparkParser):
        """What this mixin uses of the class it is part of, ``SqlwinParser`` (which defines these), beyond
        sqlglot's Spark parser: declared here, so that this module does not import the parser that imports it."""

        def _mark(self, node: exp.Expr, token: Token | None) -> exp.Expr: ...

        def _fail(self, message: str, token: Token | None = None) -> t.NoReturn: ...

        def _expect(self, token_type: TokenType, what: str, context: str) -> Token: ...

        def _parse_table_arg(self, partition: bool) -> n.TableArg: ...

        def _parse_streaming_table_name(self) -> exp.Table: ...
else:
    _Base = object


class ClauseParserMixin(_Base):
    """Recursive-descent rules for what stock Spark SQL does not have."""

    # ------------------------------------------------------------------ helpers

    def _word(self) -> str:
        """The current token's text, upper case, when it is a word (not a string/identifier)."""
        curr = self._curr
        if not curr or curr.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            return ""
        return curr.text.upper()

    def _node(self, node: exp.Expr, start: Token) -> t.Any:
        return self._mark(self.expression(node), start)

    def _parse_interval_arg(self, context: str) -> exp.Expr:
        start = self._curr
        value = self._parse_bitwise()
        if value is None:
            self._fail(f"expected an interval {context}")
        return self._mark(value, start)

    def _parse_count(self, context: str) -> exp.Expr:
        if self._curr.token_type != TokenType.NUMBER:
            self._fail(f"expected a number {context}")
        start = self._curr
        return self._mark(self._parse_primary(), start)

    # ------------------------------------------------------------------ Select clauses

    def _parse_select_clause(self, key: str) -> exp.Expr:
        """One of ALLOWED LATENESS / GRACE PERIOD, LATE ROWS TO, EVICT, EMIT (``key`` says which)."""
        start = self._curr
        if key == "lateness":
            grace = self._word() == "GRACE"
            self._advance()
            second = "PERIOD" if grace else "LATENESS"
            if not self._match_text_seq(second):
                self._fail(f"expected {second} after {start.text.upper()}")
            context = "after GRACE PERIOD" if grace else "after ALLOWED LATENESS"
            node: exp.Expr = n.AllowedLateness(this=self._parse_interval_arg(context), grace=grace or None)
        elif key == "late_rows_to":
            self._advance()
            if not self._match(TokenType.ROWS):
                self._fail("expected ROWS TO after LATE")
            if not self._match_text_seq("TO"):
                self._fail("expected TO after LATE ROWS")
            node = n.LateRowsTo(this=self._parse_streaming_table_name())
        elif key == "evict":
            node = self._parse_evict()
        else:
            node = self._parse_emit()
        return self._node(node, start)

    def _parse_evict(self) -> exp.Expr:
        self._advance()
        after = {"BEFORE": False, "AFTER": True}.get(self._word())
        if after is not None:
            self._advance()
        start = self._curr
        evictor: exp.Expr
        if self._match(TokenType.KEEP):
            if not self._match_text_seq("LAST"):
                self._fail("expected LAST after KEEP")
            if self._curr.token_type == TokenType.NUMBER:
                count = self._parse_count("after KEEP LAST")
                if not self._match(TokenType.ROWS):
                    self._fail("expected ROWS after KEEP LAST n")
                evictor = n.EvictKeepLastRows(this=count)
            else:
                evictor = n.EvictKeepLastInterval(this=self._parse_interval_arg("or n ROWS after KEEP LAST"))
        elif self._word() == "DELTA" and self._next.token_type == TokenType.L_PAREN:
            self._advance(2)
            this = self._parse_disjunction()
            if this is None:
                self._fail("expected an expression in DELTA(...)")
            self._expect(TokenType.R_PAREN, "')'", "to close DELTA(")
            self._expect(TokenType.LT, "'<' threshold", "after DELTA(expr)")
            threshold = self._parse_bitwise()
            if threshold is None:
                self._fail("expected a threshold after DELTA(expr) <")
            evictor = n.EvictDelta(this=this, expression=threshold)
        else:
            self._fail(
                "expected KEEP LAST n ROWS, KEEP LAST interval or DELTA(expr) < threshold after EVICT"
            )
        return n.Evict(this=self._node(evictor, start), after=after)

    def _parse_emit(self) -> exp.Expr:
        self._advance()
        if self._match(TokenType.WITH):
            if not self._match(TokenType.TRIGGER) and not self._match_text_seq("TRIGGER"):
                self._fail("expected TRIGGER after EMIT WITH")
            trigger = self._parse_trigger()
            mode = self._word() if self._word() in ("ACCUMULATING", "DISCARDING") else None
            if mode:
                self._advance()
            return n.Emit(trigger=trigger, mode=mode)
        if self._match_text_seq("FINAL"):
            return n.Emit(sugar="FINAL")
        if self._match_text_seq("CHANGES"):
            return n.Emit(sugar="CHANGES")
        if self._match(TokenType.ON):
            if not self._match(TokenType.WINDOW):
                self._fail("expected WINDOW CLOSE after EMIT ON")
            if not self._match_text_seq("CLOSE"):
                self._fail("expected CLOSE after EMIT ON WINDOW")
            return n.Emit(sugar="ON WINDOW CLOSE")
        self._fail("expected WITH TRIGGER, FINAL, ON WINDOW CLOSE or CHANGES after EMIT")

    # ------------------------------------------------------------------ triggers

    def _parse_trigger(self) -> n.Trigger:
        """``trigger (UNTIL trigger)*``: UNTIL binds loosest and associates left."""
        start = self._curr
        this = self._parse_trigger_unary()
        while self._word() == "UNTIL":
            self._advance()
            this = self._node(n.TriggerUntil(this=this, expression=self._parse_trigger_unary()), start)
        return this

    def _parse_trigger_unary(self) -> n.Trigger:
        """One trigger without a top-level UNTIL (also what REPEATEDLY, EARLY and LATE take)."""
        start = self._curr
        word = self._word()
        node: exp.Expr
        if word == "REPEATEDLY":
            self._advance()
            node = n.TriggerRepeatedly(this=self._parse_trigger_unary())
        elif start and start.token_type == TokenType.L_PAREN:
            self._advance()
            inner = self._parse_trigger()
            self._expect(TokenType.R_PAREN, "')'", "to close the parenthesized trigger")
            node = n.TriggerParen(this=inner)
        elif word == "NEVER":
            self._advance()
            node = n.TriggerNever()
        elif word == "EVERY":
            self._advance()
            node = self._parse_every()
        elif word == "AFTER":
            self._advance()
            node = self._parse_after()
        else:
            self._fail("expected a trigger (AFTER ..., REPEATEDLY, EVERY, NEVER or '(')")
        return self._node(node, start)

    def _parse_every(self) -> exp.Expr:
        if self._curr.token_type == TokenType.NUMBER:
            count = self._parse_count("after EVERY")
            if not self._match(TokenType.ROWS):
                self._fail("expected ROWS after EVERY n")
            return n.TriggerEveryRows(this=count)
        if self._curr.token_type != TokenType.INTERVAL:
            self._fail("expected n ROWS or an interval after EVERY")
        return n.TriggerEveryInterval(this=self._parse_interval_arg("after EVERY"))

    def _parse_after(self) -> exp.Expr:
        word = self._word()
        if word == "WATERMARK":
            self._advance()
            early = late = None
            if self._match_text_seq("EARLY"):
                early = self._parse_trigger_unary()
            # LATE ROWS TO is the clause that may follow the trigger (GRAMMAR 4: clauses in any order)
            late_rows_to = self._next is not None and self._next.token_type == TokenType.ROWS
            if self._word() == "LATE" and not late_rows_to:
                self._advance()
                late = self._parse_trigger_unary()
            return n.TriggerAfterWatermark(early=early, late=late)
        if word == "PROCESSING":
            self._advance()
            if not self._match_text_seq("TIME"):
                self._fail("expected TIME after AFTER PROCESSING")
            delay = aligned = offset = None
            if self._match_text_seq("DELAY"):
                delay = self._parse_interval_arg("after DELAY")
            if self._match_text_seq("ALIGNED"):
                if not self._match_text_seq("TO"):
                    self._fail("expected TO after ALIGNED")
                aligned = self._parse_interval_arg("after ALIGNED TO")
                if self._match_text_seq("OFFSET"):
                    offset = self._parse_interval_arg("after OFFSET")
            return n.TriggerAfterProcessingTime(delay=delay, aligned_to=aligned, align_offset=offset)
        if word == "COUNT":
            self._advance()
            return n.TriggerAfterCount(this=self._parse_count("after AFTER COUNT"))
        kinds = {"ANY": n.TriggerAfterAny, "ALL": n.TriggerAfterAll, "EACH": n.TriggerAfterEach}
        if word in kinds:
            self._advance()
            self._expect(TokenType.L_PAREN, "'('", f"after AFTER {word}")
            triggers = [self._parse_trigger()]
            while self._match(TokenType.COMMA):
                triggers.append(self._parse_trigger())
            self._expect(TokenType.R_PAREN, "')' or ','", f"in AFTER {word} (...)")
            return kinds[word](expressions=triggers)
        self._fail("expected WATERMARK, PROCESSING TIME, COUNT, ANY, ALL or EACH after AFTER")

    # ------------------------------------------------------------------ stream statements

    def _parse_create_stream(self) -> exp.Expr:
        """CREATE STREAM name (...) USING ..., CREATE STREAM name FROM TABLE ..., CREATE STREAMING TABLE."""
        self._advance()  # CREATE
        if self._match_text_seq("STREAMING"):
            self._expect(TokenType.TABLE, "TABLE", "after CREATE STREAMING")
            name = self._parse_streaming_table_name()
            fmt, options = self._parse_using_format(), self._parse_stream_options()
            self._expect(TokenType.ALIAS, "AS <query>", "in CREATE STREAMING TABLE")
            query = self._parse_select(nested=True) if self._curr else None
            if query is None:
                self._fail("expected a query after AS")
            return n.CreateStreamingTable(this=name, format=fmt, options=options, expression=query)
        self._advance()  # STREAM
        name = self._parse_streaming_table_name()
        if self._match(TokenType.FROM):
            return self._parse_replay_stream(name)
        self._expect(TokenType.L_PAREN, "'(' with the columns, or FROM TABLE,", "after CREATE STREAM name")
        columns: list[exp.Expr] = []
        watermark = None
        while True:
            start = self._curr
            if self._match_text_seq("WATERMARK", "FOR"):
                if watermark is not None:
                    self._fail("duplicate WATERMARK definition", start)
                watermark = self._parse_watermark_def(start)
            elif self._next.token_type == TokenType.ALIAS:
                name_id = self._parse_id_var(any_token=True)
                self._advance()  # AS
                expr = self._parse_disjunction()
                if expr is None:
                    self._fail("expected an expression after AS")
                columns.append(self._node(n.ComputedColumn(this=name_id, expression=expr), start))
            else:
                column = self._parse_field_def()
                if not isinstance(column, exp.ColumnDef) or not column.args.get("kind"):
                    self._fail("expected a column definition (name type)", start)
                columns.append(self._mark(column, start))
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.R_PAREN, "')' or ','", "in the columns of CREATE STREAM")
        fmt, options = self._parse_using_format(), self._parse_stream_options()
        idle = alignment = None
        while self._curr and self._curr.text.upper() == "WITH":
            start = self._curr
            if idle is None and self._match_text_seq("WITH", "IDLE", "TIMEOUT"):
                idle = self._parse_interval_arg("after WITH IDLE TIMEOUT")
            elif alignment is None and self._match_text_seq("WITH", "WATERMARK", "ALIGNMENT"):
                alignment = self._parse_alignment(start)
            else:
                self._fail("expected WITH IDLE TIMEOUT or WITH WATERMARK ALIGNMENT GROUP (each at most once)")
        return n.CreateStream(this=name, expressions=columns, watermark=watermark, format=fmt,
                              options=options, idle_timeout=idle, alignment=alignment)

    def _parse_alignment(self, start: Token) -> exp.Expr:
        """After ``WITH WATERMARK ALIGNMENT``: ``GROUP 'name' MAX DRIFT interval``."""
        if not self._match_text_seq("GROUP"):
            self._fail("expected GROUP 'name' after WITH WATERMARK ALIGNMENT")
        if self._curr is None or self._curr.token_type != TokenType.STRING:
            self._fail("expected the alignment group's name as a string ('name') after GROUP")
        group = self._parse_primary()
        if not self._match_text_seq("MAX", "DRIFT"):
            self._fail("expected MAX DRIFT interval after the alignment group")
        drift = self._parse_interval_arg("after MAX DRIFT")
        return self._node(n.WatermarkAlignment(this=group, expression=drift), start)

    def _parse_replay_stream(self, name: exp.Table) -> exp.Expr:
        start = self._curr
        if self._match(TokenType.TABLE):
            source = self._parse_table_arg(partition=False)
        else:
            source = self._node(n.TableArg(this=self._parse_streaming_table_name()), start)
        if not (self._match_text_seq("ARRIVAL") and self._match(TokenType.ORDER_BY)):
            self._fail("expected ARRIVAL ORDER BY after FROM TABLE t")
        order = self._parse_csv(self._parse_ordered)
        if not order:
            self._fail("expected a column after ARRIVAL ORDER BY")
        micro_batch = None
        if self._match_text_seq("MICRO", "BATCH", "BY"):
            micro_start = self._curr
            micro_batch = self._parse_disjunction()
            if micro_batch is None:
                self._fail("expected an expression after MICRO BATCH BY")
            self._mark(micro_batch, micro_start)
        processing_time = None
        if self._match_text_seq("PROCESSING", "TIME", "BY"):
            clock_start = self._curr
            processing_time = self._parse_disjunction()
            if processing_time is None:
                self._fail("expected an expression after PROCESSING TIME BY")
            self._mark(processing_time, clock_start)
        wm_start = self._curr
        if not self._match_text_seq("WATERMARK", "FOR"):
            self._fail("expected WATERMARK FOR column AS expression")
        watermark = self._parse_watermark_def(wm_start)
        idle = None
        if self._match_text_seq("WITH", "IDLE", "TIMEOUT"):
            idle = self._parse_interval_arg("after WITH IDLE TIMEOUT")
        return n.CreateReplayStream(this=name, source=source, arrival_order=order, micro_batch=micro_batch,
                                    processing_time=processing_time, watermark=watermark, idle_timeout=idle)

    def _parse_watermark_def(self, start: Token) -> exp.Expr:
        """After ``WATERMARK FOR``: ``col AS expr [ON ROWS WHERE predicate]`` (punctuated: GRAMMAR 3)."""
        column = self._parse_id_var()
        if column is None:
            self._fail("expected a column after WATERMARK FOR")
        self._expect(TokenType.ALIAS, "AS", "after WATERMARK FOR column")
        expr_start = self._curr
        expr = self._parse_disjunction()
        if expr is None:
            self._fail("expected an expression after WATERMARK FOR column AS")
        self._mark(expr, expr_start)
        where = None
        if self._curr and self._curr.text.upper() == "ON":
            if not self._match_text_seq("ON", "ROWS", "WHERE"):
                self._fail("expected ON ROWS WHERE condition (a punctuated watermark)")
            where_start = self._curr
            where = self._parse_disjunction()
            if where is None:
                self._fail("expected a condition after ON ROWS WHERE")
            self._mark(where, where_start)
        return self._node(n.WatermarkDef(this=column, expression=expr, where=where), start)

    def _parse_using_format(self) -> exp.Expr | None:
        if not self._match(TokenType.USING):
            return None
        start = self._curr
        fmt = self._parse_var(any_token=True)
        if fmt is None:
            self._fail("expected a format (json, csv, parquet, rate, ...) after USING")
        return self._mark(exp.var(fmt.name.lower()), start)

    def _parse_stream_options(self) -> list[exp.Expr] | None:
        """``OPTIONS (key 'value', 'k.e.y' = 'v', ...)`` as ``exp.Property(this=key, value=...)``."""
        if not self._match_text_seq("OPTIONS"):
            return None
        self._expect(TokenType.L_PAREN, "'('", "after OPTIONS")
        options: list[exp.Expr] = []
        while self._curr and self._curr.token_type != TokenType.R_PAREN:
            start = self._curr
            if start.token_type == TokenType.STRING:
                key = self._parse_string()
            else:
                parts = []
                while True:
                    token = self._advance_any()
                    if token is None or token.token_type in (TokenType.COMMA, TokenType.L_PAREN):
                        self._fail("expected an option name", token or self._curr)
                    parts.append(token.text)
                    if not self._match(TokenType.DOT):
                        break
                key = exp.var(".".join(parts))
            self._match(TokenType.EQ)
            value = self._parse_bitwise()
            if value is None:
                self._fail(f"expected a value for option {key.name}")
            options.append(self._node(exp.Property(this=key, value=value), start))
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.R_PAREN, "')' or ','", "in OPTIONS (...)")
        return options
