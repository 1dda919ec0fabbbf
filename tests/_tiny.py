"""Tiny models, model configurations, training configurations and CLI options for the tests.

Every test file takes its small models and runs from here (the fixtures of ``conftest.py``
build on these too), passing the sizes a test needs as overrides: embeddings and hidden
states of 8-32, vocabularies of 9-10, seconds per training run on a CPU.
"""

from __future__ import annotations

import shutil
from dataclasses import fields

import torch

from convs2s_edu import (
    ConvS2S,
    ConvS2SConfig,
    HybridConfig,
    HybridSeq2Seq,
    RNNSeq2Seq,
    RNNSeq2SeqConfig,
    eos_index,
)
from convs2s_edu.ablations import ABLATION_FIELDS, AblatedConvS2S, AblationConfig
from convs2s_edu.training import TrainConfig

VOCAB = 10

#: The four encoder/decoder combinations.
KINDS = ("convs2s", "gru", "gru+conv", "conv+gru")

# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

#: The sizes of a tiny model (:func:`tiny_model_config`'s defaults, with ``vocab_size=VOCAB``).
MODEL_SIZES = {
    "embed_dim": 16,
    "hidden_dim": 16,
    "n_encoder_layers": 2,
    "n_decoder_layers": 2,
    "attention_dim": 12,
    "dropout": 0.0,
    "max_positions": 24,
}

_FIELDS = {
    "convs2s": {f.name for f in fields(AblationConfig)},
    "gru": {f.name for f in fields(RNNSeq2SeqConfig)},
}


def tiny_model_config(kind: str, **overrides):
    """The config of a tiny model of ``kind``: :data:`MODEL_SIZES` with ``overrides``.

    A field goes to every config that has it (``attention_dim`` to the GRU parts only,
    ``kernel_size`` to the convolutional ones); a name no config has is a ``TypeError``.
    """
    options = {"vocab_size": VOCAB, **MODEL_SIZES, **overrides}
    unknown = sorted(set(overrides) - _FIELDS["convs2s"] - _FIELDS["gru"])
    if unknown:
        raise TypeError(f"no model config has the field(s) {unknown}")
    if kind in _FIELDS:
        config = ConvS2SConfig if kind == "convs2s" else RNNSeq2SeqConfig
        if kind == "convs2s" and set(overrides) & set(ABLATION_FIELDS):
            config = AblationConfig  # the paper's ablations (convs2s_edu.ablations)
        return config(**{k: v for k, v in options.items() if k in _FIELDS[kind]})
    return HybridConfig.from_options(kind, **options)


def tiny_model(kind: str, seed: int | None = 0, eos_bias: float = 0.0, **overrides):
    """A tiny model of ``kind`` (:func:`tiny_model_config`), initialised after
    ``torch.manual_seed(seed)`` (``seed=None``: from the current random state), with
    ``eos_bias`` added to the ``<eos>`` logit's bias."""
    if seed is not None:
        torch.manual_seed(seed)
    cfg = tiny_model_config(kind, **overrides)
    if kind == "convs2s":
        model = (AblatedConvS2S if isinstance(cfg, AblationConfig) else ConvS2S)(cfg)
    elif kind == "gru":
        model = RNNSeq2Seq(cfg)
    else:
        model = HybridSeq2Seq(cfg)
    if eos_bias:
        with torch.no_grad():
            output_layer(model).bias[eos_index(cfg.vocab_size)] += eos_bias
    return model


#: The vocabulary of :func:`decoding_model`.
DECODING_VOCAB = 9


def decoding_model(kind: str, seed: int = 0, eos_bias: float = 0.0, **overrides):
    """The decoding tests' model: a vocabulary of :data:`DECODING_VOCAB`, dropout 0.1 (decoding
    must switch it off), attention of 16 and a one-layer GRU; ``eos_bias`` makes it stop early
    or never."""
    if kind == "gru":
        overrides = {"n_encoder_layers": 1, "n_decoder_layers": 1, **overrides}
    options = {"vocab_size": DECODING_VOCAB, "attention_dim": 16, "dropout": 0.1, **overrides}
    return tiny_model(kind, seed, eos_bias, **options)


