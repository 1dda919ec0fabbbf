"""``convs2s_edu.fast.dropout``: dropout with its mask from 16-bit random numbers.

:class:`FastDropout` must be :class:`torch.nn.Dropout` in distribution: each element
dropped with probability p (to 1/65536), the others scaled by 1/(1 - p), the identity in
evaluation, the gradient masked by the very mask of the forward pass; its random numbers
uniform over all 16 bits; and a compiled model must run it without a graph break and
draw the eager masks from the same seed.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from convs2s_edu.fast import FastDropout
from convs2s_edu.fast import dropout as dropout_module
from convs2s_edu.fast.dropout import keep_mask, random_bits16

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_each_element_is_dropped_with_probability_p_and_the_rest_scaled(p):
    torch.manual_seed(0)
    x = torch.rand(64, 50, 32) + 0.5  # no zeros of its own
    y = FastDropout(p).train()(x)
    n = x.numel()
    dropped = (y == 0).sum().item()
    # the binomial count: within 5 standard deviations of n p
    assert abs(dropped - n * p) < 5 * math.sqrt(n * p * (1 - p)), dropped / n
    kept = y != 0
    p_rounded = round(p * 65536) / 65536  # what is dropped; the rest scaled to keep E[y] = x
    assert_close(y[kept], x[kept] / (1 - p_rounded))


def test_the_16_bit_numbers_are_uniform_over_all_16_bits():
    """A draw that lost a bit (e.g. ``random_()``'s non-negative range), or favoured some
    values, would fail the counts of the 65536 values or of one of the 16 bits."""
    torch.manual_seed(0)
    n = 2**20
    bits = random_bits16(torch.empty(n)).long()
    assert bits.min() == -(2**15) and bits.max() == 2**15 - 1
    counts = torch.bincount(bits + 2**15, minlength=2**16).double()
    expected = n / 2**16
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    dof = 2**16 - 1  # chi-square: mean dof, standard deviation sqrt(2 dof)
    assert abs(chi2 - dof) < 5 * math.sqrt(2 * dof), chi2
    for b in range(16):  # each bit set half of the time, within 5 standard deviations
        share = ((bits + 2**15) >> b & 1).double().mean().item()
        assert abs(share - 0.5) < 5 * math.sqrt(0.25 / n), (b, share)


def test_p_rounds_to_the_nearest_multiple_of_1_over_65536(monkeypatch):
    """With every 16-bit value once, a mask drops exactly round(65536 p) of them (by
    hand: 6553.6 -> 6554 for p = 0.1), and the kept ones are scaled by 1/(1 - p~)."""
    every_value = torch.arange(-(2**15), 2**15, dtype=torch.int16)
    monkeypatch.setattr(dropout_module, "random_bits16", lambda x: every_value)
    x = torch.ones(2**16)
    for p, dropped in ((0.1, 6554), (1 / 3, 21845), (0.5, 32768), (0.99999, 65535)):
        assert (~keep_mask(x, p)).sum().item() == dropped, p
        y = FastDropout(p).train()(x)
        assert (y == 0).sum().item() == dropped, p
        assert_close(y.sum(), torch.tensor(2.0**16))  # E[y] = x: the scale of the rounded p


def test_any_number_of_elements():
    for shape in ((0,), (7,), (3, 5), (2, 3, 5)):  # none, and not a multiple of 4
        assert random_bits16(torch.empty(shape)).shape == shape
        assert FastDropout(0.5).train()(torch.ones(shape)).shape == shape


def test_evaluation_and_p_0_are_the_identity_and_p_1_drops_everything():
    x = torch.randn(4, 5, 6)
    assert FastDropout(0.3).eval()(x) is x
    assert FastDropout(0.0).train()(x) is x
    assert torch.equal(FastDropout(1.0).train()(x), torch.zeros_like(x))


def test_the_gradient_is_masked_by_the_forward_mask():
    torch.manual_seed(1)
    x = torch.rand(8, 9, 10, requires_grad=True) + 0.5
    x.retain_grad()
    y = FastDropout(0.4).train()(x)
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad != 0, y != 0)
    scale = 65536 / (65536 - round(0.4 * 65536))  # 1 / (1 - p~)
    assert_close(x.grad[y != 0], torch.full_like(x.grad[y != 0], scale))


def test_a_compiled_model_draws_the_eager_masks_without_a_graph_break():
    """The draw is one custom operator: ``random_`` over the full 64-bit range inside
    ``forward`` would break the graph. Two dropouts in a row draw the eager masks from the
    same seed, in the forward and the backward pass."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = nn.Sequential(FastDropout(0.3), nn.Linear(16, 16), FastDropout(0.3), nn.Tanh())
    compiled = torch.compile(model)
    x = (torch.rand(7, 4, 16) + 0.5).transpose(0, 1)  # (4, 7, 16), not contiguous
    outputs, grads = {}, {}
    for name, m in (("eager", model), ("compiled", compiled)):
        xi = x.clone().requires_grad_()
        torch.manual_seed(2)
        outputs[name] = m(xi)
        outputs[name].sum().backward()
        grads[name] = xi.grad
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    assert_close(outputs["compiled"], outputs["eager"])
    assert_close(grads["compiled"], grads["eager"])
