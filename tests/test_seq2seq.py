"""Tests of ``convs2s_edu.seq2seq``, the common encoder/decoder interface, on all four
combinations of the two encoders and the two decoders: the model-level properties (causality,
padding invariance, attention that sums to 1 and vanishes on padding, step-by-step decoding
equal to teacher forcing, states never changed in place, reorder, dropout in training mode only,
learning), and the checks at the entry points (token dtypes and shapes, lengths, ids, padding)
and of the two model configs."""

from __future__ import annotations

import math
import re

import pytest
import torch
from _tiny import KINDS, RUN_MODEL, VOCAB, randomise_biases, tiny_model
from torch.testing import assert_close

from convs2s_edu import ConvS2SConfig, RNNSeq2SeqConfig, beam_search, greedy_decode, sos_index
from convs2s_edu.data import PAD, n_token_ids

pytestmark = pytest.mark.usefixtures("single_thread")
kinds = pytest.mark.parametrize("kind", KINDS)

#: The four combinations, and ConvS2S with the paper's three tricks and with a wider kernel.
VARIANTS = {
    **{kind: (kind, {}) for kind in KINDS},
    "convs2s-paper": (
        "convs2s",
        dict(weight_norm=True, scale_encoder_grad=True, scale_context=True),
    ),
    "convs2s-kernel5": ("convs2s", dict(kernel_size=5)),
}
variants = pytest.mark.parametrize("variant", VARIANTS)


def _variant(variant, **overrides):
    kind, options = VARIANTS[variant]
    return tiny_model(kind, **options, **overrides)


def _n_attention(model) -> int:
    return model.decoder.cfg.n_decoder_layers if model.decoder.multi_step else 1


@variants
def test_attention_shape_rows_sum_to_one_and_vanish_on_padding(variant, ragged_batch):
    model = _variant(variant).eval()
    randomise_biases(model)
    _, batch = ragged_batch
    with torch.no_grad():
        logits, attn = model(batch.src, batch.tgt_in, return_attention=True)
    B, S = batch.src.shape
    T = batch.tgt_in.shape[1]
    assert logits.shape == (B, T, model.n_ids)
    if model.decoder.multi_step:  # the layer axis stays: (B, L, T, S)
        assert attn.shape == (B, _n_attention(model), T, S)
        on_padding = batch.src_padding_mask[:, None, None, :].expand_as(attn)
    else:  # a single attention: (B, T, S)
        assert attn.shape == (B, T, S)
        on_padding = batch.src_padding_mask[:, None, :].expand_as(attn)
    # target positions after a row's last token: both models compute them (the loss ignores
    # them), so the attention sums to 1 there too
    running = (
        (batch.tgt_in != PAD)[:, None, :] if model.decoder.multi_step else batch.tgt_in != PAD
    )
    running = running.expand(attn.shape[:-1])
    assert not running.all()
    assert_close(attn.sum(-1), torch.ones(attn.shape[:-1]))
    on_padding = on_padding & running[..., None]
    assert on_padding.any()
    assert (attn[on_padding] == 0).all()
    assert (attn[~on_padding & running[..., None]] > 0).all()
    if model.decoder.multi_step:  # the layers attend differently: each has its own attention
        assert not torch.allclose(attn[:, 0], attn[:, 1])


@variants
def test_decoder_is_causal(variant):
    model = _variant(variant).eval()
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(1, 11, (2, 6), generator=gen)
    tgt_in = torch.randint(1, 11, (2, 7), generator=gen)
    with torch.no_grad():
        logits = model(src, tgt_in)
        for t in range(1, tgt_in.shape[1]):
            changed = tgt_in.clone()
            changed[:, t:] = (tgt_in[:, t:] % 10) + 1  # a different token at every position >= t
            logits2 = model(src, changed)
            assert_close(logits2[:, :t], logits[:, :t], atol=0.0, rtol=0.0)
            assert not torch.allclose(logits2[:, t], logits[:, t])  # the change is visible


@variants
def test_logits_and_attention_are_padding_invariant(variant, ragged_batch):
    model = _variant(variant, dropout=0.1).eval()
    randomise_biases(model)
    examples, batch = ragged_batch
    with torch.no_grad():
        logits, attn = model(batch.src, batch.tgt_in, return_attention=True)
        for i, (x, _) in enumerate(examples):
            n = len(x)
            alone, alone_attn = model(
                batch.src[i : i + 1, :n], batch.tgt_in[i : i + 1, : n + 1], return_attention=True
            )
            assert_close(logits[i : i + 1, : n + 1], alone, atol=1e-5, rtol=1e-5)
            assert_close(attn[i : i + 1, ..., : n + 1, :n], alone_attn, atol=1e-5, rtol=1e-5)


