"""Tests of ``convs2s_edu.convs2s``: ConvS2S (Gehring et al., 2017) against hand computations
from its own parameters, its ablation switches (positions, attention layers), its parameter
names and the checks of its config and building blocks.

Every equivalence test rebuilds a quantity from the module's parameters with
plain tensor operations (``F.pad``, ``F.conv1d``, matrix products, explicit
softmax over the real source tokens) and compares with ``assert_close``.
The model-level properties (causality, padding invariance, the attention's
normalisation, learning) are tested on all four encoder/decoder combinations,
ConvS2S variants included, in ``test_seq2seq.py``.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from _tiny import VOCAB, randomise_biases, tiny_model
from torch.nn.utils import parametrize
from torch.testing import assert_close

from convs2s_edu import (
    PAD,
    ConvBlock,
    ConvS2S,
    ConvS2SConfig,
    MultiStepAttention,
    greedy_decode,
    scale_gradient,
    sos_index,
)
from convs2s_edu.ablations import AblatedConvS2S, AblationConfig, NoPositions
from convs2s_edu.convs2s import ConvMemory

pytestmark = pytest.mark.usefixtures("single_thread")

SQRT_HALF = math.sqrt(0.5)

# config variants every model-level property must hold for
VARIANTS = {
    "original": {},
    "paper_tricks": dict(weight_norm=True, scale_encoder_grad=True, scale_context=True),
    "kernel5": dict(kernel_size=5),
}


def _random_tokens(B: int, T: int, vocab: int, generator=None) -> torch.Tensor:
    return torch.randint(1, vocab + 1, (B, T), generator=generator)


def _perturb_weight_norm_gains(module: torch.nn.Module) -> None:
    """With weight norm, ``weight = g * v / ||v||`` and ``g`` starts at ``||v||``; move every
    ``g`` so that ``.weight`` differs from the raw ``v`` and a test that reads the wrong one
    fails."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("parametrizations.weight.original0"):
                p.mul_(torch.rand_like(p) + 0.5)


# --------------------------------------------------------------------------
# GLU block
# --------------------------------------------------------------------------


