r"""Dropout's fast path: the mask drawn from 16-bit random numbers, four from each
64-bit draw.

:class:`torch.nn.Dropout` draws one random number per element
(:meth:`torch.Tensor.bernoulli_`), and on a CPU that draw is most of what a dropout
costs: at the site's sizes it cost about as much as the largest matrix product of the
block the dropout feeds. :class:`FastDropout` computes the same function from a quarter
as many draws: one 64-bit random integer gives four 16-bit ones, and an element is kept
when its 16-bit number clears a threshold. The site's appendix page on the fast paths
measures what the fast paths together buy on the machine that built it.

Departure, said plainly: the probability of dropping is :math:`p` rounded to a
multiple of :math:`1/65536` (``0.1`` becomes :math:`6554/65536 = 0.100006`), and the
masks differ from :class:`torch.nn.Dropout`'s for the same seed, so a run on the fast
paths follows another random path than one on the reference (as runs on two
machines do). PyTorch offers no cheaper mask on a CPU: :func:`torch.rand_like` costs
half of ``bernoulli_``, and the kernels :func:`torch.compile` generates to draw random
numbers cost more than ``bernoulli_`` (measured on a Xeon, the site's sizes).

The random numbers are drawn by one custom operator, ``convs2s_edu::random_bits16``,
so that :func:`torch.compile` treats the draw as opaque: it does not break the compiled
graph (``random_`` over the full 64-bit range in ``forward`` would), and the backward
pass multiplies by the very mask the forward pass drew. The operator is tagged as a
random one (``torch.Tag.nondeterministic_seeded``), as PyTorch's own random operators
are, which tells the compiler not to merge two draws or recompute one.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FastDropout", "keep_mask", "random_bits16"]

#: The random integers a mask compares: 16 bits, so :math:`p` is kept to 1/65536.
LEVELS = 2**16


@torch.library.custom_op(
    "convs2s_edu::random_bits16",
    mutates_args=(),
    tags=(torch.Tag.nondeterministic_seeded,),
)
def random_bits16(x: torch.Tensor) -> torch.Tensor:
    """Uniform random 16-bit integers (``torch.int16``, -32768 to 32767) of ``x``'s
    shape, drawn from PyTorch's default generator: four from each 64-bit draw."""
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device)
    words.random_(-(2**63), None)  # the full 64-bit range
    return words.view(torch.int16)[:n].view(x.shape)


@random_bits16.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, dtype=torch.int16)


def keep_mask(x: torch.Tensor, p: float) -> torch.Tensor:
    """A boolean tensor of ``x``'s shape, each entry ``True`` (keep) with probability
    :math:`1 - p`, :math:`p` rounded to a multiple of 1/65536."""
    # P(bits < threshold) = round(p * 65536) / 65536: those are dropped
    threshold = round(p * LEVELS) - LEVELS // 2
    # the comparison outside the operator: a compiled model fuses it with the product
    return random_bits16(x) >= threshold


class FastDropout(nn.Dropout):
    """:class:`torch.nn.Dropout` with its mask from :func:`keep_mask` (the module
    docstring): in training, each element is zeroed with probability :math:`p` and the
    others are scaled by :math:`1/(1-p)`; in evaluation, the identity. Same parameters
    (none), same function in distribution."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.p == 1.0:
            return x * 0.0
        keep = keep_mask(x.detach(), self.p)  # (x's shape), no gradient of its own
        return x * keep * (1.0 / (1.0 - self.p))