def _tensors(state):
    """Every tensor inside a (nested) decoder state, cloned."""
    if isinstance(state, torch.Tensor):
        return [state.clone()]
    if isinstance(state, (tuple, list)):
        return [t for part in state for t in _tensors(part)]
    return []


@kinds
def test_step_by_step_equals_teacher_forcing_and_leaves_states_unchanged(
    kind, ragged_batch, device
):
    model = tiny_model(kind, dropout=0.1).eval()
    randomise_biases(model)
    model.to(device)
    _, batch = ragged_batch
    batch = batch.to(device)
    B, T = batch.tgt_in.shape
    L = _n_attention(model)
    with torch.no_grad():
        logits, attn = model(batch.src, batch.tgt_in, return_attention=True)
        attn = attn if model.decoder.multi_step else attn[:, None]  # (B, L, T, S)
        state = model.decoder.start(model.encode(batch.src))
        for t in range(T):
            before = _tensors(state)
            logits_t, attn_t, new_state = model.decoder.step(batch.tgt_in[:, t], state)
            # the old state is untouched, and stepping from it again gives the same answer
            for a, b in zip(before, _tensors(state), strict=True):
                assert torch.equal(a, b)
            again, _, _ = model.decoder.step(batch.tgt_in[:, t], state)
            assert torch.equal(again, logits_t)
            assert attn_t.shape == (B, L, batch.src.shape[1])
            # the real positions (padding's outputs are read by no loss)
            real = batch.tgt_in[:, t] != PAD
            assert_close(logits_t[real], logits[real, t], atol=1e-5, rtol=1e-5)
            assert_close(attn_t[real], attn[real, :, t], atol=1e-5, rtol=1e-5)
            state = new_state


@kinds
def test_reorder_selects_encoder_rows_and_decoder_rows(kind, ragged_batch):
    """Reordering a batch's state equals decoding the reordered sources from the start,
    after some steps (so the recurrent state / conv windows matter too)."""
    model = tiny_model(kind).eval()
    randomise_biases(model)
    _, batch = ragged_batch
    index = torch.tensor([2, 0, 0, 1])
    with torch.no_grad():
        state = model.decoder.start(model.encode(batch.src))
        ref = model.decoder.start(model.encode(batch.src[index]))
        for t in range(3):
            _, _, state = model.decoder.step(batch.tgt_in[:, t], state)
            _, _, ref = model.decoder.step(batch.tgt_in[index, t], ref)
        state = model.decoder.reorder(state, index)
        for t in range(3, batch.tgt_in.shape[1]):
            logits, attn, state = model.decoder.step(batch.tgt_in[index, t], state)
            ref_logits, ref_attn, ref = model.decoder.step(batch.tgt_in[index, t], ref)
            assert_close(logits, ref_logits, atol=1e-5, rtol=1e-5)
            assert_close(attn, ref_attn, atol=1e-5, rtol=1e-5)


@kinds
def test_training_cuts_loss_on_sorting(kind, train_on_sorting, device):
    model = tiny_model(
        kind,
        embed_dim=32,
        hidden_dim=32,
        n_encoder_layers=1,
        n_decoder_layers=2 if kind in ("convs2s", "gru+conv") else 1,
    )
    losses = train_on_sorting(model.to(device), steps=300, device=device)
    first, last = losses[0], sum(losses[-20:]) / 20
    assert math.isfinite(last)
    assert last < 0.25 * first, (first, last)


# --------------------------------------------------------------------------
# Dropout: in training mode, where the paper applies it; never in eval mode
# --------------------------------------------------------------------------


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
    "kind, inputs_of",
    [
        # ConvS2S: every convolution and the output layer see dropped-out inputs (Section 3.4)
        (
            "convs2s",
            lambda m: [b.conv for b in [*m.encoder.blocks, *m.decoder.blocks]] + [m.decoder.W_o],
        ),
        ("gru", lambda m: [m.decoder.W_s]),
    ],
)
def test_dropout_acts_in_training_mode_only(kind, inputs_of, ragged_batch):
    _, batch = ragged_batch
    model = tiny_model(kind, dropout=0.5, **RUN_MODEL[kind])
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
# Token dtypes and shapes at the entry points
# --------------------------------------------------------------------------


