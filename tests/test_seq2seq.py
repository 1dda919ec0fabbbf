"""The common encoder/decoder interface, on all four combinations of the two encoders and the
two decoders: the model-level properties (causality, padding invariance, attention that sums
to 1 and vanishes on padding, step-by-step decoding equal to teacher forcing, states never
changed in place, reorder, learning), the hybrids' bridges, token-dtype handling, old
checkpoints and training by name."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import KINDS, make_model
from torch.testing import assert_close

from convs2s_edu import (
    MODEL_NAMES,
    HybridConfig,
    TrainConfig,
    beam_search,
    build_model,
    collate_batch,
    greedy_decode,
    load_checkpoint,
    sos_index,
)
from convs2s_edu.cli import main
from convs2s_edu.training import cache_key, train

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
    return make_model(kind, **options, **overrides)


def _randomise_biases(model):
    """Zero-initialised biases (b_a, b_d, the bridge ...) become visible when forgotten."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("bias", "b_a", "b_d")):
                p.normal_(0.0, 0.5)


def _n_attention(model) -> int:
    return model.decoder.cfg.n_decoder_layers if model.decoder.multi_step else 1


def test_model_names_are_the_four_combinations():
    assert set(MODEL_NAMES) == set(KINDS)


@variants
def test_attention_shape_rows_sum_to_one_and_vanish_on_padding(variant, ragged_batch):
    model = _variant(variant).eval()
    _randomise_biases(model)
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
    assert_close(attn.sum(-1), torch.ones(attn.shape[:-1]))
    assert on_padding.any()
    assert (attn[on_padding] == 0).all()
    assert (attn[~on_padding] > 0).all()
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
    _randomise_biases(model)
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
    model = make_model(kind, dropout=0.1).eval()
    _randomise_biases(model)
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
            assert_close(logits_t, logits[:, t], atol=1e-5, rtol=1e-5)
            assert_close(attn_t, attn[:, :, t], atol=1e-5, rtol=1e-5)
            state = new_state


@kinds
def test_reorder_selects_encoder_rows_and_decoder_rows(kind, ragged_batch):
    """Reordering a batch's state equals decoding the reordered sources from the start,
    after some steps (so the recurrent state / conv windows matter too)."""
    model = make_model(kind).eval()
    _randomise_biases(model)
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
    model = make_model(
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
# The hybrids' bridges
# --------------------------------------------------------------------------


def test_bridges_have_the_sizes_the_parts_need():
    f, n = 16, 20
    gru_conv = make_model("gru+conv", embed_dim=f, hidden_dim=n)
    conv_gru = make_model("conv+gru", embed_dim=f, hidden_dim=n)
    assert gru_conv.bridge.weight.shape == (f, 2 * n)  # annotations 2n -> keys f
    assert conv_gru.bridge.weight.shape == (2 * n, f)  # z^u f -> annotations 2n
    assert conv_gru.decoder.W_init.weight.shape == (n * 2, f)  # s_0 from the mean of z^u
    assert make_model("convs2s").bridge is None and make_model("gru").bridge is None
    src = torch.tensor([[3, 1, 2, 0]])
    with torch.no_grad():
        for model in (gru_conv, conv_gru):
            _randomise_biases(model)
            raw = model.encoder(src)
            enc = model.encode(src)
            # z~_j = W_b z_j + b_b on the real tokens, zero at padding
            by_hand = raw.states[0, :3] @ model.bridge.weight.T + model.bridge.bias
            assert_close(enc.states[0, :3], by_hand)
            assert (enc.states[0, 3] == 0).all()
    # the conv encoder's summary is the mean of z^u over the real tokens
    z = conv_gru.encoder(src)
    assert_close(z.summary[0], z.states[0, :3].mean(0))


def test_hybrid_parts_must_agree_on_shared_sizes():
    cfg = HybridConfig.from_options("gru+conv", vocab_size=10, embed_dim=8)
    assert cfg.conv.embed_dim == cfg.rnn.embed_dim == 8
    with pytest.raises(ValueError, match=r"agree on embed_dim, got 8 \(conv\) and 16 \(rnn\)"):
        HybridConfig("gru+conv", cfg.conv, cfg.rnn.replace(embed_dim=16))
    with pytest.raises(ValueError, match="name must be one of"):
        HybridConfig("lstm+conv")
    with pytest.raises(ValueError, match="n_heads"):
        HybridConfig.from_options("conv+gru", n_heads=4)


# --------------------------------------------------------------------------
# Token dtypes and shapes at the entry points
# --------------------------------------------------------------------------


@kinds
@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.uint8])
def test_small_integer_dtypes_are_converted(kind, dtype):
    model = make_model(kind)
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
    model = make_model(kind)
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
# Checkpoints and training by name
# --------------------------------------------------------------------------


