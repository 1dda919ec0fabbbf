r"""The paper's ablations of ConvS2S, and one it does not run, as subclasses.

:mod:`convs2s_edu.convs2s` holds the paper's model as written. What the paper takes
away from it to measure what each part is worth lives here, each a subclass that
changes one thing:

=============================  ===================================================
``source_positions=False``     no source position table, :math:`e_j = w_j` (§5.4,
``target_positions=False``     Table 4); likewise for the target, :math:`g_i`
``attention_layers=(1, 4)``    attention in some decoder layers only (§5.5, Table 5)
``attention_values="z"``       the attention sums :math:`z^u_j` or :math:`e_j` alone
                               instead of :math:`z^u_j + e_j` (not in the paper)
=============================  ===================================================

:class:`AblationConfig` adds these four fields to
:class:`~convs2s_edu.ConvS2SConfig`; :class:`AblatedConvS2S` is the model they
describe (with every field at its default, the paper's model). The training
configuration names them in ``model_options`` of the ``"convs2s"`` model, and the
model registry builds an :class:`AblatedConvS2S` when any of them is given
(:mod:`convs2s_edu.registry`).

References
----------
Gehring et al. (2017), §5.4 "Position Embeddings", §5.5 "Multi-step Attention".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import nn

from .convs2s import (
    SQRT_HALF,
    ConvDecoder,
    ConvEncoder,
    ConvMemory,
    ConvS2S,
    ConvS2SConfig,
    MultiStepAttention,
    _linear,
)
from .seq2seq import EncoderDecoder, EncoderOut

__all__ = [
    "AblationConfig",
    "NoPositions",
    "AblatedEncoder",
    "AblatedDecoder",
    "AblatedConvS2S",
    "ABLATION_FIELDS",
]


@dataclass
class AblationConfig(ConvS2SConfig):
    """:class:`~convs2s_edu.ConvS2SConfig` and what the ablations switch off.

    Parameters
    ----------
    source_positions, target_positions : bool
        Add the learned position embeddings :math:`p_j` to the source (encoder) or
        the target (decoder) token embeddings (§3.1). Paper and seed: both on.
        Turning one off removes that side's position table (no parameters): the
        paper's ablation of §5.4.
    attention_layers : tuple of int or None
        The decoder layers (numbered ``1..n_decoder_layers``, bottom to top) that
        have a :class:`~convs2s_edu.MultiStepAttention`; ``None`` (default) means
        every layer, as in the paper. A layer without attention passes its
        ConvBlock's output on unchanged. The paper's ablation of §5.5; the attention
        output then has ``len(attention_layers)`` layers, and ``scale_encoder_grad``
        divides by that number.
    attention_values : {"z+e", "z", "e"}
        The values the attention sums: the paper's :math:`z^u_j + e_j` (§3.3), or
        :math:`z^u_j` or :math:`e_j` alone (keys stay :math:`z^u_j`): an ablation
        the paper does not run.
    **fields
        Those of :class:`~convs2s_edu.ConvS2SConfig`.
    """

    source_positions: bool = True
    target_positions: bool = True
    attention_layers: tuple | None = None
    attention_values: str = "z+e"

    def __post_init__(self):
        super().__post_init__()
        for name in ("source_positions", "target_positions"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        if self.attention_layers is not None:
            layers, top = self.attention_layers, self.n_decoder_layers
            allowed = f"distinct layer numbers in 1..{top}"
            if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
                raise TypeError(
                    f"attention_layers must be None or a sequence of {allowed}, "
                    f"got {layers!r}"
                )
            layers = tuple(layers)
            ok = [isinstance(n, int) and not isinstance(n, bool) for n in layers]
            if (
                not layers
                or not all(ok)
                or len(set(layers)) != len(layers)
                or not all(1 <= n <= top for n in layers)
            ):
                raise ValueError(
                    f"attention_layers must hold at least one of {allowed}, "
                    f"got {self.attention_layers!r}"
                )
            self.attention_layers = tuple(sorted(layers))
        if self.attention_values not in ("z+e", "z", "e"):
            raise ValueError(
                f'attention_values must be "z+e", "z" or "e", '
                f"got {self.attention_values!r}"
            )

    @property
    def attending_layers(self) -> tuple:
        """The 0-based indices of the decoder layers that attend (all by default)."""
        if self.attention_layers is None:
            return tuple(range(self.n_decoder_layers))
        return tuple(n - 1 for n in self.attention_layers)


#: The fields :class:`AblationConfig` adds: a ``"convs2s"`` configuration whose
#: ``model_options`` name one of them is an :class:`AblatedConvS2S`.
ABLATION_FIELDS = tuple(
    f.name
    for f in fields(AblationConfig)
    if f.name not in {g.name for g in fields(ConvS2SConfig)}
)


class NoPositions(nn.Module):
    """:math:`p_j = 0`: a position "table" without parameters (the ablation of §5.4),
    so that the embedding reads :math:`e_j = w_j`. The embedding still bounds the
    input's length by ``max_positions``."""

    def forward(self, positions: torch.Tensor) -> float:
        return 0.0