@kinds
@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.uint8])
def test_small_integer_dtypes_are_converted(kind, dtype):
    model = tiny_model(kind)
    src = torch.tensor([[3, 1, 2], [5, 4, 0]])
    tgt = torch.tensor([[sos_index(10), 1, 2], [sos_index(10), 4, 5]])
    with torch.no_grad():
        assert torch.equal(model(src.to(dtype), tgt.to(dtype)), model(src, tgt))
    assert greedy_decode(model, src.to(dtype)) == greedy_decode(model, src)
    assert beam_search(model, src.to(dtype), beam_size=2) == beam_search(model, src, beam_size=2)


@kinds
@pytest.mark.parametrize(
    "bad, match",
    [
        (torch.tensor([[1.0, 2.0]]), "dtype torch.float32"),
        (torch.tensor([[True, False]]), "dtype torch.bool"),
        ([[1.7, 2.9]], "got 1.7"),
        ([[1, True]], "got True"),
        ([1, 2, 3], "2-D batch"),
        (torch.tensor([1, 2, 3]), r"2-D batch .* shape \(3,\)"),
    ],
)
def test_bad_token_inputs_are_rejected_at_every_entry_point(kind, bad, match):
    model = tiny_model(kind)
    tgt = torch.tensor([[sos_index(10), 1]])
    with pytest.raises(ValueError, match=rf"src .*{match}"):
        model(bad, tgt)
    with pytest.raises(ValueError, match=rf"tgt_in .*{match}"):
        model(torch.tensor([[1, 2]]), bad)
    with pytest.raises(ValueError, match=match):
        greedy_decode(model, bad)
    with pytest.raises(ValueError, match=match):
        beam_search(model, bad, beam_size=2)


# --------------------------------------------------------------------------
# Lengths, token ids, batch sizes and padding at the model's entry
# --------------------------------------------------------------------------

MAX_POS = 8
N_IDS = n_token_ids(VOCAB)  # 13: ids 0..12

#: The input checks' models: one layer of 8 features, positions for ``MAX_POS`` tokens, the
#: configs' default dropout, drawn from the current random state.
SHORT = {
    "embed_dim": 8,
    "hidden_dim": 8,
    "n_encoder_layers": 1,
    "n_decoder_layers": 1,
    "attention_dim": 8,
    "max_positions": MAX_POS,
    "dropout": 0.1,
}
input_kinds = pytest.mark.parametrize("kind", ["convs2s", "gru"], ids=["convs2s", "rnn"])


def _ok_src(B=2, S=4):
    return torch.randint(1, VOCAB + 1, (B, S))


def _ok_tgt(B=2, T=5):
    tgt = torch.randint(1, VOCAB + 1, (B, T))
    tgt[:, 0] = sos_index(VOCAB)
    return tgt


@input_kinds
def test_valid_inputs_pass_the_checks(kind):
    model = tiny_model(kind, seed=None, **SHORT).eval()
    # the longest accepted input is exactly max_positions, ids 0..N_IDS-1
    src = _ok_src(S=MAX_POS)
    src[0, 0] = N_IDS - 1
    logits = model(src, _ok_tgt(T=MAX_POS))
    assert logits.shape == (2, MAX_POS, N_IDS)


@input_kinds
@pytest.mark.parametrize("which", ["src", "tgt_in"])
def test_sequence_longer_than_max_positions_is_rejected(kind, which):
    model = tiny_model(kind, seed=None, **SHORT).eval()
    src, tgt = _ok_src(), _ok_tgt()
    if which == "src":
        src = _ok_src(S=MAX_POS + 1)
    else:
        tgt = _ok_tgt(T=MAX_POS + 3)
    bad = MAX_POS + 1 if which == "src" else MAX_POS + 3
    with pytest.raises(ValueError, match=rf"{which} has length {bad}\b.*1\.\.{MAX_POS}\b"):
        model(src, tgt)


@input_kinds
@pytest.mark.parametrize("which", ["src", "tgt_in"])
@pytest.mark.parametrize("bad_id", [-1, N_IDS, 1000])
def test_token_ids_outside_vocabulary_are_rejected(kind, which, bad_id):
    model = tiny_model(kind, seed=None, **SHORT).eval()
    src, tgt = _ok_src(), _ok_tgt()
    (src if which == "src" else tgt)[1, 2] = bad_id
    with pytest.raises(
        ValueError,
        match=rf"{which} holds token id {re.escape(str(bad_id))}\b"
        rf".*0\.\.{N_IDS - 1}\b",
    ):
        model(src, tgt)


