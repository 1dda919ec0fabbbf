r"""The recurrent baseline: a bidirectional GRU encoder and a GRU decoder with Bahdanau
attention.

The attention-based recurrent model of Bahdanau et al. (2014) [1]_, the architecture
ConvS2S set out to replace. In the paper it is a rival in §5.1: the WMT'16
English-Romanian winner it beats (Sennrich et al., 2016b) "implements the
attention-based sequence to sequence architecture of Bahdanau et al. (2014) and uses
GRU cells both in the encoder and decoder"; its other rivals are deep LSTMs
(GNMT, Wu et al., 2016). The equations follow section 6 of Shi's article [2]_,
``../shared/seeds/001``:

.. math::

    e_{tj} &= v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a) \\
    a_{tj} &= \mathrm{softmax}_j(e_{tj}) \\
    c_t &= \textstyle\sum_j a_{tj} h_j \\
    s_t &= f(s_{t-1}, y_{t-1}, c_t) \\
    p(y_t \mid y_{<t}, x) &= \mathrm{softmax}(W_s s_t + b_s)

The model is an :class:`~convs2s_edu.EncoderDecoder` of a :class:`GRUEncoder` and a
:class:`GRUDecoder`. The encoder runs :class:`torch.nn.GRU` over the whole (packed)
source and the keys :math:`W_a h_j + b_a` are computed once per sequence. What stays
step by step is the decoder: :math:`s_t` needs :math:`s_{t-1}`, and the attention at
step :math:`t` needs :math:`s_{t-1}`, so the :math:`T` steps of a target cannot run in
parallel even with teacher forcing. That sequential dependency is the paper's argument
for convolutions.

References
----------
.. [1] D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly
   Learning to Align and Translate." ICLR 2015. arXiv:1409.0473.
.. [2] E. S. Shi. "Towards Building Your Own AI: Unpack the Secret of Seq2Seq
   Learning and Bahdanau Attention Mechanism." 2023, section 6.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .data import PAD, n_token_ids
from .seq2seq import Decoder, Encoder, EncoderDecoder, EncoderOut, ModelConfig

__all__ = [
    "RNNSeq2SeqConfig",
    "BahdanauAttention",
    "FixedContext",
    "GRUEncoder",
    "GRUDecoderState",
    "GRUDecoder",
    "RNNSeq2Seq",
]


@dataclass
class RNNSeq2SeqConfig(ModelConfig):
    """Hyperparameters of :class:`RNNSeq2Seq`; sizes match
    :class:`~convs2s_edu.ConvS2SConfig`.

    Parameters
    ----------
    vocab_size : int
        Number of ordinary tokens; the model embeds ``vocab_size + 3`` ids.
    embed_dim : int
        Embedding size (seed: 128, as for ConvS2S).
    hidden_dim : int
        :math:`n`, the GRU state size of each direction of the encoder and of
        the decoder (seed: 128). Encoder annotations :math:`h_j` have size
        :math:`2n`.
    n_encoder_layers, n_decoder_layers : int
        Stacked GRU layers. Bahdanau et al. use 1 and 1.
    attention_dim : int
        Size of the hidden layer of the additive attention (:math:`n'` in the
        paper); 128 by default.
    dropout : float
        Dropout on embeddings, between GRU layers and before the output layer.
    max_positions : int
        Longest source or decoder input accepted (no position table is needed;
        the limit keeps both models' inputs alike).
    attention : bool
        ``True`` (default): Bahdanau et al.'s RNNsearch, a context :math:`c_t` per step
        (:class:`BahdanauAttention`). ``False``: their RNNencdec baseline (Cho et al.,
        2014), one fixed context for every step (:class:`FixedContext`).
    """

    vocab_size: int = 50
    embed_dim: int = 128
    hidden_dim: int = 128
    n_encoder_layers: int = 1
    n_decoder_layers: int = 1
    attention_dim: int = 128
    dropout: float = 0.1
    max_positions: int = 64
    attention: bool = True

    def __post_init__(self):
        super().__post_init__()  # sizes >= 1, dropout in [0, 1)
        if not isinstance(self.attention, bool):
            raise ValueError(f"attention must be True or False, got {self.attention!r}")


class BahdanauAttention(nn.Module):
    r"""Additive (Bahdanau) attention.

    Parameters
    ----------
    enc_dim : int
        Size of the encoder annotations :math:`h_j` (``2 * hidden_dim``).
    dec_dim : int
        Size of the decoder state :math:`s_{t-1}`.
    attention_dim : int
        Size of the hidden layer inside the :math:`\tanh`.

    Attributes
    ----------
    W_a : torch.nn.Linear
        :math:`W_a` in :math:`e_{tj} = v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a)`.
    U_a : torch.nn.Linear
        :math:`U_a`, applied to the previous decoder state.
    b_a : torch.nn.Parameter
        :math:`b_a`, shape ``(attention_dim,)``.
    v_a : torch.nn.Parameter
        :math:`v_a`, shape ``(attention_dim,)``.

    Returns
    -------
    c : Tensor, shape (B, enc_dim)
        The context :math:`c_t`.
    a : Tensor, shape (B, S)
        The weights :math:`a_{tj}`; they sum to 1 and are zero on source padding.

    Notes
    -----
    The form of section 6 of Shi's article, which the package follows:

    .. math::

        e_{tj} &= v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a) \\
        a_{tj} &= \frac{\exp(e_{tj})}{\sum_k \exp(e_{tk})} \\
        c_t &= \sum_j a_{tj} h_j

    :math:`W_a h_j + b_a` does not depend on :math:`t`: :meth:`keys` computes it
    once per source sequence and every decoder step reuses it.

    Bahdanau et al. (2014, appendix A.1.2) write the same score with the letters
    swapped and no bias, :math:`v_a^\top \tanh(W_a s_{i-1} + U_a h_j)`: their
    :math:`U_a` (pre-computed, on the annotations) is this class's ``W_a``, their
    :math:`W_a` (on the decoder state) is ``U_a``, and :math:`b_a` is Shi's
    article's.

    References
    ----------
    Shi (2023), section 6 (this form); Bahdanau, Cho & Bengio (2014), §3.1 and
    appendix A.1.2 (letters swapped, no :math:`b_a`).
    """

    def __init__(self, enc_dim: int, dec_dim: int, attention_dim: int):
        super().__init__()
        self.W_a = nn.Linear(enc_dim, attention_dim, bias=False)
        self.U_a = nn.Linear(dec_dim, attention_dim, bias=False)
        self.b_a = nn.Parameter(torch.zeros(attention_dim))
        self.v_a = nn.Parameter(torch.empty(attention_dim).uniform_(-0.1, 0.1))

    def keys(self, h: torch.Tensor) -> torch.Tensor:
        """:math:`W_a h_j + b_a` for every source position (the part of the energy that
        does not depend on :math:`t`): ``(B, S, enc_dim) -> (B, S, attention_dim)``."""
        return self.W_a(h) + self.b_a

    def energy(self, s_prev: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """:math:`e_{tj}` ``(B, S)`` from :math:`s_{t-1}` ``(B, dec_dim)`` and the keys
        :math:`W_a h_j + b_a` ``(B, S, A)`` of :meth:`keys` (which hold :math:`b_a`)."""
        # e_tj = v_a^T tanh(W_a h_j + U_a s_{t-1} + b_a)
        return torch.tanh(keys + self.U_a(s_prev).unsqueeze(1)) @ self.v_a  # (B, S)

    def forward(
        self,
        s_prev: torch.Tensor,
        keys: torch.Tensor,
        h: torch.Tensor,
        padding_mask: torch.Tensor,
    ):
        e = self.energy(s_prev, keys).masked_fill(padding_mask, float("-inf"))  # (B, S)
        # a_tj = softmax_j(e_tj)
        a = torch.softmax(e, dim=-1)  # (B, S)
        # c_t = Σ_j a_tj h_j
        c = torch.bmm(a.unsqueeze(1), h).squeeze(1)  # (B, 2n)
        return c, a


class FixedContext(nn.Module):
    r"""No attention: the same context :math:`c` at every decoder step.

    The RNN Encoder-Decoder of Cho et al. (2014), which Bahdanau et al. (2014) train
    as RNNencdec against their attention model: the decoder sees the source only
    through one fixed-size vector. Here that vector is the last state of each
    direction of the encoder, the forward GRU's at the last source token and the
    backward GRU's at the first, so that :math:`c` has the size :math:`2n` of an
    annotation and the decoder is :class:`GRUDecoder` unchanged.

    Returns
    -------
    c : Tensor, shape (B, 2n)
        :math:`c = [\overrightarrow{h}_{S}; \overleftarrow{h}_1]`, the same at every step.
    a : Tensor, shape (B, S)
        Zeros: no weight on any source position.

    Notes
    -----
    .. math::

        s_t = f(s_{t-1}, y_{t-1}, c), \qquad
        c = [\overrightarrow{h}_{S}; \overleftarrow{h}_1]

    Departure: Cho et al. compute :math:`c = \tanh(V h_N)` from a unidirectional
    encoder's last state :math:`h_N`; here :math:`c` is the bidirectional encoder's two
    last states as they are, so that the encoder is the same with and without attention.

    References
    ----------
    Cho et al. (2014), §2.2; Bahdanau, Cho & Bengio (2014), §4.2 (RNNencdec) and
    Figure 2 (its BLEU score falls as sentences get longer).
    """

    def keys(self, h: torch.Tensor) -> torch.Tensor:
        """Nothing to precompute: the annotations ``h`` themselves."""
        return h

    def forward(
        self,
        s_prev: torch.Tensor,
        keys: torch.Tensor,
        h: torch.Tensor,
        padding_mask: torch.Tensor,
    ):
        B, S, two_n = h.shape
        last = (~padding_mask).sum(dim=1) - 1  # (B,) index of each source's last token
        forward_last = h[torch.arange(B, device=h.device), last, : two_n // 2]  # (B, n)
        # c = [h_S forward; h_1 backward]: does not depend on s_{t-1}
        c = torch.cat([forward_last, h[:, 0, two_n // 2 :]], dim=-1)  # (B, 2n)
        return c, h.new_zeros(B, S)


class GRUEncoder(Encoder):
    r"""The bidirectional GRU encoder of Bahdanau et al. (2014).

    Parameters
    ----------
    cfg : RNNSeq2SeqConfig

    Returns
    -------
    EncoderOut
        ``states``: the annotations
        :math:`h_j = [\overrightarrow{h}_j; \overleftarrow{h}_j]` ``(B, S, 2n)``,
        zero at padding; ``embedded``: the (dropped-out) source embeddings
        ``(B, S, embed_dim)``; the padding mask; ``summary``: the backward GRU's
        last state :math:`\overleftarrow{h}_1` of the top layer ``(B, n)``, which
        has read the whole source from right to left.

    Notes
    -----
    A bidirectional :class:`torch.nn.GRU` over the packed source
    (:func:`~torch.nn.utils.rnn.pack_padded_sequence`), so padding never enters
    the recurrence: the forward GRU reads :math:`x_1 \dots x_m`, the backward one
    :math:`x_m \dots x_1`, and :math:`h_j` joins their states at :math:`j`
    (Bahdanau et al., §3.2).

    References
    ----------
    Bahdanau, Cho & Bengio (2014), §3.2.
    """

    def __init__(self, cfg: RNNSeq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        n = cfg.hidden_dim
        self.out_dim, self.embed_dim = 2 * n, cfg.embed_dim
        self.embed = nn.Embedding(
            n_token_ids(cfg.vocab_size), cfg.embed_dim, padding_idx=PAD
        )
        self.dropout = nn.Dropout(cfg.dropout)
        self.gru = nn.GRU(
            cfg.embed_dim,
            n,
            num_layers=cfg.n_encoder_layers,
            bidirectional=True,
            batch_first=True,
            dropout=cfg.dropout if cfg.n_encoder_layers > 1 else 0.0,
        )

    def forward(self, src: torch.Tensor) -> EncoderOut:
        pad = src.eq(PAD)  # (B, S)
        lengths = (~pad).sum(dim=1).cpu()  # (B,)
        x = self.dropout(self.embed(src))  # (B, S, E)
        # h_j = [forward h_j; backward h_j]
        h, h_n = self.recur(x, lengths)  # (B, S, 2n), zero at padding; (2 L_enc, B, n)
        # h_n[-1]: the backward GRU's last state of the top layer, the first position's
        return EncoderOut(states=h, embedded=x, padding_mask=pad, summary=h_n[-1])

    def recur(self, x: torch.Tensor, lengths: torch.Tensor):
        """The bidirectional GRU over the packed ``x`` ``(B, S, E)`` (``lengths``
        ``(B,)``, on the CPU): the annotations ``(B, S, 2n)``, zero at padding, and
        every layer's and direction's last state ``(2 L_enc, B, n)``, as
        :class:`torch.nn.GRU` returns them."""
        packed = pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=False
        )
        out, h_n = self.gru(packed)
        h, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return h, h_n


class GRUDecoderState(NamedTuple):
    """State of :class:`GRUDecoder` (never changed in place).

    Attributes
    ----------
    h : Tensor, shape (B, S, 2n)
        The annotations :math:`h_j` the attention reads.
    keys : Tensor, shape (B, S, attention_dim)
        :math:`W_a h_j + b_a`, computed once by :meth:`GRUDecoder.start`.
    padding_mask : Tensor, shape (B, S)
    s : Tensor, shape (n_decoder_layers, B, n)
        :math:`s_{t-1}`, the GRU state (:math:`s_0` after ``start``).
    """

    h: torch.Tensor
    keys: torch.Tensor
    padding_mask: torch.Tensor
    s: torch.Tensor


class GRUDecoder(Decoder):
    r"""The GRU decoder with Bahdanau attention, one step per target position.

    Parameters
    ----------
    cfg : RNNSeq2SeqConfig
    summary_dim : int, optional
        Size of ``EncoderOut.summary``, the input of :math:`W_{init}`; default
        ``hidden_dim`` (:class:`GRUEncoder`'s :math:`\overleftarrow{h}_1`); ``embed_dim``
        after the ``conv+gru`` hybrid's convolutional encoder.

    Returns
    -------
    logits : Tensor, shape (B, T, vocab_size + 3)
    attention : Tensor, shape (B, 1, T, S)
        One attention mechanism: :math:`L = 1` in the decoders' common layout.

    Notes
    -----
    .. math::

        s_0 &= \tanh(W_{init}\, \overleftarrow{h}_1) \\
        c_t &= \mathrm{Attention}(s_{t-1}, h) \\
        s_t &= \mathrm{GRU}\big(s_{t-1}, [E y_{t-1}; c_t]\big) \\
        p(y_t \mid y_{<t}, x) &= \mathrm{softmax}(W_s s_t + b_s)

    After a convolutional encoder, :math:`\overleftarrow{h}_1` is replaced by the
    encoder's summary, the mean of :math:`z^u_j` over the real tokens.
    :meth:`forward` (teacher forcing) is :meth:`start`, then :meth:`step` once per
    target position: :math:`s_t` needs :math:`s_{t-1}`, so the steps cannot run in
    parallel, even when every input :math:`y_{t-1}` is known in advance.

    Departure from Bahdanau et al.: the output layer is Shi's
    :math:`\mathrm{softmax}(W_s s_t + b_s)` rather than the paper's deep maxout
    output over :math:`(s_t, y_{t-1}, c_t)`.

    References
    ----------
    Bahdanau, Cho & Bengio (2014); Shi (2023), section 6.
    """

    multi_step = False

    def __init__(self, cfg: RNNSeq2SeqConfig, summary_dim: int | None = None):
        super().__init__()
        self.cfg = cfg
        n = cfg.hidden_dim
        self.in_dim = 2 * n  # the annotations h_j
        n_ids = n_token_ids(cfg.vocab_size)
        self.embed = nn.Embedding(n_ids, cfg.embed_dim, padding_idx=PAD)  # E
        self.dropout = nn.Dropout(cfg.dropout)
        self.W_init = nn.Linear(summary_dim or n, cfg.n_decoder_layers * n)
        if cfg.attention:
            self.attention = BahdanauAttention(2 * n, n, cfg.attention_dim)
        else:
            self.attention = FixedContext()  # RNNencdec: one c for every step
        # f in s_t = f(s_{t-1}, y_{t-1}, c_t)
        self.gru = nn.GRU(
            cfg.embed_dim + 2 * n,
            n,
            num_layers=cfg.n_decoder_layers,
            batch_first=True,
            dropout=cfg.dropout if cfg.n_decoder_layers > 1 else 0.0,
        )
        self.W_s = nn.Linear(n, n_ids)  # W_s, b_s

    def start(self, enc: EncoderOut) -> GRUDecoderState:
        """:math:`s_0` and the keys :math:`W_a h_j + b_a`, computed once per source."""
        B = enc.states.shape[0]
        # s_0 = tanh(W_init h_1^backward)
        s0 = torch.tanh(self.W_init(enc.summary))  # (B, L_dec n)
        # (L, B, n)
        s0 = s0.view(B, self.cfg.n_decoder_layers, -1).transpose(0, 1).contiguous()
        return GRUDecoderState(
            h=enc.states,
            keys=self.attention.keys(enc.states),
            padding_mask=enc.padding_mask,
            s=s0,
        )

    def step(self, y_prev: torch.Tensor, state: GRUDecoderState):
        """One decoder step.

        Parameters
        ----------
        y_prev : Tensor, shape (B,)
            Previous output token (``<sos>`` first).
        state : GRUDecoderState
            Holds :math:`s_{t-1}`.

        Returns
        -------
        logits : Tensor, shape (B, vocab_size + 3)
        attention : Tensor, shape (B, 1, S)
        state : GRUDecoderState
            Holds :math:`s_t`.
        """
        s = state.s  # (L, B, n)
        # c_t from s_{t-1} (top layer) and the precomputed keys W_a h_j + b_a
        # (B, 2n), (B, S)
        c, a = self.attention(s[-1], state.keys, state.h, state.padding_mask)
        y = self.dropout(self.embed(y_prev))  # (B, E)
        # s_t = f(s_{t-1}, y_{t-1}, c_t)
        out, s = self.gru(torch.cat([y, c], dim=-1).unsqueeze(1), s)  # (B, 1, n)
        # p(y_t) = softmax(W_s s_t + b_s)
        logits = self.W_s(self.dropout(out[:, 0]))  # (B, V)
        return logits, a.unsqueeze(1), state._replace(s=s)

    def reorder(self, state: GRUDecoderState, index: torch.Tensor) -> GRUDecoderState:
        """Rows ``index`` of the annotations, keys and mask (dim 0) and of :math:`s` (dim 1)."""
        return GRUDecoderState(
            h=state.h.index_select(0, index),  # (B', S, 2n)
            keys=state.keys.index_select(0, index),  # (B', S, A)
            padding_mask=state.padding_mask.index_select(0, index),  # (B', S)
            s=state.s.index_select(1, index),  # (L, B', n)
        )

    def forward(self, tgt_in: torch.Tensor, enc: EncoderOut):
        """Teacher forcing: :meth:`start`, then :meth:`step` on every column of
        ``tgt_in`` ``(B, T)``; returns logits ``(B, T, V)`` and attention
        ``(B, 1, T, S)``.

        Every row runs every step, its padding too (the loss ignores those positions).
        """
        state = self.start(enc)
        logits, attention = [], []
        for t in range(tgt_in.shape[1]):  # inherently sequential: s_t needs s_{t-1}
            logits_t, a_t, state = self.step(tgt_in[:, t], state)  # (B, V), (B, 1, S)
            logits.append(logits_t)
            attention.append(a_t)
        return torch.stack(logits, dim=1), torch.stack(attention, dim=2)


class RNNSeq2Seq(EncoderDecoder):
    r"""GRU encoder-decoder with Bahdanau attention (the paper's recurrent competitor).

    Parameters
    ----------
    cfg : RNNSeq2SeqConfig, optional

    Returns
    -------
    logits : Tensor, shape (B, T, vocab_size + 3)
    attention : Tensor, shape (B, T, S)
        Only with ``return_attention=True``.

    Notes
    -----
    An :class:`~convs2s_edu.EncoderDecoder` of a :class:`GRUEncoder` and a
    :class:`GRUDecoder` (see their equations); the sizes agree, so there is no
    bridge.

    References
    ----------
    Bahdanau, Cho & Bengio (2014); Shi (2023), section 6.
    """

    def __init__(self, cfg: RNNSeq2SeqConfig | None = None):
        cfg = cfg if cfg is not None else RNNSeq2SeqConfig()
        super().__init__(
            GRUEncoder(cfg),
            GRUDecoder(cfg),
            vocab_size=cfg.vocab_size,
            max_positions=cfg.max_positions,
        )
        self.cfg = cfg