#: :func:`tiny_model` overrides that build the model of a training run of ``tiny_config(kind)``
#: (:data:`TINY_OPTIONS`: 16 features, two convolutional layers or one GRU layer), with
#: positions for 16 tokens.
RUN_MODEL = {
    "convs2s": {"max_positions": 16},
    "gru": {
        "attention_dim": 16,
        "n_encoder_layers": 1,
        "n_decoder_layers": 1,
        "max_positions": 16,
    },
}


def randomise_biases(model: torch.nn.Module) -> None:
    """Draw every bias (``bias``, ``b_a``, ``b_d``) from N(0, 0.5^2): biases that start at zero
    (``b_a``, ``b_d``, the bridge's, all of them with the paper's init) become visible when
    a computation forgets them."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("bias", "b_a", "b_d")):
                p.normal_(0.0, 0.5)


def output_layer(model) -> torch.nn.Linear:
    """The decoder's output layer: ``W_o`` (convolutional) or ``W_s`` (GRU)."""
    dec = model.decoder
    return dec.W_o if hasattr(dec, "W_o") else dec.W_s


# --------------------------------------------------------------------------
# Training runs
# --------------------------------------------------------------------------

#: Small model sizes for a training run, per kind (``TrainConfig.model_options``).
TINY_OPTIONS = {
    "convs2s": {"embed_dim": 16, "hidden_dim": 16, "n_encoder_layers": 2, "n_decoder_layers": 2},
    "gru": {"embed_dim": 16, "hidden_dim": 16, "attention_dim": 16},
    "gru+conv": {
        "embed_dim": 16,
        "hidden_dim": 16,
        "attention_dim": 16,
        "n_encoder_layers": 1,
        "n_decoder_layers": 1,
    },
    "conv+gru": {
        "embed_dim": 16,
        "hidden_dim": 16,
        "attention_dim": 16,
        "n_encoder_layers": 1,
        "n_decoder_layers": 1,
    },
}

#: Data sizes for six steps of 16 per epoch (``tiny_config``'s own give two): the tests of
#: what happens between the steps and epochs of a run.
SIX_STEPS = {"n_train": 96, "n_valid": 32, "n_test": 32}

#: Data sizes for three steps of 16 per epoch, sources of 2 to 6 tokens: the tests that
#: recompute the loop's numbers by another route.
THREE_STEPS = {"min_len": 2, "n_train": 48, "n_valid": 24}


def tiny_config(model: str = "convs2s", dropout: float | None = None, **changes) -> TrainConfig:
    """The sorting task on 32 short examples, one epoch, a tiny model of ``model``
    (:data:`TINY_OPTIONS`, plus ``dropout`` when given), on the fast paths (the default,
    ``fast=None``, would time them on each machine: ``test_training_calibrate.py``), with
    ``changes`` applied."""
    options = dict(TINY_OPTIONS.get(model, {}))
    if dropout is not None:
        options["dropout"] = dropout
    cfg = TrainConfig(
        model=model,
        vocab_size=10,
        min_len=3,
        max_len=6,
        n_train=32,
        n_valid=16,
        n_test=16,
        batch_size=16,
        epochs=1,
        device="cpu",
        model_options=options,
        fast=True,  # not timed per machine: the same path, and numbers, in every test
    )
    return cfg.replace(**changes)


def copy_run(runs, model: str, tmp_path):
    """A copy of the ``tiny_runs`` fixture's run of ``model`` under ``tmp_path``, to change."""
    dst = tmp_path / model
    shutil.copytree(runs / model, dst)
    return dst


#: CLI options for the original notebook's models on a tiny slice of the task: each
#: command takes seconds.
SMALL = [
    "--n-train",
    "64",
    "--epochs",
    "1",
    "--max-len",
    "6",
    "--min-len",
    "3",
    "--device",
    "cpu",
    "--quiet",
]
