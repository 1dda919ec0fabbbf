"""``convs2s_edu.fast.conv``: the convolution as one matrix product over windows.

:class:`FastConvBlock` must be :class:`~convs2s_edu.ConvBlock` (whose convolution is
:class:`torch.nn.Conv1d`) in values and gradients, in a block's forward and in a causal
step, with and without weight normalisation; and a whole ConvS2S switched to it must give
the reference's logits, attention and gradients.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from convs2s_edu import ConvBlock, ConvS2S, ConvS2SConfig, sequence_loss
from convs2s_edu.fast import FastConvBlock, use_fast_paths

pytestmark = pytest.mark.usefixtures("single_thread")


def _randomise(module: torch.nn.Module) -> None:
    """Biases start at zero and weight-norm gains at the weights' norms: move both, so that
    a fast path that dropped a bias or read the raw direction would show."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias") or name.endswith("original0"):
                p.add_(torch.rand_like(p))


@pytest.mark.parametrize("weight_norm", [False, True], ids=["plain", "weight_norm"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "centred"])
@pytest.mark.parametrize("kernel_size", [1, 3, 5])
def test_the_window_convolution_is_the_blocks_conv1d_in_values_and_gradients(
    kernel_size, causal, weight_norm
):
    torch.manual_seed(0)
    B, T, d = 3, 7, 4
    block = ConvBlock(d, kernel_size, causal=causal, weight_norm=weight_norm).double()
    _randomise(block)
    x = torch.randn(B, T, d, dtype=torch.double, requires_grad=True)
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[1, 5:] = True  # a padded row
    w = torch.randn(B, T, d, dtype=torch.double)
    wrt = [x, *block.parameters()]

    def run():
        y = block(x, padding_mask=mask)
        return y.detach(), torch.autograd.grad((y * w).sum(), wrt)

    reference = run()
    use_fast_paths(block)
    assert type(block) is FastConvBlock
    fast = run()
    assert_close(fast[0], reference[0])
    for a, b in zip(fast[1], reference[1]):
        assert_close(a, b)


def test_a_fast_causal_step_is_the_reference_step():
    torch.manual_seed(0)
    block = ConvBlock(4, 3, causal=True, weight_norm=True).eval()
    _randomise(block)
    x_t, window = torch.randn(2, 1, 4), torch.randn(2, 2, 4)
    reference = block.step(x_t, window)
    assert_close(use_fast_paths(block).step(x_t, window), reference)


def test_the_fast_convs2s_is_the_reference_in_values_and_gradients():
    torch.manual_seed(0)
    cfg = ConvS2SConfig.paper(
        vocab_size=10, embed_dim=8, hidden_dim=6, n_encoder_layers=2, n_decoder_layers=2,
        dropout=0.0,
    )  # fmt: skip
    model = ConvS2S(cfg).double()
    _randomise(model)
    src = torch.tensor([[4, 5, 6, 7], [8, 9, 0, 0]])
    tgt_in = torch.tensor([[11, 4, 5, 6, 7], [11, 8, 9, 0, 0]])
    tgt_out = torch.tensor([[4, 5, 6, 7, 12], [8, 9, 12, 0, 0]])

    def run():
        model.zero_grad()
        logits, attention = model(src, tgt_in, return_attention=True)
        sequence_loss(logits, tgt_out).backward()
        return logits.detach(), attention.detach(), [p.grad.clone() for p in model.parameters()]

    reference = run()
    use_fast_paths(model)
    assert sum(type(m) is FastConvBlock for m in model.modules()) == 4
    fast = run()
    assert_close(fast[0], reference[0])
    assert_close(fast[1], reference[1])
    for a, b in zip(fast[2], reference[2]):
        assert_close(a, b)
