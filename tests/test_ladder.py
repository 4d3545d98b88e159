"""The model ladder over every V2 architecture of the installed max, against its baseline.

One run of ``bench/ladder.py`` (apply into a copy of max's architectures,
then L1 import, L2 construct, L3 weights, L4 trace per package, in child
interpreters; no graph is compiled). A package below its rung in
``bench/ladder_baseline.json`` fails the test; one above it is reported
(update the baseline with ``python bench/ladder.py --update-baseline``).

Measured here (2 shared cores, load average 10-14 from other jobs): about
28 min wall and 6.4 CPU-minutes for the whole run (one interpreter per
package); an idle machine needs roughly the CPU time spread on 2 cores.
The pure parts (rung, first failure, flagged failure, baseline compare)
are tested on their own below, in milliseconds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("ladder_bench", ROOT / "bench" / "ladder.py")
assert _spec is not None and _spec.loader is not None
ladder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ladder)


def _step(rung: str, ok: bool, where: str = "", side: str = "v3") -> dict[str, object]:
    return {"rung": rung, "ok": ok, "detail": f"{rung} {'ok' if ok else 'failed'}", "where": where, "side": side}


def test_rung_is_the_highest_with_every_rung_below_passed() -> None:
    steps = [_step("L0", True), _step("L1", True), _step("L2", True), _step("L3", False), _step("L4", True)]
    assert ladder.rung_of(steps) == "L2"
    assert ladder.first_failure(steps)["rung"] == "L3"  # type: ignore[index]
    assert ladder.rung_of([_step("L0", False)]) == "-"
    # several roots: a rung passes when it passes for every root
    assert ladder.rung_of([_step("L0", True), _step("L1", True), _step("L2", True), _step("L2", False)]) == "L1"


def test_a_failure_is_flagged_by_a_todo_on_its_statement_or_a_check_finding(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "x = 1\n"
        "# TODO(migrate-v3): MV383 build the root in _instantiate_module\n"
        "y = f(\n"
        "    2,\n"
        ")\n"
        "z = 3\n"
    )
    assert ladder.flagged(f"{f}:4", {}) == "TODO"  # inside the statement under the marker
    assert ladder.flagged(f"{f}:6", {}) == ""
    assert ladder.flagged(f"{f}:6", {str(f.resolve()): {6}}) == "check"
    assert ladder.flagged("", {}) == ""


def test_a_missing_attribute_is_flagged_by_a_todo_that_says_it_went_missing(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "config.py").write_text(
        "# TODO(migrate-v3): MV301 llama3_modulev3's Llama3Config has no norm_dtype, quant_config (V2 ...)\n"
        "from x import Llama3Config\n"
    )
    (pkg / "model.py").write_text("a = 1\nq = config.quant_config\n")
    where = f"{pkg / 'model.py'}:2"
    detail = "construct M: AttributeError: 'Cfg' object has no attribute 'quant_config'"
    assert ladder.flagged(where, {}, detail, pkg) == "TODO"
    assert ladder.flagged(where, {}, detail.replace("quant_config", "rope_theta"), pkg) == ""
    assert ladder.flagged(where, {}, detail) == ""  # (no package given: the site only)
    # a failure in another package of the tree (a draft's module under its unified pipeline) is
    # named by that package's note; a note in a package the failure is not in names nothing
    unified = tmp_path / "unified"
    unified.mkdir()
    assert ladder.flagged(where, {}, detail, unified) == "TODO"
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.py").write_text("a = 1\n")
    assert ladder.flagged(f"{other / 'x.py'}:1", {}, detail, unified) == ""


def test_a_constructor_called_the_v2_way_is_flagged_by_a_todo_naming_the_call_and_argument(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "model.py").write_text(
        "# TODO(migrate-v3): MV301 gemma4_modulev3's Gemma4TextModel(config, mesh) is not V2 gemma4's "
        "Gemma4TextModel(config): update the calls of it here (it needs mesh)\n"
        "from x import Gemma4TextModel\n"
        "target = Gemma4TextModel(config)\n"
    )
    where = f"{pkg / 'model.py'}:3"
    detail = "construct M: TypeError: Gemma4TextModel.__init__() missing 1 required positional argument: 'mesh'"
    assert ladder.flagged(where, {}, detail, pkg) == "TODO"
    assert ladder.flagged(where, {}, detail.replace("'mesh'", "'devices'"), pkg) == ""
    assert ladder.flagged(where, {}, detail.replace("Gemma4TextModel.", "Gemma4Assistant."), pkg) == ""
    unexpected = "construct M: TypeError: Gemma4TextModel.__init__() got an unexpected keyword argument 'mesh'"
    assert ladder.flagged(where, {}, unexpected, pkg) == "TODO"


def test_a_weight_in_another_dtype_is_flagged_by_the_todo_that_dropped_its_layers_own_dtype(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "model.py").write_text(
        "# TODO(migrate-v3): MV342 RMSNorm(dtype=config.norm_dtype) dropped: V3 weights take default_dtype\n"
        "make_norm = partial(RMSNorm, dim=8)\n"
    )
    detail = ("L3 M: V2 3 weights vs V3 3 parameters: 1 dtype (e.g. dtype norm.weight checkpoint float32 "
              "vs V3 bfloat16 of an OffsetRMSNorm (RMSNorm))")
    assert ladder.flagged("", {}, detail, pkg) == "TODO"  # the subclass's max base is named
    assert ladder.flagged("", {}, detail.replace("(RMSNorm)", "(LayerNorm)"), pkg) == ""
    assert ladder.flagged("", {}, detail.replace("dtype norm.weight", "shape norm.weight"), pkg) == ""


def test_an_l3_failure_of_weight_names_is_flagged_by_a_todo_that_says_the_names_may_differ(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "text.py").write_text(
        "# TODO(migrate-v3): MV301 llama3_modulev3's Llama3 is max's own port: a subclass takes its module tree, "
        "so its parameter names (the checkpoint keys compile() binds) need not be V2 llama3's Llama3's\n"
        "from ..llama3_modulev3.llama3 import Llama3\n"
    )
    detail = ("Text: 21 V3 parameters no V2 weight accounts for (e.g. language_model.embed_tokens.weight of an "
              "Embedding): a checkpoint V2 loads has no such tensor")
    assert ladder.flagged("", {}, detail, pkg) == "TODO"
    assert ladder.flagged("", {}, "Text: V2 4 weights vs V3 4 parameters: 2 unexpected (e.g. ...)", pkg) == "TODO"
    (pkg / "text.py").write_text("# TODO(migrate-v3): MV342 RMSNorm(dtype=x) dropped\n")
    assert ladder.flagged("", {}, detail, pkg) == ""
    roots = "Draft: 8 weight issues (e.g. missing layers.0.self_attn.k_norm_weight)"  # (a package root's L3)
    assert ladder.flagged("", {}, roots, pkg) == ""
    (pkg / "text.py").write_text("# TODO(migrate-v3): MV362 AttentionWithRope(use_qk_norm=...): V3 holds ...\n")
    assert ladder.flagged("", {}, roots, pkg) == "TODO"


@pytest.mark.needs_max
def test_an_l3_weight_is_traced_to_the_statement_that_builds_its_module(tmp_path: Path) -> None:
    """``construction_site``: ``layers.0.norm.weight`` -> ``self.norm = ...`` in the class of ``layers.0``."""
    from migrate_v3.verify.ladder import _holder, construction_site

    (tmp_path / "net_l3site.py").write_text(
        "from max.experimental import functional as F\n"
        "from max.experimental.nn import Module, ModuleList, RMSNorm\n"
        "class Block(Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.norm = RMSNorm(4)\n"
        "class Net(Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers: ModuleList = ModuleList([Block()])\n"
        "        self.final = RMSNorm(4)\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import net_l3site  # type: ignore[import-not-found]
        from max.experimental import functional as F

        with F.lazy():
            net = net_l3site.Net()
        site = str(tmp_path / "net_l3site.py")
        assert construction_site(net, "layers.0.norm.weight") == f"{site}:6"
        assert construction_site(net, "final.weight") == f"{site}:11"
        assert construction_site(net, "layers.0.weight") == f"{site}:10"  # a list item: the list
        assert construction_site(net, "nothing.weight") == ""
        assert type(_holder(net, "layers.0.norm.weight")).__name__ == "RMSNorm"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("net_l3site", None)


def test_a_method_the_base_says_is_unimplemented_is_flagged_by_a_todo_to_implement_it(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "model.py").write_text(
        "# TODO(migrate-v3): MV382 implement _instantiate_module(self, model_config): build the root module\n"
        "class M(Base):\n"
        "    def load(self):\n"
        "        return self.load_model()\n"
    )
    where = f"{pkg / 'model.py'}:4"
    detail = "load path: NotImplementedError: M must implement `_instantiate_module`."
    assert ladder.flagged(where, {}, detail, pkg) == "TODO"
    assert ladder.flagged(where, {}, detail.replace("_instantiate_module", "_prepare_state_dict"), pkg) == ""


def test_baseline_comparison_fails_a_regression_and_names_an_improvement(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"arch": "a", "rung": "L1"}, {"arch": "b", "rung": "L4"}, {"arch": "c", "rung": "L2"}]
    assert ladder.compare_baseline(rows, {"a": "L1", "b": "L3", "c": "L2"}) == 0
    assert "improved b: L3 -> L4" in capsys.readouterr().out
    assert ladder.compare_baseline(rows, {"a": "L2", "b": "L4", "c": "L2"}) == 1
    assert "REGRESSION a: L2 -> L1" in capsys.readouterr().out


@pytest.mark.slow  # not a compile, but every package in its own child interpreter: minutes
def test_no_architecture_falls_below_its_baseline_rung(tmp_path: Path) -> None:
    out = tmp_path / "ladder.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "ladder.py"), "--json", str(out), "--baseline"],
                         capture_output=True, text=True, check=False)
    assert out.is_file(), run.stderr[-3000:]
    data = json.loads(out.read_text())
    baseline = json.loads((ROOT / "bench" / "ladder_baseline.json").read_text())
    rungs = {row["arch"]: row["rung"] for row in data["packages"]}
    assert set(rungs) == set(baseline), "the set of V2 architecture packages changed: update the baseline"
    improved = [line for line in run.stdout.splitlines() if line.startswith("improved ")]
    if improved:
        warnings.warn("ladder: " + "; ".join(improved), stacklevel=1)
    regressions = [line for line in run.stdout.splitlines() if line.startswith("REGRESSION ")]
    assert not regressions and run.returncode == 0, "\n".join(regressions) + run.stderr[-2000:]


def test_a_v2_reference_that_refuses_a_cpu_is_classified_apart() -> None:
    gpu = {**_step("L2", False, side="v2"), "detail": "V2 reference: load path: ValueError: MiMo-V2 runs only on "
           "NVIDIA SM100 (B200-class) GPUs"}
    other = {**_step("L2", False, side="v2"), "detail": "V2 reference: load path: KeyError: 'q'"}
    assert ladder.classify(gpu, ROOT, "") == "needs a GPU"
    opened = {**_step("L2", False, side="v2"), "detail": "V2 reference: load path: ValueError: Device 0 was "
              "requested but no devices were found."}  # on a GPU spec, the load path opened the device
    assert ladder.classify(opened, ROOT, "") == "needs a GPU"
    assert ladder.classify(other, ROOT, "") == "V2 itself fails"
    assert ladder.classify(_step("L2", False), ROOT, "") == "tool"
    kernel = {**_step("L4", False), "detail": "X: trace X: ValueError: q's device type was expected to be gpu but "
              "got cpu", "where": "<site-packages>/max/nn/kernels.py:3069"}  # a MAX kernel with no CPU form
    assert ladder.classify(kernel, ROOT, "") == "needs a GPU"
    assert ladder.classify({**kernel, "where": "<tree>/pkg_modulev3/attention.py:12"}, ROOT, "") == "tool"


def test_a_weight_the_load_path_reads_before_building_is_named() -> None:
    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _weight_read

    def stopped(error: str) -> archbuild.Built:
        return archbuild.Built("v2", "X", failure=archbuild.Failure("load path", error))

    assert _weight_read(stopped("KeyError: 'layers.0.self_attn.kv_a_layernorm.weight'")) == (
        "layers.0.self_attn.kv_a_layernorm.weight")
    assert _weight_read(stopped("KeyError: 'Expected e_score_correction_bias in state_dict'")) == (
        "e_score_correction_bias")
    assert _weight_read(stopped("KeyError: 'mrope_section'")) is None  # a config key, not a weight
    assert _weight_read(stopped("ValueError: layers.0.norm.weight")) is None
    built = stopped("KeyError: 'norm.weight'")
    built.roots = [archbuild.Capture(object(), (), {})]
    assert _weight_read(built) is None  # it built: the stop came later


@pytest.mark.needs_max
def test_the_speculative_pipeline_config_has_the_draft(tmp_path: Path) -> None:
    from migrate_v3.verify import tiny

    model_dir, weights = tiny.checkpoint_dir(tiny.tiny_hf_config("llama", ["LlamaForCausalLM"]), tmp_path)
    plain = tiny.pipeline_config(model_dir, weights, "float32")
    assert plain.draft_model is None
    spec = tiny.pipeline_config(model_dir, weights, "float32", speculative="eagle", accelerator=True)
    assert spec.draft_model is not None and spec.draft_model.max_length == spec.model.max_length
    assert spec.speculative is not None and spec.speculative.speculative_method == "eagle"
    assert spec.model.device_specs[0].device_type == "gpu"


def test_a_weight_a_key_error_message_quotes_is_named() -> None:
    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _weight_read

    built = archbuild.Built("v2", "X", failure=archbuild.Failure("load path", (
        "KeyError: \"Expected NextN norm key 'decoder_layer.self_attn.kv_a_layernorm.weight' not found in "
        "state_dict. Available keys sample: []...\"")))
    assert _weight_read(built) == "decoder_layer.self_attn.kv_a_layernorm.weight"


@pytest.mark.needs_max
def test_a_rewritten_checkpoint_is_a_new_directory_with_the_config_as_it_is_now(tmp_path: Path) -> None:
    import json

    from migrate_v3.verify import archbuild

    ckpt = archbuild.tiny_checkpoint("LlamaForCausalLM", "llama3", tmp_path / "a")
    ckpt, _ = ckpt.with_weights({"norm.weight": ((4,), "float32")})
    ckpt.hf_config.dflash_config = {"mask_token_id": 3}
    again = ckpt.rewritten(tmp_path / "b")
    assert again.model_dir != ckpt.model_dir  # MAX keeps a loaded config per path: a new one
    assert json.loads((again.model_dir / "config.json").read_text())["dflash_config"] == {"mask_token_id": 3}
    assert again.weights.read_bytes() == ckpt.weights.read_bytes()


@pytest.mark.needs_max
def test_a_v3_module_for_a_gpu_device_ref_constructs_while_gpu_refs_are_the_cpu_device() -> None:
    from max.driver import CPU
    from max.experimental import functional as F
    from max.experimental.nn import Linear
    from max.experimental.tensor import default_device
    from max.graph import DeviceRef
    from max.graph import type as graph_type

    from migrate_v3.verify import archbuild

    saved = graph_type.Accelerator
    with F.lazy(), archbuild.gpu_refs_on_cpu():
        assert DeviceRef.GPU().to_device() == CPU()
        with default_device(DeviceRef.GPU()):
            layer = Linear(4, 4)  # a V3 Tensor holds a Device: without the stand-in this opens an accelerator
    assert layer.weight.shape == [4, 4]
    assert graph_type.Accelerator is saved  # scoped
    with archbuild.gpu_refs_on_cpu(False):
        assert graph_type.Accelerator is saved


@pytest.mark.needs_max
def test_a_checkpoint_name_is_found_for_an_adapter_that_inserts_a_segment(tmp_path: Path) -> None:
    from typing import Any

    from migrate_v3.verify import archbuild

    def adapter(state_dict: dict[str, Any], **kwargs: Any) -> dict[str, Any]:  # gate. -> gate.gate_score.
        return {k.removeprefix("model.").replace("gate.", "gate.gate_score."): v.data()
                for k, v in state_dict.items() if k.startswith("model.") and "gate_score" not in k}

    v2: archbuild.Signature = {"layers.0.mlp.gate.gate_score.weight": ((4, 8), "float32")}
    names = archbuild.checkpoint_names((adapter, None), v2, {}, None, None, tmp_path)
    assert names == {"model.layers.0.mlp.gate.weight": ((4, 8), "float32")}


def test_a_checkpoint_name_is_found_for_an_adapter_that_maps_the_layer_after_the_last_onto_a_module(
    tmp_path: Path
) -> None:
    """DeepSeek-V3's MTP layer is ``model.layers.{num_hidden_layers}`` in the checkpoint; the
    adapter maps it to ``draft.decoder_layer`` (and every other layer under ``target.``)."""
    from types import SimpleNamespace
    from typing import Any

    from migrate_v3.verify import archbuild

    hf = SimpleNamespace(num_hidden_layers=2)

    def adapter(state_dict: dict[str, Any], huggingface_config: Any = None, **kwargs: Any) -> dict[str, Any]:
        mtp = f"layers.{huggingface_config.num_hidden_layers}."
        out = {}
        for k, v in state_dict.items():
            name = k.removeprefix("model.")
            out[f"draft.decoder_layer.{name[len(mtp):]}" if name.startswith(mtp) else f"target.{name}"] = v.data()
        return out

    v2: archbuild.Signature = {"draft.decoder_layer.self_attn.kv_a_layernorm.weight": ((16,), "float32"),
                               "target.layers.1.mlp.gate.weight": ((4, 8), "float32")}
    names = archbuild.checkpoint_names((adapter, None), v2, {}, None, hf, tmp_path)
    assert names == {"layers.2.self_attn.kv_a_layernorm.weight": ((16,), "float32"),
                     "layers.1.mlp.gate.weight": ((4, 8), "float32")}


def test_a_pipeline_that_converts_its_weights_itself_gets_a_checkpoint_its_conversions_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gemma4 registers no weight adapter: its load path converts ``language_model.*`` names with
    its package's ``convert_*_state_dict`` functions (dropping the rest). The ladder's checkpoint
    gets the names those read, or the model compiles with none of its weights."""
    from types import SimpleNamespace

    from migrate_v3.verify import archbuild

    package = tmp_path / "towers_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("class TowersModel:\n    pass\n")
    (package / "weight_adapters.py").write_text(
        "def convert_language_state_dict(state_dict):\n"
        "    return {k.removeprefix('language_model.'): v.data() for k, v in state_dict.items()\n"
        "            if k.startswith('language_model.')}\n\n"
        "def convert_vision_state_dict(state_dict):\n"
        "    return {k.removeprefix('vision.'): v.data() for k, v in state_dict.items() if k.startswith('vision.')}\n\n"
        "def convert_with_config(state_dict, config):\n"
        "    raise AssertionError('takes a config: not one of the conversions')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from towers_pkg.model import TowersModel  # type: ignore[import-not-found]

    adapter = archbuild.internal_adapter(SimpleNamespace(pipeline_model=TowersModel))
    assert adapter is not None
    v2: archbuild.Signature = {"embed_tokens.weight": ((4, 8), "float32")}
    names = archbuild.checkpoint_names((adapter, adapter), v2, {}, None, None, tmp_path)
    assert names == {"language_model.embed_tokens.weight": ((4, 8), "float32")}
    assert archbuild.internal_adapter(SimpleNamespace(pipeline_model=archbuild.Checkpoint)) is None


def test_a_convolution_its_load_path_flattens_itself_is_given_as_one_in_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """internvl's load path converts its vision weights itself, flattening the patch embedding's
    Conv2d weight (it unpacks 4 axes): a 2-axis weight makes that conversion raise, which the
    union of the package's conversions must not take for "not a checkpoint name"."""
    from types import SimpleNamespace

    from migrate_v3.verify import archbuild

    package = tmp_path / "conv_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("class ConvModel:\n    pass\n")
    (package / "weight_adapters.py").write_text(
        "from types import SimpleNamespace\n\n"
        "def convert_language_state_dict(state_dict, **unused):\n"
        "    return {k.removeprefix('language_model.'): v.data() for k, v in state_dict.items()\n"
        "            if k.startswith('language_model.')}\n\n"
        "def convert_vision_state_dict(state_dict, **unused):\n"
        "    out = {}\n"
        "    for k, v in state_dict.items():\n"
        "        if k.startswith('language_model.'):\n"
        "            continue\n"
        "        o, i, h, w = v.data().shape\n"
        "        out[k.removeprefix('vision_model.')] = SimpleNamespace(shape=(o, i * h * w), dtype='float32')\n"
        "    return out\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from conv_pkg.model import ConvModel  # type: ignore[import-not-found]

    adapter = archbuild.internal_adapter(SimpleNamespace(pipeline_model=ConvModel))
    assert adapter is not None
    v2: archbuild.Signature = {"embeddings.patch_embedding.weight": ((8, 12), "float32")}
    names = archbuild.checkpoint_names((adapter, None), v2, {}, None, None, tmp_path)
    assert names == {"embeddings.patch_embedding.weight": ((8, 12, 1, 1), "float32")}
    assert adapter({}) == {}  # (nothing given: nothing refused)


def test_a_pipeline_model_that_builds_none_of_its_packages_modules_is_a_placeholder() -> None:
    """dflash_llama3's registered pipeline model builds llama3's ``Llama3`` and runs nothing (the
    draft it names is built by the unified pipeline): its own root classes are climbed instead."""
    from types import SimpleNamespace

    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _placeholder

    class Llama3: ...

    class Draft: ...

    Llama3.__module__, Draft.__module__ = "archs.llama3.llama3", "archs.dflash_llama3.dflash_llama3"
    class Placeholder:
        def execute(self, inputs: object) -> object:
            """Runs nowhere: the unified pipeline runs the draft."""
            raise NotImplementedError("a placeholder for the registry")

    class Runs:  # (eagle3_deepseekV3's runs the sibling's model it built: no placeholder)
        def execute(self, inputs: object) -> object:
            return inputs

    def built(pipeline: object, *modules: object) -> archbuild.Built:
        return archbuild.Built("v2", "DFlashDraftModel", pipeline, roots=[SimpleNamespace(module=m) for m in modules])  # type: ignore[misc]

    assert _placeholder(built(Placeholder(), Llama3()), "archs.dflash_llama3.")
    assert not _placeholder(built(Runs(), Llama3()), "archs.dflash_llama3.")
    assert not _placeholder(built(Placeholder(), Llama3(), Draft()), "archs.dflash_llama3.")
    assert not _placeholder(built(Placeholder()), "archs.dflash_llama3.")  # (built nothing: its own failure)


def test_a_v3_parameter_no_v2_weight_accounts_for_is_named_apart(tmp_path: Path) -> None:
    """The probe checkpoint holds it (so names and shapes agree), but a checkpoint V2 loads does not:
    L3 fails on such names (olmo's affine LayerNorm weights where V2 has a weightless one)."""
    from migrate_v3.verify import archbuild

    v2: archbuild.Signature = {"layers.0.mlp.weight": ((4, 8), "float32")}
    v3: archbuild.Signature = {**v2, "layers.0.norm.weight": ((8,), "float32")}
    only: set[str] = set()
    names = archbuild.checkpoint_names((None, None), v2, v3, None, None, tmp_path, only)
    assert set(names) == set(v3)
    assert only == {"layers.0.norm.weight"}


def test_a_v2_graph_that_mixes_devices_on_a_cpu_spec_is_built_on_a_gpu_spec(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typing import Any

    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _Pair

    calls: list[tuple[str, bool]] = []

    def build(entry: Any, side: str, ckpt: Any, *args: Any, accelerator: bool = False, **kwargs: Any
              ) -> archbuild.Built:
        calls.append((side, accelerator))
        out = archbuild.Built(side, "X", roots=[archbuild.Capture(object(), (), {})], accelerator=accelerator)
        if side == "v2" and not accelerator:  # its code puts the image inputs on DeviceRef.GPU() itself
            out.failure = archbuild.Failure("load path", "ValueError: Input values must be on the same device")
        return out

    monkeypatch.setattr(archbuild, "build", build)
    pair = _Pair(None, None, ("p",), (), tmp_path, "p.x")
    _, built2, built3 = pair.first_pass(archbuild.Checkpoint("llama", None, tmp_path, tmp_path / "w"))
    assert pair.accelerator and built2.failure is None and built3.accelerator
    assert calls == [("v2", False), ("v2", True), ("v3", True)]


def test_a_v2_reference_that_refuses_a_cpu_reports_where_it_stops_on_a_gpu_spec(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typing import Any

    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _Pair

    def build(entry: Any, side: str, ckpt: Any, *args: Any, accelerator: bool = False, **kwargs: Any
              ) -> archbuild.Built:
        out = archbuild.Built(side, "X", accelerator=accelerator)
        out.failure = archbuild.Failure("load path", "ValueError: DeepSeekV3.2 sparse attention requires a "
                                        "quantization config." if accelerator else
                                        "ValueError: DeepseekV2 currently only supported on gpu.")
        return out

    monkeypatch.setattr(archbuild, "build", build)
    pair = _Pair(None, None, ("p",), (), tmp_path, "p.x")
    _, built2, _ = pair.first_pass(archbuild.Checkpoint("llama", None, tmp_path, tmp_path / "w"))
    assert pair.accelerator and built2.failure is not None and "sparse attention" in built2.failure.error


@pytest.mark.needs_max
def test_a_setting_the_v2_load_path_names_as_a_flag_is_turned_on_for_both_sides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typing import Any

    from migrate_v3.verify import archbuild, tiny
    from migrate_v3.verify.ladder import _Pair

    seen: list[tuple[str, dict[str, Any]]] = []

    def build(entry: Any, side: str, ckpt: Any, *args: Any, accelerator: bool = False, **kwargs: Any
              ) -> archbuild.Built:
        seen.append((side, dict(ckpt.settings)))
        out = archbuild.Built(side, "X", accelerator=accelerator)
        if not ckpt.settings:
            out.failure = archbuild.Failure("load path", "ValueError: X needs the bitmask input", message=(
                "X needs the bitmask input: --no-sampler-grammar turns it off; elsewhere it follows "
                "--enable-structured-output"))
        else:
            out.roots = [archbuild.Capture(object(), (), {})]
        return out

    monkeypatch.setattr(archbuild, "build", build)
    monkeypatch.setattr(archbuild, "encoding_for", lambda entry: "float32")
    model_dir, weights = tiny.checkpoint_dir(tiny.tiny_hf_config("llama", ["LlamaForCausalLM"]), tmp_path / "c")
    pair = _Pair(None, None, ("p",), (), tmp_path, "p.x")
    ckpt, built2, _ = pair.first_pass(archbuild.Checkpoint("llama", None, model_dir, weights))
    assert pair.settings == ["sampling.enable_structured_output"] and built2.roots and built2.failure is None
    assert ckpt.settings == {"sampling.enable_structured_output": True}
    assert seen[-1] == ("v3", {"sampling.enable_structured_output": True})  # the V3 side gets it too


def test_a_module_constructed_inside_another_roots_constructor_is_not_a_root() -> None:
    from typing import Any

    from migrate_v3.verify import archbuild

    class Layer:  # V2 modules, as far as roots_of looks: what they contain
        def named_modules(self) -> list[tuple[str, Any]]:
            return [("", self)]

    class Shard(Layer):
        pass

    root = archbuild.Capture(Layer(), (), {})
    shard = archbuild.Capture(Shard(), (), {}, parent=root)  # kept in a plain list: not a child
    other = archbuild.Capture(Layer(), (), {})
    roots = archbuild.roots_of([root, shard, other], "v2", lambda cls: True)
    assert [c.module for c in roots] == [root.module, other.module]


def test_an_architecture_that_builds_only_quantized_gets_an_fp8_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace
    from typing import Any

    from migrate_v3.verify import archbuild, tiny
    from migrate_v3.verify.ladder import _Pair

    seen: list[str | None] = []

    def build(entry: Any, side: str, ckpt: archbuild.Checkpoint, *args: Any, accelerator: bool = False,
              **kwargs: Any) -> archbuild.Built:
        seen.append(ckpt.encoding)
        out = archbuild.Built(side, "X", accelerator=accelerator)
        if getattr(ckpt.hf_config, "quantization_config", None) is None:
            out.failure = archbuild.Failure("load path", "ValueError: expected a `quantization_config` field in "
                                            "Hugging Face config when the dtype is float8")
        else:
            out.roots = [archbuild.Capture(object(), (), {})]
        return out

    monkeypatch.setattr(archbuild, "build", build)
    entry = SimpleNamespace(supported_encodings=["float8_e4m3fn"], default_encoding="float8_e4m3fn")
    pair = _Pair(entry, None, ("p",), (), tmp_path, "p.x")
    ckpt = archbuild.tiny_checkpoint("LlamaForCausalLM", "llama3", tmp_path / "ckpt")
    ckpt, built2, _ = pair.first_pass(ckpt)
    assert built2.roots and ckpt.encoding == "float8_e4m3fn" and seen[-1] == "float8_e4m3fn"
    assert ckpt.hf_config.quantization_config == tiny.FP8_BLOCK_SCALED
    assert pair.read["weight_scale_inv"] == ((1,), "float32")  # its parser reads the scales' dtype
    assert pair.read["layers.0.mlp.down_proj.weight_scale"] == ((1,), "float32")  # and which layers have them
    assert "layers.0.mlp.down_proj.weight_scale" in pair.placeholders  # (the roots' real ones follow)
    bf16_only = _Pair(SimpleNamespace(supported_encodings=["bfloat16"], default_encoding="bfloat16"), None,
                      ("p",), (), tmp_path, "p.y")
    _, built, _ = bf16_only.first_pass(archbuild.tiny_checkpoint("LlamaForCausalLM", "llama3", tmp_path / "c2"))
    assert not built.roots and built.failure is not None  # no float8 encoding: no quantized checkpoint


def test_the_layers_of_a_root_whose_constructor_raised_are_not_roots() -> None:
    from typing import Any

    from migrate_v3.verify import archbuild

    class Layer:
        def named_modules(self) -> list[tuple[str, Any]]:
            return [("", self)]

    failed = archbuild.Capture(Layer(), (), {})  # its constructor raised: no longer among the captures
    attention = archbuild.Capture(Layer(), (), {}, parent=failed)
    assert archbuild.roots_of([attention], "v2", lambda cls: True) == []


def test_a_pipeline_model_that_does_not_build_on_its_own_is_named(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _Pair

    class DraftModel:  # a placeholder registered for lookup: its base reads what only siblings set
        pass

    pair = _Pair(SimpleNamespace(pipeline_model=DraftModel), None, ("p",), (), tmp_path, "p.x")
    built2 = archbuild.Built("v2", "X", failure=archbuild.Failure(
        "load path", "AttributeError: 'DraftModel' object has no attribute 'norm_method'", "/x/model.py:3"))
    step = pair.roots(built2, archbuild.Built("v3", "X"))
    assert not isinstance(step, list) and step.side == "v2"
    assert "the pipeline model DraftModel does not build on its own" in step.detail and "'norm_method'" in step.detail


def test_a_root_the_v3_load_path_stopped_before_building_is_named_at_that_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay of V2's call (with V2's config: the V3 load path built none) fails otherwise than the
    V3 load path did before it built the root: L2 reports the load path's stop, where a user meets it."""
    from types import SimpleNamespace

    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _Pair

    class Root:
        pass

    pair = _Pair(SimpleNamespace(pipeline_model=None), None, ("p",), (), tmp_path, "p.x")
    monkeypatch.setattr(_Pair, "classes3", lambda self, pipeline_model=None: {"Root": Root})
    replayed = archbuild.Failure("construct Root", "AttributeError: 'V2Config' object has no attribute 'kv'", "/t/r.py:9")
    monkeypatch.setattr(archbuild, "replay", lambda *args, **kwargs: (None, replayed, ""))
    built2 = archbuild.Built("v2", "X", roots=[archbuild.Capture(Root(), (), {})])
    stop = archbuild.Failure("load path", "TypeError: Base.__init__() got an unexpected keyword argument 'r'", "/t/model.py:7")
    roots = pair.roots(built2, archbuild.Built("v3", "X", failure=stop))
    assert isinstance(roots, list) and roots[0].failed is not None
    assert roots[0].failed.where == "/t/model.py:7" and "stopped before building it" in roots[0].failed.detail
    assert "'V2Config' object has no attribute 'kv'" in roots[0].failed.detail
    # the same failure both ways, or none on the load path: the replay's own
    for v3 in (archbuild.Built("v3", "X", failure=replayed), archbuild.Built("v3", "X")):
        roots = pair.roots(built2, v3)
        assert isinstance(roots, list) and roots[0].failed is not None and roots[0].failed.where == "/t/r.py:9"


def test_a_root_traces_with_the_input_types_it_or_the_child_it_hands_its_inputs_to_declares() -> None:
    from migrate_v3.verify import auto

    class Decoder:
        def input_types(self) -> tuple[str, ...]:
            return ("z: [batch, 16, height, width]",)

        def __call__(self, z: object) -> object:
            return z

    class Autoencoder:  # a wrapper: its __call__ hands z to the decoder as it is
        def __init__(self) -> None:
            self.encoder, self.decoder = object(), Decoder()

        def __call__(self, z: object) -> object:
            return self.decoder(z)

    class Shifted(Autoencoder):  # the decoder gets something else: its types say nothing
        def __call__(self, z: object) -> object:
            return self.decoder(z + 1)  # type: ignore[operator]

    assert auto.declared_input_types(Decoder()) == (["z: [batch, 16, height, width]"], "Decoder.input_types()")
    types, whose = auto.declared_input_types(Autoencoder()) or ([], "")
    assert types == ["z: [batch, 16, height, width]"] and "self.decoder takes Autoencoder's inputs" in whose
    assert auto.declared_input_types(Shifted()) is None


def test_an_encoder_is_retried_with_its_optional_attention_mask_shaped_as_its_ids() -> None:
    from migrate_v3.verify import auto
    from migrate_v3.verify.spec import Input

    class Encoder:
        def __call__(self, input_ids: object, attention_mask: object = None) -> object:
            return input_ids

    class Scaled:
        def __call__(self, input_ids: object, scale: object = None) -> object:
            return input_ids

    ids = Input((2, 5), "int64", dims=("batch", "seq"), low=0, high=64)
    (mask,) = auto.mask_inputs(Encoder, [ids])
    assert (mask.shape, mask.dtype, mask.dims, mask.fill) == ((2, 5), "int64", ("batch", "seq"), 1.0)
    assert auto.mask_inputs(Scaled, [ids]) == []
    assert auto.mask_inputs(Encoder, [Input((2, 5, 16), "$dtype")]) == []  # no ids: no mask shape


def test_a_root_with_no_inputs_is_a_failure_that_says_why_never_a_trace_with_none() -> None:
    from types import SimpleNamespace

    from migrate_v3.verify.ladder import _trace_root

    traced: list[tuple[object, ...]] = []

    class V3:
        def trace(self, *types: object) -> None:
            traced.append(types)

    made = SimpleNamespace(inputs=[], static_reason="cannot infer the shape of input 'z'; give it in the spec")
    step = _trace_root("VAE", made, object(), V3(), object, None, ())
    assert not step.ok and step.side == "setup" and "cannot infer the shape of input 'z'" in step.detail
    assert traced == []
    assert ladder.classify({"side": "setup", "rung": "L4", "detail": step.detail}, ROOT, "") == "no inputs"


def test_a_class_attribute_a_base_declares_and_only_its_siblings_set_takes_their_value() -> None:
    from migrate_v3.verify import archbuild

    class Base:
        norm_method: str
        attention_bias: bool = False
        state_dict: dict[str, object]  # set by __init__: no subclass sets it on its class

    class Dense(Base):
        norm_method = "rms_norm"

    class Other(Base):
        norm_method = "rms_norm"

    class Olmo(Base):
        norm_method = "layer_norm"

    class Draft(Base):  # registered for lookup only: built on its own, it reads norm_method
        pass

    assert archbuild.unset_class_attributes(Draft) == {"norm_method": "rms_norm"}  # the siblings' majority
    assert archbuild.unset_class_attributes(Olmo) == {}  # it sets its own
    assert {c.__name__ for c in Base.__subclasses__()} == {"Dense", "Other", "Olmo", "Draft"}


def test_a_stand_in_weight_whose_shape_the_load_path_unpacks_gets_the_rank_it_wants() -> None:
    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _unpacked_rank

    def stopped(error: str) -> archbuild.Built:
        return archbuild.Built("v2", "X", failure=archbuild.Failure("load path", error, "/x/weight_adapters.py:89"))

    assert _unpacked_rank(stopped("ValueError: not enough values to unpack (expected 5, got 1)")) == 5
    assert _unpacked_rank(stopped("ValueError: not enough values to unpack (expected 3, got 2)")) is None
    assert _unpacked_rank(stopped("KeyError: 'q'")) is None


def test_a_stand_in_weight_the_module_declares_in_another_shape_gets_that_shape() -> None:
    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _declared_shape, _Pair

    def stopped(error: str) -> archbuild.Built:
        return archbuild.Built("v2", "X", failure=archbuild.Failure("load path", error, "/x/layer.py:796"))

    error = ("ValueError: Value provided to weight 'layers.0.self_attn.kv_a_layernorm.weight' had different "
             "shape (expected=[Dim(16)], actual=[Dim(1)])")
    assert _declared_shape(stopped(error)) == ("layers.0.self_attn.kv_a_layernorm.weight", (16,))
    assert _declared_shape(stopped("KeyError: 'q'")) is None
    pair = _Pair(None, None, (), (), Path("."), "x")
    pair.read = {"language_model.layers.0.self_attn.kv_a_layernorm.weight": ((1,), "bfloat16"),
                 "e_score_correction_bias": ((1,), "float32")}
    assert pair._reshaped(stopped(error))  # the stand-in under a prefix the load path strips
    assert pair.read["language_model.layers.0.self_attn.kv_a_layernorm.weight"] == ((16,), "bfloat16")
    assert not pair._reshaped(stopped(error))  # already that shape
    assert pair.read["e_score_correction_bias"] == ((1,), "float32")


def test_a_weight_the_load_path_still_misses_is_given_under_the_prefixes_it_keeps_names_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """unified_mtp_glm5_2's load path keeps only ``target.*`` (and ``draft.*``) names, the prefix
    stripped: a weight it reads before building is given under each prefix in turn, the ones
    before kept (its draft reads its own copy)."""
    from types import SimpleNamespace

    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _Pair

    (tmp_path / "split_pkg.py").write_text(
        "class Base:\n    pass\n\n"
        "class Split(Base):\n"
        "    def load(self, raw):\n"
        "        draft = {k[6:]: v for k, v in raw.items() if k.startswith('draft.')}\n"
        "        return {k[7:]: v for k, v in raw.items() if k.startswith('target.')}, draft\n"
        "    def other(self, name):\n"
        "        return name.startswith('not a prefix')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from split_pkg import Split  # type: ignore[import-not-found]

    assert archbuild.load_path_prefixes(Split) == ("draft.", "target.")

    def stopped(error: str) -> archbuild.Built:
        return archbuild.Built("v2", "X", failure=archbuild.Failure("load path", error, "/x/model.py:132"))

    pair = _Pair(SimpleNamespace(pipeline_model=Split), None, (), (), tmp_path, "x")
    missing = stopped("KeyError: 'layers.0.norm.weight'")
    assert not pair._prefixed(missing)  # not given yet: the plain name comes first
    pair.read["layers.0.norm.weight"] = ((1,), "float32")
    assert pair._prefixed(missing) and "draft.layers.0.norm.weight" in pair.read
    assert pair._prefixed(missing)
    assert {"draft.layers.0.norm.weight", "target.layers.0.norm.weight"} <= set(pair.read) and (
        pair.placeholders == {"draft.layers.0.norm.weight", "target.layers.0.norm.weight"})
    assert not pair._prefixed(missing)  # every prefix tried


def test_a_root_traces_with_the_v2_graph_holding_its_weights_when_the_pipelines_types_are_for_another() -> None:
    from types import SimpleNamespace

    from migrate_v3.verify import archbuild

    def graph(*types: str) -> SimpleNamespace:
        return SimpleNamespace(inputs=[SimpleNamespace(type=t) for t in types])

    class Pipeline:  # the language model's graph inputs
        def _get_compile_input_types(self, config: object) -> tuple[str, ...]:
            return ("tokens", "offsets", "kv0", "kv1")

    class Vision:
        def forward(self, pixels: object, grid: object) -> None: ...

    class Language:
        def forward(self, tokens: object, offsets: object, *kv: object) -> None: ...

    vision2 = SimpleNamespace(state_dict=lambda: {"patch_conv.weight": 0, "ln_pre.weight": 0})
    built2 = archbuild.Built("v2", "X", loads=[(graph("tokens", "offsets"), {"embed.weight": 0}),
                                               (graph("pixels", "grid"), {"patch_conv.weight": 0, "ln_pre.weight": 0})])
    built3 = archbuild.Built("v3", "X", pipeline_model=Pipeline())
    types, source, _ = archbuild.compile_types_for(Vision(), built3, built2, (), vision2)
    assert types == ("pixels", "grid") and source == "the V2 graph loaded with this root's weights"
    types, source, _ = archbuild.compile_types_for(Language(), built3, built2, (), vision2)
    assert types == ("tokens", "offsets", "kv0", "kv1") and "_get_compile_input_types" in source  # they fit
    assert archbuild.v2_graph_types(SimpleNamespace(state_dict=lambda: {"other.weight": 0}), built2) is None


def test_a_load_path_that_wants_some_tensor_under_a_prefix_is_read_for_that_prefix() -> None:
    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _wanted_prefix

    def stopped(error: str) -> archbuild.Built:
        return archbuild.Built("v2", "X", failure=archbuild.Failure("load path", error, "/x/model.py:111"))

    assert _wanted_prefix(stopped("ValueError: no mtp.* tensors in the checkpoint; this architecture is only "
                                  "selected for checkpoints that ship the MTP head")) == "mtp."
    assert _wanted_prefix(stopped("ValueError: no vision_tower.* weights found")) == "vision_tower."
    assert _wanted_prefix(stopped("ValueError: no devices were found")) is None


def test_a_root_that_fails_to_trace_with_v2s_own_input_types_fails_on_v2_too_only_if_v2_does() -> None:
    from types import SimpleNamespace

    from migrate_v3.verify.ladder import _trace_root

    class V2:  # declares its graph's input types, as a V2 pipeline traces it with them
        stages = False

        def __init__(self) -> None:
            self.weight = SimpleNamespace(name="weight")

        def input_types(self) -> tuple[str, ...]:
            return ("features: [batch, mel, frames]",)

        def raw_state_dict(self) -> dict[str, object]:
            return {"conv.weight": self.weight}

        def trace(self, *types: object) -> None:
            if not self.stages:
                raise ValueError("Failed to create op 'AddOp'")

    class V3:
        def trace(self, *types: object) -> None:
            raise ValueError("Failed to create op 'AddOp'")

    made = SimpleNamespace(inputs=[], static_reason="")
    v2 = V2()
    step = _trace_root("Encoder", made, v2, V3(), V2, None, ())
    assert not step.ok and step.side == "v2" and "does not stage with its own input types either" in step.detail
    assert v2.weight.name == "conv.weight"  # named by attribute path, as V2's trace needs
    assert ladder.classify({"side": step.side, "rung": "L4", "detail": step.detail}, ROOT, "") == "V2 itself fails"
    v2.stages = True  # V2 stages with them: the migration's failure
    step = _trace_root("Encoder", made, v2, V3(), V2, None, ())
    assert not step.ok and step.side == "v3" and "AddOp" in step.detail


def test_weights_the_v2_reference_builds_in_other_dtypes_on_its_checkpoint_are_given_in_those(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A V2 load path that reads a norm dtype off ``layers.0.input_layernorm.weight`` builds its q/k
    norms in bfloat16 on the empty checkpoint and in float32 on one whose norms are float32: the
    checkpoint is then written with the dtypes V2 built on it (the reference agrees with its own
    checkpoint), never with the V3 side's."""
    from types import SimpleNamespace
    from typing import Any

    from migrate_v3.verify import archbuild, sides
    from migrate_v3.verify import ladder as lad

    first = SimpleNamespace(sig={"norm.weight": ((8,), "float32"), "k_norm.weight": ((4,), "bfloat16")})
    second = SimpleNamespace(sig={"norm.weight": ((8,), "float32"), "k_norm.weight": ((4,), "float32")})
    monkeypatch.setattr(sides, "v2_signature", lambda module: dict(module.sig))
    names = {"model.norm.weight": ((8,), "float32"), "model.k_norm.weight": ((4,), "bfloat16"),
             "model.v3_only.weight": ((2,), "bfloat16")}
    seen: list[Any] = []

    class Pair:
        own2 = {"norm.weight", "k_norm.weight"}

        def checkpoint(self, ckpt: Any, roots: list[Any]) -> archbuild.Signature:
            seen.append([r.v3 for r in roots])
            self.own2 = set()
            return {"model." + k: v for k, v in roots[0].v2.module.sig.items()}

    pair: Any = Pair()
    roots = [lad._Root("M", archbuild.Capture(first, (), {}), None, "")]
    built2 = archbuild.Built("v2", "M")
    built2.roots = [archbuild.Capture(second, (), {})]
    assert lad._redtyped(pair, None, roots, built2, names) == {"model.k_norm.weight": ((4,), "float32")}
    assert seen == [[None]]  # the V2 roots only: the V3 side never sets the checkpoint's dtypes
    assert pair.own2 == {"norm.weight", "k_norm.weight"}
    built2.roots = [archbuild.Capture(first, (), {})]  # the same dtypes on both: nothing to redo
    assert lad._redtyped(pair, None, roots, built2, names) == {}
    assert len(seen) == 1


@pytest.mark.needs_max
def test_a_v2_module_inside_the_v3_root_is_named_at_the_import_that_brings_its_class(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A V3 root that holds a V2 layer (its class still imported from the V2 package, with MV301's
    TODO on that import): the layer's weights are no V3 parameters; L3 names the import line."""
    from migrate_v3.verify import ladder as lad

    (tmp_path / "h20_v2side.py").write_text(
        "from max.nn.layer import Module\n\n\nclass Inner(Module):\n    def __call__(self, x):\n        return x\n")
    (tmp_path / "h20_v3side.py").write_text(
        "from max.experimental.nn import Module\n\n"
        "# TODO(migrate-v3): MV301 still imports V2 code\n"
        "from h20_v2side import Inner\n\n\n"
        "class Root(Module):\n    def __init__(self) -> None:\n        self.inner = Inner()\n        self.layers = [Inner()]\n\n"
        "    def forward(self, x):\n        return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import h20_v3side  # type: ignore[import-not-found]

    found = lad.v2_inside(h20_v3side.Root())
    site = f"{tmp_path / 'h20_v3side.py'}:4"
    assert [(p, c.__name__, w) for p, c, w in found] == [("inner", "Inner", site), ("layers.0", "Inner", site)]


@pytest.mark.needs_max
def test_a_checkpoint_name_is_found_for_adapters_that_rename_a_part_and_read_the_format_off_the_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """deepseekV3_2's shape: the V2 adapter renames ``weight_scale_inv`` -> ``weight_scale`` (a dict
    literal in its module), and the V3 adapter maps a ``.weight`` onto an FP8 ``.weight.data`` only
    when the checkpoint has some ``*.weight_scale_inv``: each weight is found once, under the name
    both adapters read (no V2-only duplicate that V3 would report as unexpected)."""
    from migrate_v3.verify import archbuild

    (tmp_path / "h20_adapters.py").write_text(
        'MAP = {"model.": "", "weight_scale_inv": "weight_scale"}\n\n\n'
        "def v2(state_dict, **kwargs):\n"
        "    out = {}\n"
        "    for k, v in state_dict.items():\n"
        "        for a, b in MAP.items():\n"
        "            k = k.replace(a, b)\n"
        "        out[k] = v.data()\n"
        "    return out\n\n\n"
        "def v3(state_dict, **kwargs):\n"
        "    fp8 = any(k.endswith('.weight_scale_inv') for k in state_dict)\n"
        "    out = {}\n"
        "    for k, v in state_dict.items():\n"
        "        k = k.removeprefix('model.')\n"
        "        if fp8 and k.endswith('.weight'):\n"
        "            k += '.data'\n"
        "        elif k.endswith('.weight_scale_inv'):\n"
        "            k = k.removesuffix('_scale_inv') + '.weight_scale_inv'\n"
        "        out[k] = v.data()\n"
        "    return out\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import h20_adapters  # type: ignore[import-not-found]

    assert archbuild.adapter_renames(h20_adapters.v2) == (("weight_scale_inv", "weight_scale"),)
    v2: archbuild.Signature = {"l.weight": ((4, 8), "float32"), "l.weight_scale": ((1, 1), "float32")}
    v3: archbuild.Signature = {"l.weight.data": ((4, 8), "float32"), "l.weight.weight_scale_inv": ((1, 1), "float32")}
    work = tmp_path / "probe"
    work.mkdir()
    names = archbuild.checkpoint_names((h20_adapters.v2, h20_adapters.v3), v2, v3, None, None, work)
    # alone, l.weight maps onto no V3 parameter (no scale in sight: not FP8); among the rest it does
    assert names == {"l.weight": ((4, 8), "float32"), "l.weight_scale_inv": ((1, 1), "float32")}


@pytest.mark.needs_max
def test_a_replayed_v2_call_loses_the_placement_arguments_the_v3_class_does_not_take() -> None:
    """V2 roots take ``device``/``dtype``; a V3 class that has no such parameter is built without
    them (as ``apply`` drops them at a call site), one that declares them still gets them."""
    from max.experimental.nn import Module

    from migrate_v3.verify.archbuild import Built, Capture, replay

    class NoPlacement(Module):  # type: ignore[type-arg]
        def __init__(self, width: int) -> None:
            super().__init__()
            self.width = width

    class TakesDevice(Module):  # type: ignore[type-arg]
        def __init__(self, width: int, device: object = None) -> None:
            super().__init__()
            self.device_given = device

    v2 = Capture(module=object(), args=(4,), kwargs={"device": "cpu-ref", "dtype": "bf16"})
    built = Built(side="v3", arch_name="x")
    module, fail, how = replay(v2, NoPlacement, Built(side="v2", arch_name="x"), built)
    assert fail is None and module.width == 4 and how.endswith("without V2's dtype/device")
    module, fail, _ = replay(Capture(object(), (4,), {"device": "cpu-ref"}), TakesDevice,
                             Built(side="v2", arch_name="x"), built)
    assert fail is None and module.device_given == "cpu-ref"


def test_a_probe_that_dies_in_l5_keeps_the_rungs_below(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An L5 compile that kills the interpreter (SIGSEGV seen) loses L5 only: the partial result
    printed before it stands, with an L5 step that says so; a package that left nothing is lost."""
    partial = {"arch": "a", "v3_package": "a_modulev3", "steps": [
        {"rung": r, "ok": True, "detail": "", "where": "", "side": "v3"} for r in ("L0", "L1", "L2", "L3", "L4")]}
    out = f"LADDER-START a\nLADDER-PARTIAL {json.dumps(partial)}\nLADDER-START b\n"

    def died(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], -11, out, (
            "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
            '  File "/x/engine/api.py", line 145 in execute\n  File "/x/ladder.py", line 9 in _l5\n\n'
            "Extension modules: numpy._core._multiarray_umath (total: 1)\n"))

    monkeypatch.setattr(ladder.subprocess, "run", died)
    results, left = ladder.run_batch(tmp_path, [("a", "a_modulev3"), ("b", "b_modulev3")])
    assert left == [("b", "b_modulev3")]
    [row] = results
    assert [s["rung"] for s in row["steps"]] == ["L0", "L1", "L2", "L3", "L4", "L5"]
    assert row["steps"][-1]["ok"] is False and "exit -11" in row["steps"][-1]["detail"]
    assert row["steps"][-1]["detail"].endswith(
        'Fatal Python error: Segmentation fault at File "/x/engine/api.py", line 145 in execute')
    assert ladder.rung_of(row["steps"]) == "L4"
    assert ladder.classify(row["steps"][-1], tmp_path, "") == "no inputs"


@pytest.mark.needs_max
def test_l5_feeds_each_input_in_its_own_dtype() -> None:
    """A bfloat16 graph input gets a bfloat16 buffer (it got float32 and the V2 reference refused it),
    token ids stay below the vocabulary, a batch dim is 2 and any other symbolic dim 6."""
    from max.driver import Buffer
    from max.dtype import DType
    from max.graph import DeviceRef, TensorType

    from migrate_v3.verify.ladder import _feed

    cpu = DeviceRef.CPU()
    ids, cache, scale = _feed([TensorType(DType.int64, ["batch", "seq"], cpu),
                               TensorType(DType.bfloat16, ["pages", 4], cpu),
                               TensorType(DType.float32, [3], cpu)], vocab=10, seed=1)
    assert ids.shape == (2, 6) and ids.min() >= 1 and ids.max() < 10
    assert isinstance(cache, Buffer) and cache.dtype == DType.bfloat16 and tuple(cache.shape) == (6, 4)
    assert scale.dtype.name == "float32" and scale.shape == (3,)


def test_a_graph_that_fails_to_verify_says_what_the_verifier_found() -> None:
    """MAX's first line ("Graph failed to verify. Please file an issue.") names no cause: the
    verifier's ``error:`` line follows it (lfm2: a value from another graph inside an op)."""
    from migrate_v3.verify import archbuild

    exc = ValueError("Graph failed to verify. Please file an issue. This should be impossible.\n"
                     "Verification failed:\nerror: unknown: 'mo.custom' op using value defined outside the region\n"
                     " note: unknown: see current operation")
    line = archbuild.failure("compile", exc).error
    assert line.endswith("(error: unknown: 'mo.custom' op using value defined outside the region)")
    assert archbuild.failure("x", ValueError("plain\nerror: not appended")).error == "ValueError: plain"


def test_l5_compiles_a_root_the_load_path_builds_anew_never_the_one_l4_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A V2 layer kept in a V3 module caches graph values per graph (lfm2's V2 rope): the module L4
    traced would hand its compile graph a value of the trace's graph."""
    from migrate_v3.verify import archbuild, ladder

    class Root:
        pass

    traced, fresh, other = Root(), Root(), object()
    built3 = archbuild.Built("v3", "Arch", roots=[archbuild.Capture(traced, (), {})])
    pair = ladder._Pair(None, None, ("v2", "v3"), (), Path("."), "pkg")
    monkeypatch.setattr(archbuild, "build", lambda *a, **k: archbuild.Built(
        "v3", "Arch", roots=[archbuild.Capture(other, (), {}), archbuild.Capture(fresh, (), {})]))
    root = ladder._Root("Root", archbuild.Capture(object(), (), {}), traced, "the load path")
    assert ladder._untraced(pair, None, root, built3) is fresh  # type: ignore[arg-type]
    replayed = ladder._Root("Root", archbuild.Capture(object(), (), {}), Root(), "replaying")
    assert ladder._untraced(pair, None, replayed, built3) is replayed.v3  # type: ignore[arg-type]


def test_a_probe_past_its_memory_limit_stops_itself_and_says_why() -> None:
    """A V2 graph whose CPU compile grows without bound (qwen3_embedding: past 11 GB) stops the probe
    cleanly, with a last stderr line the parent reports, before the kernel's SIGKILL."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); import ladder; "
            "ladder.memory_guard(0.001, every=0.01); time.sleep(30)")
    run = subprocess.run([sys.executable, "-c", code, str(ROOT / "bench")], capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 3
    assert run.stderr.strip().splitlines()[-1].startswith("the probe's memory passed 0.001 GB")


def test_a_package_past_its_time_limit_is_stopped_and_says_why(tmp_path: Path) -> None:
    """Migrated code that loops forever while staging (V2 ``ops.allgather`` iterating a V3 Tensor
    did) stops that package with a failure that says so, instead of hanging the ladder and CI."""
    out = tmp_path / "ladder.json"
    env = {**os.environ, "MIGRATE_V3_LADDER_PACKAGE_SECONDS": "0.01"}
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "ladder.py"), "bert", "--json", str(out)],
                         capture_output=True, text=True, check=False, env=env, timeout=600)
    assert out.is_file(), run.stderr[-3000:]
    (row,) = json.loads(out.read_text())["packages"]
    failed = [s for s in row["steps"] if not s["ok"]]
    assert failed and "L0-L4 passed 0.01 s: stopped" in failed[0]["detail"], row["steps"]
    assert row["steps"][-1] == failed[0], row["steps"]  # the package ends where it was stopped


def test_a_stop_that_surfaced_as_another_error_still_ends_the_package_there() -> None:
    """A deadline's raise that an import turned into an ImportError (numpy does) is still the
    stop: the first failure says so and nothing after it stands; with no failure, a next rung does."""
    from migrate_v3.verify.ladder import ArchResult, Step, _stopped

    result = ArchResult("a", "a_modulev3", steps=[
        Step("L1", True, "3 modules"), Step("L2", False, "ImportError: numpy"), Step("L3", True, "equal")])
    _stopped(result, "stopped: limit")
    assert [(s.rung, s.ok, s.detail) for s in result.steps] == [
        ("L1", True, "3 modules"), ("L2", False, "stopped: limit; there: ImportError: numpy")]
    clean = ArchResult("a", "a_modulev3", steps=[Step("L1", True, ""), Step("L2", True, "")])
    _stopped(clean, "stopped: limit")
    assert [(s.rung, s.ok, s.detail) for s in clean.steps][-1] == ("L3", False, "stopped: limit")


@pytest.mark.slow  # two compiles (V2's graph, the migrated V3 module): ~2.5 min cold
def test_migrated_gemma3_matches_v2_on_cpu(tmp_path: Path) -> None:
    """L5 on one family the tool rewrites end to end (scaled embedding, Gemma RMSNorm, sliding and
    global attention, the tied head): same checkpoint, same inputs, V2's graph vs the migrated V3
    module. Its tied head once traced and multiplied by the wrong weight (max |diff| 27.5)."""
    out = tmp_path / "ladder.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "ladder.py"), "gemma3", "-j", "1", "--l5",
                          "--json", str(out)], capture_output=True, text=True, check=False)
    assert out.is_file(), run.stderr[-3000:]
    (row,) = json.loads(out.read_text())["packages"]
    l5 = [s for s in row["steps"] if s["rung"] == "L5"]
    assert l5 and l5[0]["ok"], l5 or row["steps"]
    assert "max |diff|" in l5[0]["detail"] and "within the dtype tolerance" in l5[0]["detail"]


def test_a_v3_root_that_subclasses_the_class_of_the_v2_roots_name_is_that_root(tmp_path: Path) -> None:
    """The V3 load path builds ``RootFlatInputs(Root)`` (a graph body moved into a subclass):
    that is the V2 ``Root``'s counterpart, not a replay of ``Root`` with V2's arguments."""
    from types import SimpleNamespace

    from migrate_v3.verify import archbuild
    from migrate_v3.verify.ladder import _Pair

    class Root:  # V3's class of the V2 root's name
        pass

    class RootFlatInputs(Root):
        pass

    v2_root = type("Root", (), {})()
    pair = _Pair(SimpleNamespace(pipeline_model=None), None, ("p",), (), tmp_path, "p.x")
    pair.classes3 = lambda pipeline_model: {"Root": Root}  # type: ignore[method-assign]
    built2 = archbuild.Built("v2", "X", roots=[archbuild.Capture(v2_root, (), {})])
    built3 = archbuild.Built("v3", "X", roots=[archbuild.Capture(RootFlatInputs(), (), {})])
    roots = pair.roots(built2, built3)
    assert isinstance(roots, list) and len(roots) == 1
    assert isinstance(roots[0].v3, RootFlatInputs) and "as RootFlatInputs" in roots[0].how


def test_a_failure_of_a_root_that_stayed_a_v2_module_is_flagged_by_its_mv320_todo(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "driver.py").write_text(
        "# TODO(migrate-v3): MV320 UnifiedDraft subclasses BlockDriver, a V2 Module with no ModuleV3 form in max 26.7\n"
        "class UnifiedDraft(BlockDriver):\n    pass\n"
    )
    detail = "UnifiedDraft: V2 46 weights after the weight adapters vs V3 21 parameters: 46 unexpected"
    assert ladder.flagged("", {}, detail, pkg) == "TODO"
    assert ladder.flagged("", {}, detail.replace("UnifiedDraft:", "OtherRoot:"), pkg) == ""


def test_a_trace_stopped_inside_a_loop_marked_as_never_ending_is_flagged(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "def forward(self, xs):\n"
        "    # TODO(migrate-v3): MV391 xs was one value per device in V2 ...: iterating it never ends while staging\n"
        "    for x in xs:\n"
        "        y = self.proj(x)\n"
        "    for z in other:\n"
        "        w = z\n"
    )
    detail = "M: trace stopped (input types from M.input_types()); this package's L0-L4 passed 300 s: stopped"
    assert ladder.flagged(f"{f}:4", {}, detail) == "TODO"
    assert ladder.flagged(f"{f}:6", {}, detail) == ""  # another loop
    assert ladder.flagged(f"{f}:4", {}, "M: trace M: TypeError: x") == ""  # not a stop


def test_a_trace_past_its_deadline_raises_and_the_callers_timer_is_put_back() -> None:
    import signal
    import time

    from migrate_v3.verify import ladder as verify_ladder

    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    signal.setitimer(signal.ITIMER_REAL, 30)
    try:
        with pytest.raises(verify_ladder.TraceTimeout):
            with verify_ladder._trace_deadline(0.2):
                while True:
                    time.sleep(0.01)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25 < left <= 30  # the caller's deadline, less the time the block took
        with verify_ladder._trace_deadline(0.2):
            pass  # (a block that ends in time raises nothing)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not fired


def test_both_sides_are_built_in_the_encoding_v2s_own_weight_adapter_casts_its_weights_to(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """qwen3vl_moe's adapter makes every float weight bfloat16: its model built for the float32
    encoding could not load its own checkpoint, so both sides are built in bfloat16 instead. An
    adapter that keeps the dtypes, casts to two dtypes, or to one the architecture does not
    support, changes nothing."""
    from types import SimpleNamespace
    from typing import Any

    from migrate_v3.verify import archbuild, sides
    from migrate_v3.verify import ladder as lad

    own = {"embed.weight": ((8, 4), "float32"), "norm.weight": ((4,), "float32"), "ids": ((2,), "int64")}
    monkeypatch.setattr(sides, "v2_signature", lambda module: dict(own))
    adapted: dict[str, Any] = {}
    monkeypatch.setattr(archbuild, "adapted_signature", lambda *a: dict(adapted))
    pair: Any = SimpleNamespace(entry2=SimpleNamespace(supported_encodings=["float32", "bfloat16"]),
                                adapter=lambda side: None, pipeline_config=lambda ckpt: None)
    ckpt: Any = SimpleNamespace(encoding="float32", hf_config=None)
    built2 = archbuild.Built("v2", "M")
    built2.roots = [archbuild.Capture(None, (), {})]

    adapted.update({**own, "embed.weight": ((8, 4), "bfloat16"), "norm.weight": ((4,), "bfloat16")})
    assert lad._adapted_encoding(pair, ckpt, None, built2) == "bfloat16"
    adapted.update(own)  # the adapter keeps them
    assert lad._adapted_encoding(pair, ckpt, None, built2) is None
    adapted.update({"embed.weight": ((8, 4), "bfloat16"), "norm.weight": ((4,), "float16")})  # two dtypes
    assert lad._adapted_encoding(pair, ckpt, None, built2) is None
    adapted.update({"norm.weight": ((4,), "float16"), "embed.weight": ((8, 4), "float16")})  # unsupported
    assert lad._adapted_encoding(pair, ckpt, None, built2) is None


def test_a_failure_inside_a_class_migrate_v3_added_is_placed_at_the_call_that_reached_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``MaskedAttentionWithRope.__init__`` (emitted) raising for want of ``layer_idx`` is the
    user's call's failure: that call carries the TODO; the helper's line carries none."""
    from migrate_v3.verify import archbuild

    (tmp_path / "emitted_mod.py").write_text(
        "class Helper:\n"
        '    """A helper; added by migrate-v3."""\n\n'
        "    def __init__(self, **kwargs):\n"
        "        raise TypeError('missing layer_idx')\n\n\n"
        "class User:\n"
        "    def __init__(self):\n"
        "        self.attn = Helper()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import emitted_mod  # type: ignore[import-not-found]

    with pytest.raises(TypeError) as caught:
        emitted_mod.User()
    where = archbuild.failure("construct", caught.value, (tmp_path,)).where
    assert where == f"{tmp_path / 'emitted_mod.py'}:10"  # the call, not the helper's line 5
    with pytest.raises(TypeError) as alone:
        emitted_mod.Helper()
    assert archbuild.failure("construct", alone.value, (tmp_path,)).where.endswith("emitted_mod.py:5")


def test_a_migrated_pipeline_model_that_is_or_builds_on_a_v2_one_is_named_at_its_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gemma4_assistant's migrated arch.py registers V2 gemma4's pipeline model (MV301 kept the
    import, with its TODO); diffusion_gemma's subclasses it: the V3 load path builds V2 modules,
    and the stop is placed at that import. A V3 package's own model is none."""
    import types
    from types import SimpleNamespace

    from migrate_v3.verify import ladder as lad

    (tmp_path / "arch.py").write_text("from x import SupportedArchitecture\nfrom ..gemma4.model import Base\n")
    (tmp_path / "model.py").write_text('"""Doc."""\n\nfrom ..gemma4.model import Base\n')
    for name, file in (("archs.p_modulev3.arch", "arch.py"), ("archs.p_modulev3.model", "model.py")):
        module = types.ModuleType(name)
        module.__file__ = str(tmp_path / file)
        monkeypatch.setitem(sys.modules, name, module)
    base = type("Base", (), {"__module__": "archs.gemma4.model"})
    sub = type("Sub", (base,), {"__module__": "archs.p_modulev3.model"})
    own = type("Own", (), {"__module__": "archs.p_modulev3.model"})

    def pair(model: type) -> lad._Pair:
        return lad._Pair(None, SimpleNamespace(pipeline_model=model), ("max.pipelines.architectures", "archs"), (),
                         tmp_path, "archs.p_modulev3")

    assert pair(base).v2_pipeline_model() == ("Base", f"{tmp_path / 'arch.py'}:2")
    assert pair(sub).v2_pipeline_model() == ("Base", f"{tmp_path / 'model.py'}:3")
    assert pair(own).v2_pipeline_model() is None


def test_a_container_root_is_traced_through_the_parts_both_sides_have() -> None:
    """A root whose call only raises ``NotImplementedError`` on both sides (``Qwen3VL``: "a
    container class") is traced through its parts; a root with a forward of its own is not."""
    from max.dtype import DType
    from max.experimental import functional as F
    from max.experimental.nn import Linear, Module
    from max.graph import DeviceRef
    from max.nn import Linear as V2Linear
    from max.nn import Module as V2Module

    from migrate_v3.verify.ladder import container_parts

    class Container3(Module):  # type: ignore[type-arg]
        def __init__(self) -> None:
            super().__init__()
            self.vision = Linear(2, 2)
            self.language = Linear(2, 3)

        def forward(self, *args: object) -> object:
            """Not meant to be called."""
            raise NotImplementedError("a container class: call vision or language")

    class Plain3(Container3):
        def forward(self, *args: object) -> object:
            return args[0]

    class Container2(V2Module):
        def __init__(self) -> None:
            super().__init__()
            self.vision = V2Linear(2, 2, DType.float32, DeviceRef.CPU())
            self.language = V2Linear(2, 3, DType.float32, DeviceRef.CPU())

        def __call__(self, *args: object) -> object:
            raise NotImplementedError

    with F.lazy():
        v3, plain = Container3(), Plain3()
    v2 = Container2()
    parts = container_parts(v3, v2)
    assert [(name, p3, p2) for name, p3, p2 in parts] == [
        ("vision", v3.vision, v2.vision), ("language", v3.language, v2.language)]
    assert container_parts(plain, v2) == []
