r"""The convolutional block's fast path: the convolution as one matrix product over
windows.

:class:`~convs2s_edu.ConvBlock` convolves with :class:`torch.nn.Conv1d`, which reads its
input channels first. :class:`FastConvBlock` computes the same :math:`[A\ B] = W * X +
b_w` in the paper's own shape for the kernel (§3.2: "Each convolution kernel is
parameterized as :math:`W \in \mathbb{R}^{2d \times kd}`"): output :math:`i` is
:math:`W X_i + b_w`, with :math:`X_i = [x_i; x_{i+1}; \dots; x_{i+k-1}] \in
\mathbb{R}^{kd}` the window of :math:`k` inputs that it sees, so all :math:`B \cdot T`
outputs are one product of a :math:`(BT, kd)` matrix of windows with :math:`W^\top`. The
parameters are the module's own ``conv.weight`` :math:`(2d, d, k)` (laid out as
:math:`(2d, kd)` in the windows' order) and ``conv.bias``, so weight normalisation and
checkpoints are unchanged.

Whether this is faster than :func:`torch.nn.functional.conv1d` depends on the CPU's
convolution kernels against its matrix products; the site's appendix page on the fast
paths measures it on the machine that built the site.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..convs2s import ConvBlock

__all__ = ["FastConvBlock"]


class FastConvBlock(ConvBlock):
    """:class:`~convs2s_edu.ConvBlock` whose :meth:`~convs2s_edu.ConvBlock.convolve` is
    one matrix product over the :math:`k`-wide windows of its input (the module
    docstring). Same parameters, same function."""

    def convolve(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, T + k - 1, d)``, already padded -> ``(B, T, 2d)``."""
        k = self.kernel_size
        T = x.shape[1] - k + 1
        # X_i = [x_i; x_{i+1}; ...; x_{i+k-1}]: the window that output i sees
        windows = torch.cat([x[:, j : j + T] for j in range(k)], dim=-1)  # (B, T, k d)
        # W (2d, d, k) laid out as (2d, k d), in the windows' order
        W = self.conv.weight.transpose(1, 2).flatten(1)
        # [A B] = W X_i + b_w for every i at once
        return F.linear(windows, W, self.conv.bias)  # (B, T, 2d)
