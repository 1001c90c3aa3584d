"""The one error type users see: what was wrong, and where in their SQL."""

from __future__ import annotations


class SqlwinError(Exception):
    """A statement sqlwin cannot accept.

    Carries the 1-based ``line`` and ``col`` of the offending token when known, so the
    message reads like a compiler's: ``line 3, col 41: HOP expects ...; got 2 arguments``.
    Over JDBC this becomes the SQL error text.
    """

    def __init__(self, message: str, line: int | None = None, col: int | None = None):
        self.message = message
        self.line = line
        self.col = col
        super().__init__(self.__str__())

    def __str__(self) -> str:
        if self.line is not None:
            return f"line {self.line}, col {self.col or 1}: {self.message}"
        return self.message

    @classmethod
    def at(cls, node: object, message: str) -> SqlwinError:
        """An error positioned at a sqlglot node (uses the token position the parser kept)."""
        line, col = position_of(node)
        return cls(message, line, col)


def position_of(node: object) -> tuple[int | None, int | None]:
    """The (line, col) a sqlglot node starts at, searching its children when it has none.

    sqlglot records ``line``/``col`` (col = end column of the token) and the token's ``start``/``end``
    offsets in ``node.meta``; the dialect's parser stores the *start* column under ``start_line``/``start_col``,
    and the keyword of a clause sqlglot parses (LIMIT, OFFSET) under ``keyword_line``/``keyword_col``: taken for
    ``node`` itself only (an error at the clause), not for a query that holds it.
    """
    meta = getattr(node, "meta", None) or {}
    if "keyword_line" in meta:
        return meta["keyword_line"], meta["keyword_col"]
    stack = [node]
    while stack:
        cur = stack.pop(0)
        meta = getattr(cur, "meta", None) or {}
        if "start_line" in meta:
            return meta["start_line"], meta["start_col"]
        if "line" in meta:
            return meta["line"], _start_col(meta)
        if hasattr(cur, "iter_expressions"):
            stack.extend(cur.iter_expressions())
    return None, None


def _start_col(meta: dict) -> int | None:
    """The column a token starts at, from sqlglot's end column and the token's offsets (a token on one line:
    an identifier or a literal; a quoted one spanning lines keeps its end column)."""
    col = meta.get("col")
    if col is None or "start" not in meta or "end" not in meta:
        return col
    start = col - (meta["end"] - meta["start"])
    return start if start >= 1 else col
