"""Migrated ``*Inputs`` dataclasses built the way V2's batch processors build them.

max 26.7's ``hy_v3``, ``step3p5`` and ``minimax_m2`` subclass V2 ``llama3``'s
``Llama3Inputs``; the variant ``llama3_modulev3`` moved it to ``inputs`` and
dropped ``signal_buffers`` and ``data_parallel_splits``, which their batch
processors still pass (``TypeError`` at the first request) and their
``buffers`` still read. The migrated subclasses re-declare them, and
``buffers`` gives the order the ModuleV3 root compiles with
(``tokens, return_n_logits, input_row_offsets, ...``) without signal buffers.
No graph is built: the dataclasses and their ``buffers`` are plain Python.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.migrated_archs import migrated_archs

#: the V2 packages, the ``*Inputs`` class of each one's ``model`` module
PACKAGES = {"hy_v3": "HYV3Inputs", "step3p5": "Step3p5Inputs", "minimax_m2": "MiniMaxM2Inputs"}


@pytest.fixture(scope="module")
def archs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The three packages with ``llama3`` and its official ``llama3_modulev3``, copied from max into
    ``archs/`` and the three migrated in one run, importable as ``archs``."""
    copied = (*PACKAGES, "llama3", "llama3_modulev3")
    with migrated_archs(tmp_path_factory.mktemp("inputs_order"), "archs", copied, list(PACKAGES)) as pkg:
        yield pkg


class _Value:
    """A stand-in Buffer that says which field it is."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_v2_callers_build_the_migrated_inputs_in_the_v3_order(archs: ModuleType, package: str) -> None:
    model = importlib.import_module(f"archs.{package}_modulev3.model")
    cls = getattr(model, PACKAGES[package])
    kv = [_Value("kv0"), _Value("kv1")]
    tokens, offsets, n_logits, signals = _Value("tokens"), _Value("offsets"), _Value("n_logits"), [_Value("signal")]
    # the keywords V2's Llama3EpBatchProcessor-based processors pass (one device, no DP, no EP)
    inputs = cls(tokens=tokens, input_row_offsets=offsets, signal_buffers=signals, kv_cache_inputs=kv,
                 return_n_logits=n_logits, data_parallel_splits=None, ep_inputs=())
    assert inputs.signal_buffers == signals and inputs.data_parallel_splits is None
    assert list(inputs.buffers) == [tokens, n_logits, offsets, *kv]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_v2_signal_buffers_stay_required(archs: ModuleType, package: str) -> None:
    """V2 declared ``signal_buffers`` with no default: a caller that forgets it still fails loudly."""
    cls = getattr(importlib.import_module(f"archs.{package}_modulev3.model"), PACKAGES[package])
    with pytest.raises(TypeError, match="signal_buffers"):
        cls(tokens=_Value("t"), input_row_offsets=_Value("o"), return_n_logits=_Value("n"))


def test_field_declarations_are_keyword_only_with_their_imports(tmp_path: Path) -> None:
    """Each V2 dataclass field as a subclass re-declares it: keyword-only, V2's default kept, the
    names it uses imported as V2's module did (a relative or sibling-architecture import is not)."""
    from migrate_v3.plan import field_declarations, module_trees

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text(
        "from collections.abc import Sequence\n"
        "from dataclasses import dataclass, field\n"
        "from typing import ClassVar\n"
        "from max.driver import Buffer\n"
        "from max.pipelines.architectures.llama3.model import Other\n"
        "from .local import Local\n\n"
        "@dataclass\n"
        "class Inputs:\n"
        "    needed: list[Buffer]\n"
        "    splits: Buffer | Sequence[Sequence[int]] | None = None\n"
        "    extra: list[Local] = field(default_factory=list)\n"
        "    other: Other | None = field(default=None, kw_only=True)\n"
        "    kind: ClassVar[str] = 'x'\n\n"
        "class NotData:\n"
        "    x: int = 0\n"
    )
    decls = field_declarations(module_trees(tmp_path / "pkg"))
    assert decls == {  # (the last: the plain default a class attribute can hold; None: none, or a factory)
        "pkg.model.Inputs.needed": ("list[Buffer]", "field(kw_only=True)", (("max.driver", "Buffer"),), None),
        "pkg.model.Inputs.splits": (
            "Buffer | Sequence[Sequence[int]] | None", "field(kw_only=True, default=None)",
            (("collections.abc", "Sequence"), ("max.driver", "Buffer")), "None",
        ),
        "pkg.model.Inputs.extra": ("list[Local]", "field(kw_only=True, default_factory=list)", (), None),
        "pkg.model.Inputs.other": ("Other | None", "field(kw_only=True, default=None)", (), "None"),
    }
