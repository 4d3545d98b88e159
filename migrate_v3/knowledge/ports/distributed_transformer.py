from __future__ import annotations

from typing import Any

from max.driver import CPU
from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.nn.sequential import ModuleList
from max.experimental.sharding import DeviceMapping
from max.experimental.tensor import Tensor
from max.nn.transformer import ReturnLogits


class DistributedTransformer(Module[..., tuple[Tensor, ...]]):
    """V3 port of V2 ``max.nn.transformer.DistributedTransformer``; added by migrate-v3.

    Same constructor, call convention and attribute names (so the same weight
    names) as V2. Build it under ``default_device(mesh)``: the inputs are
    moved onto the mesh of the embedding's weight, every layer runs once on
    distributed Tensors, and the logits come back Replicated (V2 allgathered
    them). ``devices``, ``signal_buffers`` and the subgraph options are
    accepted and unused. Hidden-state outputs are not ported.
    """

    def __init__(
        self,
        dim: int,
        n_heads: int,
        layers: list[Any],
        norm: Any,
        output: Any,
        embedding: Any,
        kv_params: Any,
        devices: Any,
        rope: Any,
        return_logits: ReturnLogits = ReturnLogits.LAST_TOKEN,
        use_subgraphs: bool = False,
        subgraph_layer_groups: list[list[int]] | None = None,
        logits_scaling: float = 1.0,
    ) -> None:
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.layers = ModuleList(layers)
        self.norm = norm
        self.lm_head = output
        self.embed_tokens = embedding
        self.kv_params = kv_params
        self.rope = rope
        self.return_logits = return_logits
        self.logits_scaling = logits_scaling

    def _logits(self, h: Tensor) -> Tensor:
        if self.lm_head is None:  # tied: V2 aliased the head's weight to the embedding's
            logits = self.norm(h) @ self.embed_tokens.weight.T
        else:
            logits = self.lm_head(self.norm(h))
        return F.cast(F.transfer_to(logits, DeviceMapping.replicated(logits.mesh)), DType.float32)

    def forward(
        self,
        tokens: Tensor,
        signal_buffers: Any,
        kv_collections: Any,
        return_n_logits: Tensor,
        input_row_offsets: Tensor,
    ) -> tuple[Tensor, ...]:
        mesh = self.embed_tokens.weight.mesh
        tokens = tokens.to(mesh)
        input_row_offsets = input_row_offsets.to(mesh)
        freqs_cis = self.rope.freqs_cis.to(mesh)
        h = self.embed_tokens(tokens)
        for idx, layer in enumerate(self.layers):
            h = layer(
                F.constant(idx, DType.uint32, device=CPU()),
                h,
                signal_buffers,
                kv_collections,
                freqs_cis,
                input_row_offsets,
            )
        last_logits = self._logits(F.gather(h, input_row_offsets[1:] - 1, axis=0))
        logits: Tensor | None = None
        offsets: Tensor | None = None
        if self.return_logits == ReturnLogits.VARIABLE:
            return_n_logits_range = F.arange(
                return_n_logits[0], 0, -1, out_dim="return_n_logits_range", device=CPU(), dtype=DType.int64
            ).to(mesh)
            offsets = F.unsqueeze(input_row_offsets[1:], -1) - return_n_logits_range
            last_indices = F.reshape(offsets, shape=(-1,))
            logits = self._logits(F.gather(h, last_indices, axis=0))
            offsets = F.arange(
                0,
                last_indices.shape[0] + return_n_logits[0],
                return_n_logits[0],
                out_dim="logit_offsets",
                device=CPU(),
                dtype=DType.int64,
            )
        elif self.return_logits == ReturnLogits.ALL:
            logits = self._logits(h)
            offsets = input_row_offsets
        if self.logits_scaling != 1.0:
            last_logits = last_logits / self.logits_scaling
            if logits is not None:
                logits = logits / self.logits_scaling
        if offsets is None:
            return (last_logits,)
        assert logits is not None
        return (last_logits, logits, offsets)