@pytest.mark.parametrize("weight_norm", [False, True], ids=["plain", "weight_norm"])
@pytest.mark.parametrize("kernel_size", [1, 3, 5])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "centred"])
def test_glu_block_matches_hand_computation(causal, kernel_size, weight_norm):
    torch.manual_seed(0)
    d, B, T = 6, 2, 7
    block = ConvBlock(d, kernel_size, causal=causal, dropout=0.3, weight_norm=weight_norm).eval()
    randomise_biases(block)
    _perturb_weight_norm_gains(block)
    x = torch.randn(B, T, d)
    k = kernel_size
    pad = (k - 1, 0) if causal else ((k - 1) // 2, (k - 1) // 2)
    padded = F.pad(x.transpose(1, 2), pad)  # (B, d, T + k - 1)
    assert padded.shape == (B, d, T + k - 1)
    y = F.conv1d(padded, block.conv.weight, block.conv.bias)  # (B, 2d, T): [A; B]
    A, gate = y[:, :d], y[:, d:]
    expected = ((A * torch.sigmoid(gate)).transpose(1, 2) + x) * SQRT_HALF
    assert_close(block(x), expected)


def test_glu_block_zeroes_padded_positions_before_the_convolution():
    torch.manual_seed(0)
    d = 5
    block = ConvBlock(d, 3, causal=False).eval()
    x = torch.randn(2, 6, d)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[1, 3:] = True
    x_zeroed = x.masked_fill(mask.unsqueeze(-1), 0.0)
    padded = F.pad(x_zeroed.transpose(1, 2), (1, 1))
    y = F.conv1d(padded, block.conv.weight, block.conv.bias)
    expected = ((y[:, :d] * torch.sigmoid(y[:, d:])).transpose(1, 2) + x_zeroed) * SQRT_HALF
    assert_close(block(x, padding_mask=mask), expected)


def test_causal_block_output_ignores_later_inputs_and_centred_block_does_not():
    torch.manual_seed(0)
    d, T, t = 4, 8, 5
    x = torch.randn(1, T, d)
    x2 = x.clone()
    x2[:, t:] = torch.randn(1, T - t, d)
    causal = ConvBlock(d, 3, causal=True).eval()
    assert_close(causal(x2)[:, :t], causal(x)[:, :t], atol=0.0, rtol=0.0)
    assert not torch.allclose(causal(x2)[:, t:], causal(x)[:, t:])
    centred = ConvBlock(d, 3, causal=False).eval()
    assert not torch.allclose(centred(x2)[:, t - 1], centred(x)[:, t - 1])


# --------------------------------------------------------------------------
# Initialisation (§3.5)
# --------------------------------------------------------------------------


def test_paper_init_conv_and_linear_std_match_formulas():
    torch.manual_seed(0)
    dropout, f, d, k = 0.2, 192, 256, 3
    p = 1.0 - dropout
    model = ConvS2S(
        ConvS2SConfig(
            vocab_size=10,
            embed_dim=f,
            hidden_dim=d,
            n_encoder_layers=1,
            n_decoder_layers=1,
            kernel_size=k,
            dropout=dropout,
            weight_norm=True,
        )
    )
    conv_std = math.sqrt(4 * p / (k * d))
    convs = [model.encoder.blocks[0].conv, model.decoder.blocks[0].conv]
    for conv in convs:
        assert parametrize.is_parametrized(conv, "weight")
        assert conv.weight.shape == (2 * d, d, k)
        assert conv.weight.std().item() == pytest.approx(conv_std, rel=0.03)
        assert conv.weight.mean().item() == pytest.approx(0.0, abs=0.01 * conv_std)
        assert torch.count_nonzero(conv.bias) == 0
    # linear layers: std sqrt(p / n) after dropout, sqrt(1 / n) otherwise; n = fan-in
    linears = {
        "encoder.in_proj": (model.encoder.in_proj, f, p),  # input: dropped-out embeddings
        "decoder.in_proj": (model.decoder.in_proj, f, p),
        "decoder.W_o": (model.decoder.W_o, d, p),  # dropout before the output layer
        "encoder.out_proj": (model.encoder.out_proj, d, 1.0),  # no dropout on their inputs
        "decoder.W_c": (model.decoder.W_c[0], f, 1.0),
        "decoder.attention.W_d": (model.decoder.attention[0].W_d, d, 1.0),
    }
    for name, (lin, fan_in, keep) in linears.items():
        assert parametrize.is_parametrized(lin, "weight"), name
        assert lin.weight.shape[1] == fan_in, name
        # W_o has only (vocab + 3) * d = 3328 entries: a looser, still discriminating bound
        rel = 0.06 if name == "decoder.W_o" else 0.03
        assert lin.weight.std().item() == pytest.approx(math.sqrt(keep / fan_in), rel=rel), name
        if lin.bias is not None:
            assert torch.count_nonzero(lin.bias) == 0, name
    # embeddings N(0, 0.1), PAD row zero
    for emb in (model.encoder.embed, model.decoder.embed):
        assert emb.position.weight.std().item() == pytest.approx(0.1, rel=0.05)
        assert emb.token.weight[1:].std().item() == pytest.approx(0.1, rel=0.1)
        assert torch.count_nonzero(emb.token.weight[PAD]) == 0


def test_weight_norm_weight_is_gain_times_direction():
    torch.manual_seed(0)
    block = ConvBlock(4, 3, weight_norm=True)
    _perturb_weight_norm_gains(block)
    g = block.conv.parametrizations.weight.original0  # (2d, 1, 1)
    v = block.conv.parametrizations.weight.original1  # (2d, d, k)
    norm = v.flatten(1).norm(dim=1).view(-1, 1, 1)
    assert_close(block.conv.weight, g * v / norm)


def test_default_config_has_no_weight_norm():
    model = ConvS2S(ConvS2SConfig(vocab_size=10, embed_dim=8, hidden_dim=8))
    assert not parametrize.is_parametrized(model.encoder.blocks[0].conv, "weight")
    assert not parametrize.is_parametrized(model.decoder.W_o, "weight")


# --------------------------------------------------------------------------
# Multi-step attention (§3.3, eq. 1)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("weight_norm", [False, True], ids=["plain", "weight_norm"])
@pytest.mark.parametrize("scale_context", [False, True], ids=["no_scale", "scale_context"])
def test_multistep_attention_matches_paper_equations(scale_context, weight_norm):
    torch.manual_seed(0)
    B, T, S, d, f = 3, 4, 6, 10, 8
    att = MultiStepAttention(d, f, scale_context=scale_context, weight_norm=weight_norm)
    randomise_biases(att)
    _perturb_weight_norm_gains(att)
    if weight_norm:
        assert parametrize.is_parametrized(att.W_d, "weight")
    h = torch.randn(B, T, d)
    g = torch.randn(B, T, f)
    z = torch.randn(B, S, f)  # deliberately non-zero at padding: the mask must do the work
    e = torch.randn(B, S, f)
    lengths = [6, 2, 4]
    mask = torch.arange(S)[None, :] >= torch.tensor(lengths)[:, None]
    enc = ConvMemory(z=z, z_plus_e=z + e, padding_mask=mask)
    c, a = att(h, g, enc)
    assert c.shape == (B, T, f) and a.shape == (B, T, S)

    W_d, b_d = att.W_d.weight, att.b_d  # (f, d), (f,)
    for b in range(B):
        m = lengths[b]
        for i in range(T):
            # d_i = W_d h_i + b_d + g_i
            d_i = W_d @ h[b, i] + b_d + g[b, i]
            # a_ij = exp(d_i . z_j) / sum_t exp(d_i . z_t), j over the m real tokens
            dots = torch.stack([d_i @ z[b, j] for j in range(m)])
            a_i = torch.exp(dots - dots.max())
            a_i = a_i / a_i.sum()
            # c_i = sum_j a_ij (z_j + e_j)
            c_i = sum(a_i[j] * (z[b, j] + e[b, j]) for j in range(m))
            if scale_context:
                c_i = c_i * (m * math.sqrt(1.0 / m))
            assert_close(a[b, i, :m], a_i)
            assert (a[b, i, m:] == 0).all()
            assert_close(c[b, i], c_i)


# --------------------------------------------------------------------------
# The whole model against a reference written from the parameters
# --------------------------------------------------------------------------


def _reference_convs2s(model: ConvS2S, src: torch.Tensor, tgt_in: torch.Tensor):
    """ConvS2S forward (eval mode) written out from the parameters: §3.1-3.3 plus the
    documented departures (``W_c`` projection and sqrt(0.5) after the attention)."""
    cfg, enc, dec = model.cfg, model.encoder, model.decoder
    k = cfg.kernel_size
    pad = src == PAD  # (B, S)
    S, T = src.shape[1], tgt_in.shape[1]

    def linear(lin, x):
        out = x @ lin.weight.T
        return out + lin.bias if lin.bias is not None else out

    def glu_conv(conv, x, left, right):
        y = F.conv1d(F.pad(x.transpose(1, 2), (left, right)), conv.weight, conv.bias)
        A, gate = y.chunk(2, dim=1)
        return ((A * torch.sigmoid(gate)).transpose(1, 2) + x) * SQRT_HALF

    # encoder: e_j = w_j + p_j, centred GLU blocks with padding zeroed, keys z, values z + e
    e = enc.embed.token.weight[src] + enc.embed.position.weight[:S]
    x = linear(enc.in_proj, e)
    for block in enc.blocks:
        x = x.masked_fill(pad.unsqueeze(-1), 0.0)
        x = glu_conv(block.conv, x, (k - 1) // 2, (k - 1) // 2)
    z = linear(enc.out_proj, x).masked_fill(pad.unsqueeze(-1), 0.0)
    values = z + e
    m = (~pad).sum(1).float()

    # decoder: g_i = w_i + p_i, causal GLU blocks, one attention per layer
    g = dec.embed.token.weight[tgt_in] + dec.embed.position.weight[:T]
    x = linear(dec.in_proj, g)
    attn = []
    for l, block in enumerate(dec.blocks):
        h = glu_conv(block.conv, x, k - 1, 0)
        att = dec.attention[l]
        d = h @ att.W_d.weight.T + att.b_d + g
        scores = (d @ z.transpose(1, 2)).masked_fill(pad.unsqueeze(1), float("-inf"))
        a = torch.softmax(scores, dim=-1)
        c = a @ values
        if cfg.scale_context:
            c = c * torch.sqrt(m).view(-1, 1, 1)
        x = (h + linear(dec.W_c[l], c)) * SQRT_HALF
        attn.append(a)
    return linear(dec.W_o, x), torch.stack(attn, dim=1)


@pytest.mark.parametrize("variant", list(VARIANTS), ids=list(VARIANTS))
def test_convs2s_forward_matches_reference_from_parameters(
    variant, tiny_convs2s_cfg, ragged_batch
):
    torch.manual_seed(0)
    model = ConvS2S(tiny_convs2s_cfg(**VARIANTS[variant], dropout=0.1)).eval()
    randomise_biases(model)
    _perturb_weight_norm_gains(model)
    _, batch = ragged_batch
    logits, attn = model(batch.src, batch.tgt_in, return_attention=True)
    ref_logits, ref_attn = _reference_convs2s(model, batch.src, batch.tgt_in)
    assert logits.shape == (3, batch.tgt_in.shape[1], model.n_ids)
    assert_close(logits, ref_logits)
    assert_close(attn, ref_attn)


# --------------------------------------------------------------------------
# Causality, padding invariance, attention normalisation
# --------------------------------------------------------------------------


def test_convs2s_encoder_is_not_causal(tiny_convs2s_cfg):
    torch.manual_seed(0)
    model = ConvS2S(tiny_convs2s_cfg()).eval()
    src = torch.tensor([[3, 1, 4, 1, 5]])
    changed = src.clone()
    changed[0, -1] = 9
    with torch.no_grad():
        z, z2 = model.encode(src).states, model.encode(changed).states
        # centred convolutions: the earlier neighbour sees the changed last token
        assert not torch.allclose(z[0, -2], z2[0, -2])
        # and attention carries the whole source to the first decoder position
        tgt_in = torch.tensor([[11, 1, 1, 3]])
        assert not torch.allclose(model(src, tgt_in)[0, 0], model(changed, tgt_in)[0, 0])


# --------------------------------------------------------------------------
# Gradient scaling (§3.4)
# --------------------------------------------------------------------------


def test_scale_gradient_is_identity_forward_and_scales_backward():
    torch.manual_seed(0)
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(3, 4)
    y = scale_gradient(x, 0.3)
    assert torch.equal(y, x)
    (y * w).sum().backward()
    assert_close(x.grad, 0.3 * w)


@pytest.mark.parametrize("weight_norm", [False, True], ids=["plain", "weight_norm"])
def test_scale_encoder_grad_divides_encoder_gradients_by_decoder_layers(
    weight_norm, tiny_convs2s_cfg, ragged_batch
):
    torch.manual_seed(0)
    n_layers = 3
    cfg_off = tiny_convs2s_cfg(n_decoder_layers=n_layers, weight_norm=weight_norm)
    off = ConvS2S(cfg_off).eval()
    on = ConvS2S(cfg_off.replace(scale_encoder_grad=True)).eval()
    on.load_state_dict(off.state_dict())
    _, batch = ragged_batch

    grads = {}
    for name, model in (("off", off), ("on", on)):
        logits = model(batch.src, batch.tgt_in)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), batch.tgt_out.reshape(-1), ignore_index=PAD
        )
        loss.backward()
        grads[name] = (logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()})
    logits_off, g_off = grads["off"]
    logits_on, g_on = grads["on"]
    assert torch.equal(logits_on, logits_off)  # identity in the forward pass

    conv_names = [n for n in g_off if n.startswith("encoder.blocks.")]
    assert conv_names
    projections = ("encoder.in_proj", "encoder.out_proj")
    scaled = conv_names + [n for n in g_off if n.startswith(projections)]
    for n in scaled:
        assert g_off[n].abs().sum() > 0, n
        assert_close(g_on[n], g_off[n] / n_layers, msg=lambda m, n=n: f"{n}: {m}")
    # the decoder's gradients are untouched
    for n in g_off:
        if n.startswith("decoder."):
            assert_close(g_on[n], g_off[n], msg=lambda m, n=n: f"{n}: {m}")


