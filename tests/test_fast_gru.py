"""``convs2s_edu.fast.gru``: the GRU model's fast paths against the reference model.

The bidirectional GRU layer whose backward pass is written out must be
:class:`torch.nn.GRU` over a packed batch, value for value and gradient for gradient
(against the module itself, in float64), its backward must be the derivative of its
forward (:func:`torch.autograd.gradcheck`), and the fast encoder must use it only where it
applies. The fast decoder's teacher forcing over the packed target must give the
reference's logits and attention at every real position (zeros after a row's end) and
the reference's gradients.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.testing import assert_close

from convs2s_edu import PAD, GRUDecoder, RNNSeq2Seq, RNNSeq2SeqConfig, sequence_loss
from convs2s_edu.fast import FastGRUDecoder, FastGRUEncoder, use_fast_paths
from convs2s_edu.fast.gru import _BiGRULayer, _packed_positions, fused_applies, packed_bigru

pytestmark = pytest.mark.usefixtures("single_thread")


def test_packed_positions_by_hand():
    # rows of lengths 3, 2, 1 (longest first); packed: step 0 -> 0 1 2, step 1 -> 3 4, step 2 -> 5
    reverse, previous = _packed_positions([3, 2, 1])
    # reversed, row 0 reads its steps 2 1 0 (positions 5 3 0), row 1 steps 1 0 (4 1), row 2 itself
    assert reverse.tolist() == [5, 4, 2, 3, 1, 0]
    # the same row one step earlier, for the positions after a row's first: 3 <- 0, 4 <- 1, 5 <- 3
    assert previous.tolist() == [0, 1, 3]


def _nn_gru(gru, x, lengths):
    out, h_n = gru(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0], h_n


@pytest.mark.parametrize("layers", [1, 2])
def test_packed_bigru_is_nn_gru_in_values_and_gradients(layers):
    torch.manual_seed(0)
    B, S, E, H = 6, 7, 5, 4
    gru = torch.nn.GRU(E, H, num_layers=layers, bidirectional=True, batch_first=True).double()
    x = torch.randn(B, S, E, dtype=torch.double, requires_grad=True)
    lengths = torch.tensor([7, 3, 1, 7, 5, 2])  # unsorted, with a row of one token
    ref, ref_h = _nn_gru(gru, x, lengths)
    out, h_n = packed_bigru(x, lengths, gru)
    assert_close(out, ref)
    assert_close(h_n, ref_h)
    assert (out[1, 3:] == 0).all() and (out[2, 1:] == 0).all()  # zero at padding
    # any loss of both outputs: random weights on every annotation and last state
    w, w_h = torch.randn_like(ref), torch.randn_like(ref_h)
    wrt = [x, *gru.parameters()]
    expected = torch.autograd.grad((ref * w).sum() + (ref_h * w_h).sum(), wrt)
    got = torch.autograd.grad((out * w).sum() + (h_n * w_h).sum(), wrt)
    for name, a, b in zip(["x"] + [n for n, _ in gru.named_parameters()], got, expected):
        assert_close(a, b, msg=name)


def test_bigru_layer_backward_is_the_derivative_of_its_forward():
    torch.manual_seed(0)
    sizes = [3, 3, 2, 1]  # rows of lengths 4, 3, 2
    reverse, previous = _packed_positions(sizes)
    E, H = 3, 2

    def leaf(*shape):
        return torch.randn(*shape, dtype=torch.double, requires_grad=True)

    inputs = (
        leaf(sum(sizes), E),
        leaf(2, 3 * H, E),
        leaf(2, 3 * H, H),
        leaf(2, 3 * H),
        leaf(2, 3 * H),
    )
    assert torch.autograd.gradcheck(
        lambda *a: _BiGRULayer.apply(*a, sizes, reverse, previous), inputs
    )


def test_fused_applies_only_to_eager_cpu_training_in_float():
    x = torch.zeros(2, 3)
    assert fused_applies(x)
    with torch.no_grad():
        assert not fused_applies(x)  # no gradient wanted: nn.GRU's forward
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not fused_applies(x)
    assert not fused_applies(x.to(torch.bfloat16))


SRC = torch.tensor([[4, 5, 6, 7], [8, 9, PAD, PAD], [5, PAD, PAD, PAD]])
TGT_IN = torch.tensor([[11, 4, 5, 6, 7], [11, 8, 9, PAD, PAD], [11, 5, PAD, PAD, PAD]])
TGT_OUT = torch.tensor([[4, 5, 6, 7, 12], [8, 9, 12, PAD, PAD], [5, 12, PAD, PAD, PAD]])


def _loss_and_grads(model):
    """Logits, attention and every parameter's gradient of the teacher-forced loss."""
    model.zero_grad()
    logits, attention = model(SRC, TGT_IN, return_attention=True)
    sequence_loss(logits, TGT_OUT).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    return logits.detach(), attention.detach(), grads


