from __future__ import annotations

from typing import Any

from max.experimental.tensor import Tensor
from max.nn.transformer import ReturnHiddenStates
from max.pipelines.lib import ModuleV3Outputs


def outputs_as_v2_tuple(model: Any, outputs: ModuleV3Outputs) -> tuple[Tensor, ...]:
    """What a text model of max's ModuleV3 ports returns, laid out as its V2 tuple; added by migrate-v3.

    V2's text models (one device) returned ``(next_token_logits[, logits,
    logit_offsets][, hidden_states])``: logits and offsets with VARIABLE/ALL
    logits, hidden states when ``return_hidden_states`` asked for them. Code
    that indexes that tuple reads the same entries from this one.
    """
    values = [outputs.next_token_logits]
    if outputs.logit_offsets is not None:
        assert outputs.logits is not None
        values += [outputs.logits, outputs.logit_offsets]
    if outputs.hidden_states is not None:
        values.append(outputs.hidden_states)
    elif getattr(model, "return_hidden_states", ReturnHiddenStates.NONE) != ReturnHiddenStates.NONE:
        # TODO(migrate-v3): MV342 this V3 model returns no hidden states in the mode it was given (max's Llama3TextModel returns LAST and ALL_NORMALIZED only): return them from its forward, or use a mode it has
        raise NotImplementedError(
            f"{type(model).__name__} returns no hidden states for {model.return_hidden_states}"
        )
    return tuple(values)