# --------------------------------------------------------------------------
# Incremental decoding
# --------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["original", "paper_tricks", "kernel5", "kernel1"])
def test_decoder_step_reproduces_full_forward_column_by_column(
    variant, tiny_convs2s_cfg, ragged_batch
):
    torch.manual_seed(0)
    overrides = dict(kernel_size=1) if variant == "kernel1" else VARIANTS[variant]
    model = ConvS2S(tiny_convs2s_cfg(**overrides, dropout=0.1)).eval()
    randomise_biases(model)
    _, batch = ragged_batch
    B, T = batch.tgt_in.shape
    with torch.no_grad():
        logits, attn = model(batch.src, batch.tgt_in, return_attention=True)
        state = model.decoder.start(model.encode(batch.src))
        for t in range(T):
            logits_t, attn_t, state = model.decoder.step(batch.tgt_in[:, t], state)
            assert_close(logits_t, logits[:, t], atol=1e-5, rtol=1e-5)
            assert_close(attn_t, attn[:, :, t], atol=1e-5, rtol=1e-5)
        assert state.position == T


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "centred"])
@pytest.mark.parametrize("kernel_size, n_layers", [(3, 1), (3, 4), (5, 3)])
def test_receptive_field_is_one_plus_l_times_k_minus_one(causal, kernel_size, n_layers):
    """After l blocks, output i depends on exactly 1 + l(k-1) inputs: i-l(k-1)..i (causal)
    or i-l(k-1)/2..i+l(k-1)/2 (centred), measured by the gradient of output i."""
    torch.manual_seed(0)
    d, T, i = 8, 40, 20
    blocks = [ConvBlock(d, kernel_size, causal=causal) for _ in range(n_layers)]
    x = torch.randn(1, T, d, requires_grad=True)
    h = x
    for block in blocks:
        h = block(h)
    h[0, i].sum().backward()
    reached = x.grad[0].abs().sum(dim=1).nonzero().flatten().tolist()
    width = n_layers * (kernel_size - 1)
    first = i - width if causal else i - width // 2
    assert reached == list(range(first, first + width + 1))
    assert len(reached) == 1 + n_layers * (kernel_size - 1)