def _reference_and_fast(model):
    """:func:`_loss_and_grads` of the reference model, then of its fast paths."""
    reference = _loss_and_grads(use_fast_paths(model, False))
    fast = _loss_and_grads(use_fast_paths(model))
    use_fast_paths(model, False)
    return reference, fast


@pytest.mark.parametrize("layers", [1, 2], ids=["one_layer", "two_layers"])
def test_the_fast_gru_model_is_the_reference_in_values_and_gradients(layers, monkeypatch):
    torch.manual_seed(0)
    cfg = RNNSeq2SeqConfig(
        vocab_size=10, embed_dim=8, hidden_dim=6, attention_dim=5, dropout=0.0,
        n_encoder_layers=layers, n_decoder_layers=layers,
    )  # fmt: skip
    model = RNNSeq2Seq(cfg).double()
    with torch.no_grad():
        model.decoder.attention.b_a.normal_()  # zero at init: make a dropped b_a visible
    used = []
    real = packed_bigru
    monkeypatch.setattr("convs2s_edu.fast.gru.packed_bigru", lambda *a: used.append(1) or real(*a))
    (ref_logits, ref_attn, ref_grads), (logits, attn, grads) = _reference_and_fast(model)
    assert used == [1]  # the fused layer served the fast run only
    running = TGT_IN.ne(PAD)  # up to a row's last token (the targets here have no inner PAD)
    assert_close(logits[running], ref_logits[running])
    assert_close(attn[running], ref_attn[running])
    assert (logits[~running] == 0).all() and (attn[~running] == 0).all()  # never computed
    assert grads.keys() == ref_grads.keys()
    for name in ref_grads:
        assert_close(grads[name], ref_grads[name], msg=name)


def test_without_attention_only_the_encoder_takes_its_fast_path():
    """RNNencdec's decoder (:class:`~convs2s_edu.FixedContext`) has no Bahdanau energy for
    :class:`FastGRUDecoder` to compute: the switch leaves it as it is, and the model with
    the fast encoder gives the reference's logits and gradients."""
    torch.manual_seed(0)
    cfg = RNNSeq2SeqConfig(vocab_size=10, embed_dim=8, hidden_dim=6, dropout=0.0, attention=False)
    model = RNNSeq2Seq(cfg).double()
    (ref_logits, _, ref_grads), (logits, attn, grads) = _reference_and_fast(model)
    use_fast_paths(model)
    assert type(model.encoder).__name__ == "FastGRUEncoder" and type(model.decoder) is GRUDecoder
    assert_close(logits, ref_logits)
    assert (attn == 0).all()
    for name in ref_grads:
        assert_close(grads[name], ref_grads[name], msg=name)


def test_the_fast_gru_model_drops_out_between_layers_where_nn_gru_does():
    """In training, the written-out paths (the fused encoder, the packed decoder's GRU
    equations) drop out between stacked layers where :class:`torch.nn.GRU` itself does:
    with that dropout at 1 (a deterministic mask of zeros) and no other dropout, the same
    loss and gradients as the reference."""
    torch.manual_seed(0)
    cfg = RNNSeq2SeqConfig(
        vocab_size=10, embed_dim=8, hidden_dim=6, attention_dim=5, dropout=0.0,
        n_encoder_layers=2, n_decoder_layers=3,
    )  # fmt: skip
    model = RNNSeq2Seq(cfg).double().train()
    model.encoder.gru.dropout = model.decoder.gru.dropout = 1.0
    (ref_logits, _, ref_grads), (logits, _, grads) = _reference_and_fast(model)
    running = TGT_IN.ne(PAD)
    assert_close(logits[running], ref_logits[running])
    for name in ref_grads:
        assert_close(grads[name], ref_grads[name], msg=name)


def test_the_fast_encoder_is_the_reference_where_no_gradient_is_wanted(monkeypatch):
    torch.manual_seed(0)
    cfg = RNNSeq2SeqConfig(vocab_size=10, embed_dim=8, hidden_dim=6, attention_dim=5)
    model = RNNSeq2Seq(cfg).eval()
    monkeypatch.setattr("convs2s_edu.fast.gru.packed_bigru", lambda *a: pytest.fail("used"))
    with torch.no_grad():
        ref = model.encode(SRC)
        fast = use_fast_paths(model).encode(SRC)
    assert type(model.encoder) is FastGRUEncoder and type(model.decoder) is FastGRUDecoder
    for a, b in zip(fast, ref):
        assert_close(a, b)
