r"""
Five questions learners ask
===========================

The public tutorials' issue trackers keep asking the first four of these questions
about ConvS2S; the fifth is the one a reader who knows the Transformer asks. Each is
answered here from the paper's own words and checked on the package's model, with a
link to the page that teaches it:

1. Are the attention's values :math:`z_j + e_j`, or :math:`z_j` alone?
2. Does the decoder add its residual before or after the attention?
3. Why does the paper write :math:`m\sqrt{1/m}` for what is :math:`\sqrt{m}`?
4. Where does :math:`\sqrt{0.5}` come from?
5. Why are the scores not divided by :math:`\sqrt{f}`, as the Transformer's are by
   :math:`\sqrt{d_k}`?

Every check runs on a freshly initialised ConvS2S with the paper's normalisation: the
questions are about what the model computes, not what it learns.
"""

# %%
# The model and one batch
# -----------------------

import math

import matplotlib.pyplot as plt
import torch

from convs2s_edu import ConvS2S, ConvS2SConfig, sos_index
from convs2s_edu.convs2s import SQRT_HALF

torch.manual_seed(0)
cfg = ConvS2SConfig.paper()  # weight norm, encoder gradient scaling, m·sqrt(1/m)
model = ConvS2S(cfg).eval()
src = torch.randint(1, cfg.vocab_size + 1, (4, 12))  # (B, S)
tgt_in = torch.cat([torch.full((4, 1), sos_index(cfg.vocab_size)), src.sort(1).values], 1)
enc = model.encode(src)  # keys z_j^u: enc.states, embeddings e_j: enc.embedded
print(f"ConvS2S: {cfg.n_encoder_layers} + {cfg.n_decoder_layers} layers, a batch {src.shape}")

# %%
# 1. Values: :math:`z_j + e_j`
# ----------------------------
# §3.3, equation 2: :math:`c^l_i = \sum_j a^l_{ij} (z^u_j + e_j)`, and the paper says
# why: "it resembles key-value memory networks where the keys are the :math:`z^u_j` and
# the values are the :math:`z^u_j + e_j`"; :math:`e_j` "provides point information
# about a specific input element". The scores use :math:`z^u_j` alone. The cell reads
# the decoder's memory and checks both against the encoder's output, then recomputes
# one layer's context from its own attention weights.

memory = model.decoder.memory(enc)
keys_are_z = torch.equal(memory.z, enc.states)
values_gap = (memory.z_plus_e - (enc.states + enc.embedded)).abs().max().item()
print(f"keys are z_j: {keys_are_z}; values minus (z_j + e_j): at most {values_gap:.1e}")

att = model.decoder.attention[0]
h = torch.randn(4, tgt_in.shape[1], cfg.hidden_dim)  # any decoder state (B, T, d)
g = model.decoder.embed(tgt_in)  # (B, T, f)
c, a = att(h, g, memory)  # (B, T, f), (B, T, S)
m = (~memory.padding_mask).sum(1).float().view(-1, 1, 1)  # real source tokens
by_hand = a @ (enc.states + enc.embedded) * m * torch.sqrt(1 / m)
print(f"c_i against sum_j a_ij (z_j + e_j) * m sqrt(1/m): {(c - by_hand).abs().max():.1e}")

# %%
# What the values are worth on this task, :math:`z_j` or :math:`e_j` alone against
# their sum, is measured after training on :ref:`What the values carry
# <sphx_glr_auto_examples_plot_14_attention_values.py>` (the ablation lives in
# :mod:`convs2s_edu.ablations`). One implementation detail a reader of fairseq's
# ``fconv.py`` meets: there the values are :math:`(z_j + e_j)\sqrt{0.5}`, a departure
# from equation 2 that this package does not make.
#
# 2. The residual first, then the attention
# -----------------------------------------
# Read literally, the paper's equations put the residual first: §3.2 defines a layer's
# output with its residual inside, :math:`h^l_i = v(W^l [\dots] + b^l_w) + h^{l-1}_i`,
# and §3.3 adds the context to it: "Once :math:`c^l_i` has been computed, it is simply
# added to the output of the corresponding decoder layer :math:`h^l_i`". The query
# :math:`d^l_i = W^l_d h^l_i + b^l_d + g_i` then sees the output with its residual. The
# words leave room for the other order: the residual goes "to the output of the block".
# This package takes the literal reading. The cell records, in every
# decoder layer, the block's output (residual included), the attention's context after
# :math:`W_c`, and what the layer hands to the next, and checks
# :math:`\sqrt{0.5}\,(h^l_i + W^l_c c^l_i)`.

