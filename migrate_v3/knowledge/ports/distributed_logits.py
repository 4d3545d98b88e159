from __future__ import annotations

from typing import Any

from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.sharding import DeviceMapping
from max.experimental.tensor import Tensor
from max.nn.transformer import ReturnHiddenStates, ReturnLogits


class DistributedLogitsPostprocessMixin:
    """V3 port of V2 ``max.nn.transformer.distributed_transformer.DistributedLogitsPostprocessMixin``; added by migrate-v3.

    Same method and attributes as V2 (``lm_head``, ``return_logits``,
    ``logits_scaling``, ``logit_softcapping``), on one distributed Tensor
    instead of per-device lists: the final norm is ``self.norm`` (V2 kept
    per-device ``norm_shards`` of it), the logits come back Replicated (V2
    allgathered them). ``signal_buffers`` are accepted and unused; hidden-state
    outputs are not ported.
    """

    return_logits: ReturnLogits
    return_hidden_states: ReturnHiddenStates = ReturnHiddenStates.NONE
    logits_scaling: float = 1.0
    logit_softcapping: float | None = None

    def _logits_of(self, h: Tensor) -> Tensor:
        norm = getattr(self, "norm", None)
        logits = self.lm_head(norm(h) if norm is not None else h)  # type: ignore[attr-defined]
        return F.cast(F.transfer_to(logits, DeviceMapping.replicated(logits.mesh)), DType.float32)

    def _postprocess_logits(
        self,
        h: Tensor,
        input_row_offsets: Tensor,
        return_n_logits: Tensor,
        signal_buffers: Any = None,
        capture_hidden_states: Any = None,
    ) -> tuple[Tensor, ...]:
        if capture_hidden_states or self.return_hidden_states != ReturnHiddenStates.NONE:
            raise NotImplementedError("the migrate-v3 port of DistributedLogitsPostprocessMixin returns logits only")
        last_logits = self._logits_of(F.gather(h, input_row_offsets[1:] - 1, axis=0))
        logits: Tensor | None = None
        offsets: Tensor | None = None
        if self.return_logits == ReturnLogits.VARIABLE:
            return_n_logits_range = F.arange(
                return_n_logits[0], 0, -1, out_dim="return_n_logits_range", device=CPU(), dtype=DType.int64
            ).to(input_row_offsets.mesh)
            last_indices = F.reshape(F.unsqueeze(input_row_offsets[1:], -1) - return_n_logits_range, shape=(-1,))
            logits = self._logits_of(F.gather(h, last_indices, axis=0))
            offsets = F.arange(
                0,
                last_indices.shape[0] + return_n_logits[0],
                return_n_logits[0],
                out_dim="logit_offsets",
                device=CPU(),
                dtype=DType.int64,
            )
        elif self.return_logits == ReturnLogits.ALL:
            logits = self._logits_of(h)
            offsets = input_row_offsets
        if self.logits_scaling != 1.0:
            last_logits = last_logits / self.logits_scaling
            if logits is not None:
                logits = logits / self.logits_scaling
        if self.logit_softcapping is not None:
            cap = self.logit_softcapping
            last_logits = F.tanh(last_logits / cap) * cap
            if logits is not None:
                logits = F.tanh(logits / cap) * cap
        if offsets is None:
            return (last_logits,)
        assert logits is not None
        return (last_logits, logits, offsets)