def test_attention_layer_errors_say_what_is_allowed():
    with pytest.raises(ValueError, match=r"distinct layer numbers in 1\.\.3, got \(4,\)"):
        AblationConfig(n_decoder_layers=3, attention_layers=(4,))


# --------------------------------------------------------------------------
# Parameter names (checkpoints of earlier versions load)
# --------------------------------------------------------------------------


#: The parameter names of ConvS2S, as written by 0.1.0.
def test_convs2s_parameter_names_are_unchanged():
    keys = set(tiny_model("convs2s", n_encoder_layers=1, n_decoder_layers=1).state_dict())
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


# --------------------------------------------------------------------------
# Ablation switches: positions and attention layers
# --------------------------------------------------------------------------


def _pair(tiny_convs2s_cfg, **switches):
    """A model with ``switches`` and a default model holding the same parameters."""
    torch.manual_seed(0)
    ablated = AblatedConvS2S(tiny_convs2s_cfg(**switches)).eval()
    full = ConvS2S(tiny_convs2s_cfg()).eval()
    missing, unexpected = full.load_state_dict(ablated.state_dict(), strict=False)
    assert not unexpected
    return ablated, full, missing


@pytest.mark.parametrize("side", ["source", "target"])
def test_no_positions_equals_a_zero_position_table(tiny_convs2s_cfg, ragged_batch, side):
    _, batch = ragged_batch
    ablated, full, missing = _pair(tiny_convs2s_cfg, **{f"{side}_positions": False})
    part = full.encoder if side == "source" else full.decoder
    assert missing == [f"{'encoder' if side == 'source' else 'decoder'}.embed.position.weight"]
    ablated_part = ablated.encoder if side == "source" else ablated.decoder
    assert isinstance(ablated_part.embed.position, NoPositions)
    with torch.no_grad():
        part.embed.position.weight.normal_()
        before = full(batch.src, batch.tgt_in)
        assert not torch.allclose(before, ablated(batch.src, batch.tgt_in))  # the test can fail
        part.embed.position.weight.zero_()
        torch.testing.assert_close(ablated(batch.src, batch.tgt_in), full(batch.src, batch.tgt_in))