dec, L = model.decoder, cfg.n_decoder_layers
seen = {}


def keep(key):  # a forward hook that keeps the module's output
    return lambda module, args, out: seen.__setitem__(key, out)


def keep_input(key):  # a forward pre-hook that keeps the module's input
    return lambda module, args: seen.__setitem__(key, args[0])


hooks = []
for l in range(L):
    hooks.append(dec.blocks[l].register_forward_hook(keep(("h", l))))
    hooks.append(dec.W_c[l].register_forward_hook(keep(("W_c c", l))))
    handed_to = dec.blocks[l + 1] if l + 1 < L else dec.W_o  # what reads the layer
    hooks.append(handed_to.register_forward_pre_hook(keep_input(("out", l))))
with torch.no_grad():
    model(src, tgt_in)
for hook in hooks:
    hook.remove()
for l in range(L):
    expected = (seen["h", l] + seen["W_c c", l]) * SQRT_HALF
    gap = (seen["out", l] - expected).abs().max().item()
    print(f"layer {l + 1}: output minus sqrt(0.5) (h + W_c c): {gap:.1e}")

# %%
# fairseq's ``fconv.py`` orders it the other way: it adds :math:`W_c c_i` to the gated
# linear unit's output, scales by :math:`\sqrt{0.5}`, then adds the residual and scales
# again, and its query starts from the unit's output without the residual (the
# :doc:`departures page </departures>` lists both). The decoder's layers are taught on
# :ref:`the multi-step attention page
# <sphx_glr_auto_examples_plot_07_multistep_attention.py>`.
#
# 3. :math:`m\sqrt{1/m}` is :math:`\sqrt{m}`, in two steps
# --------------------------------------------------------
# §3.4: "The conditional input :math:`c^l_i` generated by the attention is a weighted
# sum of m vectors (2) and we counteract a change in variance through scaling by
# :math:`m\sqrt{1/m}`; we multiply by m to scale up the inputs to their original
# size, assuming the attention scores are uniformly distributed." Uniform weights
# :math:`1/m` make the context a mean; :math:`\times m` turns it back into a sum, and
# :math:`\times\sqrt{1/m}` is the scaling that keeps a sum of :math:`m` independent
# unit-variance terms at unit variance, the same rule as :math:`\sqrt{0.5}` for a sum of
# two. The cell draws unit-variance values, averages them uniformly and prints the
# variance of the mean, the sum, and the scaled context.

gen = torch.Generator().manual_seed(1)
ms = [2, 4, 8, 16, 32]
variances = {"mean (uniform attention)": [], "x m sqrt(1/m)": []}
for m_ in ms:
    values = torch.randn(20_000, m_, generator=gen)  # unit variance
    mean = values.mean(1)
    scaled = mean * m_ * math.sqrt(1 / m_)
    variances["mean (uniform attention)"].append(mean.var().item())
    variances["x m sqrt(1/m)"].append(scaled.var().item())
    two_ways = m_ * math.sqrt(1 / m_) - math.sqrt(m_)
    print(
        f"m = {m_:2d}: var(mean) {mean.var():.3f} (1/m = {1 / m_:.3f}), "
        f"var(sum) {values.sum(1).var():6.2f}, var(scaled) {scaled.var():.3f}; "
        f"m sqrt(1/m) - sqrt(m) = {two_ways:.1e}"
    )

