from __future__ import annotations

from max.experimental import functional as F
from max.experimental.nn.common_layers.attention import AttentionWithRope
from max.experimental.nn.common_layers.functional_kernels import rope_split_store_ragged
from max.experimental.nn.norm.rms_norm import rms_norm
from max.experimental.tensor import Tensor
from max.nn.kv_cache import PagedCacheValues


def materialize_kv_from_hidden(
    attention: AttentionWithRope,
    layer_idx: Tensor,
    hidden: Tensor,
    kv_collection: PagedCacheValues,
    freqs_cis: Tensor,
    input_row_offsets: Tensor,
) -> None:
    """V3 port of V2 ``AttentionWithRope.materialize_kv_from_hidden``, a method V3's layer lacks;
    added by migrate-v3.

    Projects ``hidden`` to K/V with ``attention``'s weights (its q/k norms applied as its
    ``forward`` applies them) and writes them into the paged cache at ``layer_idx``:
    speculative drafts build their cache from the target's hidden states.
    """
    qkv = attention.qkv_proj(hidden)
    if attention.use_qk_norm:
        head_dim = attention.kv_params.head_dim
        q_dim = attention.n_heads * head_dim
        kv_dim = attention.num_key_value_heads * head_dim
        x_q, x_k, x_v = qkv.split([q_dim, kv_dim, kv_dim], axis=-1)
        x_q = rms_norm(x_q.reshape((-1, attention.n_heads, head_dim)), attention.q_norm_weight, attention.rms_norm_eps)
        x_k = rms_norm(
            x_k.reshape((-1, attention.num_key_value_heads, head_dim)), attention.k_norm_weight, attention.rms_norm_eps
        )
        qkv = F.concat([x_q.reshape((-1, q_dim)), x_k.reshape((-1, kv_dim)), x_v], axis=-1)
    rope_split_store_ragged(
        kv_params=attention.kv_params,
        qkv=qkv,
        input_row_offsets=input_row_offsets,
        freqs_cis=F.cast(freqs_cis, qkv.dtype).to(qkv.device),
        kv_collection=kv_collection,
        layer_idx=layer_idx,
        n_heads=attention.n_heads,
        interleaved=attention.rope.interleaved,
    )
