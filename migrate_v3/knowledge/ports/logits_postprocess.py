from __future__ import annotations

from collections.abc import Callable

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.tensor import Tensor
from max.nn.transformer import ReturnHiddenStates, ReturnLogits


def logits_postprocess(
    h: Tensor,
    input_row_offsets: Tensor,
    return_n_logits: Tensor,
    norm: Callable[[Tensor], Tensor],
    lm_head: Callable[[Tensor], Tensor],
    return_logits: ReturnLogits,
    return_hidden_states: ReturnHiddenStates = ReturnHiddenStates.NONE,
    logits_scaling: float = 1.0,
    capture_hidden_states: list[list[Tensor]] | None = None,
) -> tuple[Tensor, ...]:
    """V3 port of V2 ``max.nn.transformer.logits_postprocess`` (single device); added by migrate-v3.

    Same parameters and outputs: ``(last_logits[, logits, offsets])`` then the
    hidden states ``return_hidden_states`` asks for (one device: one entry each).
    """
    last_h = F.gather(h, input_row_offsets[1:] - 1, axis=0)
    last_logits = F.cast(lm_head(norm(last_h)), DType.float32)
    logits: Tensor | None = None
    offsets: Tensor | None = None
    if return_logits == ReturnLogits.VARIABLE:
        return_n_logits_range = F.arange(
            return_n_logits[0], 0, -1, out_dim="return_n_logits_range", device=h.device, dtype=DType.int64
        )
        offsets = F.unsqueeze(input_row_offsets[1:], -1) - return_n_logits_range
        last_indices = F.reshape(offsets, shape=(-1,))
        logits = F.cast(lm_head(norm(F.gather(h, last_indices, axis=0))), DType.float32)
        offsets = F.arange(
            0,
            last_indices.shape[0] + return_n_logits[0],
            return_n_logits[0],
            out_dim="logit_offsets",
            device=h.device,
            dtype=DType.int64,
        )
    elif return_logits == ReturnLogits.ALL:
        logits = F.cast(lm_head(norm(h)), DType.float32)
        offsets = input_row_offsets
    if logits_scaling != 1.0:
        last_logits = last_logits / logits_scaling
        if logits is not None:
            logits = logits / logits_scaling
    out: tuple[Tensor, ...] = (last_logits,)
    if offsets is not None:
        assert logits is not None
        out += (logits, offsets)
    if return_hidden_states in (ReturnHiddenStates.LAST, ReturnHiddenStates.LAST_PER_DEVICE):
        out += (last_h,)
    elif return_hidden_states == ReturnHiddenStates.ALL:
        out += (h,)
    elif return_hidden_states == ReturnHiddenStates.ALL_NORMALIZED:
        out += (norm(h),)
    elif return_hidden_states == ReturnHiddenStates.SELECTED_LAYERS:
        assert capture_hidden_states
        out += tuple(hs for layer_hs in capture_hidden_states for hs in layer_hs)
    return out
