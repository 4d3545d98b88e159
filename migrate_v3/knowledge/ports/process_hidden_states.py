from __future__ import annotations

from typing import Any

from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor
from max.nn.transformer import ReturnHiddenStates, ReturnLogits


def process_hidden_states(
    model: Any, h: Tensor, kv_collection: Any, return_n_logits: Tensor, input_row_offsets: Tensor
) -> tuple[Tensor, ...]:
    """V3 port of V2 ``Transformer._process_hidden_states`` (one device); added by migrate-v3.

    For a subclass of max's ModuleV3 ``Llama3TextModel``, which has no such
    method: its layers, final norm and head on embedded hidden states ``h``,
    as that model's ``forward`` runs them, returned as V2's tuple
    ``(next_token_logits[, logits, logit_offsets][, hidden_states])``.
    """

    def logits_of(x: Tensor) -> Tensor:
        if model.lm_head is None:  # tied: the embedding's weight, transposed
            return F.cast(x @ model.embed_tokens.weight.T, DType.float32)
        return F.cast(model.lm_head(x), DType.float32)

    for idx, layer in enumerate(model.layers):
        h = layer(F.constant(idx, DType.uint32, device=CPU()), h, kv_collection, input_row_offsets=input_row_offsets)
    last_h = F.gather(h, input_row_offsets[1:] - 1, axis=0)
    values = [logits_of(model.norm(last_h))]
    if model.return_logits == ReturnLogits.VARIABLE:
        return_n_logits_range = F.arange(
            return_n_logits[0], 0, -1, out_dim="return_n_logits_range", device=h.device, dtype=DType.int64
        )
        offsets = F.unsqueeze(input_row_offsets[1:], -1) - return_n_logits_range
        last_indices = F.reshape(offsets, shape=(-1,))
        values.append(logits_of(model.norm(F.gather(h, last_indices, axis=0))))
        values.append(F.arange(
            0, last_indices.shape[0] + return_n_logits[0], return_n_logits[0],
            out_dim="logit_offsets", device=h.device, dtype=DType.int64,
        ))
    elif model.return_logits == ReturnLogits.ALL:
        values += [logits_of(model.norm(h)), input_row_offsets]
    if model.logits_scaling != 1.0:
        values[0] = values[0] / model.logits_scaling
        if len(values) > 1:
            values[1] = values[1] / model.logits_scaling
    mode = model.return_hidden_states
    if mode in (ReturnHiddenStates.LAST, ReturnHiddenStates.LAST_PER_DEVICE):
        values.append(last_h)
    elif mode == ReturnHiddenStates.ALL:
        values.append(h)
    elif mode == ReturnHiddenStates.ALL_NORMALIZED:
        values.append(model.norm(h))
    elif mode != ReturnHiddenStates.NONE:
        # TODO(migrate-v3): MV342 this hidden-state mode is not ported (V2 captured the layers of target_layer_ids): capture them in the layer loop above
        raise NotImplementedError(f"process_hidden_states does not return hidden states for {mode}")
    return tuple(values)
