r"""Hybrids: a GRU encoder with the convolutional decoder, a convolutional encoder with
the GRU decoder.

Shi's article argues that for targets that *reorder* the source, a recurrent
encoder with a convolutional decoder may be the better pair (``../shared/seeds/001``,
the section on encoder and decoder choices). With the common interface of
:mod:`convs2s_edu.seq2seq` such a model is the parts of the two models put
together, each part with its own equations unchanged, and the smallest bridge
the shapes need (:class:`~convs2s_edu.EncoderDecoder`):

============  ======================================  ==========================================
name          encoder -> bridge -> decoder            what crosses
============  ======================================  ==========================================
``gru+conv``  :class:`~convs2s_edu.GRUEncoder`,       keys :math:`z_j = W_b h_j + b_b`; values
              :math:`W_b: 2n \to f`,                  :math:`z_j + e_j`, :math:`e_j` the GRU
              :class:`~convs2s_edu.ConvDecoder`       encoder's token embeddings (no position
                                                      table: the GRU knows the order)
``conv+gru``  :class:`~convs2s_edu.ConvEncoder`,      annotations :math:`h_j = W_b z^u_j + b_b`;
              :math:`W_b: f \to 2n`,                  :math:`s_0 = \tanh(W_{init}\,\bar z)`,
              :class:`~convs2s_edu.GRUDecoder`        :math:`\bar z` the mean of :math:`z^u_j`
                                                      over the real tokens
============  ======================================  ==========================================

The two parts share ``vocab_size``, ``embed_dim`` and ``max_positions`` (the
convolutional decoder adds the encoder's embeddings to its keys to make its values, so
the sizes must agree). ``scale_encoder_grad`` of a convolutional decoder divides the
gradient into the keys by its number of attentions whatever the encoder is; after a GRU
decoder (one attention) nothing is scaled. The ``conv+gru`` encoder is a
:class:`SummarisingConvEncoder`: the ConvEncoder (same parameters) with the
:math:`\bar z` the GRU decoder starts from, which ConvS2S does not need.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import torch

from .convs2s import ConvDecoder, ConvEncoder, ConvS2SConfig
from .rnn import GRUDecoder, GRUEncoder, RNNSeq2SeqConfig
from .seq2seq import EncoderDecoder, EncoderOut

__all__ = ["HYBRID_NAMES", "HybridConfig", "SummarisingConvEncoder", "HybridSeq2Seq"]

#: Hybrid model names: ``"<encoder>+<decoder>"``.
HYBRID_NAMES = ("gru+conv", "conv+gru")

_SHARED = ("vocab_size", "embed_dim", "max_positions")


@dataclass
class HybridConfig:
    """Hyperparameters of a :class:`HybridSeq2Seq`: which parts, and each part's config.

    Parameters
    ----------
    name : {"gru+conv", "conv+gru"}
        ``"<encoder>+<decoder>"``.
    conv : ConvS2SConfig
        Configures the convolutional part (its ``n_encoder_layers`` for a
        convolutional encoder, its ``n_decoder_layers`` for a convolutional decoder).
    rnn : RNNSeq2SeqConfig
        Configures the GRU part likewise (:meth:`from_options` builds both).
    """

    name: str = "gru+conv"
    conv: ConvS2SConfig = field(default_factory=ConvS2SConfig)
    rnn: RNNSeq2SeqConfig = field(default_factory=RNNSeq2SeqConfig)

    def __post_init__(self):
        if self.name not in HYBRID_NAMES:
            raise ValueError(f"name must be one of {HYBRID_NAMES}, got {self.name!r}")
        if isinstance(self.conv, dict):
            self.conv = ConvS2SConfig(**self.conv)
        if isinstance(self.rnn, dict):
            self.rnn = RNNSeq2SeqConfig(**self.rnn)
        for key in _SHARED:
            a, b = getattr(self.conv, key), getattr(self.rnn, key)
            if a != b:
                raise ValueError(
                    f"the two parts must agree on {key}, got {a} (conv) and {b} (rnn)"
                )

    @classmethod
    def from_options(cls, name: str, *, paper: bool = False, **options) -> HybridConfig:
        """Both parts' configs from one set of fields, each going to every config that
        has it (``hidden_dim`` to both, ``kernel_size`` to ``conv`` only); ``paper``
        starts the convolutional part from
        :meth:`ConvS2SConfig.paper <convs2s_edu.ConvS2SConfig.paper>`."""
        conv_names = {f.name for f in fields(ConvS2SConfig)}
        rnn_names = {f.name for f in fields(RNNSeq2SeqConfig)}
        unknown = sorted(set(options) - conv_names - rnn_names)
        if unknown:
            raise ValueError(
                f"unknown option(s) {unknown} for {name!r}; allowed: "
                f"{sorted(conv_names | rnn_names)}"
            )
        conv = {k: v for k, v in options.items() if k in conv_names}
        rnn = {k: v for k, v in options.items() if k in rnn_names}
        conv_cfg = ConvS2SConfig.paper(**conv) if paper else ConvS2SConfig(**conv)
        return cls(name, conv_cfg, RNNSeq2SeqConfig(**rnn))

    @property
    def vocab_size(self) -> int:
        return self.conv.vocab_size

    @property
    def max_positions(self) -> int:
        return self.conv.max_positions

    def to_dict(self) -> dict:
        return {"name": self.name, "conv": asdict(self.conv), "rnn": asdict(self.rnn)}


class SummarisingConvEncoder(ConvEncoder):
    r""":class:`~convs2s_edu.ConvEncoder` with the ``summary`` a GRU decoder starts from
    (the ``conv+gru`` hybrid's encoder).

    Parameters
    ----------
    cfg : ConvS2SConfig

    Returns
    -------
    EncoderOut
        The :class:`~convs2s_edu.ConvEncoder`'s, with ``summary`` ``(B, f)``: the mean
        of :math:`z^u_j` over the :math:`m` real tokens of each source,

        .. math:: \bar z = \frac{1}{m} \sum_{j=1}^{m} z^u_j ,

        from which :class:`~convs2s_edu.GRUDecoder` computes
        :math:`s_0 = \tanh(W_{init}\, \bar z)` in place of the GRU encoder's
        :math:`\overleftarrow{h}_1`. Same parameters as the ConvEncoder.
    """

    def forward(self, src: torch.Tensor) -> EncoderOut:
        enc = super().forward(src)
        z = enc.states  # (B, S, f), zero at padding
        m = (~enc.padding_mask).sum(dim=1, keepdim=True).to(z.dtype)  # (B, 1)
        # z̄ = (1/m) Σ_j z^u_j
        return enc._replace(summary=z.sum(dim=1) / m)  # (B, f)


class HybridSeq2Seq(EncoderDecoder):
    """A GRU encoder with the convolutional decoder, or the reverse (see the module
    notes).

    Parameters
    ----------
    cfg : HybridConfig, optional
        ``HybridConfig()`` (``"gru+conv"``, default sizes) when omitted.

    Returns
    -------
    logits, attention
        As :class:`~convs2s_edu.EncoderDecoder` returns them.

    Examples
    --------
    >>> import torch
    >>> model = HybridSeq2Seq(HybridConfig.from_options("gru+conv", vocab_size=9))
    >>> logits = model(torch.tensor([[3, 1, 2]]), torch.tensor([[10, 1, 2, 3]]))
    >>> tuple(logits.shape)
    (1, 4, 12)
    """

    def __init__(self, cfg: HybridConfig | None = None):
        cfg = cfg if cfg is not None else HybridConfig()
        if cfg.name == "gru+conv":
            encoder, decoder = GRUEncoder(cfg.rnn), ConvDecoder(cfg.conv)
        else:
            encoder = SummarisingConvEncoder(cfg.conv)
            decoder = GRUDecoder(cfg.rnn, summary_dim=cfg.conv.embed_dim)  # z̄: f
        super().__init__(
            encoder, decoder, vocab_size=cfg.vocab_size, max_positions=cfg.max_positions
        )
        self.cfg = cfg
