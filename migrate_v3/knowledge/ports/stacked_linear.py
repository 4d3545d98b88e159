from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Linear, TransparentModule
from max.experimental.tensor import Tensor, default_dtype


def _weights_in(dtype: DType | None) -> AbstractContextManager[Any]:
    """Build under ``dtype`` when the caller gave one, else under the default dtype."""
    return default_dtype(dtype) if dtype is not None else nullcontext()


class StackedLinear(TransparentModule[[Tensor], Tensor]):
    """V3 port of V2 ``max.nn.StackedLinear``; added by migrate-v3.

    Same constructor, call and checkpoint names as V2. Unfused
    (``stacked=False``): one V3 ``Linear`` child per name, and the module is
    name-transparent, so the children's weights are ``<parent>.<name>.weight``
    as V2 keyed them; the call is one matmul over their concatenated weights.
    Stacked (``stacked=True``): one ``weight`` (and ``bias``) under the
    module's own attribute. The weights get ``dtype`` (the default dtype when
    None); ``device`` is unused (V3 places weights by the default device).
    V2's quantized forms (``quant_config``) and other ``linear_cls`` classes
    are refused, not ported.
    """

    def __init__(
        self,
        in_dim: int,
        out_dims: Sequence[int],
        names: Sequence[str],
        dtype: DType | None = None,
        device: Any = None,
        stacked: bool = False,
        has_bias: bool = False,
        linear_cls: Callable[..., Any] = Linear,
        quant_config: Any = None,
        clip_weight: float | None = None,
    ) -> None:
        del device
        if quant_config is not None:
            raise NotImplementedError("the migrate-v3 port of StackedLinear has no quantized form (quant_config)")
        if linear_cls is not Linear:
            raise NotImplementedError(f"the migrate-v3 port of StackedLinear builds V3 Linears, not {linear_cls!r}")
        if stacked and clip_weight:
            raise ValueError("clip_weight is not yet supported with stacked=True.")
        if stacked and has_bias:
            raise ValueError("Bias is not supported with stacked_qkv.")
        self._names = list(names)
        self._stacked = stacked
        self._has_bias = has_bias
        self._clip_weight = clip_weight
        self.name_transparent = not stacked
        with _weights_in(dtype):
            if stacked:
                self.weight = Tensor.zeros([sum(out_dims), in_dim])
            else:
                for name, out_dim in zip(names, out_dims, strict=True):
                    setattr(self, name, Linear(in_dim, out_dim, bias=has_bias))

    @property
    def stacked_weight(self) -> Tensor:
        """The children's weights concatenated (clamped with ``clip_weight``), or the one stacked weight."""
        if self._stacked:
            return self.weight
        weights = [getattr(self, n).weight for n in self._names]
        if self._clip_weight:
            weights = [F.clip(w, -self._clip_weight, self._clip_weight) for w in weights]
        return F.concat(weights, axis=0)

    @property
    def stacked_bias(self) -> Tensor | None:
        """The children's biases concatenated, or None without a bias."""
        if not self._has_bias:
            return None
        return F.concat([getattr(self, n).bias for n in self._names], axis=0)

    def forward(self, x: Tensor) -> Tensor:
        """``x @ stacked_weight.T`` (+ the stacked bias)."""
        result = x @ self.stacked_weight.to(x.device).T
        bias = self.stacked_bias
        return result if bias is None else result + bias.to(x.device)
