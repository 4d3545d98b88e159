from __future__ import annotations

from typing import Any, Literal

from max.dtype import DType
from max.experimental import functional as F
from max.experimental.nn import Module
from max.experimental.tensor import Tensor
from max.graph.type import FilterLayout


class Conv1D(Module[[Tensor], Tensor]):
    """V3 port of V2 ``max.nn.conv.Conv1D``; added by migrate-v3.

    Same constructor, call and checkpoint names as V2: the filter is the
    parameter ``weight`` (V2 named its ``filter`` Weight ``"weight"``; ``filter``
    still reads it), shaped ``(kernel_size, in_channels / num_groups,
    out_channels)``, or PyTorch's ``(out_channels, in_channels / num_groups,
    kernel_size)`` with ``permute=True``; the optional ``bias`` is
    ``(out_channels,)``. ``dtype`` is kept (V3 ``Conv2d`` takes one too; None
    means the default dtype); ``device`` is unused (the weights follow the
    input's device, as in V3 ``Conv2d``). V2's ``name=`` prefixed the
    checkpoint keys, which V3 cannot do (its keys are attribute paths), so it
    is refused. Convolves as V2 did: a 2D convolution over a height-1 image.
    """

    def __init__(
        self,
        kernel_size: int,
        in_channels: int,
        out_channels: int,
        dtype: DType | None = None,
        stride: int = 1,
        padding: int | tuple[int, int] = 0,
        dilation: int = 1,
        num_groups: int = 1,
        device: Any = None,
        has_bias: bool = False,
        permute: bool = False,
        name: str | None = None,
    ) -> None:
        if name is not None:
            raise ValueError(
                f"Conv1D(name={name!r}): V2 keyed its weights '{name}.weight'; V3 keys are attribute "
                "paths: drop name= and map the checkpoint key in the weight adapter"
            )
        in_per_group = in_channels // num_groups
        shape = [out_channels, in_per_group, kernel_size] if permute else [kernel_size, in_per_group, out_channels]
        self.weight = Tensor.zeros(shape, dtype=dtype)
        self.bias: Tensor | Literal[0] = Tensor.zeros([out_channels], dtype=dtype) if has_bias else 0
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = (padding, padding) if isinstance(padding, int) else padding
        self.dilation = dilation
        self.num_groups = num_groups
        self.permute = permute

    @property
    def filter(self) -> Tensor:
        """The filter weight under its V2 attribute name (V3 keys it ``weight``)."""
        return self.weight

    def forward(self, x: Tensor) -> Tensor:
        """``[batch, length, in_channels]`` → ``[batch, new_length, out_channels]``
        (channels first on both sides with ``permute=True``)."""
        weight = self.weight.to(x.device)
        bias = self.bias.to(x.device) if isinstance(self.bias, Tensor) else None
        if self.permute:
            x = F.permute(x, [0, 2, 1])
            weight = F.unsqueeze(weight, 2)  # FCS → FCRS
        else:
            weight = F.unsqueeze(weight, 0)  # SCF → RSCF
        pad_left, pad_right = self.padding
        out = F.conv2d(
            F.unsqueeze(x, 1),
            weight,
            (1, self.stride),
            (1, self.dilation),
            (0, 0, pad_left, pad_right),
            self.num_groups,
            bias,
            filter_layout=FilterLayout.FCRS if self.permute else FilterLayout.RSCF,
        )
        out = F.squeeze(out, 1)
        return F.permute(out, [0, 2, 1]) if self.permute else out
