from __future__ import annotations

from max.experimental.tensor import Tensor
from max.nn.transformer import ReturnHiddenStates, ReturnLogits

from migrate_v3.knowledge.ports.logits_postprocess import logits_postprocess


class LogitsPostprocessMixin:
    """V3 port of V2 ``max.nn.transformer.transformer.LogitsPostprocessMixin``; added by migrate-v3.

    Same attributes (``norm``, ``lm_head``, ``return_logits``,
    ``return_hidden_states``, ``logits_scaling``) and method as V2, on Tensors
    (the port of ``logits_postprocess`` does the work), so a V3 ``forward`` that
    returns ``self._postprocess_logits(...)`` returns Tensors, not V2's graph
    values, which a staged V3 graph refuses.
    """

    return_logits: ReturnLogits
    return_hidden_states: ReturnHiddenStates = ReturnHiddenStates.NONE
    logits_scaling: float = 1.0

    def _postprocess_logits(
        self,
        h: Tensor,
        input_row_offsets: Tensor,
        return_n_logits: Tensor,
        capture_hidden_states: list[list[Tensor]] | None = None,
    ) -> tuple[Tensor, ...]:
        return logits_postprocess(
            h,
            input_row_offsets,
            return_n_logits,
            norm=self.norm,  # type: ignore[attr-defined]
            lm_head=self.lm_head,  # type: ignore[attr-defined]
            return_logits=self.return_logits,
            return_hidden_states=self.return_hidden_states,
            logits_scaling=self.logits_scaling,
            capture_hidden_states=capture_hidden_states,
        )
