"""Tests of ``convs2s_edu.training.step``, the one training step: its loss is the token mean
over the real target tokens of the batch, and ``clip_norm`` bounds the gradient the optimiser
sees; both recomputed by another route (unpadded examples one at a time, a global optimiser
hook)."""

from __future__ import annotations

import math

import pytest
import torch
from _reference import nll_one_by_one
from _tiny import THREE_STEPS, tiny_config
from torch.optim.optimizer import register_optimizer_step_pre_hook

from convs2s_edu.training import RunContext, build_model, make_datasets, train

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_first_training_step_loss_is_the_padding_free_token_mean(model):
    # one step: the whole training set is the first batch, seen by the initial weights
    cfg = tiny_config(model, dropout=0.0, min_len=2, n_train=16, n_valid=24)
    result = train(cfg, progress=False)
    torch.manual_seed(cfg.seed)  # the same initial weights as train()
    initial = build_model(cfg).eval()  # dropout=0: eval and train mode agree
    examples = make_datasets(cfg)[0].examples
    assert len({len(x) for x, _ in examples}) > 1  # the batch is padded
    total, n = nll_one_by_one(initial, examples, cfg.vocab_size)
    assert result.history.step_losses[0] == pytest.approx(total / n, rel=1e-5)


def grad_norms_at_each_step(cfg) -> list[float]:
    norms = []

    def hook(optimizer, args, kwargs):
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        norms.append(math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads)))

    handle = register_optimizer_step_pre_hook(hook)
    try:
        train(cfg, progress=False)
    finally:
        handle.remove()
    return norms


def test_clip_norm_bounds_the_gradient_the_optimiser_sees():
    clip = 1e-3  # far below the norm of any real gradient here
    unclipped = grad_norms_at_each_step(tiny_config(dropout=0.0, clip_norm=None, **THREE_STEPS))
    assert len(unclipped) == 3 and min(unclipped) > 100 * clip
    clipped = grad_norms_at_each_step(tiny_config(dropout=0.0, clip_norm=clip, **THREE_STEPS))
    assert len(clipped) == 3
    for norm in clipped:  # ||g|| > c: g <- g c / ||g||, so ||g|| = c exactly
        assert norm == pytest.approx(clip, rel=1e-3)


@pytest.mark.parametrize("batching", ["random", "bucket"])
def test_the_loader_draws_its_batches_from_its_generator_alone(batching):
    dataset = make_datasets(tiny_config(n_train=32))[0]

    def batches(global_seed):
        torch.manual_seed(global_seed)  # must not matter: the generator decides
        generator = torch.Generator().manual_seed(1)
        loader = RunContext(torch.device("cpu")).loader(dataset, 8, generator, batching)
        return [batch.src.tolist() for batch in loader]

    assert batches(0) == batches(1)
