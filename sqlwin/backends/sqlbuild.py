"""Build SQL from templates parsed once, with placeholders filled by sqlglot expressions.

Templates name the input relation ``__rel``; ``fill`` swaps in the real relation (a table or a
subquery) under the template's alias, so no user text is ever formatted into SQL strings.
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
    """Parse ``template`` (cached), replace ``:name`` placeholders and the ``__rel`` table."""
    tree = _parse(template, dialect).copy()
    converted = {k: v if isinstance(v, exp.Expr) else exp.convert(v) for k, v in values.items()}

    def substitute(node: exp.Expr) -> exp.Expr:
        # each occurrence gets its own copy: one node must not have two parents
        if isinstance(node, exp.Placeholder) and node.name in converted:
            value = converted[node.name].copy()
            # an operator substituted into an operator keeps its own precedence
            return exp.paren(value, copy=False) if isinstance(value, (exp.Binary, exp.Unary)) else value
        return node

    tree = tree.transform(substitute, copy=False)
    if relation is not None:
        for table in list(tree.find_all(exp.Table)):
            if table.name == REL and not table.args.get("db"):
                alias = table.args.get("alias")
                source = relation.copy()
                if isinstance(source, exp.Select):
                    source = source.subquery()
                source.set("alias", alias.copy() if alias else None)
                table.replace(source)
    return tree


def ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=ident(name), table=exp.to_identifier(table) if table else None)


def num(value: int) -> exp.Literal:
    return exp.Literal.number(value)