def test_no_positions_output_ignores_any_position_table(tiny_convs2s_cfg, ragged_batch):
    """With positions off, permuting the rows of a (default model's) table changes nothing in
    the ablated model, while it changes the default model's output."""
    _, batch = ragged_batch
    ablated, full, _ = _pair(tiny_convs2s_cfg, source_positions=False, target_positions=False)
    assert not any("position" in name for name, _ in ablated.named_parameters())
    out = ablated(batch.src, batch.tgt_in)
    before = full(batch.src, batch.tgt_in)
    with torch.no_grad():
        for part in (full.encoder, full.decoder):
            part.embed.position.weight.copy_(part.embed.position.weight.flip(0))
    assert not torch.allclose(before, full(batch.src, batch.tgt_in))
    torch.testing.assert_close(ablated(batch.src, batch.tgt_in), out)


def _block_outputs(model, src, tgt_in):
    outs = []
    hooks = [
        b.register_forward_hook(lambda m, i, o: outs.append(o.detach()))
        for b in model.decoder.blocks
    ]
    try:
        model(src, tgt_in)
    finally:
        for h in hooks:
            h.remove()
    return outs


@pytest.mark.parametrize("layers", [(3,), (1,), (1, 3), None])
def test_attention_only_where_asked(tiny_convs2s_cfg, ragged_batch, layers):
    """A decoder layer's convolution output depends on the source only if a layer below it
    attends; the attending layers are the only ones with attention parameters."""
    _, batch = ragged_batch
    torch.manual_seed(0)
    model = AblatedConvS2S(tiny_convs2s_cfg(n_decoder_layers=4, attention_layers=layers)).eval()
    attending = layers or (1, 2, 3, 4)
    assert len(model.decoder.attention) == len(model.decoder.W_c) == len(attending)
    _, attn = model(batch.src, batch.tgt_in, return_attention=True)
    assert attn.shape[1] == len(attending)
    other_src = batch.src.clone()
    other_src[:, 0] = (other_src[:, 0] % 10) + 1  # a different first token, same padding
    a = _block_outputs(model, batch.src, batch.tgt_in)
    b = _block_outputs(model, other_src, batch.tgt_in)
    for l in range(4):  # l: 0-based layer; its block sees layers 1..l's attentions
        depends = any(n <= l for n in attending)
        assert (not torch.allclose(a[l], b[l])) == depends, (layers, l)


