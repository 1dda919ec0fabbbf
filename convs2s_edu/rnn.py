r"""The recurrent baseline: a bidirectional GRU encoder and a GRU decoder with Bahdanau attention.

This is the model ConvS2S was written to beat (Bahdanau et al., 2014 [1]_; the
equations follow section 6 of the seed article [2]_, ``../shared/seeds/001``):

.. math::

    e_{tj} &= v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a) \\
    a_{tj} &= \mathrm{softmax}_j(e_{tj}) \\
    c_t &= \textstyle\sum_j a_{tj} h_j \\
    s_t &= f(s_{t-1}, y_{t-1}, c_t) \\
    p(y_t \mid y_{<t}, x) &= \mathrm{softmax}(W_s s_t + b_s)

The model is an :class:`~convs2s_edu.EncoderDecoder` of a :class:`GRUEncoder`
and a :class:`GRUDecoder`. The encoder runs cuDNN-style over the whole (packed)
source at once and the
keys :math:`W_a h_j + b_a` are computed once per sequence. What stays step by step
is the decoder: :math:`s_t` needs :math:`s_{t-1}`, and the attention at step
:math:`t` needs :math:`s_{t-1}`, so the :math:`T` steps of a target cannot run
in parallel even with teacher forcing. That sequential dependency is the
paper's argument for convolutions.

References
----------
.. [1] D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly
   Learning to Align and Translate." ICLR 2015. arXiv:1409.0473.
.. [2] E. S. Shi. "Towards Building Your Own AI: Unpack the Secret of Seq2Seq
   Learning and Bahdanau Attention Mechanism." 2023, section 6.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ._checks import check_int_fields_positive, check_probability
from .data import PAD, n_token_ids
from .gru_fused import fused_applies, packed_bigru
from .seq2seq import Decoder, Encoder, EncoderDecoder, EncoderOut

__all__ = [
    "RNNSeq2SeqConfig",
    "BahdanauAttention",
    "GRUEncoder",
    "GRUDecoderState",
    "GRUDecoder",
    "RNNSeq2Seq",
]


@dataclass
class RNNSeq2SeqConfig:
    """Hyperparameters of :class:`RNNSeq2Seq`; sizes match :class:`~convs2s_edu.ConvS2SConfig`.

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
    """

    vocab_size: int = 50
    embed_dim: int = 128
    hidden_dim: int = 128
    n_encoder_layers: int = 1
    n_decoder_layers: int = 1
    attention_dim: int = 128
    dropout: float = 0.1
    max_positions: int = 64

    def __post_init__(self):
        check_int_fields_positive(self)
        check_probability("dropout", self.dropout)

    def replace(self, **changes) -> RNNSeq2SeqConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return asdict(self)


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
    The form of section 6 of the seed article, which the package follows:

    .. math::

        e_{tj} &= v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a) \\
        a_{tj} &= \frac{\exp(e_{tj})}{\sum_k \exp(e_{tk})} \\
        c_t &= \sum_j a_{tj} h_j

    :math:`W_a h_j + b_a` does not depend on :math:`t`: :meth:`keys` computes it
    once per source sequence and every decoder step reuses it.

    Bahdanau et al. (2014, appendix A.1.2) write the same score with the letters
    swapped and no bias, :math:`v_a^\top \tanh(W_a s_{i-1} + U_a h_j)`: their
    :math:`U_a` (pre-computed, on the annotations) is this class's ``W_a``, their
    :math:`W_a` (on the decoder state) is ``U_a``, and :math:`b_a` is the seed
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
        """:math:`W_a h_j + b_a` for every source position (the part of the energy
        that does not depend on :math:`t`): ``(B, S, enc_dim) -> (B, S, attention_dim)``."""
        return self.W_a(h) + self.b_a

    def energy(self, s_prev: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """:math:`e_{tj}` ``(B, S)`` from :math:`s_{t-1}` ``(B, dec_dim)`` and the keys
        :math:`W_a h_j + b_a` ``(B, S, A)`` of :meth:`keys` (which hold :math:`b_a`)."""
        # e_tj = v_a^T tanh(W_a h_j + U_a s_{t-1} + b_a)
        return torch.tanh(keys + self.U_a(s_prev).unsqueeze(1)) @ self.v_a  # (B, S)

    def forward(
        self, s_prev: torch.Tensor, keys: torch.Tensor, h: torch.Tensor, padding_mask: torch.Tensor
    ):
        e = self.energy(s_prev, keys).masked_fill(padding_mask, float("-inf"))  # (B, S)
        # a_tj = softmax_j(e_tj)
        a = torch.softmax(e, dim=-1)  # (B, S)
        # c_t = Σ_j a_tj h_j
        c = torch.bmm(a.unsqueeze(1), h).squeeze(1)  # (B, 2n)
        return c, a


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
    the recurrence. Whenever a gradient is wanted on a CPU (training), the same
    equations run through :func:`~convs2s_edu.gru_fused.packed_bigru` with the
    module's weights: both directions step together and the backward pass is
    written out, the weight gradients one matrix product over all steps (the same
    values and gradients, ``tests/test_gru_fused.py``). The class attribute
    ``fused = False`` makes training call the module itself (and so does a
    forward without gradients: a forward hook on ``gru`` sees only those).
    """

    #: Whether training on a CPU uses :func:`~convs2s_edu.gru_fused.packed_bigru`.
    fused = True

    def __init__(self, cfg: RNNSeq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        n = cfg.hidden_dim
        self.out_dim, self.embed_dim, self.summary_dim = 2 * n, cfg.embed_dim, n
        self.embed = nn.Embedding(n_token_ids(cfg.vocab_size), cfg.embed_dim, padding_idx=PAD)
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
        if self.fused and fused_applies(x):
            # the same GRU, its backward written out (training on a CPU; see gru_fused)
            h, h_n = packed_bigru(x, lengths, self.gru)
        else:
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, h_n = self.gru(packed)  # h_n: (2 L_enc, B, n)
            h, _ = pad_packed_sequence(
                out, batch_first=True, total_length=src.shape[1]
            )  # (B, S, 2n)
        # h_n[-1]: the backward GRU's last state of the top layer, the first position's
        return EncoderOut(states=h, embedded=x, padding_mask=pad, summary=h_n[-1])


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

    def first(self, n: int) -> GRUDecoderState:
        """The state of the first ``n`` rows (views, nothing copied)."""
        return GRUDecoderState(self.h[:n], self.keys[:n], self.padding_mask[:n], self.s[:, :n])


# the parameters of one layer of nn.GRU, in the order GRUDecoder.forward reads them
_GRU_WEIGHTS = ("weight_ih", "bias_ih", "weight_hh", "bias_hh")


def _gru_update(
    x_gates: torch.Tensor, h_gates: torch.Tensor, s_prev: torch.Tensor
) -> torch.Tensor:
    r"""One GRU step from its two matrix products, as :class:`torch.nn.GRU` computes it.

    ``x_gates`` :math:`W_i x_t + b_i` and ``h_gates`` :math:`W_h s_{t-1} + b_h`, both
    ``(B, 3n)`` in the gate order :math:`r, z, \tilde s`; ``s_prev`` ``(B, n)``.
    """
    n = s_prev.shape[-1]
    # r_t, z_t = σ(W_ir x + b_ir + W_hr s_{t-1} + b_hr), σ(W_iz x + b_iz + W_hz s_{t-1} + b_hz)
    rz = torch.sigmoid(x_gates[:, : 2 * n] + h_gates[:, : 2 * n])
    r, z = rz[:, :n], rz[:, n:]
    # s~_t = tanh(W_in x + b_in + r_t ⊙ (W_hn s_{t-1} + b_hn))
    s_tilde = torch.tanh(torch.addcmul(x_gates[:, 2 * n :], r, h_gates[:, 2 * n :]))
    # s_t = (1 - z_t) ⊙ s~_t + z_t ⊙ s_{t-1}
    return torch.addcmul(s_tilde, z, s_prev - s_tilde)


class GRUDecoder(Decoder):
    r"""The GRU decoder with Bahdanau attention, one step per target position.

    Parameters
    ----------
    cfg : RNNSeq2SeqConfig
    summary_dim : int, optional
        Size of ``EncoderOut.summary``, the input of
        :math:`W_{init}`; default ``hidden_dim`` (:class:`GRUEncoder`'s
        :math:`\overleftarrow{h}_1`).

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
    :meth:`forward` (teacher forcing) computes what :meth:`start` and
    :meth:`step` repeated compute (the equations written out, see there; so a
    forward hook on ``gru``, ``attention`` or ``embed`` sees a teacher-forced
    forward differently from the steps): :math:`s_t` needs :math:`s_{t-1}`, so
    the steps cannot run in parallel. Each step runs only on the rows whose
    target has not ended (the packed target, as
    :func:`~torch.nn.utils.rnn.pack_padded_sequence` packs the encoder's source),
    so padding is never computed; logits and attention after a row's last token
    are zero.

    Departure from Bahdanau et al.: the output layer is the seed article's
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
        self.attention = BahdanauAttention(2 * n, n, cfg.attention_dim)
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
        s0 = s0.view(B, self.cfg.n_decoder_layers, -1).transpose(0, 1).contiguous()  # (L, B, n)
        return GRUDecoderState(
            h=enc.states, keys=self.attention.keys(enc.states), padding_mask=enc.padding_mask, s=s0
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
        c, a = self.attention(s[-1], state.keys, state.h, state.padding_mask)  # (B, 2n), (B, S)
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
        r"""Teacher forcing: :meth:`start`, then the equations of :meth:`step` once per
        column of ``tgt_in`` ``(B, T)``, each on the rows whose target is still running;
        returns logits ``(B, T, V)`` and attention ``(B, 1, T, S)``, both zero after a
        row's last token.

        A row's length runs to its last non-``PAD`` token. As
        :func:`~torch.nn.utils.rnn.pack_padded_sequence` does for the encoder's
        :class:`torch.nn.GRU`, the rows are put longest first, so that the rows still
        running at step :math:`t` are the first :math:`n_t` (``batch_sizes[t]`` of the
        packed target): the right padding is never computed (~29% of the seed's random
        batches). The loss ignores those positions, so the gradients are those of
        running every row to the end.

        Under teacher forcing the inputs :math:`y_{t-1}` are known in advance, so what
        depends only on them runs once for every step, as one matrix product: the
        embeddings :math:`E y_{t-1}` and their share :math:`W_{iy} E y_{t-1} + b_i`
        of the GRU's input gates (:math:`W_i = [W_{iy}\; W_{ic}]` splits over the input
        :math:`[E y_{t-1}; c_t]`), and, after the loop, the output layer
        :math:`W_s s_t + b_s`. What needs :math:`s_{t-1}` (the attention, the context's
        share :math:`W_{ic} c_t` and the recurrence) runs step by step: the sequential
        part the paper's argument is about. The attention weights come from
        :math:`\tanh(x) = 2\sigma(2x) - 1`: :math:`a_{tj} = \mathrm{softmax}_j\big(2 v_a^\top
        \sigma(2(W_a h_j + b_a + U_a s_{t-1}))\big)` is the same softmax (the constant
        :math:`-\sum v_a` cancels), and :math:`\sigma` costs a CPU less than :math:`\tanh`;
        :class:`BahdanauAttention` and :meth:`step` compute :math:`e_{tj}` as written.
        The GRU's equations are written out with the weights of ``self.gru`` (gate
        order :math:`r, z, \tilde s` of :class:`torch.nn.GRU`); :meth:`step` calls the
        module, and ``tests/test_rnn.py`` checks that both give the same logits and
        gradients.
        """
        B, T = tgt_in.shape
        # a row's length: up to its last non-PAD token (at least 1)
        position = torch.arange(1, T + 1, device=tgt_in.device)  # (T,)
        lengths = (tgt_in.ne(PAD) * position).amax(dim=1).clamp(min=1)  # (B,)
        if torch.compiler.is_compiling():
            return self._every_row(tgt_in, enc, position[None, :] <= lengths[:, None])
        packed = pack_padded_sequence(tgt_in, lengths.cpu(), True, enforce_sorted=False)
        sizes = packed.batch_sizes.tolist()  # n_t, non-increasing
        state = self.reorder(self.start(enc), packed.sorted_indices.to(tgt_in.device))
        h, mask = state.h, state.padding_mask  # (B, S, 2n), (B, S)
        # tanh(x) = 2σ(2x) - 1, so v_a^T tanh(x) = 2 v_a^T σ(2x) - Σ v_a: the softmax over j
        # ignores the constant, and σ costs less than tanh (a third on the AVX2 EPYC)
        keys2 = 2 * state.keys  # 2 (W_a h_j + b_a)  (B, S, A)
        U2, v2 = 2 * self.attention.U_a.weight, 2 * self.attention.v_a  # 2 U_a (A, n), 2 v_a (A,)
        s = list(state.s.unbind(0))  # s_{t-1} of every layer, (B, n) each
        gru, E = self.gru, self.cfg.embed_dim
        W_iy, W_ic = gru.weight_ih_l0[:, :E], gru.weight_ih_l0[:, E:]  # (3n, E), (3n, 2n)
        # W_iy E y_{t-1} + b_i for every step at once, split into the steps  (n_t, 3n) each
        y = self.dropout(self.embed(packed.data))  # E y_{t-1}, packed  (Σ n_t, E)
        gates_y = F.linear(y, W_iy, gru.bias_ih_l0).split(sizes)
        tops, attention = [], []
        for t, n_t in enumerate(sizes):  # inherently sequential: s_t needs s_{t-1}
            if n_t < h.shape[0]:  # the rows whose target has ended leave (the last ones)
                h, keys2, mask, s = h[:n_t], keys2[:n_t], mask[:n_t], [s_l[:n_t] for s_l in s]
            # a_tj = softmax_j(v_a^T tanh(W_a h_j + b_a + U_a s_{t-1}))
            #      = softmax_j(2 v_a^T σ(2 (W_a h_j + b_a) + 2 U_a s_{t-1}))  (see above)
            x = keys2 + F.linear(s[-1], U2).unsqueeze(1)  # (n_t, S, A)
            e = torch.sigmoid(x) @ v2  # e_tj + Σ v_a  (n_t, S)
            a = torch.softmax(e.masked_fill(mask, float("-inf")), dim=-1)  # (n_t, S)
            # c_t = Σ_j a_tj h_j
            c = torch.bmm(a.unsqueeze(1), h).squeeze(1)  # (n_t, 2n)
            # W_i [E y_{t-1}; c_t] + b_i = (W_iy E y_{t-1} + b_i) + W_ic c_t
            x_gates = torch.addmm(gates_y[t], c, W_ic.t())  # (n_t, 3n)
            for layer in range(len(s)):
                W_i, b_i, W_h, b_h = (gru.get_parameter(f"{w}_l{layer}") for w in _GRU_WEIGHTS)
                if layer:  # a stacked layer reads the one below (dropout between, as nn.GRU)
                    x_gates = F.linear(
                        F.dropout(s[layer - 1], gru.dropout, gru.training), W_i, b_i
                    )
                s[layer] = _gru_update(x_gates, F.linear(s[layer], W_h, b_h), s[layer])
            tops.append(s[-1])
            attention.append(a)
        # p(y_t) = softmax(W_s s_t + b_s), every step at once
        logits = self.W_s(self.dropout(torch.cat(tops)))  # (Σ n_t, V)

        def unpack(x):  # (Σ n_t, ...) packed -> (B, T, ...) in the batch's order, 0 at padding
            padded, _ = pad_packed_sequence(packed._replace(data=x), True, total_length=T)
            return padded

        return unpack(logits), unpack(torch.cat(attention)).unsqueeze(1)

    def _every_row(self, tgt_in: torch.Tensor, enc: EncoderOut, running: torch.Tensor):
        """:meth:`forward` under :func:`torch.compile`: every row runs every step (one graph
        for batches of any lengths, where the packed loop's step sizes would make a graph per
        batch), and the outputs after a row's last token are set to zero as there."""
        state = self.start(enc)
        logits, attention = [], []
        for t in range(tgt_in.shape[1]):
            logit_t, a_t, state = self.step(tgt_in[:, t], state)
            logits.append(logit_t)
            attention.append(a_t)
        keep = running[..., None]  # (B, T, 1)
        logits = torch.stack(logits, dim=1) * keep  # (B, T, V)
        attention = torch.stack(attention, dim=2) * keep[:, None]  # (B, 1, T, S)
        return logits, attention


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
