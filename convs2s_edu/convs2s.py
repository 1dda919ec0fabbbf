r"""The convolutional sequence to sequence model (Gehring et al., 2017 [1]_).

Each class maps to a part of the paper:

===============================  ==================================================================
:class:`TokenPositionEmbedding`  token + learned absolute position embeddings (§3.1)
:class:`ConvBlock`               convolution + gated linear unit [2]_ + scaled residual (§3.2)
:class:`ConvEncoder`             a stack of centred ConvBlocks, outputs :math:`z^u_j` (§3.2)
:class:`MultiStepAttention`      :math:`d^l_i`, :math:`a^l_{ij}`, :math:`c^l_i` (§3.3, eqs. 1-2)
:class:`ConvDecoder`             causal ConvBlocks with attention in every layer (§3.2-3.3)
:class:`ConvS2S`                 :class:`~convs2s_edu.EncoderDecoder` of the two (§3)
===============================  ==================================================================

Defaults follow the original notebook (``../shared/seeds/000``): 128-dimensional
embeddings and hidden states, 4 + 4 layers, kernel width 3, dropout 0.1, and
*none* of the paper's normalisation tricks. :meth:`ConvS2SConfig.paper` turns
the three tricks on (weight normalisation with the paper's initialisation,
encoder gradient scaling, the :math:`m\sqrt{1/m}` context scaling).

References
----------
.. [1] J. Gehring, M. Auli, D. Grangier, D. Yarats, Y. N. Dauphin.
   "Convolutional Sequence to Sequence Learning." ICML 2017. arXiv:1705.03122.
.. [2] Y. N. Dauphin, A. Fan, M. Auli, D. Grangier. "Language Modeling with
   Gated Convolutional Networks." ICML 2017. arXiv:1612.08083.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import weight_norm as _weight_norm

from ._checks import check_int
from .data import PAD, n_token_ids
from .seq2seq import Decoder, Encoder, EncoderDecoder, EncoderOut, ModelConfig

__all__ = [
    "ConvS2SConfig",
    "TokenPositionEmbedding",
    "ConvBlock",
    "ConvEncoder",
    "ConvMemory",
    "MultiStepAttention",
    "ConvDecoder",
    "DecoderCache",
    "ConvS2S",
    "scale_gradient",
]

#: The residual scale of the paper, :math:`\sqrt{0.5}`: the sum of two
#: independent unit-variance terms has variance 2, so scaling by :math:`\sqrt{0.5}`
#: brings it back to 1.
SQRT_HALF = math.sqrt(0.5)


@dataclass
class ConvS2SConfig(ModelConfig):
    """Hyperparameters of :class:`ConvS2S`. Defaults are the original notebook's.

    Parameters
    ----------
    vocab_size : int
        Number of ordinary tokens (``1..vocab_size``); the model embeds
        ``vocab_size + 3`` ids (pad, ``<sos>``, ``<eos>``).
    embed_dim : int
        :math:`f`, the embedding size (paper: 512 for WMT; seed: 128).
    hidden_dim : int
        :math:`d`, the number of channels (paper: 512 and more in its WMT models; seed: 128).
    n_encoder_layers, n_decoder_layers : int
        Number of ConvBlocks (paper: 15 to 20 in its WMT models of Table 1, 13 encoder
        and 5 decoder layers in its ablations, §5.4; seed: 4 each). The decoder has one
        attention per layer, so ``n_decoder_layers`` attention mechanisms.
    kernel_size : int
        :math:`k`, the convolution width (paper: 3 in its WMT models of Table 1; 3 in the
        encoder and 5 in the decoder of its ablations, §5.4; 3, 5 or 7 in Tables 7-8;
        seed: 3). Must be odd, since the encoder pads ``(k-1)/2`` on each side.
    dropout : float
        Dropout on embeddings, on the input of every convolution and before
        the output layer (the paper gives no rate, §4.2; seed: 0.1 on conv inputs).
    max_positions : int
        Size of the learned position table: the longest source or decoder input
        the model accepts. The toy task needs 21 (20 tokens + ``<sos>``).
    weight_norm : bool
        Weight-normalise every convolution and linear layer (§4.2) and use the
        paper's initialisation (§3.5). Paper: on. Original notebook: off (PyTorch's
        default init).
    scale_encoder_grad : bool
        Multiply the gradient that flows into the encoder by
        ``1 / n_decoder_layers``, the number of attention mechanisms (§3.4).
        Identity in the forward pass. Paper: on. Original notebook: off.
    scale_context : bool
        Multiply the attention context :math:`c^l_i` by :math:`m\\sqrt{1/m}`,
        :math:`m` the number of real source tokens (§3.4). Paper: on. Original notebook:
        off.

    Notes
    -----
    The paper's model, nothing else: its ablations (no position embeddings, §5.4;
    attention in fewer decoder layers, §5.5) and the attention-values ablation are
    subclasses in :mod:`convs2s_edu.ablations`.
    """

    vocab_size: int = 50
    embed_dim: int = 128
    hidden_dim: int = 128
    n_encoder_layers: int = 4
    n_decoder_layers: int = 4
    kernel_size: int = 3
    dropout: float = 0.1
    max_positions: int = 64  # 20 tokens + <sos>, with room for longer test sequences
    weight_norm: bool = False  # paper: True
    scale_encoder_grad: bool = False  # paper: True
    scale_context: bool = False  # paper: True

    def __post_init__(self):
        super().__post_init__()  # sizes >= 1, dropout in [0, 1)
        if self.kernel_size % 2 == 0:
            raise ValueError(
                f"kernel_size must be odd (1, 3, 5, ...) so the encoder can pad (k-1)/2 "
                f"on each side, got {self.kernel_size}"
            )

    @classmethod
    def paper(cls, **overrides) -> ConvS2SConfig:
        """The original notebook's sizes with all three of the paper's normalisation tricks on."""
        tricks = dict(weight_norm=True, scale_encoder_grad=True, scale_context=True)
        return cls(**{**tricks, **overrides})


# ---- Helpers: the paper's initialisation (§3.5) and gradient scaling (§3.4) ----


def _linear(
    n_in: int, n_out: int, *, dropout: float, weight_norm: bool, bias: bool = True
) -> nn.Linear:
    """A linear layer ``n_in -> n_out``; with ``weight_norm`` initialised N(0,
    sqrt(p/n)) and weight-normalised (§3.5).

    ``dropout`` is the dropout applied to the layer's *input* (every call site states
    it, as §3.5 does): ``p = 1 - dropout`` is the retain probability, so ``dropout=0.0``
    (no dropout in front of the layer) gives the paper's N(0, sqrt(1/n)). Without
    ``weight_norm`` the layer keeps PyTorch's default initialisation and ``dropout`` is
    not used."""
    layer = nn.Linear(n_in, n_out, bias=bias)
    if weight_norm:
        p = 1.0 - dropout  # probability of *retaining* a unit
        # W ~ N(0, sqrt(p / n)), n = fan-in: keeps the variance of the output (§3.5)
        nn.init.normal_(layer.weight, mean=0.0, std=math.sqrt(p / n_in))
        if bias:
            nn.init.zeros_(layer.bias)
        layer = _weight_norm(layer, name="weight", dim=0)
    return layer


class _ScaleGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


def scale_gradient(x: torch.Tensor, factor: float) -> torch.Tensor:
    r"""Identity in the forward pass; multiplies the gradient by ``factor`` in the
    backward pass.

    Parameters
    ----------
    x : Tensor
        Any tensor.
    factor : float
        Gradient multiplier. :class:`ConvS2S` uses ``1 / n_decoder_layers`` on the
        encoder output when ``scale_encoder_grad`` is on.

    Returns
    -------
    Tensor
        ``x`` unchanged (a view).

    Notes
    -----
    The paper (§3.4): "we scale the gradients for the encoder layers by the
    number of attention mechanisms we use", because every one of the
    :math:`L` decoder attentions sends gradient into the same encoder output:

    .. math::

        \frac{\partial \mathcal{L}}{\partial z}
        \leftarrow \frac{1}{L}\,\frac{\partial \mathcal{L}}{\partial z}

    fairseq's ``fconv`` uses :math:`1/(2L)`; we follow the paper's wording.
    """
    return _ScaleGradient.apply(x, float(factor))


# ---- Embeddings ----------------------------------------------------------


class TokenPositionEmbedding(nn.Module):
    r"""Token embedding plus learned absolute position embedding.

    Parameters
    ----------
    n_ids : int
        Number of token ids, ``vocab_size + 3``.
    embed_dim : int
        :math:`f`, the embedding size.
    max_positions : int
        Number of rows of the position table; longer inputs raise ``ValueError``.
    dropout : float
        Dropout applied to the sum.
    weight_norm : bool
        The paper's normalisation switch (``ConvS2SConfig.weight_norm``): for
        embeddings it means the paper's initialisation only, both tables from
        :math:`\mathcal{N}(0, 0.1)` (§3.5) instead of PyTorch's
        :math:`\mathcal{N}(0, 1)`; embeddings are not weight-normalised.

    Returns
    -------
    Tensor, shape (B, T, f)
        :math:`e = (w_1 + p_1, \dots, w_T + p_T)`.

    Notes
    -----
    Section 3.1 of the paper: the input elements :math:`x = (x_1,\dots,x_m)`
    are embedded as :math:`w = (w_1,\dots,w_m)`, :math:`w_j \in \mathbb{R}^f`,
    and their absolute positions as :math:`p = (p_1,\dots,p_m)`; the model
    reads

    .. math:: e = (w_1 + p_1, \dots, w_m + p_m).

    Sequences are right-padded, so a token's position does not depend on the
    padding around it. The ``PAD`` row of the token table is zero.

    References
    ----------
    Gehring et al. (2017), §3.1 "Position Embeddings".
    """

    def __init__(
        self,
        n_ids: int,
        embed_dim: int,
        max_positions: int,
        *,
        dropout: float = 0.0,
        weight_norm: bool = False,
    ):
        super().__init__()
        self.max_positions = max_positions
        self.token = nn.Embedding(n_ids, embed_dim, padding_idx=PAD)  # w
        self.position = nn.Embedding(max_positions, embed_dim)  # p
        if weight_norm:  # the paper's init: N(0, 0.1)
            nn.init.normal_(self.token.weight, 0.0, 0.1)
            nn.init.normal_(self.position.weight, 0.0, 0.1)
            with torch.no_grad():
                self.token.weight[PAD].zero_()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Embed ``x`` ``(B, T)``; positions are ``start .. start + T - 1``."""
        T = x.shape[1]
        if start + T > self.max_positions:
            raise ValueError(
                f"position {start + T - 1} is outside the position table "
                f"(0..{self.max_positions - 1}); "
                f"sequences may hold at most max_positions={self.max_positions} tokens"
            )
        positions = torch.arange(start, start + T, device=x.device)  # (T,)
        # e_j = w_j + p_j
        e = self.token(x) + self.position(positions)  # (B, T, f)
        return self.dropout(e)