@pytest.mark.parametrize(
    "switches",
    [
        {"attention_layers": (2,)},
        {"target_positions": False},
        {"source_positions": False, "attention_layers": (1, 3)},
    ],
)
def test_ablated_models_decode_incrementally_like_the_full_recompute(
    tiny_convs2s_cfg, ragged_batch, switches
):
    _, batch = ragged_batch
    torch.manual_seed(1)
    model = AblatedConvS2S(tiny_convs2s_cfg(**switches))
    assert greedy_decode(model, batch.src, incremental=True) == greedy_decode(
        model, batch.src, incremental=False
    )


def test_defaults_keep_the_state_dict(tiny_convs2s_cfg):
    """An ablated model whose switches all say "the paper's" is the paper's model."""
    torch.manual_seed(0)
    default = ConvS2S(tiny_convs2s_cfg())
    torch.manual_seed(0)
    explicit = AblatedConvS2S(
        tiny_convs2s_cfg(attention_layers=[3, 1, 2], source_positions=True, target_positions=True)
    )
    sd, se = default.state_dict(), explicit.state_dict()
    assert list(sd) == list(se)
    assert "encoder.embed.position.weight" in sd and "decoder.attention.2.b_d" in sd
    for k in sd:
        torch.testing.assert_close(sd[k], se[k], rtol=0, atol=0)
    assert explicit.cfg.attention_layers == (1, 2, 3)


@pytest.mark.parametrize("layers, n_attentions", [((2,), 1), ((1, 3), 2), (None, 3)])
def test_encoder_gradient_is_divided_by_the_number_of_attentions(
    tiny_convs2s_cfg, ragged_batch, layers, n_attentions
):
    """The encoder's conv blocks get gradient only through z^u, which scale_encoder_grad
    divides by the number of attention mechanisms (§3.4), not by the number of layers."""
    _, batch = ragged_batch
    grads = []
    for scale in (False, True):
        torch.manual_seed(0)
        model = AblatedConvS2S(tiny_convs2s_cfg(attention_layers=layers, scale_encoder_grad=scale))
        model(batch.src, batch.tgt_in).square().sum().backward()
        grads.append(model.encoder.blocks[0].conv.weight.grad)
    torch.testing.assert_close(grads[1], grads[0] / n_attentions)


