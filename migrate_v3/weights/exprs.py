"""Tiny integer expressions over config keys (`num_key_value_heads*head_dim`).

Rules store sizes and head counts as expressions, not numbers, so a template
stays valid for every model size; this evaluates them safely (names, ints,
+ - * // only) against the config.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

IntExpr = int | str


def evaluate(expr: IntExpr, config: Mapping[str, Any]) -> int:
    """Value of `expr` with config keys as variables; `head_dim` defaults to hidden/heads."""
    if isinstance(expr, int):
        return expr
    env = dict(config)
    if "head_dim" not in env and "hidden_size" in env and "num_attention_heads" in env:
        env["head_dim"] = int(env["hidden_size"]) // int(env["num_attention_heads"])
    tree = ast.parse(expr, mode="eval")
    return _eval(tree.body, env, expr)


def _eval(node: ast.AST, env: Mapping[str, Any], text: str) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.Name):
        if node.id not in env or not isinstance(env[node.id], int):
            raise KeyError(f"{text!r}: config has no integer {node.id!r}")
        return int(env[node.id])
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env, text), _eval(node.right, env, text)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv):
            return a // b
    raise ValueError(f"unsupported expression {text!r}")
