"""Tests of ``convs2s_edu.training.config``: ``TrainConfig`` (every field type- and range-checked,
the field named in the message; ``to_dict``/``from_dict``), ``MODEL_NAMES``, the data sets of
a config (the same for every model, splits pairwise disjoint) and ``build_model`` (the paper's
ConvS2S by default, ``model_options`` reaching every kind of model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _tiny import KINDS, SIX_STEPS, tiny_config

from convs2s_edu import MODEL_NAMES, generate_dataset
from convs2s_edu import training as train_mod
from convs2s_edu.training import TrainConfig, build_model, make_datasets

pytestmark = pytest.mark.usefixtures("single_thread")

# --------------------------------------------------------------------------
# TrainConfig: types and ranges, the field named
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"clip_norm": "x"}, "clip_norm must be a positive finite number or None, got 'x'"),
        ({"clip_norm": float("inf")}, "clip_norm"),
        ({"clip_norm": True}, "clip_norm"),
        ({"model_options": None}, "model_options must be a dict .* got None"),
        ({"model_options": {1: 2}}, "model_options"),
        ({"lr": True}, "lr must be a positive finite number, got True"),
        ({"lr": "0.1"}, "lr must be"),
        ({"lr": float("nan")}, "lr must be"),
        ({"epochs": 2.0}, "epochs must be an integer in 1..10000, got 2.0"),
        ({"epochs": True}, "epochs"),
        ({"max_len": 100_000}, "max_len must be an integer in 1..512, got 100000"),
        ({"min_len": 0}, "min_len must be an integer in 1..512, got 0"),
        ({"vocab_size": 10**6}, "vocab_size must be an integer in 1..10000"),
        ({"batch_size": 10**5}, "batch_size must be an integer in 1..4096"),
        ({"n_train": 10**9}, "n_train must be an integer in 1..1000000"),
        ({"seed": -1}, r"seed must be an integer in 0..4294967295, got -1"),
        ({"seed": 2**40}, "seed"),
        ({"paper_normalisation": "yes"}, "paper_normalisation must be True or False"),
        ({"device": 0}, "device must be"),
        ({"model": None}, "model must be one of"),
    ],
)
def test_train_config_names_the_bad_field_and_the_allowed_values(changes, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**changes)


def test_train_config_bounds_are_inclusive():
    cfg = TrainConfig(max_len=512, min_len=512, seed=2**32 - 1, batch_size=4096, epochs=1)
    assert (cfg.max_len, cfg.seed) == (512, 2**32 - 1)
    assert TrainConfig(epochs=np.int64(3)).epochs == 3  # numpy integers accepted, stored as int
    assert type(TrainConfig(epochs=np.int64(3)).epochs) is int


def test_from_dict_refuses_unknown_fields():
    d = TrainConfig().to_dict()
    assert TrainConfig.from_dict(d) == TrainConfig()
    with pytest.raises(ValueError, match="unknown TrainConfig field.*n_heads"):
        TrainConfig.from_dict({**d, "n_heads": 4})
    with pytest.raises(ValueError, match="from a dict, got list"):
        TrainConfig.from_dict([1])


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"model": "lstm"}, "lstm"),
        ({"epochs": 0}, "epochs"),
        ({"min_len": 9, "max_len": 4}, "9 > 4"),
        ({"lr": -1.0}, "-1.0"),
        ({"batch_size": 0}, "batch_size"),
        ({"device": "tpu"}, "tpu"),
        ({"clip_norm": 0.0}, "clip_norm"),
    ],
)
def test_bad_train_config_is_rejected_clearly(changes, match):
    with pytest.raises(ValueError, match=match):
        tiny_config(**{**SIX_STEPS, "epochs": 2, **changes})


def test_cuda_requested_without_cuda_is_rejected(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        tiny_config(**SIX_STEPS, epochs=2, device="cuda")


def test_model_names_are_the_four_combinations():
    assert set(MODEL_NAMES) == set(KINDS)


# --------------------------------------------------------------------------
# The data sets of a config
# --------------------------------------------------------------------------


def test_both_models_see_identical_data():
    a = make_datasets(tiny_config("convs2s", **SIX_STEPS, epochs=2))
    b = make_datasets(tiny_config("gru", **SIX_STEPS, epochs=2))
    for da, db in zip(a, b):
        assert da.examples == db.examples
    train_set, valid_set, test_set = a
    assert train_set.examples != test_set.examples  # different seeds per split


def sources(ds):
    return {tuple(x) for x, _ in ds.examples}


def test_train_valid_and_test_sets_are_pairwise_disjoint():
    # 4 tokens, lengths 2-4: 336 distinct sources, so independent draws would collide
    cfg = tiny_config(
        dropout=0.0, vocab_size=4, min_len=2, max_len=4, n_train=120, n_valid=40, n_test=40
    )
    train_set, valid_set, test_set = make_datasets(cfg)
    assert (len(train_set), len(valid_set), len(test_set)) == (120, 40, 40)
    a, b, c = sources(train_set), sources(valid_set), sources(test_set)
    assert not a & b and not a & c and not b & c
    for ds in (train_set, valid_set, test_set):
        assert all(y == sorted(x) for x, y in ds.examples)


def test_disjoint_splits_are_the_plain_draws_when_nothing_collides():
    cfg = TrainConfig(vocab_size=50, min_len=8, max_len=20, n_train=300, n_valid=50, n_test=50)
    for offset, ds in enumerate(make_datasets(cfg)):
        assert ds.examples == generate_dataset(len(ds), 8, 20, 50, cfg.seed + offset)


def test_a_task_too_small_for_disjoint_splits_is_refused():
    cfg = tiny_config(
        dropout=0.0, vocab_size=1, min_len=1, max_len=2, n_train=10, n_valid=5, n_test=5
    )
    with pytest.raises(ValueError, match="too few distinct sequences"):
        make_datasets(cfg)


# --------------------------------------------------------------------------
# build_model
# --------------------------------------------------------------------------


def test_paper_normalisation_selects_the_papers_convs2s():
    tiny = tiny_config(**SIX_STEPS, epochs=2)
    gru = tiny_config("gru", **SIX_STEPS, epochs=2)
    paper = build_model(tiny).cfg
    assert (paper.weight_norm, paper.scale_encoder_grad, paper.scale_context) == (True, True, True)
    seed = build_model(tiny.replace(paper_normalisation=False)).cfg
    assert (seed.weight_norm, seed.scale_encoder_grad, seed.scale_context) == (False, False, False)
    # model_options win over the switch; the GRU ignores it
    mixed = build_model(tiny.replace(model_options={"scale_context": False})).cfg
    assert (mixed.weight_norm, mixed.scale_context) == (True, False)
    assert (
        build_model(gru.replace(paper_normalisation=True)).cfg
        == build_model(gru.replace(paper_normalisation=False)).cfg
    )


def test_unknown_model_option_is_a_value_error():
    with pytest.raises(ValueError, match="bad model_options"):
        build_model(tiny_config(**SIX_STEPS, epochs=2, model_options={"n_heads": 4}))


@pytest.mark.parametrize("model", ["convs2s", "gru", "gru+conv", "conv+gru"])
def test_model_options_reach_every_kind_of_model(model):
    m = train_mod.build_model(train_mod.TrainConfig(model=model, model_options={"embed_dim": 24}))
    # the token embedding table of the encoder has the asked width, whatever the parts
    tables = [x for x in m.modules() if isinstance(x, torch.nn.Embedding)]
    assert tables and all(t.embedding_dim == 24 for t in tables), model