# --------------------------------------------------------------------------
# Bad configs, sizes and positions: a ValueError that names the value and the allowed range
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, err",
    [
        ([0], ValueError),
        ([4], ValueError),
        ([], ValueError),
        ([1, 1], ValueError),
        ([True], ValueError),
        ("1", TypeError),
        (2, TypeError),
    ],
)
def test_attention_layers_validation(tiny_convs2s_cfg, bad, err):
    with pytest.raises(err, match="attention_layers"):
        tiny_convs2s_cfg(attention_layers=bad)  # 3 decoder layers


def test_position_switch_validation(tiny_convs2s_cfg):
    with pytest.raises(TypeError, match="source_positions"):
        tiny_convs2s_cfg(source_positions="no")


@pytest.mark.parametrize("kernel_size", [2, 4])
def test_even_kernel_with_centred_padding_is_rejected(kernel_size):
    with pytest.raises(ValueError, match=rf"odd kernel_size.*got {kernel_size}\b"):
        ConvBlock(8, kernel_size, causal=False)
    with pytest.raises(ValueError, match=rf"kernel_size must be odd.*got {kernel_size}\b"):
        ConvS2SConfig(kernel_size=kernel_size)
    # a causal block pads k-1 on the left only, so an even width is fine there
    block = ConvBlock(8, kernel_size, causal=True)
    assert block(torch.randn(1, 5, 8)).shape == (1, 5, 8)


CONV_SIZES = [
    "vocab_size",
    "embed_dim",
    "hidden_dim",
    "n_encoder_layers",
    "n_decoder_layers",
    "kernel_size",
    "max_positions",
]


@pytest.mark.parametrize("value", [0, -3])
@pytest.mark.parametrize("field", CONV_SIZES)
def test_convs2s_config_rejects_non_positive_sizes(field, value):
    with pytest.raises(ValueError, match=rf"{field} must be an integer >= 1, got {value}\b"):
        ConvS2SConfig(**{field: value})


def test_conv_block_rejects_non_positive_sizes():
    with pytest.raises(ValueError, match=r"d must be an integer >= 1, got 0"):
        ConvBlock(0, 3)
    with pytest.raises(ValueError, match=r"kernel_size must be an integer >= 1, got -1"):
        ConvBlock(8, -1, causal=True)


def test_decoder_step_past_the_position_table_is_rejected():
    max_pos = 8
    model = tiny_model(
        "convs2s",
        seed=None,
        embed_dim=8,
        hidden_dim=8,
        n_encoder_layers=1,
        n_decoder_layers=1,
        max_positions=max_pos,
        dropout=0.1,
    ).eval()
    state = model.decoder.start(model.encode(torch.randint(1, VOCAB + 1, (2, 4))))
    y = torch.full((2,), sos_index(VOCAB))
    with torch.no_grad():
        for _ in range(max_pos):
            _, _, state = model.decoder.step(y, state)
        with pytest.raises(ValueError, match=rf"position {max_pos}\b.*0\.\.{max_pos - 1}\b"):
            model.decoder.step(y, state)


@pytest.mark.parametrize("values", ["z+e", "z", "e"])
def test_attention_values_switch_what_the_context_sums(values):
    model = tiny_model("convs2s", attention_values=values).eval()
    src, tgt_in = torch.tensor([[3, 1, 2, 5]]), torch.tensor([[VOCAB + 1, 1, 2, 3]])
    enc = model.encode(src)
    memory = model.decoder.memory(enc)
    z, e = enc.states, enc.embedded  # keys z_j either way
    assert_close(memory.z, z)
    assert_close(memory.z_plus_e, {"z+e": z + e, "z": z, "e": e}[values])
    logits, attn = model(src, tgt_in, return_attention=True)  # and the model runs on it
    assert torch.isfinite(logits).all() and attn.shape[-1] == 4
    with pytest.raises(ValueError, match=r'attention_values must be "z\+e", "z" or "e", got'):
        tiny_model("convs2s", attention_values="e+z")


def test_the_papers_model_refuses_a_config_it_would_partly_ignore(tiny_convs2s_cfg):
    """ConvS2S builds the paper's model: an ablation's config is built by its own class,
    never silently as the full model."""
    with pytest.raises(TypeError, match=r"would ignore the fields \['attention_layers'"):
        ConvS2S(tiny_convs2s_cfg(attention_layers=(1,)))
    assert isinstance(AblatedConvS2S(tiny_convs2s_cfg(attention_layers=(1,))), ConvS2S)
