"""``outputs_as_v2_tuple`` (``migrate_v3/knowledge/ports/model_outputs.py``): the fields of a
``ModuleV3Outputs`` in the order V2's text model returned them, for the modes the model runs in
(the layout of V2 ``Transformer._postprocess_logits`` + ``extract_hs``, one device)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


def _outputs(**fields: object) -> object:
    from max.pipelines.lib import ModuleV3Outputs

    return ModuleV3Outputs(**fields)  # type: ignore[arg-type]


def test_layout_follows_the_modes() -> None:
    from max.nn.transformer import ReturnHiddenStates

    from migrate_v3.knowledge.ports.model_outputs import outputs_as_v2_tuple

    last, logits, offsets, hidden = "last", "logits", "offsets", "hidden"
    plain = SimpleNamespace(return_hidden_states=ReturnHiddenStates.NONE)
    assert outputs_as_v2_tuple(plain, _outputs(next_token_logits=last)) == (last,)
    assert outputs_as_v2_tuple(plain, _outputs(next_token_logits=last, logits=logits, logit_offsets=offsets)) == (
        last, logits, offsets)
    normalized = SimpleNamespace(return_hidden_states=ReturnHiddenStates.ALL_NORMALIZED)
    full = _outputs(next_token_logits=last, logits=logits, logit_offsets=offsets, hidden_states=hidden)
    assert outputs_as_v2_tuple(normalized, full) == (last, logits, offsets, hidden)  # outputs[1], outputs[3]
    assert outputs_as_v2_tuple(normalized, _outputs(next_token_logits=last, hidden_states=hidden)) == (last, hidden)


def test_a_hidden_state_mode_the_model_does_not_return_raises() -> None:
    from max.nn.transformer import ReturnHiddenStates

    from migrate_v3.knowledge.ports.model_outputs import outputs_as_v2_tuple

    selected = SimpleNamespace(return_hidden_states=ReturnHiddenStates.SELECTED_LAYERS)
    with pytest.raises(NotImplementedError, match="SELECTED_LAYERS"):
        outputs_as_v2_tuple(selected, _outputs(next_token_logits="last", logits="l", logit_offsets="o"))
