r"""The training loss both models minimise: token-level cross-entropy, padding excluded."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .data import PAD

__all__ = ["sequence_loss"]


def sequence_loss(
    logits: torch.Tensor, tgt_out: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    r"""Token-level cross-entropy, padding excluded.

    Parameters
    ----------
    logits : Tensor, shape (B, T, V)
        The decoder's scores for every target position (teacher forcing).
    tgt_out : Tensor, shape (B, T)
        The targets :math:`y_{bt}`, ``PAD`` where a row is shorter.
    reduction : {"mean", "sum"}
        ``"mean"``: divided by :math:`N`, the number of real target tokens; ``"sum"``:
        the sum (the training step, :mod:`convs2s_edu.training.step`, divides it by
        :math:`N` summed over every process of a data-parallel run).

    Returns
    -------
    Tensor
        A scalar.

    Notes
    -----
    .. math::

        \mathcal{L} = -\frac{1}{N}\sum_{b,t:\ y_{bt} \neq \text{PAD}}
                       \log p(y_{bt} \mid y_{b,<t}, x_b)

    The paper also normalises the gradient by the number of non-padding target
    tokens (Gehring et al., 2017, §4.2).
    """
    return F.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD, reduction=reduction
    )
