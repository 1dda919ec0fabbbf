"""The model registry: every architecture the package trains, by name.

A name in :data:`MODELS` is all that :class:`~convs2s_edu.TrainConfig` (its ``model``),
:func:`~convs2s_edu.build_model`, the command line, the experiments, the schematic figures
and the ONNX export of the "Try the models" page need to know of a model. A new
architecture is one call of :func:`register_model`::

    from convs2s_edu.registry import register_model

    register_model("bag", lambda paper, **options: BagOfWords(**options), label="Bag of words")
    result = train(TrainConfig(model="bag"))

Its model must be an :class:`~convs2s_edu.EncoderDecoder` (so that decoding, the metrics
and the training loop work unchanged); its builder takes ``paper`` (the config's
``paper_normalisation``) and the model's options: ``vocab_size``, ``max_positions`` and
the config's ``model_options``.

A checkpoint names its model, so it loads as long as that name is registered: the
package's own four are registered when it is imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from .ablations import ABLATION_FIELDS, AblatedConvS2S, AblationConfig
from .convs2s import ConvS2S, ConvS2SConfig
from .hybrid import HYBRID_NAMES, HybridConfig, HybridSeq2Seq
from .rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from .seq2seq import EncoderDecoder

__all__ = ["EXPORTS", "ModelEntry", "MODELS", "register_model", "model_entry"]

#: How ``tools/export_onnx.py`` exports a model for the browser: ``"prefix"``, one graph
#: from the source and the target prefix to the next token's log-probabilities (any
#: :class:`~convs2s_edu.EncoderDecoder`: ``model.decoder(prefix, model.encode(src))``),
#: or ``"step"``, an encoder graph and a one-step graph over a recurrent state (the
#: GRU).
EXPORTS = ("prefix", "step")

#: Where the package's drawings are (the lab: imported only when a figure is drawn).
_DRAWN = "convs2s_edu.lab.schematic:"


@dataclass(frozen=True)
class ModelEntry:
    """One registered architecture.

    Parameters
    ----------
    name : str
        What :class:`~convs2s_edu.TrainConfig`'s ``model`` and the command line call it.
    build : callable
        ``build(paper, **options) -> EncoderDecoder``: a freshly initialised model;
        ``paper`` is the config's ``paper_normalisation``, ``options`` are
        ``vocab_size``, ``max_positions`` and the config's ``model_options``.
    label : str
        The name the site's tables and figures print, e.g. ``"GRU + attention"``.
    schematic : str or callable
        The function that draws the model
        (``schematic(model, src, tgt_in) -> Schematic``), or its import path
        ``"module:function"`` (imported when first drawn, so that the registry does not
        load the drawing code); by default the generic drawing of any model,
        :func:`~convs2s_edu.lab.schematic.module_schematic`.
    export : {"prefix", "step"}
        How the browser page's ONNX graphs are made (:data:`EXPORTS`).
    ignores : tuple of str
        :class:`~convs2s_edu.TrainConfig` fields the model does not read: two configs
        that differ only there are one run (the training cache and resuming leave them
        out).
    """

    name: str
    build: Callable[..., EncoderDecoder]
    label: str
    schematic: str | Callable = _DRAWN + "module_schematic"
    export: str = "prefix"
    ignores: tuple[str, ...] = ()

    def __post_init__(self):
        if self.export not in EXPORTS:
            raise ValueError(f"export must be one of {EXPORTS}, got {self.export!r}")

    def draw(self, model: EncoderDecoder, src, tgt_in):
        """The model's schematic figure of one example (see ``schematic``)."""
        draw = self.schematic
        if isinstance(draw, str):
            module, function = draw.split(":")
            draw = getattr(importlib.import_module(module), function)
        return draw(model, src, tgt_in)


#: The registered models by name, in the order they were registered.
MODELS: dict[str, ModelEntry] = {}


def register_model(
    name: str, build: Callable[..., EncoderDecoder], **entry
) -> ModelEntry:
    """Register a model under ``name``.

    Parameters
    ----------
    name : str
        A non-empty name not registered yet.
    build : callable
        ``build(paper, **options) -> EncoderDecoder``.
    **entry
        The other fields of :class:`ModelEntry`, by keyword: ``label`` (required),
        ``schematic``, ``export``, ``ignores`` (a tuple).

    Returns
    -------
    ModelEntry
        The entry, also in :data:`MODELS`.

    Raises
    ------
    ValueError
        For a name that is empty or registered already, or an ``export`` not in
        :data:`EXPORTS`.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a model's name must be a non-empty string, got {name!r}")
    if name in MODELS:
        raise ValueError(
            f"a model named {name!r} is registered already: {list(MODELS)}"
        )
    MODELS[name] = ModelEntry(name, build, **entry)  # ValueError for a bad export
    return MODELS[name]


def model_entry(name: str) -> ModelEntry:
    """The entry of ``name``; ``ValueError`` naming the registered models otherwise."""
    if name not in MODELS:
        raise ValueError(f"no model named {name!r}; registered: {list(MODELS)}")
    return MODELS[name]


def _convs2s(paper: bool, **options) -> ConvS2S:
    # an ablation's option makes it the ablated model (convs2s_edu.ablations)
    ablated = set(options) & set(ABLATION_FIELDS)
    config = AblationConfig if ablated else ConvS2SConfig
    config = config.paper if paper else config
    return (AblatedConvS2S if ablated else ConvS2S)(config(**options))


def _gru(paper: bool, **options) -> RNNSeq2Seq:
    return RNNSeq2Seq(RNNSeq2SeqConfig(**options))  # no convolution: paper is ignored


def _hybrid(name: str) -> Callable[..., HybridSeq2Seq]:
    return lambda paper, **options: HybridSeq2Seq(
        HybridConfig.from_options(name, paper=paper, **options)
    )


register_model(
    "convs2s", _convs2s, label="ConvS2S", schematic=_DRAWN + "convs2s_schematic"
)
register_model(
    "gru",
    _gru,
    label="GRU + attention",
    schematic=_DRAWN + "gru_schematic",
    export="step",
    ignores=("paper_normalisation",),  # a switch of the convolutional parts
)
for _name, _label in zip(HYBRID_NAMES, ("GRU enc + conv dec", "conv enc + GRU dec")):
    register_model(_name, _hybrid(_name), label=_label)
