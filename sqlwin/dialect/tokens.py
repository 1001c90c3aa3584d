"""Tokenizer of the sqlwin dialect: Spark's, except that EXPLAIN is an ordinary word.

Stock sqlglot tokenizes EXPLAIN as a command and swallows the rest of the statement as one
string, so ``EXPLAIN <sqlwin query>`` could never be parsed or positioned. Here the parser sees
the tokens and builds ``ExplainStatement``.
"""

from __future__ import annotations

from sqlglot.dialects.spark import Spark


class SqlwinTokenizer(Spark.Tokenizer):
    KEYWORDS = {k: v for k, v in Spark.Tokenizer.KEYWORDS.items() if k != "EXPLAIN"}
