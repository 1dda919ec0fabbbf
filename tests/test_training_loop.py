"""The training loop checked against independent computations.

Each test recomputes what :func:`convs2s_edu.train.train` reports (the loss, the held-out
loss, the clipped gradient norm, the token count, the batch order) by another route:
unpadded examples one at a time, a global optimiser hook, the data set itself.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.optim.optimizer import register_optimizer_step_pre_hook

from convs2s_edu import generate_dataset, sequence_loss
from convs2s_edu.convs2s import ConvS2S, ConvS2SConfig
from convs2s_edu.data import (
    PAD,
    Batch,
    SortingDataset,
    collate_batch,
    eos_index,
    sos_index,
)
from convs2s_edu.decode import beam_search, greedy_decode
from convs2s_edu.rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from convs2s_edu.training import (
    TrainConfig,
    build_model,
    load_checkpoint,
    make_datasets,
    train,
)
from convs2s_edu.training import loop as train_mod

pytestmark = pytest.mark.usefixtures("single_thread")

TINY_OPTIONS = {
    "convs2s": {"embed_dim": 16, "hidden_dim": 16, "n_encoder_layers": 2, "n_decoder_layers": 2},
    "gru": {"embed_dim": 16, "hidden_dim": 16, "attention_dim": 16},
}


def tiny(model="convs2s", dropout=0.0, **changes):
    cfg = TrainConfig(
        model=model,
        vocab_size=10,
        min_len=2,
        max_len=6,
        n_train=48,
        n_valid=24,
        n_test=16,
        batch_size=16,
        epochs=1,
        device="cpu",
        model_options={**TINY_OPTIONS[model], "dropout": dropout},
    )
    return cfg.replace(**changes)


def nll_one_by_one(model, examples, vocab) -> tuple[float, int]:
    """Sum of -log p(y_t | y_<t, x) over every target token (<eos> included) and their number,
    each example alone and unpadded, so padding cannot enter."""
    total, n = 0.0, 0
    sos, eos = sos_index(vocab), eos_index(vocab)
    with torch.no_grad():
        for x, y in examples:
            logits = model(torch.tensor([x]), torch.tensor([[sos, *y]]))[0]  # (T, V)
            logp = F.log_softmax(logits.double(), dim=-1)
            target = [*y, eos]
            total -= sum(float(logp[t, tok]) for t, tok in enumerate(target))
            n += len(target)
    return total, n


# --------------------------------------------------------------------------
# The loss
# --------------------------------------------------------------------------


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


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_first_training_step_loss_is_the_padding_free_token_mean(model):
    # one step: the whole training set is the first batch, seen by the initial weights
    cfg = tiny(model, n_train=16)
    result = train(cfg, progress=False)
    torch.manual_seed(cfg.seed)  # the same initial weights as train()
    initial = build_model(cfg).eval()  # dropout=0: eval and train mode agree
    examples = make_datasets(cfg)[0].examples
    assert len({len(x) for x, _ in examples}) > 1  # the batch is padded
    total, n = nll_one_by_one(initial, examples, cfg.vocab_size)
    assert result.history.step_losses[0] == pytest.approx(total / n, rel=1e-5)


# --------------------------------------------------------------------------
# Gradient clipping
# --------------------------------------------------------------------------


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
    unclipped = grad_norms_at_each_step(tiny(clip_norm=None))
    assert len(unclipped) == 3 and min(unclipped) > 100 * clip
    clipped = grad_norms_at_each_step(tiny(clip_norm=clip))
    assert len(clipped) == 3
    for norm in clipped:  # ||g|| > c: g <- g c / ||g||, so ||g|| = c exactly
        assert norm == pytest.approx(clip, rel=1e-3)


# --------------------------------------------------------------------------
# Held-out loss, data splits, shuffling, tokens/s
# --------------------------------------------------------------------------


def test_valid_loss_is_the_eval_mode_token_weighted_mean(monkeypatch):
    monkeypatch.setattr(train_mod, "VALID_BATCH_SIZE", 5)  # several batches of unequal size
    cfg = tiny("convs2s", dropout=0.5, n_valid=23)
    result = train(cfg, progress=False)
    valid = make_datasets(cfg)[1].examples
    model = result.model.eval()
    total, n = nll_one_by_one(model, valid, cfg.vocab_size)
    assert result.history.epochs[-1]["valid_loss"] == pytest.approx(total / n, rel=1e-5)


def sources(ds):
    return {tuple(x) for x, _ in ds.examples}


def test_train_valid_and_test_sets_are_pairwise_disjoint():
    # 4 tokens, lengths 2-4: 336 distinct sources, so independent draws would collide
    cfg = tiny(vocab_size=4, min_len=2, max_len=4, n_train=120, n_valid=40, n_test=40)
    train_set, valid_set, test_set = make_datasets(cfg)
    assert (len(train_set), len(valid_set), len(test_set)) == (120, 40, 40)
    a, b, c = sources(train_set), sources(valid_set), sources(test_set)
    assert not a & b and not a & c and not b & c
    for ds in (train_set, valid_set, test_set):
        assert all(y == sorted(x) for x, y in ds.examples)


def test_disjoint_splits_are_the_plain_draws_when_nothing_collides():
    cfg = TrainConfig(vocab_size=50, min_len=8, max_len=20, n_train=300, n_valid=50, n_test=50)
    for offset, ds in enumerate(make_datasets(cfg)):
        assert ds.examples == generate_dataset(len(ds), 8, 20, 50, cfg.seed + offset)


def test_a_task_too_small_for_disjoint_splits_is_refused():
    cfg = tiny(vocab_size=1, min_len=1, max_len=2, n_train=10, n_valid=5, n_test=5)
    with pytest.raises(ValueError, match="too few distinct sequences"):
        make_datasets(cfg)


def test_each_epoch_sees_every_example_once_in_a_new_order(monkeypatch):
    cfg = tiny(epochs=2)
    train_examples = make_datasets(cfg)[0].examples
    seen = []
    real_collate = SortingDataset.collate

    def recording(self, examples):
        if len(self) == cfg.n_train:
            seen.extend(tuple(x) for x, _ in examples)
        return real_collate(self, examples)

    monkeypatch.setattr(SortingDataset, "collate", recording)
    train(cfg, progress=False)
    first, second = seen[: cfg.n_train], seen[cfg.n_train :]
    assert len(second) == cfg.n_train
    everything = sorted(tuple(x) for x, _ in train_examples)
    assert sorted(first) == everything and sorted(second) == everything
    assert first != second
    assert first != [tuple(x) for x, _ in train_examples]  # shuffled, not the stored order


def test_tokens_per_second_counts_real_target_tokens_only():
    cfg = tiny(epochs=2)
    result = train(cfg, progress=False)
    # every example contributes its sorted tokens plus <eos>; padding contributes nothing
    n_tokens = sum(len(y) + 1 for _, y in make_datasets(cfg)[0].examples)
    for e in result.history.epochs:
        assert e["tokens_per_second"] * e["seconds"] == pytest.approx(n_tokens, rel=1e-9)


# --------------------------------------------------------------------------
# Modes: a loaded model evaluates; dropout works in training, not in eval
# --------------------------------------------------------------------------


def test_loaded_model_is_in_eval_mode(tmp_path):
    train(tiny(dropout=0.3), out_dir=tmp_path, progress=False)
    model = load_checkpoint(tmp_path).model
    assert not any(m.training for m in model.modules())


def conv_model(p):
    torch.manual_seed(0)
    return ConvS2S(
        ConvS2SConfig(
            vocab_size=10,
            embed_dim=16,
            hidden_dim=16,
            n_encoder_layers=2,
            n_decoder_layers=2,
            dropout=p,
            max_positions=16,
        )
    )


def gru_model(p):
    torch.manual_seed(0)
    return RNNSeq2Seq(
        RNNSeq2SeqConfig(
            vocab_size=10,
            embed_dim=16,
            hidden_dim=16,
            attention_dim=16,
            dropout=p,
            max_positions=16,
        )
    )


def zero_share_of_inputs(model, modules, batch, training: bool) -> list[float]:
    """Share of exact zeros in the input of each module (where dropout acts) in one forward."""
    shares = []
    hooks = [
        m.register_forward_pre_hook(
            lambda mod, args: shares.append(float((args[0] == 0).double().mean()))
        )
        for m in modules
    ]
    model.train(training)
    with torch.no_grad():
        model(batch.src, batch.tgt_in)
    for h in hooks:
        h.remove()
    return shares


@pytest.mark.parametrize(
    "make, inputs_of",
    [
        # ConvS2S: every convolution and the output layer see dropped-out inputs (Section 3.4)
        (
            conv_model,
            lambda m: [b.conv for b in [*m.encoder.blocks, *m.decoder.blocks]] + [m.decoder.W_o],
        ),
        (gru_model, lambda m: [m.decoder.W_s]),
    ],
)
def test_dropout_acts_in_training_mode_only(make, inputs_of, ragged_batch):
    _, batch = ragged_batch
    model = make(0.5)
    model.train()
    with torch.no_grad():
        a, b = (model(batch.src, batch.tgt_in) for _ in range(2))
    assert not torch.equal(a, b)  # two training-mode forwards differ
    model.eval()
    with torch.no_grad():
        a, b = (model(batch.src, batch.tgt_in) for _ in range(2))
    assert torch.equal(a, b)
    # where the paper applies it: about p = 0.5 of the inputs are zeroed in training mode
    modules = inputs_of(model)
    train_share = zero_share_of_inputs(model, modules, batch, True)
    eval_share = zero_share_of_inputs(model, modules, batch, False)
    assert len(train_share) >= len(modules) and len(train_share) == len(eval_share)
    for tr, ev in zip(train_share, eval_share):
        assert tr - ev > 0.25


# --------------------------------------------------------------------------
# Decoding builds no autograd graph
# --------------------------------------------------------------------------


@pytest.mark.parametrize("make", [conv_model, gru_model])
@pytest.mark.parametrize("decode", [greedy_decode, lambda m, s: beam_search(m, s, beam_size=3)])
def test_decoding_runs_without_autograd(make, decode, ragged_batch):
    _, batch = ragged_batch
    model = make(0.1)
    assert all(p.requires_grad for p in model.parameters())
    grad_modes, outputs = [], []

    def hook(module, args, output):
        grad_modes.append(torch.is_grad_enabled())
        for o in output if isinstance(output, tuple) else (output,):
            if isinstance(o, torch.Tensor):
                outputs.append(o)

    hooks = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        decode(model, batch.src)
    finally:
        for h in hooks:
            h.remove()
    assert grad_modes and not any(grad_modes)
    assert outputs and not any(o.requires_grad or o.grad_fn is not None for o in outputs)


# --------------------------------------------------------------------------
# Batch.to
# --------------------------------------------------------------------------


def test_batch_to_returns_new_tensors_and_leaves_the_original(ragged_batch):
    examples, batch = ragged_batch
    moved = batch.to("meta")  # a second device that exists on every machine
    assert isinstance(moved, Batch) and moved is not batch
    for name, tensor in vars(moved).items():
        original = getattr(batch, name)
        assert tensor.device.type == "meta", name
        assert original.device.type == "cpu", name
        assert tensor.shape == original.shape and tensor.dtype == original.dtype, name
    # the original still holds the data
    assert torch.equal(batch.src, collate_batch(examples, 10).src)
