"""Tests of ``convs2s_edu.rnn``: the GRU + Bahdanau baseline against hand computations from
its own parameters, the dropout between the layers of its encoder and the checks of its
config.

The reference below writes out the GRU cell (PyTorch's gate order r, z, n),
the bidirectional encoder one real token at a time (no packing, no padding),
the additive attention and the output layer; the model must agree with it.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from convs2s_edu import PAD, BahdanauAttention, RNNSeq2Seq, RNNSeq2SeqConfig
from convs2s_edu import training as train_mod

pytestmark = pytest.mark.usefixtures("single_thread")

VARIANTS = {
    "one_layer": {},
    "two_layers": dict(n_encoder_layers=2, n_decoder_layers=2),
    # RNNencdec: one context for every step, the encoder's two last states
    "no_attention": dict(attention=False, n_encoder_layers=2),
}


def _randomise_zero_biases(module: torch.nn.Module) -> None:
    if module.cfg.attention:
        with torch.no_grad():
            module.decoder.attention.b_a.normal_(0.0, 0.5)


# --------------------------------------------------------------------------
# Bahdanau attention
# --------------------------------------------------------------------------


def test_bahdanau_energy_and_context_match_hand_computation():
    torch.manual_seed(0)
    B, S, enc_dim, dec_dim, A = 3, 5, 8, 6, 7
    att = BahdanauAttention(enc_dim, dec_dim, A)
    with torch.no_grad():
        att.b_a.normal_()  # zero at init; make a forgotten b_a visible
    h = torch.randn(B, S, enc_dim)  # non-zero at padding: the mask must do the work
    s_prev = torch.randn(B, dec_dim)
    lengths = [5, 1, 3]
    mask = torch.arange(S)[None, :] >= torch.tensor(lengths)[:, None]

    keys = att.keys(h)
    energy = att.energy(s_prev, keys)
    c, a = att(s_prev, keys, h, mask)
    assert energy.shape == (B, S) and a.shape == (B, S) and c.shape == (B, enc_dim)

    W_a, U_a, b_a, v_a = att.W_a.weight, att.U_a.weight, att.b_a, att.v_a
    for b in range(B):
        m = lengths[b]
        # e_tj = v_a^T tanh(W_a h_j + U_a s_{t-1} + b_a)
        e = torch.stack(
            [v_a @ torch.tanh(W_a @ h[b, j] + U_a @ s_prev[b] + b_a) for j in range(S)]
        )
        assert_close(energy[b], e)
        a_b = torch.exp(e[:m] - e[:m].max())
        a_b = a_b / a_b.sum()
        assert_close(a[b, :m], a_b)
        assert (a[b, m:] == 0).all()
        # c_t = sum_j a_tj h_j, over the real tokens only
        assert_close(c[b], sum(a_b[j] * h[b, j] for j in range(m)))


# --------------------------------------------------------------------------
# The whole model against a reference written from the parameters
# --------------------------------------------------------------------------


def _gru_cell(x, h, gru, suffix):
    """PyTorch's GRU cell: r, z, n gates from ``weight_ih_{suffix}`` etc."""
    W_ih, W_hh = getattr(gru, f"weight_ih_{suffix}"), getattr(gru, f"weight_hh_{suffix}")
    b_ih, b_hh = getattr(gru, f"bias_ih_{suffix}"), getattr(gru, f"bias_hh_{suffix}")
    i_r, i_z, i_n = (W_ih @ x + b_ih).chunk(3)
    h_r, h_z, h_n = (W_hh @ h + b_hh).chunk(3)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def _reference_rnn(model: RNNSeq2Seq, src: torch.Tensor, tgt_in: torch.Tensor):
    """Eval-mode forward, one sequence and one token at a time."""
    cfg, n = model.cfg, model.cfg.hidden_dim
    enc, dec = model.encoder, model.decoder
    att = dec.attention
    all_logits, all_attn = [], []
    for b in range(src.shape[0]):
        m = int((src[b] != PAD).sum())
        layer_in = [enc.embed.weight[tok] for tok in src[b, :m]]
        for l in range(cfg.n_encoder_layers):
            fwd, h = [], torch.zeros(n)
            for j in range(m):
                h = _gru_cell(layer_in[j], h, enc.gru, f"l{l}")
                fwd.append(h)
            bwd, h = [None] * m, torch.zeros(n)
            for j in reversed(range(m)):
                h = _gru_cell(layer_in[j], h, enc.gru, f"l{l}_reverse")
                bwd[j] = h
            layer_in = [torch.cat([fwd[j], bwd[j]]) for j in range(m)]
        H = torch.stack(layer_in)  # (m, 2n): annotations h_j
        # s_0 = tanh(W_init <backward state after reading the whole source>), split per layer
        s = list(torch.tanh(dec.W_init.weight @ bwd[0] + dec.W_init.bias).view(-1, n))
        logits, attn = [], []
        for t in range(tgt_in.shape[1]):
            if not cfg.attention:  # c = [forward state at the last token; backward at the first]
                c, a = torch.cat([fwd[m - 1], bwd[0]]), torch.zeros(m)
            else:
                e = torch.stack(
                    [
                        att.v_a
                        @ torch.tanh(att.W_a.weight @ H[j] + att.U_a.weight @ s[-1] + att.b_a)
                        for j in range(m)
                    ]
                )
                a = torch.softmax(e, dim=0)
                c = (a[:, None] * H).sum(0)
            x = torch.cat([dec.embed.weight[tgt_in[b, t]], c])
            for l in range(cfg.n_decoder_layers):
                s[l] = _gru_cell(x, s[l], dec.gru, f"l{l}")
                x = s[l]
            logits.append(dec.W_s.weight @ x + dec.W_s.bias)
            attn.append(torch.cat([a, torch.zeros(src.shape[1] - m)]))
        all_logits.append(torch.stack(logits))
        all_attn.append(torch.stack(attn))
    return torch.stack(all_logits), torch.stack(all_attn)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("variant", list(VARIANTS), ids=list(VARIANTS))
