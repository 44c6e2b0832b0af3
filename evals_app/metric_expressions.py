"""promptfoo's ``derivedMetrics`` over a batch: an expression such as
``2 * precision * recall / (precision + recall)`` evaluated, per variant, over the sums of each
named metric's scores across every trial of the variant, as promptfoo evaluates it over a
prompt's named scores summed across its tests (a ratio of sums, never a mean of ratios).

The expressions are mathjs's arithmetic: numbers, metric names (0 when the variant has no score
for one), ``+ - * / % ^``, parentheses and a few functions. Read with Python's parser and walked
node by node, so nothing else in an expression can run.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "abs": abs,
    "sqrt": math.sqrt,
    "log": math.log,
    "exp": math.exp,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "min": min,
    "max": max,
}


class UnusableExpression(Exception):
    """The expression is not arithmetic over metric names; the message says what is not."""


def metric_value(expression: str, sums: Mapping[str, float]) -> float | None:
    """The expression's value over ``sums``; None where it has none (a division by zero, a
    result that is not a finite number). Raises UnusableExpression."""
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise UnusableExpression(f"{expression!r} is not an arithmetic expression") from None
    try:
        value = _value(tree.body, sums)
    except (ZeroDivisionError, OverflowError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _value(node: ast.AST, sums: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise UnusableExpression("a boolean is not a metric's value")
        return float(node.value)
    if isinstance(node, ast.Name):
        return float(sums.get(node.id, 0.0))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_value(node.left, sums), _value(node.right, sums))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand, sums))
    if isinstance(node, ast.Call) and not node.keywords:
        name = _function_name(node.func)
        if name in _FUNCTIONS:
            return float(_FUNCTIONS[name](*(_value(arg, sums) for arg in node.args)))
    raise UnusableExpression(f"{ast.unparse(node)!r} is not arithmetic over metric names")


def _function_name(node: ast.AST) -> Any:
    # mathjs writes sqrt(x); an expression written for JavaScript may say Math.sqrt(x).
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "Math" else None
    return None
