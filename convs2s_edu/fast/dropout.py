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

__all__ = ["FastDropout", "dropped_levels", "keep_mask", "random_bits16"]

#: The random integers a mask compares: 16 bits, so :math:`p` is kept to 1/65536.
LEVELS = 2**16


@torch.library.custom_op(
    "convs2s_edu::random_bits16",
    mutates_args=(),
    tags=(torch.Tag.nondeterministic_seeded,),
)
def _random_bits16(x: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device)
    words.random_(-(2**63), None)  # the full 64-bit range
    return words.view(torch.int16)[:n].view(x.shape)  # contiguous


@_random_bits16.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape, dtype=torch.int16)  # contiguous, as the operator's


def random_bits16(x: torch.Tensor) -> torch.Tensor:
    """Uniform random 16-bit integers (``torch.int16``, -32768 to 32767) of ``x``'s
    shape, contiguous, drawn from PyTorch's default generator: four from each 64-bit
    draw (the custom operator ``convs2s_edu::random_bits16``)."""
    return _random_bits16(x)


def dropped_levels(p: float) -> int:
    r"""How many of the 65536 values of a 16-bit number drop an element: ``round(p *
    65536)``, so that the probability of dropping is :math:`\tilde p` =
    ``dropped_levels(p) / 65536``, :math:`p` rounded to a multiple of 1/65536."""
    return round(p * LEVELS)


def keep_mask(x: torch.Tensor, p: float) -> torch.Tensor:
    r"""A boolean tensor of ``x``'s shape, each entry ``True`` (keep) with probability
    :math:`1 - \tilde p` (:func:`dropped_levels`)."""
    # the dropped_levels(p) lowest of the 65536 values drop
    threshold = dropped_levels(p) - LEVELS // 2
    # the comparison outside the operator: a compiled model fuses it with the product
    return random_bits16(x) >= threshold


class FastDropout(nn.Dropout):
    r""":class:`torch.nn.Dropout` with its mask from :func:`keep_mask` (the module
    docstring): in training, each element is zeroed with probability :math:`\tilde p`,
    :math:`p` rounded to a multiple of 1/65536 (:func:`dropped_levels`), and the others
    are scaled by :math:`1/(1-\tilde p)`, so that the expectation is the input; in
    evaluation, the identity. Same parameters (none); the same function in distribution
    up to that rounding."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dropped = dropped_levels(self.p)
        if not self.training or dropped == 0:
            return x
        if dropped == LEVELS:
            return x * 0.0
        keep = keep_mask(x.detach(), self.p)  # (x's shape), no gradient of its own
        return x * keep * (LEVELS / (LEVELS - dropped))  # 1 / (1 - p~)