# %%
# The scaling's effect on the model is on :ref:`the context scaling page
# <sphx_glr_auto_examples_normalisation_plot_05_context_scaling.py>`.
#
# 4. :math:`\sqrt{0.5}`: two summands, twice the variance
# -------------------------------------------------------
# §3.4: "We multiply the sum of the input and output of a residual block by
# :math:`\sqrt{0.5}` to halve the variance of the sum. This assumes that both summands
# have the same variance which is not always true but effective in practice." The cell
# sends unit-variance inputs through a stack of the package's own ``ConvBlock`` and
# prints the activations' variance after each block, as the paper scales them and with
# the :math:`\sqrt{0.5}` undone (the block's output divided by it).

block_cfg = ConvS2SConfig.paper(n_encoder_layers=12)
stack = ConvS2S(block_cfg).encoder.blocks.eval()
x = torch.randn(64, 20, block_cfg.hidden_dim, generator=gen)  # (B, T, d), variance 1
scaled_x, unscaled_x = x, x
through = {"with sqrt(0.5)": [], "without": []}
with torch.no_grad():
    for block in stack:
        scaled_x = block(scaled_x)
        unscaled_x = block(unscaled_x) / SQRT_HALF
        through["with sqrt(0.5)"].append(scaled_x.var().item())
        through["without"].append(unscaled_x.var().item())
for name, v in through.items():
    print(f"{name:15s} variance after blocks 1-12: " + " ".join(f"{u:.2g}" for u in v))

# %%
# Both scalings as figures: the variance of the context against :math:`m` (left) and of
# the activations through the stack (right), on logarithmic axes.

fig, (left, right) = plt.subplots(1, 2, figsize=(9.3, 3.4), layout="constrained")
# the paper's scaling: blue squares, solid; without it: orange circles, dashed
paper, unscaled = dict(fmt="s-", color="C0"), dict(fmt="o--", color="C1")
labels = {"mean (uniform attention)": "the mean", "x m sqrt(1/m)": r"$\times m\sqrt{1/m}$"}
for (name, v), style in zip(variances.items(), (unscaled, paper)):
    left.plot(ms, v, style["fmt"], color=style["color"], label=labels[name])
left.set(xscale="log", yscale="log", xlabel="m, real source tokens", ylabel="variance")
left.set_xticks(ms, [str(m_) for m_ in ms])
left.minorticks_off()
left.set_title("3. The context of uniform attention")
left.legend()
blocks = range(1, len(stack) + 1)
right_labels = (r"with $\sqrt{0.5}$", "without")
for v, label, style in zip(through.values(), right_labels, (paper, unscaled)):
    right.plot(blocks, v, style["fmt"], color=style["color"], label=label)
right.set(yscale="log", xlabel="ConvBlock", ylabel="variance of the activations")
right.set_title("4. Residual sums through 12 blocks")
right.legend()
plt.show()

# %%
# 5. No :math:`1/\sqrt{f}`: the scale of the scores
# -------------------------------------------------
# The scores :math:`d^l_i \cdot z^u_j` are plain dot products; the Transformer, which
# came later, divides them by :math:`\sqrt{d_k}`, since a dot product of :math:`f`
# independent entries of variance :math:`\sigma^2` has standard deviation
# :math:`\sigma^2\sqrt{f}`, and a large spread makes the softmax nearly one-hot. The
# ConvS2S paper says nothing about the scale of its scores. The cell measures layer 1's
# scores on a batch of 64 sorting examples under the paper's initialisation and the
# original notebook's (PyTorch's): their standard deviation within a row (the spread the
# softmax sees; an offset common to a row does not change the weights), and the mean
# largest weight next to :math:`1/m` (uniform).