class AblatedEncoder(ConvEncoder):
    """:class:`~convs2s_edu.ConvEncoder`, without source positions when
    ``cfg.source_positions`` is ``False``.

    Parameters
    ----------
    cfg : AblationConfig
    """

    def __init__(self, cfg: AblationConfig):
        super().__init__(cfg)
        if not cfg.source_positions:
            self.embed.position = NoPositions()  # e_j = w_j


class AblatedDecoder(ConvDecoder):
    """:class:`~convs2s_edu.ConvDecoder` with attention in ``cfg.attention_layers``
    only, values :math:`z^u_j`, :math:`e_j` or their sum, and target positions or not.

    Parameters
    ----------
    cfg : AblationConfig

    Notes
    -----
    ``attention[i]`` and ``W_c[i]`` belong to the ``i``-th attending layer (as in
    the reference, where every layer attends). The memory's ``z_plus_e`` holds the
    values that ``attention_values`` names.
    """

    def __init__(self, cfg: AblationConfig):
        super().__init__(cfg)
        if not cfg.target_positions:
            self.embed.position = NoPositions()  # g_i without p_i
        f, d = cfg.embed_dim, cfg.hidden_dim
        # the 0-based layer l attends with attention[slot[l]]
        self.slot = {l: i for i, l in enumerate(cfg.attending_layers)}
        if len(self.slot) < cfg.n_decoder_layers:
            self.attention = nn.ModuleList(
                MultiStepAttention(
                    d, f, scale_context=cfg.scale_context, weight_norm=cfg.weight_norm
                )
                for _ in self.slot
            )
            self.W_c = nn.ModuleList(
                _linear(f, d, dropout=0.0, weight_norm=cfg.weight_norm)
                for _ in self.slot
            )

    def memory(self, enc: EncoderOut) -> ConvMemory:
        """The reference's keys :math:`z^u_j` (their gradient scaled by the attentions
        this decoder has); values as ``attention_values`` says."""
        memory = super().memory(enc)
        z, e = memory.z, enc.embedded  # (B, S, f) each
        values = {"z+e": memory.z_plus_e, "z": z, "e": e}[self.cfg.attention_values]
        return memory._replace(z_plus_e=values)

    def attend(self, l: int, h: torch.Tensor, g: torch.Tensor, memory: ConvMemory):
        """Layer ``l``'s attention as in the reference, or ``(h, None)`` for a layer
        without attention."""
        if l not in self.slot:
            return h, None
        i = self.slot[l]
        c, a = self.attention[i](h, g, memory)  # (B, T, f), (B, T, S)
        # h_i <- sqrt(0.5) (h_i + W_c c_i)
        return (h + self.W_c[i](c)) * SQRT_HALF, a


class AblatedConvS2S(ConvS2S):
    """:class:`~convs2s_edu.ConvS2S` of an :class:`AblationConfig`: an
    :class:`AblatedEncoder` and an :class:`AblatedDecoder`.

    Parameters
    ----------
    cfg : AblationConfig, optional
        The defaults: the paper's model (a :class:`~convs2s_edu.ConvS2S` in all but
        name).

    Returns
    -------
    logits, attention
        As :class:`~convs2s_edu.ConvS2S`'s; the attention has one layer per
        attending decoder layer.
    """

    def __init__(self, cfg: AblationConfig | None = None):
        cfg = cfg if cfg is not None else AblationConfig()
        EncoderDecoder.__init__(
            self,
            AblatedEncoder(cfg),
            AblatedDecoder(cfg),
            vocab_size=cfg.vocab_size,
            max_positions=cfg.max_positions,
        )
        self.cfg = cfg
