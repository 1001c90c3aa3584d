"""Build SQL from templates parsed once, with placeholders filled by sqlglot expressions.

Every backend writes its SQL as templates in its own dialect and fills them here, so no user text
is ever formatted into SQL strings. A template names what it is given as ``:name`` placeholders:
an expression, a FROM source (``FROM :src AS a``) or a CTE body (``WITH c AS (:body)``). Templates
may also read the input relation as the table ``__rel``, which ``fill`` swaps for the real one.
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp

REL = "__rel"


@lru_cache(maxsize=256)
def _parse(template: str, dialect: str) -> exp.Expr:
    return sqlglot.parse_one(template, read=dialect)


def fill(template: str, dialect: str, relation: exp.Expr | None = None, **values: object) -> exp.Expr:
    """A fresh tree of ``template`` (parsed once per dialect) with each placeholder replaced by a copy of
    ``values[name]`` (Python values become literals):

    - ``FROM :name [AS a]``: a query becomes a subquery, and the source takes the template's alias ``a``;
    - ``:name`` elsewhere: an operator keeps its own precedence (parenthesized), and a query becomes a
      subquery, except as a CTE's body;
    - the table ``__rel`` becomes ``relation``, under the template's alias.
    """
    converted = {k: v if isinstance(v, exp.Expr) else exp.convert(v) for k, v in values.items()}
    if relation is not None:
        converted[REL] = relation

    def substitute(node: exp.Expr) -> exp.Expr:
        # each occurrence gets its own copy: one node must not have two parents
        if isinstance(node, exp.Table) and not node.args.get("db"):
            key = node.this.name if isinstance(node.this, exp.Placeholder) else REL if node.name == REL else None
            return _source(converted[key], node.args.get("alias")) if key in converted else node
        if isinstance(node, exp.Placeholder) and node.name in converted:
            value = converted[node.name].copy()
            if isinstance(value, exp.Query) and not isinstance(value, exp.Subquery):
                return value if isinstance(node.parent, exp.CTE) else value.subquery(copy=False)
            # an operator substituted into an operator keeps its own precedence
            return exp.paren(value, copy=False) if isinstance(value, (exp.Binary, exp.Unary)) else value
        return node

    return _parse(template, dialect).copy().transform(substitute, copy=False)


def _source(value: exp.Expr, alias: exp.TableAlias | None) -> exp.Expr:
    """``value`` as a FROM source: a query becomes a subquery; the template's alias, if any, wins."""
    source = value.copy()
    if isinstance(source, exp.Query) and not isinstance(source, exp.Subquery):
        source = source.subquery(copy=False)
    if alias is not None:
        source.set("alias", alias.copy())
    return source


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=exp.to_identifier(table) if table else None)


def num(value: int) -> exp.Literal:
    return exp.Literal.number(value)
