"""The parsed source of a live Python object (a class, a function), for checks that read code."""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any


def parsed(obj: Any) -> ast.Module | None:
    """``obj``'s own source, dedented and parsed; None when it has none (a builtin, a C extension,
    code made at run time) or it does not parse on its own."""
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(obj)))
    except (OSError, TypeError, SyntaxError):
        return None
