r"""One interface for every encoder and every decoder, and the model that composes them.

Every model of the package is an :class:`EncoderDecoder`: an :class:`Encoder`
that reads the whole source once, an optional linear *bridge* where the
encoder's and the decoder's sizes differ, and a :class:`Decoder` that predicts
the target left to right. The search functions of :mod:`convs2s_edu.decode`
only ever call the methods below, so any encoder works with any decoder::

                         src (B, S)
                             |
                  Encoder.forward(src)
                             |
                             v
    EncoderOut(states (B, S, D), embedded (B, S, f) or None,
               padding_mask (B, S), summary (B, D0) or None)
                             |
            bridge: states <- W_b states + b_b   (only where D differs)
                             |
         +-------------------+--------------------+
         |                                        |
  teacher forcing                         decoding, one token at a time
  Decoder.forward(tgt_in, enc)            state = Decoder.start(enc)
    -> logits (B, T, V),                  Decoder.step(y_prev, state)
       attention (B, L, T, S)               -> logits (B, V), attention (B, L, S),
                                               new state
                                          Decoder.reorder(state, index) -> state

ConvS2S pairs a :class:`~convs2s_edu.ConvEncoder` with a
:class:`~convs2s_edu.ConvDecoder`, the GRU model a :class:`~convs2s_edu.GRUEncoder` with
a :class:`~convs2s_edu.GRUDecoder`, and the hybrids cross them
(:mod:`convs2s_edu.hybrid`).

Conventions
-----------
* A decoder never changes a state in place: :meth:`Decoder.step` and
  :meth:`Decoder.reorder` return new states, so a state can be kept and reused.
* The state holds the decoder's view of the encoder output (keys, values,
  padding mask), so :meth:`Decoder.reorder` selects the rows of those too:
  beam search repeats and prunes hypotheses through ``reorder`` alone.
* Attention has one layout at the decoder level (above), :math:`L` the number of attention
  mechanisms: ``n_decoder_layers`` for the convolutional decoder, 1 for the GRU decoder
  (the model-level layout: :class:`EncoderDecoder`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

import torch
from torch import nn

from ._checks import check_int_fields_positive, check_model_inputs, check_probability
from .data import PAD, as_token_batch, n_token_ids

__all__ = ["ModelConfig", "EncoderOut", "Encoder", "Decoder", "EncoderDecoder"]


@dataclass
class ModelConfig:
    """What the models' hyperparameter dataclasses share
    (:class:`~convs2s_edu.ConvS2SConfig`, :class:`~convs2s_edu.RNNSeq2SeqConfig`).

    A subclass declares its fields; this base checks them when the config is made (every
    ``int`` field ``>= 1``: sizes, counts and lengths; ``dropout`` in ``[0, 1)``), each
    ``ValueError`` naming the field, the bad value and the allowed range. A subclass
    with more to check calls ``super().__post_init__()`` first.
    """

    def __post_init__(self):
        check_int_fields_positive(self)
        check_probability("dropout", self.dropout)

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """The fields as a plain ``dict`` (:func:`dataclasses.asdict`)."""
        return asdict(self)


class EncoderOut(NamedTuple):
    r"""What every encoder returns.

    Attributes
    ----------
    states : Tensor, shape (B, S, D)
        One vector per source position, zero at padding: :math:`z^u_j` of the
        convolutional encoder (:math:`D = f`), the annotations
        :math:`h_j = [\overrightarrow{h}_j; \overleftarrow{h}_j]` of the GRU
        encoder (:math:`D = 2n`). After the bridge, :math:`D` is the size the
        decoder attends over.
    embedded : Tensor, shape (B, S, f), or None
        The source embeddings :math:`e_j` (the convolutional decoder adds them
        to its attention values, :math:`z^u_j + e_j`).
    padding_mask : Tensor, shape (B, S)
        True at source padding.
    summary : Tensor, shape (B, D0), or None
        One vector per source, from which a recurrent decoder computes its
        initial state :math:`s_0`: the backward GRU's last state
        :math:`\overleftarrow{h}_1` (:math:`D_0 = n`), or, from the convolutional
        encoder of the ``conv+gru`` hybrid (:mod:`convs2s_edu.hybrid`), the mean of
        :math:`z^u_j` over the real tokens (:math:`D_0 = f`). ``None`` (the default)
        from an encoder that feeds no recurrent decoder: ConvS2S's.
    """

    states: torch.Tensor
    embedded: torch.Tensor | None
    padding_mask: torch.Tensor
    summary: torch.Tensor | None = None


class Encoder(nn.Module):
    """An encoder: ``forward(src (B, S)) -> EncoderOut``.

    Attributes
    ----------
    out_dim : int
        :math:`D`, the size of ``EncoderOut.states``.
    embed_dim : int
        :math:`f`, the size of ``EncoderOut.embedded``.
    """

    out_dim: int
    embed_dim: int

    def forward(self, src: torch.Tensor) -> EncoderOut:  # pragma: no cover - interface
        raise NotImplementedError


class Decoder(nn.Module):
    """A decoder: teacher forcing with ``forward``, decoding with ``start``, ``step``,
    ``reorder``.

    Attributes
    ----------
    in_dim : int
        The size of ``EncoderOut.states`` it attends over; a different
        encoder size needs a bridge (:class:`EncoderDecoder`).
    multi_step : bool
        True when the decoder has one attention per layer (its model-level
        attention keeps the layer axis).
    """

    in_dim: int
    multi_step: bool

    def forward(
        self, tgt_in: torch.Tensor, enc: EncoderOut
    ):  # pragma: no cover - interface
        """``tgt_in`` ``(B, T)`` -> logits ``(B, T, V)``, attention ``(B, L, T, S)``."""
        raise NotImplementedError

    def start(self, enc: EncoderOut) -> Any:  # pragma: no cover - interface
        """The state before the first step (it holds what it needs of ``enc``)."""
        raise NotImplementedError

    def step(self, y_prev: torch.Tensor, state):  # pragma: no cover - interface
        """``y_prev`` ``(B,)`` -> logits ``(B, V)``, attention ``(B, L, S)``, the new state."""
        raise NotImplementedError

    def reorder(self, state, index: torch.Tensor):  # pragma: no cover - interface
        """The state of rows ``index`` ``(B',)`` (rows may repeat), encoder part included."""
        raise NotImplementedError


class EncoderDecoder(nn.Module):
    r"""An :class:`Encoder`, a bridge where the sizes differ, and a :class:`Decoder`.

    Parameters
    ----------
    encoder : Encoder
    decoder : Decoder
    vocab_size : int
        Number of ordinary tokens; ids ``0..vocab_size + 2`` are accepted.
    max_positions : int
        Longest source or decoder input accepted.

    Attributes
    ----------
    bridge : torch.nn.Linear or None
        :math:`W_b`, :math:`b_b`: maps the encoder's states (``encoder.out_dim``) to the
        size the decoder attends over (``decoder.in_dim``); ``None`` when the sizes
        agree (ConvS2S, the GRU model), so those models have no parameters beyond their
        parts.

    Returns
    -------
    logits : Tensor, shape (B, T, vocab_size + 3)
        From ``model(src, tgt_in)`` (teacher forcing). After a row's last
        non-padding token the loss reads nothing: the models compute those positions
        anyway (the GRU decoder's fast path, :class:`~convs2s_edu.fast.FastGRUDecoder`,
        skips them and returns zeros there).
    attention : Tensor, shape (B, L, T, S) or (B, T, S)
        Only with ``return_attention=True``; ``(B, T, S)`` for a decoder with a
        single attention (``Decoder.multi_step`` ``False``).

    Notes
    -----
    The bridge is the smallest map the shapes need, applied to every source
    position and set to zero again at padding:

    .. math:: \tilde{z}_j = W_b z_j + b_b

    It is not in either paper: it exists only so that a GRU encoder can feed the
    convolutional decoder (:math:`2n \to f`) and a convolutional encoder the
    GRU decoder (:math:`f \to 2n`).

    ``model(src, tgt_in)`` converts and checks its inputs (:meth:`check_inputs`). The
    checks read the tensors' values, which stops a GPU's queue; ``check=False`` skips
    them for batches known to be valid already, such as those of
    :class:`~convs2s_edu.SortingDataset`, whose examples were checked when it was built
    (the package's training step passes it).
    """

    def __init__(
        self, encoder: Encoder, decoder: Decoder, *, vocab_size: int, max_positions: int
    ):
        super().__init__()
        self.vocab_size = vocab_size
        self.n_ids = n_token_ids(vocab_size)
        self.max_positions = max_positions
        self.encoder = encoder
        self.decoder = decoder
        if encoder.out_dim != decoder.in_dim:
            self.bridge = nn.Linear(encoder.out_dim, decoder.in_dim)  # W_b, b_b
        else:
            self.bridge = None

    def check_inputs(self, src, tgt_in=None):
        """Convert token batches to ``int64`` (:func:`~convs2s_edu.data.as_token_batch`)
        and check them; returns ``(src, tgt_in)``. ``ValueError`` for ids outside the
        vocabulary, inputs longer than ``max_positions``, empty or left-padded sources
        and batches of different sizes."""
        # a named region of the profiler's timeline: the checks' cost shows under this
        # name
        with torch.profiler.record_function("EncoderDecoder.check_inputs"):
            src = as_token_batch(src, "src")
            if tgt_in is not None:
                tgt_in = as_token_batch(tgt_in, "tgt_in")
            check_model_inputs(src, tgt_in, self.n_ids, self.max_positions, PAD)
        return src, tgt_in

    def encode(self, src: torch.Tensor) -> EncoderOut:
        """Run the encoder (and the bridge) on ``src`` ``(B, S)``."""
        enc = self.encoder(src)
        if self.bridge is None:
            return enc
        # z~_j = W_b z_j + b_b, zero at padding
        states = self.bridge(enc.states).masked_fill(
            enc.padding_mask.unsqueeze(-1), 0.0
        )
        return enc._replace(states=states)  # (B, S, decoder.in_dim)

    def forward(
        self, src, tgt_in, return_attention: bool = False, *, check: bool = True
    ):
        # off only for batches checked already (the package's own training step)
        if check:
            src, tgt_in = self.check_inputs(src, tgt_in)
        # (B, T, V), (B, L, T, S)
        logits, attention = self.decoder(tgt_in, self.encode(src))
        if not return_attention:
            return logits
        return logits, attention if self.decoder.multi_step else attention[:, 0]
