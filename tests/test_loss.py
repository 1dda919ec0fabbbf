"""Tests of ``convs2s_edu.loss``: ``sequence_loss`` is the cross-entropy over the real target
tokens, padding masked out, checked by hand."""

import pytest
import torch

from convs2s_edu import sequence_loss
from convs2s_edu.data import PAD


def test_sequence_loss_is_the_masked_cross_entropy_by_hand():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 7)  # (B, T, V)
    tgt = torch.tensor([[1, 2, 3, 4, 5], [6, 1, PAD, PAD, PAD], [2, 2, 2, PAD, PAD]])
    logp = torch.log_softmax(logits.double(), dim=-1)
    terms = [
        -float(logp[b, t, tgt[b, t]]) for b in range(3) for t in range(5) if int(tgt[b, t]) != PAD
    ]
    assert len(terms) == 10
    assert float(sequence_loss(logits, tgt)) == pytest.approx(sum(terms) / 10, rel=1e-6)
    assert float(sequence_loss(logits, tgt, "sum")) == pytest.approx(sum(terms), rel=1e-6)