def test_rnn_forward_matches_reference_from_parameters(variant, grad, tiny_rnn_cfg, ragged_batch):
    """Every position, the padding of the target too (the decoder runs every row every
    step), with and without a gradient wanted."""
    torch.manual_seed(0)
    model = RNNSeq2Seq(tiny_rnn_cfg(**VARIANTS[variant], dropout=0.1)).eval()
    _randomise_zero_biases(model)
    _, batch = ragged_batch
    with torch.set_grad_enabled(grad):
        logits, attn = model(batch.src, batch.tgt_in, return_attention=True)
    with torch.no_grad():
        ref_logits, ref_attn = _reference_rnn(model, batch.src, batch.tgt_in)
    assert logits.shape == (3, batch.tgt_in.shape[1], model.n_ids)
    assert_close(logits, ref_logits)
    assert_close(attn, ref_attn)


def test_rnn_encoder_annotations_are_zero_at_padding(tiny_rnn_cfg, ragged_batch):
    torch.manual_seed(0)
    model = RNNSeq2Seq(tiny_rnn_cfg()).eval()
    _, batch = ragged_batch
    with torch.no_grad():
        enc = model.encode(batch.src)
        state = model.decoder.start(enc)
    assert enc.states.shape == (*batch.src.shape, 2 * model.cfg.hidden_dim)
    assert (enc.states[batch.src_padding_mask] == 0).all()
    assert (enc.states[~batch.src_padding_mask].abs().sum(-1) > 0).all()
    assert state.s.shape == (model.cfg.n_decoder_layers, 3, model.cfg.hidden_dim)


# --------------------------------------------------------------------------
# Causality, padding invariance, attention normalisation
# --------------------------------------------------------------------------


def test_rnn_step_matches_forward_column(tiny_rnn_cfg, ragged_batch):
    torch.manual_seed(0)
    model = RNNSeq2Seq(tiny_rnn_cfg(n_decoder_layers=2)).eval()
    _, batch = ragged_batch
    with torch.no_grad():
        logits, attn = model(batch.src, batch.tgt_in, return_attention=True)
        state = model.decoder.start(model.encode(batch.src))
        for t in range(batch.tgt_in.shape[1]):
            logits_t, a_t, state = model.decoder.step(batch.tgt_in[:, t], state)
            assert_close(logits_t, logits[:, t])
            assert_close(a_t, attn[:, None, t])  # (B, L=1, S)


# --------------------------------------------------------------------------
# Dropout between the encoder's layers; bad sizes
# --------------------------------------------------------------------------


def test_a_two_layer_gru_encoder_drops_out_between_its_layers():
    m = train_mod.build_model(
        train_mod.TrainConfig(model="gru", model_options={"n_encoder_layers": 2, "dropout": 0.25})
    )
    grus = [x for x in m.modules() if isinstance(x, torch.nn.GRU) and x.num_layers == 2]
    assert grus and grus[0].dropout == 0.25


RNN_SIZES = [
    "vocab_size",
    "embed_dim",
    "hidden_dim",
    "n_encoder_layers",
    "n_decoder_layers",
    "attention_dim",
    "max_positions",
]


def test_rnn_config_attention_is_true_or_false():
    with pytest.raises(ValueError, match="attention must be True or False, got 1"):
        RNNSeq2SeqConfig(attention=1)


@pytest.mark.parametrize("value", [0, -3])
@pytest.mark.parametrize("field", RNN_SIZES)
def test_rnn_config_rejects_non_positive_sizes(field, value):
    with pytest.raises(ValueError, match=rf"{field} must be an integer >= 1, got {value}\b"):
        RNNSeq2SeqConfig(**{field: value})
