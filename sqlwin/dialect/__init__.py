"""The sqlglot dialect ``sqlwin``: Spark SQL plus the streaming-window syntax of GRAMMAR.md.

Importing this package registers the dialect, so ``sqlglot.parse_one(sql, read="sqlwin")``
works; the stock ``spark`` dialect is left untouched. Use ``parse``/``parse_one``/``generate``
here: they turn every sqlglot error into a positioned ``SqlwinError``.
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.tokens import Token

from sqlwin.dialect.generator import SqlwinGenerator
from sqlwin.dialect.parser import SqlwinParser
from sqlwin.dialect.tokens import SqlwinTokenizer
from sqlwin.errors import SqlwinError


class Sqlwin(Spark):
    """Registered under the name ``sqlwin`` (sqlglot keys dialects by lower-cased class name)."""

    Tokenizer = SqlwinTokenizer
    Parser = SqlwinParser
    Generator = SqlwinGenerator


_DIALECT = Sqlwin()

# In Spark SQL that sqlwin writes for Spark to keep and parse again (a streaming table's view), so that the JDBC
# server's parser hook passes it unchanged: it is plain Spark SQL, which this dialect need not know all of
# (``fmt.`path` WITH (options)``), and its words (a COMMENT saying "streaming table") are no sqlwin syntax.
SPARK_SQL_MARK = "/* sqlwin: Spark SQL */"


def _position(sql: str, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(sql)))
    return sql.count("\n", 0, offset) + 1, offset - sql.rfind("\n", 0, offset)


def _token_error(text: str, error: TokenError) -> SqlwinError:
    cause = error.__cause__ if isinstance(error.__cause__, TokenError) else error
    missing = re.search(r"Missing (.+) from \d+:(\d+)", str(cause))
    if missing:
        line, col = _position(text, int(missing.group(2)))
        return SqlwinError(f"unterminated literal or comment: missing the closing {missing.group(1)}", line, col)
    comment = text.rfind("/*")
    if comment >= 0 and "*/" not in text[comment + 2:]:
        return SqlwinError("unterminated comment: missing the closing */", *_position(text, comment))
    line, col = _position(text, error.start) if error.start is not None else (None, None)
    return SqlwinError(f"cannot tokenize: {cause}", line, col)


NESTING_LIMIT = 40  # parenthesised levels the parser's recursion takes with room to spare


def check_nesting(text: str, tokens: list[Token], limit: int = NESTING_LIMIT) -> None:
    """Refuse, before parsing, a statement whose parentheses nest deeper than ``limit``."""
    depth = 0
    for tok in tokens:
        if tok.text == "(":
            depth += 1
            if depth > limit:
                raise SqlwinError(f"the statement is nested too deeply (more than {limit} levels of "
                                  "parentheses); flatten it, for example with WITH ... AS common table "
                                  "expressions", *_position(text, tok.start))
        elif tok.text == ")":
            depth = max(0, depth - 1)


def parse(text: str) -> list[exp.Expr]:
    """Every statement of a script (``;``-separated, comments allowed), as sqlglot trees. The nesting
    is checked on the parser's own tokens (tokenizing is a third of parsing a long statement)."""
    try:
        tokens = _DIALECT.tokenize(text)
        check_nesting(text, tokens)
        trees = _DIALECT.parser().parse(tokens, text)
    except ParseError as e:
        info = e.errors[0] if e.errors else {}
        raise SqlwinError(info.get("description") or str(e), info.get("line"), info.get("col")) from None
    except TokenError as e:
        raise _token_error(text, e) from None
    except SqlglotError as e:
        raise SqlwinError(str(e)) from None
    # a comment after the last ';' is kept by sqlglot as a Semicolon tree: no statement (sqlwin.sql refused
    # 'SELECT ...; -- note' as two statements while the CLI, which splits scripts itself, ran it)
    return [tree for tree in trees if tree is not None and not isinstance(tree, exp.Semicolon)]


def parse_one(text: str) -> exp.Expr:
    """The one statement in ``text`` (a trailing ``;`` is fine)."""
    trees = parse(text)
    if len(trees) != 1:
        raise SqlwinError(f"expected one statement, got {len(trees)}")
    return trees[0]


def generate(node: exp.Expr, pretty: bool = False) -> str:
    """sqlwin SQL for ``node`` (plain Spark SQL prints as the stock Spark dialect prints it)."""
    return _DIALECT.generate(node, pretty=pretty)


__all__ = ["NESTING_LIMIT", "Sqlwin", "check_nesting", "generate", "parse", "parse_one"]