src64 = torch.randint(1, cfg.vocab_size + 1, (64, 12), generator=gen)  # (B, S)
sos = torch.full((64, 1), sos_index(cfg.vocab_size))
tgt64 = torch.cat([sos, src64.sort(1).values], 1)  # (B, T)
print(f"1/m = {1 / src64.shape[1]:.3f} (uniform attention over m = {src64.shape[1]})")
inits = {"paper's init": ConvS2SConfig.paper(), "original notebook's init": ConvS2SConfig()}
for name, init in inits.items():
    torch.manual_seed(0)
    net = ConvS2S(init).eval()
    dec0, att0 = net.decoder, net.decoder.attention[0]
    with torch.no_grad():
        g0 = dec0.embed(tgt64)  # (B, T, f)
        d_1 = att0.W_d(dec0.blocks[0](dec0.in_proj(g0))) + att0.b_d + g0  # (B, T, f)
        scores = d_1 @ dec0.memory(net.encode(src64)).z.mT  # (B, T, S)
        _, a0 = net(src64, tgt64, return_attention=True)  # (B, L, T, S)
    sd, peak = scores.std(-1).mean(), a0[:, 0].amax(-1).mean()  # spread within a row
    f_net = init.embed_dim
    print(f"{name:13s}: row std(d.z) {sd:6.3f}, / sqrt(f) {sd / math.sqrt(f_net):.3f}, ", end="")
    print(f"mean largest weight {peak:.3f}")

# %%
# What you saw
# ------------
# * The decoder attends with keys :math:`z^u_j` and values :math:`z^u_j + e_j`, as
#   equation 2 writes them, checked on the package's model to rounding.
# * Each decoder layer adds its residual first and its attention's context second,
#   :math:`\sqrt{0.5}(h^l_i + W^l_c c^l_i)`, the literal reading of §3.2-3.3.
# * :math:`m\sqrt{1/m}` and :math:`\sqrt{m}` are one number; the paper writes the two
#   steps, undoing the average and then scaling a sum of :math:`m` terms.
# * Without :math:`\sqrt{0.5}` the activations' variance at least doubles with every
#   residual sum; with it, it moves only by what a block's output differs from its
#   input in variance (the summands' variances are not equal here, as the paper warns).
#   :ref:`The deep stack page <sphx_glr_auto_examples_plot_05_deep_stack.py>` shows
#   what that does to training.
# * The scores have no :math:`1/\sqrt{f}`, and the paper does not discuss their scale;
#   the printout gives their spread and the mean largest weight under both
#   initialisations.
#
# Try it
# ------
# **1. Non-uniform attention.** The paper says its :math:`m` assumes uniform scores.
# Give each row of weights most of its mass on one position (e.g. a softmax of scores
# scaled by 10): what variance does the scaled context have then?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# With the weight on one value the context is nearly that value, of variance near 1,
# and the :math:`\sqrt{m}` factor makes it about :math:`m`: the scaling is right only
# for spread-out attention, "not the case but ... effective in practice".

weights = torch.softmax(10 * torch.randn(20_000, 16, generator=gen), dim=1)
peaked = (weights * torch.randn(20_000, 16, generator=gen)).sum(1) * math.sqrt(16)
print(f"peaked attention over m = 16: variance of the scaled context {peaked.var():.2f}")

# %%
# .. raw:: html
#
#    </details>
#
# **2. The Transformer's** :math:`1/\sqrt{d_k}`. Two vectors of :math:`f = 128`
# independent entries with variance 1: predict the standard deviation of
# their dot product, and after dividing it by :math:`\sqrt{f}`.
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# A sum of :math:`f` independent products of variance 1 has variance
# :math:`f`: standard deviation :math:`\sqrt{128} \approx 11.3`, and 1 after the
# division. Without it, scores 11 apart already give a softmax weight ratio of
# :math:`e^{11}`.

q, k_ = torch.randn(10_000, 128), torch.randn(10_000, 128)
dots = (q * k_).sum(-1)
print(
    f"std {dots.std():.2f}, sqrt(f) = {128**0.5:.2f}, after / sqrt(f): {dots.std() / 128**0.5:.3f}"
)

# %%
# .. raw:: html
#
#    </details>