@input_kinds
def test_mismatched_batch_sizes_are_rejected(kind):
    model = tiny_model(kind, seed=None, **SHORT).eval()
    with pytest.raises(ValueError, match=r"same batch size, got 2 and 3"):
        model(_ok_src(B=2), _ok_tgt(B=3))


@input_kinds
def test_float_and_one_dimensional_token_tensors_are_rejected(kind):
    model = tiny_model(kind, seed=None, **SHORT).eval()
    with pytest.raises(
        ValueError, match=r"src must hold integer token ids, got dtype torch.float32"
    ):
        model(_ok_src().float(), _ok_tgt())
    with pytest.raises(ValueError, match=r"tgt_in must be a 2-D .* got a tensor of shape \(5,\)"):
        model(_ok_src(), _ok_tgt()[0])


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_all_padding_and_left_padded_sources_are_rejected(kind):
    depth = 4 if kind == "convs2s" else 1  # the configs' default depths and positions
    model = tiny_model(
        kind,
        seed=None,
        **dict(SHORT, n_encoder_layers=depth, n_decoder_layers=depth, max_positions=64),
    )
    tgt_in = torch.tensor([[11, 1], [11, 2]])
    with pytest.raises(ValueError, match="src row 1 holds only padding"):
        model(torch.tensor([[3, 1], [0, 0]]), tgt_in)
    with pytest.raises(ValueError, match="src row 0 has a real token after padding"):
        model(torch.tensor([[0, 3], [2, 1]]), tgt_in)


# --------------------------------------------------------------------------
# The two model configs
# --------------------------------------------------------------------------


@pytest.mark.parametrize("config", [ConvS2SConfig, RNNSeq2SeqConfig])
@pytest.mark.parametrize("dropout", [1.0, -0.1, 1.5])
def test_configs_reject_dropout_outside_unit_interval(config, dropout):
    with pytest.raises(ValueError, match=rf"dropout must be in \[0, 1\), got {dropout}"):
        config(dropout=dropout)


@pytest.mark.parametrize("config", [ConvS2SConfig, RNNSeq2SeqConfig])
def test_config_replace_validates_again(config):
    with pytest.raises(ValueError, match=r"hidden_dim must be an integer >= 1, got 0"):
        config().replace(hidden_dim=0)


# --------------------------------------------------------------------------
# Checks at the boundary, not in the package's own training step
# --------------------------------------------------------------------------

#: Operations that read a tensor's values on the host (on a GPU: wait for its queue).
SYNCS = ("aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::is_nonzero")


def _profiled_syncs(run) -> tuple[list[str], list[str]]:
    """The names of every profiled event of ``run()``, and those of its host reads."""
    with torch.profiler.profile() as prof:
        run()
    names = [e.name for e in prof.events()]
    return names, [n for n in names if n in SYNCS]


@pytest.mark.parametrize("kind", KINDS)
def test_a_training_step_reads_nothing_on_the_host_for_checks(kind, ragged_batch):
    """The package's step (fast paths on, as it trains) runs no input check: what it reads on
    the host is Adam's step counter of every parameter and, for a GRU encoder, the packing's
    own index arithmetic; a user's call of the same model does check, inside its region."""
    from convs2s_edu.fast import FastGRUEncoder, use_fast_paths
    from convs2s_edu.training.step import make_train_step

    torch.manual_seed(0)
    model = use_fast_paths(tiny_model(kind))
    optimizer = torch.optim.Adam(model.parameters())
    step = make_train_step(model, optimizer, 1.0)
    _, batch = ragged_batch
    step(batch)  # Adam's state exists from here on
    names, syncs = _profiled_syncs(lambda: step(batch))
    assert "EncoderDecoder.check_inputs" not in names
    n_params = len(list(model.parameters()))
    _, adam_syncs = _profiled_syncs(optimizer.step)
    assert adam_syncs.count("aten::item") == n_params  # one step counter per parameter
    rest = list(syncs)
    for name in adam_syncs:
        rest.remove(name)
    # the fused GRU encoder's positions of the packed batch (boolean indexing)
    packing = ["aten::nonzero"] * (2 if isinstance(model.encoder, FastGRUEncoder) else 0)
    assert rest == packing
    # the same model called as a user calls it checks its inputs, reading them on the host
    names, syncs = _profiled_syncs(lambda: model(batch.src, batch.tgt_in))
    assert "EncoderDecoder.check_inputs" in names and "aten::nonzero" in syncs
