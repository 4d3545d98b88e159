from __future__ import annotations

from max.experimental.nn import Module
from max.experimental.tensor import Tensor


class Identity(Module[[Tensor], Tensor]):
    """V3 port of V2 ``max.nn.Identity``; added by migrate-v3.

    Returns its input unchanged and holds no weights (EAGLE drafts put it where
    a norm was: the target's hidden states arrive normalized).
    """

    def forward(self, x: Tensor) -> Tensor:
        return x