#: The parameter names of RNNSeq2Seq before the encoder/decoder split, as written by 0.1.0.
def test_convs2s_parameter_names_are_unchanged():
    keys = set(make_model("convs2s", n_encoder_layers=1, n_decoder_layers=1).state_dict())
    assert keys == {
        "encoder.embed.token.weight",
        "encoder.embed.position.weight",
        "encoder.in_proj.weight",
        "encoder.in_proj.bias",
        "encoder.blocks.0.conv.weight",
        "encoder.blocks.0.conv.bias",
        "encoder.out_proj.weight",
        "encoder.out_proj.bias",
        "decoder.embed.token.weight",
        "decoder.embed.position.weight",
        "decoder.in_proj.weight",
        "decoder.in_proj.bias",
        "decoder.blocks.0.conv.weight",
        "decoder.blocks.0.conv.bias",
        "decoder.attention.0.W_d.weight",
        "decoder.attention.0.b_d",
        "decoder.W_c.0.weight",
        "decoder.W_c.0.bias",
        "decoder.W_o.weight",
        "decoder.W_o.bias",
    }


def _tiny_train_config(kind, **changes):
    return TrainConfig(
        model=kind,
        vocab_size=10,
        min_len=3,
        max_len=6,
        n_train=64,
        n_valid=16,
        n_test=16,
        batch_size=16,
        epochs=1,
        device="cpu",
        model_options={
            "embed_dim": 16,
            "hidden_dim": 16,
            "attention_dim": 16,
            "n_encoder_layers": 1,
            "n_decoder_layers": 1,
        },
        **changes,
    )


@pytest.mark.parametrize("kind", ["gru+conv", "conv+gru"])
def test_hybrids_train_by_name_and_their_checkpoints_load(kind, tmp_path):
    cfg = _tiny_train_config(kind)
    result = train(cfg, out_dir=tmp_path, progress=False)
    assert result.model.cfg.name == kind
    loaded = load_checkpoint(tmp_path)
    src = collate_batch([([3, 1, 2], [1, 2, 3])], 10).src
    assert greedy_decode(loaded.model, src) == greedy_decode(result.model, src)
    assert beam_search(loaded.model, src, beam_size=2) == beam_search(
        result.model, src, beam_size=2
    )
    # the paper switch reaches the convolutional part; the cache keeps the kinds apart
    conv_part = build_model(cfg).cfg.conv
    assert conv_part.weight_norm and conv_part.scale_context
    assert not build_model(cfg.replace(paper_normalisation=False)).cfg.conv.weight_norm
    keys = {cache_key(cfg.replace(model=k)) for k in MODEL_NAMES}
    assert len(keys) == len(MODEL_NAMES)


@pytest.mark.parametrize("kind", ["gru+conv", "conv+gru"])
def test_cli_trains_a_hybrid(kind, tmp_path, capsys):
    argv = [
        "train",
        "--model",
        kind,
        "--out",
        str(tmp_path),
        "--n-train",
        "32",
        "--epochs",
        "1",
        "--max-len",
        "5",
        "--min-len",
        "3",
        "--device",
        "cpu",
        "--quiet",
    ]
    assert main(argv) == 0
    assert kind in capsys.readouterr().out
    assert (tmp_path / "checkpoint.pt").is_file()