# ---- The convolutional block with a gated linear unit --------------------


class ConvBlock(nn.Module):
    r"""One convolution + gated linear unit + residual connection, scaled by
    :math:`\sqrt{0.5}`.

    Parameters
    ----------
    d : int
        Number of channels in and out (the paper's :math:`d`).
    kernel_size : int
        :math:`k`, the convolution width.
    causal : bool
        ``True``: pad :math:`k-1` zeros on the left, so output :math:`i` sees
        inputs :math:`i-k+1..i` only (decoder). ``False``: pad :math:`(k-1)/2`
        on each side (encoder); needs an odd :math:`k`.
    dropout : float
        Dropout on the block's input, before the convolution.
    weight_norm : bool
        Weight-normalise the convolution and initialise it from
        :math:`\mathcal{N}(0, \sqrt{4p/(kd)})`, :math:`p` the retain probability (§3.5).

    Attributes
    ----------
    conv : torch.nn.Conv1d
        :math:`W` ``(2d, d, k)`` and :math:`b_w` ``(2d,)``, without padding of its own:
        :meth:`convolve` pads, then maps ``(B, T, d)`` to
        :math:`Y = [A\ B] \in \mathbb{R}^{2d}` at every position.

    Returns
    -------
    Tensor, shape (B, T, d)
        :math:`\sqrt{0.5}\,(A \otimes \sigma(B) + x)`.

    Notes
    -----
    Section 3.2, with the gated linear unit of Dauphin et al. (2017):

    .. math::

        [A\ B] &= W * X + b_w \\
        v([A\ B]) &= A \otimes \sigma(B) \\
        h^l_i &= \sqrt{0.5}\,\big(v(W^l [h^{l-1}_{i-k/2}, \dots, h^{l-1}_{i+k/2}] + b^l_w)
                 + h^{l-1}_i\big)

    (§3.2 of the paper writes the residual without the scale; §3.4 adds
    the :math:`\sqrt{0.5}`). The gate :math:`\sigma(B)` decides which parts of
    :math:`A` pass. :func:`torch.nn.functional.glu` computes
    :math:`A \otimes \sigma(B)` from the first and second halves of the channels.

    The causal padding puts :math:`k-1` zeros on the left. §3.2 words it as
    :math:`k-1` zeros on both sides and :math:`k` outputs removed from the end,
    which would leave :math:`T - 1` outputs for :math:`T` inputs; removing
    :math:`k-1` gives exactly this left padding (see the departures page).

    References
    ----------
    Gehring et al. (2017), §3.2 and §3.4; Dauphin et al. (2017), eq. 1.
    """

    def __init__(
        self,
        d: int,
        kernel_size: int = 3,
        *,
        causal: bool = False,
        dropout: float = 0.0,
        weight_norm: bool = False,
    ):
        super().__init__()
        check_int("d", d)
        check_int("kernel_size", kernel_size)
        if not causal and kernel_size % 2 == 0:
            raise ValueError(
                f"centred padding needs an odd kernel_size (1, 3, 5, ...), got {kernel_size}"
            )
        self.d, self.kernel_size, self.causal = d, kernel_size, causal
        self.dropout = nn.Dropout(dropout)
        conv = nn.Conv1d(d, 2 * d, kernel_size)  # W, b_w: (2d, d, k), (2d,)
        if weight_norm:
            p = 1.0 - dropout
            # W ~ N(0, sqrt(4p / (k d))): the GLU's output has about 1/4 of its input's
            # variance (§3.5, Appendix A.1), so its input gets 4 times the layer input's
            nn.init.normal_(conv.weight, 0.0, math.sqrt(4.0 * p / (kernel_size * d)))
            nn.init.zeros_(conv.bias)
            conv = _weight_norm(conv, name="weight", dim=0)
        self.conv = conv

    @property
    def padding(self) -> tuple[int, int]:
        """Zeros added (left, right) so that the output is as long as the input."""
        k = self.kernel_size
        return (k - 1, 0) if self.causal else ((k - 1) // 2, (k - 1) // 2)

    def forward(
        self, x: torch.Tensor, padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``x`` ``(B, T, d)``; ``padding_mask`` ``(B, T)`` is True at positions to zero first."""
        if padding_mask is not None:
            # padded positions enter the convolution as exact zeros, like the
            # zeros a lone sequence is padded with
            x = x.masked_fill(padding_mask.unsqueeze(-1), 0.0)
        residual = x  # (B, T, d)
        x = F.pad(self.dropout(x), (0, 0, *self.padding))  # (B, T + k - 1, d)
        # [A B] = W * X + b_w
        y = self.convolve(x)  # (B, T, 2d)
        # v([A B]) = A ⊗ σ(B)
        v = F.glu(y, dim=-1)  # (B, T, d)
        # h = sqrt(0.5) (v + x)
        return (v + residual) * SQRT_HALF

    def convolve(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`[A\ B] = W * X + b_w`: ``x`` ``(B, T + k - 1, d)``, already padded,
        to ``(B, T, 2d)``. :class:`torch.nn.Conv1d` reads channels first, ``(B, d, T)``."""
        return self.conv(x.transpose(1, 2)).transpose(1, 2)

    def step(self, x_t: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
        """One causal step: ``x_t`` ``(B, 1, d)`` is the newest input, ``window``
        ``(B, k-1, d)`` the previous ``k-1`` inputs (zeros before the start).
        Returns ``(B, 1, d)``, the same as column ``t`` of :meth:`forward` (eval mode)."""
        x = torch.cat([window, x_t], dim=1)  # (B, k, d)
        # [A B] = W * X + b_w over the one window that ends at the newest input
        y = self.convolve(self.dropout(x))  # (B, 1, 2d)
        v = F.glu(y, dim=-1)  # (B, 1, d)
        return (v + x_t) * SQRT_HALF


# ---- Encoder -------------------------------------------------------------


def _conv_stack(cfg: ConvS2SConfig, *, causal: bool):
    """The embeddings, the linear map :math:`f \\to d` and :class:`ConvBlock`\\ s that
    the encoder (``n_encoder_layers``, centred) and the decoder (``n_decoder_layers``,
    causal) start with."""
    f, d, k = cfg.embed_dim, cfg.hidden_dim, cfg.kernel_size  # the paper's f, d and k
    embed = TokenPositionEmbedding(
        n_token_ids(cfg.vocab_size),
        f,
        cfg.max_positions,
        dropout=cfg.dropout,
        weight_norm=cfg.weight_norm,
    )
    # f -> d, dropout on the embeddings in front of it: N(0, sqrt(p/n)) under the
    # paper's init
    in_proj = _linear(f, d, dropout=cfg.dropout, weight_norm=cfg.weight_norm)
    blocks = nn.ModuleList(
        ConvBlock(d, k, causal=causal, dropout=cfg.dropout, weight_norm=cfg.weight_norm)
        for _ in range(cfg.n_decoder_layers if causal else cfg.n_encoder_layers)
    )
    return embed, in_proj, blocks


class ConvEncoder(Encoder):
    r"""The convolutional encoder: embeddings, a linear map to :math:`d`,
    ``n_encoder_layers`` centred :class:`ConvBlock`\ s and a linear map back to
    :math:`f`.

    Parameters
    ----------
    cfg : ConvS2SConfig

    Returns
    -------
    EncoderOut
        ``states`` :math:`z^u` ``(B, S, f)`` (zero at padding), ``embedded``
        :math:`e` ``(B, S, f)`` and the padding mask (no ``summary``: the convolutional
        decoder starts from none; the ``conv+gru`` hybrid's encoder adds the one a GRU
        decoder needs, :class:`~convs2s_edu.hybrid.SummarisingConvEncoder`).

    Notes
    -----
    Section 3.2: every layer keeps the sequence length, padding
    :math:`(k-1)/2` zeros on both sides. Padded positions are set to zero
    before every convolution, so a sequence's encoding does not depend on the
    padding added for its batch. The attention keys are :math:`z^u_j`; the
    values add the input embeddings back, which :class:`ConvDecoder` does (§3.3):

    .. math:: \text{keys } z^u_j, \qquad \text{values } z^u_j + e_j.

    References
    ----------
    Gehring et al. (2017), §3.2-3.3.
    """

    def __init__(self, cfg: ConvS2SConfig):
        super().__init__()
        self.cfg = cfg
        self.out_dim = self.embed_dim = cfg.embed_dim
        self.embed, self.in_proj, self.blocks = _conv_stack(cfg, causal=False)
        # no dropout on its input: N(0, sqrt(1/n)) under the paper's init
        self.out_proj = _linear(
            cfg.hidden_dim, cfg.embed_dim, dropout=0.0, weight_norm=cfg.weight_norm
        )  # d -> f

    def forward(self, src: torch.Tensor) -> EncoderOut:
        pad = src.eq(PAD)  # (B, S)
        e = self.embed(src)  # (B, S, f)
        x = self.in_proj(e)  # (B, S, d)
        for block in self.blocks:
            x = block(x, padding_mask=pad)  # (B, S, d)
        z = self.out_proj(x).masked_fill(pad.unsqueeze(-1), 0.0)  # (B, S, f)
        return EncoderOut(states=z, embedded=e, padding_mask=pad)


class ConvMemory(NamedTuple):
    """What every :class:`MultiStepAttention` of the decoder attends to.

    Attributes
    ----------
    z : Tensor, shape (B, S, f)
        :math:`z^u_j`, the top encoder layer projected to the embedding size
        (attention keys).
    z_plus_e : Tensor, shape (B, S, f)
        :math:`z^u_j + e_j`, the attention values.
    padding_mask : Tensor, shape (B, S)
        True at source padding.
    """

    z: torch.Tensor
    z_plus_e: torch.Tensor
    padding_mask: torch.Tensor


# ---- Multi-step attention ------------------------------------------------


class MultiStepAttention(nn.Module):
    r"""Dot-product attention of one decoder layer over the encoder output (equations
    1-2).

    Parameters
    ----------
    hidden_dim : int
        :math:`d`, the size of the decoder state :math:`h^l_i`.
    embed_dim : int
        :math:`f`, the size of :math:`g_i`, :math:`z^u_j` and :math:`e_j`.
    scale_context : bool
        Multiply :math:`c^l_i` by :math:`m\sqrt{1/m}` (§3.4).
    weight_norm : bool
        Weight-normalise ``W_d`` and initialise it from
        :math:`\mathcal{N}(0, \sqrt{1/n})`, the paper's init for a layer without dropout
        in front (§3.5): :math:`h^l_i` is not dropped out before :math:`W^l_d`.

    Attributes
    ----------
    W_d : torch.nn.Linear
        :math:`W^l_d` in :math:`d^l_i = W^l_d h^l_i + b^l_d + g_i` (no bias of its own).
    b_d : torch.nn.Parameter
        :math:`b^l_d`, shape ``(f,)``.

    Returns
    -------
    c : Tensor, shape (B, T, f)
        The conditional input :math:`c^l_i`.
    a : Tensor, shape (B, T, S)
        The attention weights :math:`a^l_{ij}`; rows sum to 1, zero on source padding.

    Notes
    -----
    Section 3.3: equation 1 (:math:`d^l_i`), the softmax after it, and equation 2
    (:math:`c^l_i`):

    .. math::

        d^l_i &= W^l_d h^l_i + b^l_d + g_i \\
        a^l_{ij} &= \frac{\exp(d^l_i \cdot z^u_j)}{\sum_{t=1}^{m} \exp(d^l_i \cdot z^u_t)} \\
        c^l_i &= \sum_{j=1}^{m} a^l_{ij} (z^u_j + e_j)

    :math:`g_i` is the embedding of the previous target element, :math:`z^u_j`
    the output of the last encoder layer :math:`u` and :math:`e_j` the source
    embedding. "Multi-step" because every decoder layer has its own attention,
    and layer :math:`l+1` sees what layers :math:`1..l` attended to.

    With ``scale_context`` the context is multiplied by :math:`m\sqrt{1/m} = \sqrt{m}`,
    :math:`m` the number of real source tokens: under uniform attention over
    :math:`m` independent values the context is their mean, whose variance is
    :math:`1/m` of one value's, and the factor restores one value's variance (§3.4).

    The scores are plain dot products, as in the paper, not divided by
    :math:`\sqrt{f}` as in the Transformer's later scaled dot-product attention.

    References
    ----------
    Gehring et al. (2017), §3.3, eqs. 1-2.
    """

    def __init__(
        self,
        hidden_dim: int,
        embed_dim: int,
        *,
        scale_context: bool = False,
        weight_norm: bool = False,
    ):
        super().__init__()
        # h is not dropped out before W_d: N(0, sqrt(1/n)) under the paper's init
        self.W_d = _linear(
            hidden_dim, embed_dim, dropout=0.0, weight_norm=weight_norm, bias=False
        )
        self.b_d = nn.Parameter(torch.zeros(embed_dim))
        self.scale_context = scale_context

    def forward(self, h: torch.Tensor, g: torch.Tensor, enc: ConvMemory):
        """``h`` ``(B, T, d)`` decoder states, ``g`` ``(B, T, f)`` target embeddings,
        ``enc`` the keys and values (:class:`ConvMemory`)."""
        # d_i = W_d h_i + b_d + g_i
        d = self.W_d(h) + self.b_d + g  # (B, T, f)
        # d_i · z_j
        scores = torch.bmm(d, enc.z.transpose(1, 2))  # (B, T, S)
        scores = scores.masked_fill(enc.padding_mask.unsqueeze(1), float("-inf"))
        # a_ij = softmax_j(d_i · z_j)
        a = torch.softmax(scores, dim=-1)  # (B, T, S)
        # c_i = Σ_j a_ij (z_j + e_j)
        c = torch.bmm(a, enc.z_plus_e)  # (B, T, f)
        if self.scale_context:
            m = (~enc.padding_mask).sum(dim=1).to(c.dtype)  # (B,)
            # c_i <- m sqrt(1/m) c_i
            c = c * (m * torch.sqrt(1.0 / m)).view(-1, 1, 1)
        return c, a


# ---- Decoder -------------------------------------------------------------


class DecoderCache(NamedTuple):
    """State of :class:`ConvDecoder` for incremental decoding (never changed in place).

    Attributes
    ----------
    memory : ConvMemory
        Keys :math:`z^u_j` and values :math:`z^u_j + e_j`, one row per hypothesis.
    windows : tuple of Tensor, each (B, k-1, d)
        The last ``k-1`` inputs of every causal convolution (zeros before the start).
    position : int
        Position of the next decoder input.
    """

    memory: ConvMemory
    windows: tuple
    position: int = 0


class ConvDecoder(Decoder):
    r"""The causal convolutional decoder with a :class:`MultiStepAttention` in every
    layer.

    Parameters
    ----------
    cfg : ConvS2SConfig

    Returns
    -------
    logits : Tensor, shape (B, T, vocab_size + 3)
    attention : Tensor, shape (B, L, T, S)
        :math:`L` = ``n_decoder_layers``.

    Notes
    -----
    For every layer :math:`l` (§3.2-3.3):

    .. math::

        h^l_i &= \sqrt{0.5}\,\big(v(W^l [h^{l-1}_{i-k+1}, \dots, h^{l-1}_i] + b^l_w)
                 + h^{l-1}_i\big)
               \quad\text{(causal: left padding } k-1\text{)} \\
        h^l_i &\leftarrow \sqrt{0.5}\,\big(h^l_i + W^l_c c^l_i\big)

    and the output distribution is
    :math:`p(y_{i+1}) = \mathrm{softmax}(W_o h^L_i + b_o)`.

    Departures: :math:`W^l_c` maps the context from :math:`f` to :math:`d`
    (the paper adds :math:`c^l_i` to :math:`h^l_i` and leaves the sizes
    implicit; fairseq uses the same projection), and the sum is scaled by
    :math:`\sqrt{0.5}` as in fairseq. The original notebook's block order is kept: the
    residual is added inside the ConvBlock, before attention.

    The decoder reads the encoder output through :meth:`memory`: keys
    :math:`z^u_j` (``enc.states``) and values :math:`z^u_j + e_j`
    (``enc.embedded`` added). With ``scale_encoder_grad`` the gradient that flows
    back into :math:`z^u` is divided by the number of attentions here, where the
    :math:`L` attentions are (§3.4); the forward pass is unchanged.

    :meth:`step` decodes one position at a time from a :class:`DecoderCache`
    that holds the last :math:`k-1` inputs of every convolution, so a step
    costs one column instead of the whole prefix.

    References
    ----------
    Gehring et al. (2017), §3.2-3.4, Figure 1.
    """

    multi_step = True

    def __init__(self, cfg: ConvS2SConfig):
        super().__init__()
        self.cfg = cfg
        self.in_dim = cfg.embed_dim  # z^u_j has the embedding size f
        f, d = cfg.embed_dim, cfg.hidden_dim  # the paper's f and d
        self.embed, self.in_proj, self.blocks = _conv_stack(cfg, causal=True)
        # one attention per layer (§3.3), and W_c, f -> d, to add its context to h;
        # c is not dropped out before W_c: N(0, sqrt(1/n)) under the paper's init
        self.attention = nn.ModuleList(
            MultiStepAttention(
                d, f, scale_context=cfg.scale_context, weight_norm=cfg.weight_norm
            )
            for _ in self.blocks
        )
        self.W_c = nn.ModuleList(
            _linear(f, d, dropout=0.0, weight_norm=cfg.weight_norm) for _ in self.blocks
        )
        self.dropout = nn.Dropout(cfg.dropout)
        # d -> V, dropout in front of the output layer: N(0, sqrt(p/n)) under the
        # paper's init
        V = n_token_ids(cfg.vocab_size)
        self.W_o = _linear(d, V, dropout=cfg.dropout, weight_norm=cfg.weight_norm)

    def memory(self, enc: EncoderOut) -> ConvMemory:
        """Keys :math:`z^u_j` and values :math:`z^u_j + e_j` from an
        :class:`EncoderOut`."""
        z = enc.states  # (B, S, f)
        if self.cfg.scale_encoder_grad:
            # every one of the L decoder attentions sends gradient into z: scale by
            # 1/L (§3.4)
            z = scale_gradient(z, 1.0 / len(self.attention))
        # values z_j + e_j (§3.3)
        return ConvMemory(z=z, z_plus_e=z + enc.embedded, padding_mask=enc.padding_mask)

    def attend(self, l: int, h: torch.Tensor, g: torch.Tensor, memory: ConvMemory):
        """Layer ``l``'s (0-based) attention, eqs. 1-2, its context added to ``h``:
        the new ``h`` ``(B, T, d)`` and :math:`a^l_{ij}` ``(B, T, S)``. (A variant of
        :mod:`convs2s_edu.ablations` returns ``None`` for a layer without attention.)"""
        c, a = self.attention[l](h, g, memory)  # (B, T, f), (B, T, S)
        # h_i <- sqrt(0.5) (h_i + W_c c_i)
        return (h + self.W_c[l](c)) * SQRT_HALF, a

    def forward(self, tgt_in: torch.Tensor, enc: EncoderOut):
        memory = self.memory(enc)
        g = self.embed(tgt_in)  # (B, T, f)  g_i: previous target element + position
        x = self.in_proj(g)  # (B, T, d)
        attention = []
        for l, block in enumerate(self.blocks):
            h = block(x)  # (B, T, d), causal
            x, a = self.attend(l, h, g, memory)
            attention.append(a)
        # p(y) = softmax(W_o h^L + b_o)
        logits = self.W_o(self.dropout(x))  # (B, T, V)
        attention = [a for a in attention if a is not None]  # (see attend)
        return logits, torch.stack(attention, dim=1)  # (B, L, T, S)

    def start(self, enc: EncoderOut) -> DecoderCache:
        """The state before the first step: every window holds the ``k-1`` zeros of the
        causal padding, the position is 0."""
        memory = self.memory(enc)
        B, k, d = memory.z.shape[0], self.cfg.kernel_size, self.cfg.hidden_dim
        windows = tuple(memory.z.new_zeros(B, k - 1, d) for _ in self.blocks)
        return DecoderCache(memory, windows, 0)

    def step(self, y_prev: torch.Tensor, state: DecoderCache):
        """Decode one position.

        Parameters
        ----------
        y_prev : Tensor, shape (B,)
            The previous output token (``<sos>`` at the first step).
        state : DecoderCache
            Not changed: the new windows and position are in the returned state.

        Returns
        -------
        logits : Tensor, shape (B, vocab_size + 3)
        attention : Tensor, shape (B, n_decoder_layers, S)
        state : DecoderCache
            Windows shifted by one, ``position + 1``.
        """
        g = self.embed(y_prev.unsqueeze(1), start=state.position)  # (B, 1, f)
        x = self.in_proj(g)  # (B, 1, d)
        attention, windows = [], []
        for l, block in enumerate(self.blocks):
            window = state.windows[l]  # (B, k-1, d)
            h = block.step(x, window)  # (B, 1, d)
            windows.append(
                torch.cat([window[:, 1:], x], dim=1) if window.shape[1] else window
            )
            x, a = self.attend(l, h, g, state.memory)
            attention.append(a)
        logits = self.W_o(self.dropout(x))[:, 0]  # (B, V)
        new_state = DecoderCache(state.memory, tuple(windows), state.position + 1)
        attention = [a for a in attention if a is not None]  # (see attend)
        return logits, torch.cat(attention, dim=1), new_state  # (B, V), (B, L, S)

    def reorder(self, state: DecoderCache, index: torch.Tensor) -> DecoderCache:
        """Rows ``index`` ``(B',)`` of the keys, values, mask and every window."""
        memory = ConvMemory(*(t.index_select(0, index) for t in state.memory))
        windows = tuple(w.index_select(0, index) for w in state.windows)
        return DecoderCache(memory, windows, state.position)


# ---- The whole model -----------------------------------------------------


class ConvS2S(EncoderDecoder):
    r"""Convolutional sequence to sequence model: :class:`ConvEncoder` +
    :class:`ConvDecoder`.

    Parameters
    ----------
    cfg : ConvS2SConfig, optional
        Hyperparameters; the original notebook's defaults when omitted.

    Returns
    -------
    logits : Tensor, shape (B, T, vocab_size + 3)
        From ``model(src, tgt_in)``: unnormalised scores of :math:`y_{i+1}`
        given :math:`y_{\le i}` (teacher forcing).
    attention : Tensor, shape (B, n_decoder_layers, T, S)
        Only with ``return_attention=True``: :math:`a^l_{ij}` of every decoder layer.

    Notes
    -----
    The model factorises the target distribution left to right,

    .. math:: p(y \mid x) = \prod_{i} p(y_{i+1} \mid y_1, \dots, y_i, x)
              = \prod_i \mathrm{softmax}(W_o h^L_i + b_o)_{y_{i+1}},

    but, unlike a recurrent decoder, computes all :math:`T` positions of a
    training batch in parallel: every layer is one convolution over the whole
    sequence. The source padding mask is derived from ``PAD`` (id 0). The
    encoder's and the decoder's sizes agree, so there is no bridge
    (:class:`~convs2s_edu.EncoderDecoder`).

    References
    ----------
    Gehring et al. (2017), §3, Figure 1.

    Examples
    --------
    >>> import torch
    >>> model = ConvS2S(ConvS2SConfig(vocab_size=10)).eval()
    >>> src = torch.tensor([[3, 1, 2]])
    >>> tgt_in = torch.tensor([[11, 1, 2, 3]])  # <sos> = vocab_size + 1
    >>> logits, attn = model(src, tgt_in, return_attention=True)
    >>> tuple(logits.shape), tuple(attn.shape)
    ((1, 4, 13), (1, 4, 4, 3))
    """

    def __init__(self, cfg: ConvS2SConfig | None = None):
        cfg = cfg if cfg is not None else ConvS2SConfig()
        unread = sorted(set(asdict(cfg)) - set(asdict(ConvS2SConfig())))
        if unread:  # a subclass's config, e.g. convs2s_edu.ablations.AblationConfig
            raise TypeError(
                f"ConvS2S builds the paper's model and would ignore the fields {unread} "
                f"of {type(cfg).__name__}: build it with its own model class"
            )
        super().__init__(
            ConvEncoder(cfg),
            ConvDecoder(cfg),
            vocab_size=cfg.vocab_size,
            max_positions=cfg.max_positions,
        )
        self.cfg = cfg
