"""Parser of the sqlwin dialect: Spark's parser plus window TVFs, streaming clauses and statements.

It overrides a few entry points of sqlglot's Spark parser rather than patching sqlglot:
``_parse_table`` (window TVFs in FROM/JOIN), ``_parse_table_alias`` (clause words are not
aliases), ``_parse_query_modifiers`` (ALLOWED LATENESS, LATE ROWS TO, EVICT, EMIT on a Select),
``_parse_statement`` (CREATE STREAM, CREATE STREAMING TABLE, SHOW/STOP, EXPLAIN) and
``raise_error`` (1-based start line/col and an "expected ..." message on every error). Trigger
and statement grammars live in ``sqlwin.dialect.clauses``.
"""

from __future__ import annotations

import re
import typing as t
from bisect import bisect_right
from functools import lru_cache

from sqlglot import exp
from sqlglot.errors import ErrorLevel, ParseError
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import Token, TokenType

from sqlwin.core.timeunits import CALENDAR_UNITS, UNIT_MICROS, normalize_unit
from sqlwin.dialect import nodes as n
from sqlwin.dialect.clauses import ClauseParserMixin

TVF_NAMES = frozenset({"TUMBLE", "HOP", "CUMULATE", "SESSION"})

# Words that end an interval in sqlwin clauses: never taken as the unit of ``INTERVAL 5 <word>``.
INTERVAL_STOP_WORDS = frozenset(
    {"EMIT", "ALLOWED", "GRACE", "LATE", "EVICT", "ACCUMULATING", "DISCARDING", "UNTIL", "EARLY",
     "ALIGNED", "WATERMARK", "MICRO"}
)


def _start_of(sql: str, offset: int) -> tuple[int, int]:
    """1-based (line, col) of the character at ``offset`` of ``sql`` (a bisection over the line
    starts, computed once per text: counting newlines per node was quadratic in long statements)."""
    starts = _line_starts(sql)
    line = bisect_right(starts, offset)
    return line, offset - starts[line - 1] + 1


@lru_cache(maxsize=8)
def _line_starts(sql: str) -> list[int]:
    return [0, *(m.end() for m in re.finditer("\n", sql))]


def _first_part(interval: exp.Expr) -> exp.Expr:
    """The first part of a multi-unit interval (sqlglot's ``Add`` of its parts), or the interval itself."""
    while isinstance(interval, exp.Add):
        interval = interval.this
    return interval


def _describe(token: Token | None) -> str:
    if not token:
        return "end of statement"
    if token.token_type == TokenType.STRING:
        return f"string '{_one_line(token.text)}'"
    return f"'{_one_line(token.text)}'"


def _one_line(text: str, width: int = 60) -> str:
    """A token's text as an error message shows it: one line (a string literal may span several), not too long."""
    first = (text.splitlines() or [""])[0]
    return first if first == text and len(text) <= width else f"{first[:width]}..."


