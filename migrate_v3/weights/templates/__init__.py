"""Built-in rule templates, keyed by name, each a function of the HF config."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..rules import Rule
from . import deepseek_v3, llama


@dataclass(frozen=True)
class Template:
    name: str
    rules: Callable[[Mapping[str, Any]], list[Rule]]
    factory: str
    description: str


TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template("llama", llama.rules, "migrate_v3.weights.factories:llama3",
                 "HF Llama family -> llama3_modulev3 (language_model. prefix)"),
        Template("llama-stacked", lambda c: llama.rules(c, stacked=True),
                 "migrate_v3.weights.factories:llama3_stacked",
                 "HF Llama family -> llama3_modulev3 with stacked qkv_proj / gate_up_proj"),
        Template("deepseek-v3", deepseek_v3.rules, "migrate_v3.weights.factories:deepseek_v3",
                 "HF DeepSeek-V3 (FP8 or bf16, MTP) -> deepseekV3_modulev3"),
    )
}

_BY_MODEL_TYPE = {"deepseek_v3": "deepseek-v3", "llama": "llama", "mistral": "llama", "granite": "llama"}


def get_template(name: str) -> Template:
    if name not in TEMPLATES:
        raise KeyError(f"unknown template {name!r}; known: {', '.join(sorted(TEMPLATES))}")
    return TEMPLATES[name]


def guess_template(config: Mapping[str, Any]) -> Template | None:
    """The template for the config's `model_type`, if there is one."""
    name = _BY_MODEL_TYPE.get(str(config.get("model_type", "")))
    return TEMPLATES[name] if name else None
