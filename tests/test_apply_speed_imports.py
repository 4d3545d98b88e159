"""Files where only import statements can change take ``ast`` + per-statement libcst.

``migrate_v3.pipeline._rewrite_imports`` must give exactly what the
whole-module path gives (``REFERENCE_ENGINE``: libcst's transformer and
PositionProvider), and hand every unusual layout to that path.
"""

from __future__ import annotations

import pytest

import migrate_v3.pipeline as pipeline
from codemods.base import TransformContext

CTX = TransformContext(
    package="olmo2",
    package_depth=0,
    v3_packages={"llama3": "llama3_modulev3"},
)

SOURCES = {
    "plain": "from ..llama3.model_config import Llama3Config\nX = 1\n",
    "todo": "from ..gemma3.layers import Attn  # keep\n\nX = 1\n",
    "nested": (
        '"""Doc."""\n\nimport os\n\ntry:\n    from ..llama3.model_config import (\n        A,  # first\n        B,\n    )\n'
        "except ImportError:\n    from ..gemma3 import C\n\n\ndef f():\n    from ..llama3 import D\n    return D\n"
    ),
    "nested_one_line": (
        "try:\n    from ..llama3.model_config import A, B  # c\nexcept ImportError:\n    from ..gemma3 import C\n\n\n"
        "class K:\n    def f(self):\n        from ..llama3 import D\n        return D\n"
    ),
    "top_level_multi_line": "from ..llama3.model_config import (\n    A,  # a\n\n    # b\n        B,\n)\nfrom ..gemma3 \\\n  import C\n",
    "absolute": "from max.pipelines.architectures.llama3.x import Y\nfrom max.pipelines.architectures.olmo2.z import W\n",
    "deep": "if True:\n\tif False:\n\t\tfrom ..gemma3 import C\n",
    "mixed_tabs": "if True:\n    if False:\n\t\tfrom ..gemma3 import C\n",
    "one_line_suite": "if TYPE_CHECKING: from ..llama3 import A\nfrom ..gemma3 import B\n",
    "else_suite": "try:\n    pass\nexcept ImportError: from ..llama3 import A\n",
    "semicolons": "import os; from ..llama3 import A\nfrom ..gemma3 import B; X = 1\n",
    "continuation": "from ..llama3 \\\n    import A\nX = 1 + \\\n  2\nfrom ..gemma3 import B\n",
    "after_continuation": "x = 1; \\\nfrom ..llama3 import A\n",
    "non_ascii": "from ..llama3 import A as Ä  # ünïcode\nfrom ..gemma3 import B\n",
    "crlf": "from ..llama3 import A\r\nfrom ..gemma3 import B\r\n",
    "no_final_newline": "from ..llama3 import A\nfrom ..gemma3 import B",
    "existing_todo": "# TODO(migrate-v3): MV301 depends on V2 package gemma3: migrate gemma3 first (apply gemma3 ...)\nfrom ..gemma3 import B\n",
    "first_statement_with_header": "# Copyright\n\n# about B\nfrom ..gemma3 import B\n",
    "form_feed": "\x0cfrom ..gemma3 import B\n",
    "star": "from ..llama3 import *\n",
    "bad_syntax": "from ..llama3 import A\ndef f(:\n",
}


@pytest.mark.parametrize("name", sorted(SOURCES))
@pytest.mark.parametrize("positions", [True, False], ids=["positions", "no-positions"])
def test_import_path_same_as_whole_module(name: str, positions: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    source = SOURCES[name]
    ctx = TransformContext(**{**CTX.__dict__, "positions": positions})

    def run() -> object:
        try:
            return pipeline.transform_source(source, context=ctx)
        except pipeline.TransformError as exc:
            return str(exc)

    fast = run()
    monkeypatch.setattr(pipeline, "REFERENCE_ENGINE", True)
    assert fast == run()


def test_import_path_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = []
    original = pipeline._rewrite_imports

    def spy(*args: object, **kwargs: object) -> object:
        result = original(*args, **kwargs)  # type: ignore[arg-type]
        taken.append(result is not None)
        return result

    monkeypatch.setattr(pipeline, "_rewrite_imports", spy)
    for name in ("plain", "todo", "nested_one_line", "top_level_multi_line", "deep", "non_ascii"):
        taken.clear()
        result = pipeline.transform_source(SOURCES[name], context=CTX)
        assert taken == [True], name
        assert result.changed, name
    # an absolute sibling import made relative moves to the relative section
    # (``codemods.import_order.NeutralImportOrder`` needs the whole module)
    taken.clear()
    assert pipeline.transform_source(SOURCES["absolute"], context=CTX).changed
    assert taken == []
    for name in ("nested", "one_line_suite", "else_suite", "semicolons", "after_continuation", "crlf", "existing_todo"):
        taken.clear()
        pipeline.transform_source(SOURCES[name], context=CTX)
        assert taken == [False], name