_REQUIRED_RE = re.compile(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>")


def _friendly(message: str) -> str:
    """sqlglot's messages, reworded as 'expected ...' where we know what was expected."""
    if message.startswith("Expecting "):
        return f"expected '{message[len('Expecting '):]}'"
    if message.startswith("Expected table name"):
        return "expected a table name"
    if message.startswith("Expected database name"):
        return "expected a database name"
    match = _REQUIRED_RE.match(message)
    if match:
        clause = match.group(2).upper()
        if clause in ("WHERE", "HAVING", "QUALIFY"):
            return f"expected a condition after {clause}"
        return f"expected an expression (incomplete {match.group(2)})"
    return message[:1].lower() + message[1:] if message[1:2].islower() else message  # keep acronyms


class SqlwinParser(ClauseParserMixin, SparkParser):
    FUNCTIONS = {**SparkParser.FUNCTIONS, "PROCTIME": n.Proctime.from_arg_list}

    _in_group_by = False  # set while parsing GROUP BY keys (see _parse_disjunction)

    # ------------------------------------------------------------------ positions and errors

    def _tok(self, offset: int) -> Token | None:
        index = self._index + offset
        return self._tokens[index] if 0 <= index < len(self._tokens) else None

    def _mark(self, node: exp.Expr, token: Token | None) -> exp.Expr:
        """Record where ``node`` starts (1-based line/col of its first token) for the planner."""
        if token and node is not None:
            line, col = _start_of(self.sql, token.start)
            node.meta["start_line"] = line
            node.meta["start_col"] = col
        return node

    def raise_error(self, message: str, token: Token | None = None) -> None:  # type: ignore[override]
        """Raise a ParseError whose line/col are the *start* of the offending token.

        A ParseError (not SqlwinError) so that sqlglot's backtracking (``_try_parse``) still
        works; ``sqlwin.dialect.parse`` turns it into a SqlwinError.
        """
        token = token or self._curr or None
        if token:
            line, col = _start_of(self.sql, token.start)
        elif self._prev:
            line, col = _start_of(self.sql, self._prev.end + 1)
        else:
            line, col = 1, 1
        if message == "Invalid expression / Unexpected token":
            text = f"unexpected {_describe(token)}"
        elif message.startswith("duplicate "):
            text = message
        else:
            text = f"{_friendly(message)}, got {_describe(token)}"
        error = ParseError.new(f"{text}. Line {line}, Col: {col}.", description=text, line=line, col=col)
        if self.error_level != ErrorLevel.IMMEDIATE:  # sqlglot's RAISE/WARN levels collect errors
            self.errors.append(error)
            return
        raise error

    def _fail(self, message: str, token: Token | None = None) -> t.NoReturn:
        """raise_error that always raises (sqlwin rules cannot go on after an error)."""
        self.raise_error(message, token)
        raise self.errors[-1]

    def _expect(self, token_type: TokenType, what: str, context: str) -> Token:
        if not self._match(token_type):
            self._fail(f"expected {what} {context}")
        return self._prev

    # ------------------------------------------------------------------ intervals

    def _parse_interval(self, require_interval: bool = True,
                        parse_function_unit: bool = True) -> exp.Add | exp.Interval | exp.Paren | None:
        """Spark's multi-unit form ``INTERVAL 9 MINUTES -60 SECONDS`` is one value: sqlglot's sum of its parts
        (a signed later part included), kept in parentheses so that ``ts - INTERVAL 1 MINUTE 30 SECONDS`` is
        generated as ``ts - (... + ...)``, not as ``(ts - ...) + ...``. Each part records where it starts."""
        start, value = self._curr, self._tok(1) if require_interval else self._curr
        interval = super()._parse_interval(require_interval, parse_function_unit=parse_function_unit)
        if interval is None:
            return None
        if not require_interval:  # a later part (sqlglot parses them here too): where its value starts
            self._mark(_first_part(interval), value)
            return interval
        while self._signed_part_follows():
            sign = self._curr
            self._advance()
            part = self._parse_interval(False, parse_function_unit=parse_function_unit)
            first = t.cast(exp.Interval, self._mark(_first_part(part), sign))
            if sign.token_type == TokenType.DASH:
                text = first.this.name
                first.set("this", exp.Literal.string(text[1:] if text.startswith("-") else f"-{text}"))
            interval = self.expression(exp.Add(this=interval, expression=part))
        if isinstance(interval, exp.Add):
            self._mark(_first_part(interval), value)
            return t.cast(exp.Paren, self._mark(self.expression(exp.Paren(this=interval)), start))
        return interval

    def _signed_part_follows(self) -> bool:
        """``- 30 SECONDS`` after an interval's part: a further part of the multi-unit form (a unit follows)."""
        sign, number, unit = self._tok(0), self._tok(1), self._tok(2)
        return bool(sign and number and unit and sign.token_type in (TokenType.DASH, TokenType.PLUS)
                    and number.token_type in (TokenType.NUMBER, TokenType.STRING)
                    and normalize_unit(unit.text) in UNIT_MICROS.keys() | CALENDAR_UNITS)

    def _parse_interval_span(self, this: exp.Expr, parse_function_unit: bool = True) -> exp.Interval:
        # ``INTERVAL 5 ACCUMULATING``: stock sqlglot takes any word as the unit; in sqlwin clause
        # words end the interval instead (a unit-less interval, as sqlglot would build it).
        curr = self._curr
        if (
            this is not None
            and curr
            and curr.token_type == TokenType.VAR
            and curr.text.upper() in INTERVAL_STOP_WORDS
        ):
            unit = None
            if this.is_number:
                this = exp.Literal.string(this.name)
            elif this.is_string:
                parts = exp.INTERVAL_STRING_RE.findall(this.name)
                if len(parts) == 1:
                    this = exp.Literal.string(parts[0][0])
                    unit = exp.Var(this=parts[0][1].upper())
            return self.expression(exp.Interval(this=this, unit=unit))
        return super()._parse_interval_span(this, parse_function_unit=parse_function_unit)

    # ------------------------------------------------------------------ window TVFs

    def _parse_table(self, schema: bool = False, joins: bool = False, alias_tokens: t.Any = None,
                     parse_bracket: bool = False, is_db_reference: bool = False,
                     parse_partition: bool = False, consume_pipe: bool = False) -> exp.Expr | None:
        if not schema and not is_db_reference:
            tvf = self._parse_window_tvf()
            if tvf is not None:
                return tvf
        return super()._parse_table(
            schema=schema, joins=joins, alias_tokens=alias_tokens, parse_bracket=parse_bracket,
            is_db_reference=is_db_reference, parse_partition=parse_partition,
            consume_pipe=consume_pipe,
        )

    def _is_tvf_name(self, token: Token | None, after: Token | None) -> bool:
        return bool(
            token
            and token.token_type in (TokenType.VAR, TokenType.SESSION)
            and token.text.upper() in TVF_NAMES
            and after
            and after.token_type == TokenType.L_PAREN
        )

    def _window_tvf_ahead(self, offset: int = 0) -> str | None:
        """'wrapped' for ``TABLE(TUMBLE(``, 'bare' for ``TUMBLE(`` at ``offset``, else None."""
        token, after = self._tok(offset), self._tok(offset + 1)
        if (
            token
            and token.token_type == TokenType.TABLE
            and after
            and after.token_type == TokenType.L_PAREN
            and self._is_tvf_name(self._tok(offset + 2), self._tok(offset + 3))
        ):
            return "wrapped"
        before = self._tok(offset - 1)
        if self._is_tvf_name(token, after) and not (before and before.token_type == TokenType.DOT):
            return "bare"
        return None

    def _parse_join(self, skip_join_token: bool = False, parse_bracket: bool = False,
                    alias_tokens: t.Collection[TokenType] | None = None) -> exp.Join | None:
        # ``FROM t, TUMBLE(...)``: stock sqlglot tries the table after a comma and swallows its
        # errors; a window TVF there is certain, so its errors must reach the user.
        if self._curr.token_type == TokenType.COMMA and self._window_tvf_ahead(1):
            self._advance()
            return self.expression(exp.Join(this=self._parse_window_tvf()))
        return super()._parse_join(skip_join_token, parse_bracket, alias_tokens)

    def _parse_window_tvf(self) -> n.WindowTVF | None:
        """``TUMBLE(...)`` or ``TABLE(TUMBLE(...))`` in a FROM/JOIN position, with its alias."""
        start = self._curr
        form = self._window_tvf_ahead()
        if form is None:
            return None
        wrapped = form == "wrapped"
        if wrapped:
            self._advance(2)
        name = self._curr.text.upper()
        self._advance(2)
        if self._curr.token_type == TokenType.R_PAREN:
            self._fail(f"expected the arguments of {name}")
        args = self._parse_tvf_args()
        self._expect(TokenType.R_PAREN, "')'", f"to close the arguments of {name}")
        if wrapped:
            self._expect(TokenType.R_PAREN, "')'", f"to close TABLE({name}(...)")
        tvf = self.expression(n.WindowTVF(this=name, expressions=args, wrapped=wrapped or None))
        alias = self._parse_table_alias()
        if alias:
            tvf.set("alias", alias)
        return t.cast(n.WindowTVF, self._mark(tvf, start))

    def _parse_tvf_args(self) -> list[exp.Expr]:
        args = []
        while True:
            arg = self._parse_tvf_arg()
            if arg is None:
                self._fail("expected an argument")
            args.append(arg)
            if not self._match(TokenType.COMMA):
                return args

    def _at_named_arg(self, offset: int = 0) -> bool:
        token, after = self._tok(offset), self._tok(offset + 1)
        return bool(
            token and after and after.token_type == TokenType.FARROW
            and token.token_type not in (TokenType.STRING, TokenType.NUMBER)
            and re.fullmatch(r"\w+", token.text)
        )

    def _parse_tvf_arg(self) -> exp.Expr | None:
        start = self._curr
        if self._at_named_arg():
            name = start.text.upper()
            self._advance(2)
            value = self._parse_tvf_value()
            if value is None:
                self._fail(f"expected a value after {name} =>")
            return self._mark(self.expression(exp.Kwarg(this=exp.var(name), expression=value)), start)
        return self._parse_tvf_value()

    def _parse_tvf_value(self) -> exp.Expr | None:
        start = self._curr
        node: exp.Expr | None
        if self._match(TokenType.TABLE):
            node = self._parse_table_arg(partition=True)
        elif (
            start.token_type == TokenType.VAR
            and start.text.upper() == "DESCRIPTOR"
            and self._next.token_type == TokenType.L_PAREN
        ):
            self._advance(2)
            columns = self._parse_csv(self._parse_column)
            if not columns:
                self._fail("expected DESCRIPTOR(column)")
            self._expect(TokenType.R_PAREN, "')'", "to close DESCRIPTOR(")
            node = self.expression(n.Descriptor(expressions=columns))
        elif self._match(TokenType.ROWS):
            count = self._parse_bitwise()
            if count is None:
                self._fail("expected a row count after ROWS")
            node = self.expression(n.RowsExtent(this=count))
        else:
            node = self._parse_lambda()
        return self._mark(node, start) if node is not None else None

    def _parse_table_arg(self, partition: bool) -> n.TableArg:
        """After TABLE: ``t``, ``(t)`` or ``(subquery)``, then ``PARTITION BY``/``ORDER BY`` keys."""
        start = self._prev
        this: exp.Expr | None
        if self._match(TokenType.L_PAREN):
            if self._curr.token_type in self.SELECT_START_TOKENS:
                query = self._parse_select(nested=True)
                if query is None:
                    self._fail("expected a query after TABLE(")
                this = query if isinstance(query, exp.Subquery) else self.expression(
                    exp.Subquery(this=query))
            else:
                this = self._parse_table_parts(schema=True)
            self._expect(TokenType.R_PAREN, "')'", "to close TABLE(")
            wrapped = True
        else:
            if self._curr.token_type not in self.ID_VAR_TOKENS | {TokenType.IDENTIFIER}:
                self._fail("expected a table name or '(' after TABLE")
            this = self._parse_table_parts(schema=True)
            wrapped = False
        partition_by = order_by = None
        if partition and self._match(TokenType.PARTITION_BY):
            partition_by = self._parse_tvf_key_list(self._parse_disjunction, "PARTITION BY")
        if partition and self._match(TokenType.ORDER_BY):
            order_by = self._parse_tvf_key_list(self._parse_ordered, "ORDER BY")
        node = self.expression(
            n.TableArg(this=this, partition_by=partition_by, order_by=order_by, wrapped=wrapped or None)
        )
        return t.cast(n.TableArg, self._mark(node, start))

    def _starts_tvf_arg(self, offset: int) -> bool:
        """Whether the token at ``offset`` begins a new TVF argument rather than another key."""
        token = self._tok(offset)
        if not token:
            return True
        if self._at_named_arg(offset):
            return True
        if token.token_type in (TokenType.STRING, TokenType.INTERVAL, TokenType.ROWS, TokenType.TABLE):
            return True
        after = self._tok(offset + 1)
        return bool(
            token.text.upper() == "DESCRIPTOR" and after and after.token_type == TokenType.L_PAREN
        )

    def _parse_tvf_key_list(self, method: t.Callable[[], exp.Expr | None], what: str) -> list[exp.Expr]:
        """``k1, k2`` (ends where DESCRIPTOR, a named argument, a string, INTERVAL or ROWS begins)
        or ``(k1, k2)``."""
        if self._curr.token_type == TokenType.L_PAREN:
            keys = self._parse_wrapped_csv(method)
        else:
            keys = [method()]
            while self._curr.token_type == TokenType.COMMA and not self._starts_tvf_arg(1):
                self._advance()
                keys.append(method())
        if not keys or any(k is None for k in keys):
            self._fail(f"expected a column after {what}")
        return t.cast(list[exp.Expr], keys)

    def _parse_group(self, skip_group_by_token: bool = False) -> exp.Group | None:
        # Stock sqlglot stops GROUP BY at a leading WINDOW token (the WINDOW clause), so Spark's
        # ``GROUP BY window(ts, '10 minutes')`` failed; parse leading window(...) keys here.
        if not skip_group_by_token and not self._match(TokenType.GROUP_BY):
            return None
        in_group_by, self._in_group_by = self._in_group_by, True
        try:
            return self._parse_group_keys()
        finally:
            self._in_group_by = in_group_by

    def _parse_disjunction(self) -> exp.Expr | None:
        # After ``GROUP BY k WITH ROLLUP`` stock sqlglot reads on for more keys: stop at a clause.
        if self._in_group_by and self._clause_ahead():
            return None
        return super()._parse_disjunction()

    def _parse_group_keys(self) -> exp.Group | None:
        leading: list[exp.Expr] = []
        more = True
        while self._curr.token_type == TokenType.WINDOW and self._next.token_type == TokenType.L_PAREN:
            leading.append(self._parse_disjunction())
            more = self._match(TokenType.COMMA)
            if not more:
                break
        if not leading:
            return super()._parse_group(skip_group_by_token=True)
        group = super()._parse_group(skip_group_by_token=True) if more else None
        group = group or self.expression(exp.Group())
        group.set("expressions", [*leading, *group.expressions])
        return group

    # ------------------------------------------------------------------ clause words vs aliases

    def _parse_table_alias(self, alias_tokens: t.Collection[TokenType] | None = None) -> exp.TableAlias | None:
        if self._clause_ahead():
            return None
        return super()._parse_table_alias(alias_tokens)

    def _clause_ahead(self) -> str | None:
        """The Select arg key of the sqlwin clause starting at the current token, if any."""
        curr, nxt = self._curr, self._next
        if not curr or curr.token_type != TokenType.VAR or not nxt:
            return None
        word, next_word = curr.text.upper(), nxt.text.upper()
        if word == "EMIT":
            after = self._tok(2)
            if nxt.token_type in (TokenType.VAR, TokenType.WITH) or (
                nxt.token_type == TokenType.ON and after and after.text.upper() == "WINDOW"
            ):
                return "emit"
        elif word == "EVICT" and nxt.token_type in (TokenType.VAR, TokenType.KEEP):
            return "evict"
        elif (word, next_word) in (("ALLOWED", "LATENESS"), ("GRACE", "PERIOD")):
            return "lateness"
        elif word == "LATE" and nxt.token_type == TokenType.ROWS:
            return "late_rows_to"
        return None

    def _clause_word(self) -> str | None:
        """Like ``_clause_ahead`` where no alias can stand (after WHERE, GROUP BY, ...): the first
        word decides, so that a misspelt rest gets a precise error from the clause parser."""
        curr = self._curr
        if curr and curr.token_type == TokenType.VAR:
            return CLAUSE_WORDS.get(curr.text.upper())
        return None

    def _parse_projections(self) -> tuple[list[exp.Expr], list[exp.Expr] | None]:
        """A SELECT lists at least one column (sqlglot takes ``SELECT FROM t``, Spark does not: its error would
        quote the SQL sqlwin generates)."""
        projections, exclude = super()._parse_projections()
        if not projections:
            self._fail("expected a column or an expression after SELECT")
        return projections, exclude

    def _parse_query_modifiers(self, this: t.Any) -> t.Any:
        this = super()._parse_query_modifiers(this)
        while isinstance(this, exp.Select) and (key := self._clause_ahead() or self._clause_word()):
            token = self._curr
            clause = self._parse_select_clause(key)
            if this.args.get(key):
                self._fail(f"duplicate {CLAUSE_NAMES[key]} clause", token)
            this.set(key, clause)
            this = super()._parse_query_modifiers(this)
        return this

    def _parse_limit(self, this: t.Any = None, top: bool = False, skip_limit_token: bool = False) -> t.Any:
        """sqlglot's LIMIT (FETCH, TOP), its node marked at its keyword: an error about the clause points there,
        as those of the other clauses do, not at its value (the node's first positioned child)."""
        token = self._prev if skip_limit_token else self._curr
        node = super()._parse_limit(this, top=top, skip_limit_token=skip_limit_token)
        return self._mark_keyword(node, token) if node is not this and node is not None else node

    def _parse_offset(self, this: t.Any = None) -> t.Any:
        """sqlglot's OFFSET, its node marked at its keyword (as LIMIT's)."""
        token = self._curr
        node = super()._parse_offset(this)
        return self._mark_keyword(node, token) if node is not this and node is not None else node

    def _mark_keyword(self, node: exp.Expr, token: Token | None) -> exp.Expr:
        """Record where the keyword of a clause sqlglot parses is (``meta["keyword_line"]``/``["keyword_col"]``):
        ``position_of`` takes it for the clause's node itself only, so the position of a query around it (the
        first of its parts that has one) stays its first column's, never a LIMIT at its end."""
        if token and node is not None:
            node.meta["keyword_line"], node.meta["keyword_col"] = _start_of(self.sql, token.start)
        return node

    # ------------------------------------------------------------------ statements

    def _parse_statement(self) -> exp.Expr | None:
        curr, nxt = self._curr, self._next
        if not curr:
            return None
        start = curr
        node: exp.Expr | None = None
        word = curr.text.upper() if curr.token_type == TokenType.VAR else ""
        if curr.token_type == TokenType.CREATE and nxt.token_type == TokenType.VAR and (
            nxt.text.upper() in ("STREAM", "STREAMING")
        ):
            node = self._parse_create_stream()
        elif word == "EXPLAIN":
            node = self._parse_explain()
        elif curr.token_type == TokenType.DROP and nxt.text.upper() == "STREAMING":
            self._advance(2)
            self._expect(TokenType.TABLE, "TABLE", "after DROP STREAMING")
            name = self._parse_streaming_table_name()
            node = self.expression(n.DropStreamingTable(this=name, purge=self._match_text_seq("PURGE") or None))
        elif word == "STOP" and nxt.text.upper() == "STREAMING":
            self._advance(2)
            self._expect(TokenType.TABLE, "TABLE", "after STOP STREAMING")
            node = self.expression(n.StopStreamingTable(this=self._parse_streaming_table_name()))
        elif (
            curr.token_type == TokenType.SHOW
            and nxt.token_type == TokenType.STRING
            and " ".join(nxt.text.split()).upper() == "STREAMING TABLES"
        ):
            self._advance(2)
            node = self.expression(n.ShowStreamingTables())
        if node is None:
            return super()._parse_statement()
        return self._mark(node, start)

    def _parse_streaming_table_name(self) -> exp.Table:
        if not self._curr or self._curr.token_type not in self.ID_VAR_TOKENS | {TokenType.IDENTIFIER}:
            self._fail("expected a table name")
        return t.cast(exp.Table, self._parse_table_parts(schema=True))

    def _parse_explain(self) -> n.ExplainStatement:
        self._advance()
        mode = self._prev.text.upper() if self._match_texts(EXPLAIN_MODES) else None
        inner = self._parse_statement() if self._curr else None
        if inner is None:
            self._fail("expected a statement after EXPLAIN")
        return self.expression(n.ExplainStatement(this=inner, mode=mode))


CLAUSE_NAMES = {"lateness": "ALLOWED LATENESS", "late_rows_to": "LATE ROWS TO", "evict": "EVICT",
                "emit": "EMIT"}
CLAUSE_WORDS = {"ALLOWED": "lateness", "GRACE": "lateness", "LATE": "late_rows_to", "EVICT": "evict",
                "EMIT": "emit"}
EXPLAIN_MODES = ("REWRITE", "EXTENDED", "CODEGEN", "COST", "FORMATTED")
