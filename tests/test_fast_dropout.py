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
    assert_close(y[kept], x[kept] / (1 - p))


def test_the_16_bit_numbers_are_uniform_over_all_16_bits():
    """A draw that lost a bit (e.g. ``random_()``'s non-negative range) would leave half
    of the values, or the sign, never drawn."""
    torch.manual_seed(0)
    bits = random_bits16(torch.empty(2**20)).long()
    counts = torch.bincount(bits + 2**15, minlength=2**16)
    assert bits.min() == -(2**15) and bits.max() == 2**15 - 1
    # every 1/16 of the range holds 1/16 of the draws, within 5 standard deviations
    sixteenths = counts.view(16, -1).sum(1).double()
    mean, sd = 2**20 / 16, math.sqrt(2**20 * (1 / 16) * (15 / 16))
    assert (sixteenths - mean).abs().max() < 5 * sd, sixteenths
    assert (bits < 0).double().mean().sub(0.5).abs() < 0.005


def test_p_rounds_to_the_nearest_multiple_of_1_over_65536():
    x = torch.empty(2**16)
    for p in (0.1, 1 / 3, 0.5):
        torch.manual_seed(3)
        bits = random_bits16(x)
        torch.manual_seed(3)  # the same numbers
        threshold = round(p * 2**16) - 2**15  # dropped: the round(p 65536) lowest values
        assert torch.equal(keep_mask(x, p), bits >= threshold)


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
    assert_close(x.grad[y != 0], torch.full_like(x.grad[y != 0], 1 / 0.6))


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
    x = torch.rand(4, 7, 16) + 0.5
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
