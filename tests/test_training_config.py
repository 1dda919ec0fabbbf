"""Tests of ``convs2s_edu.training.config``: ``TrainConfig`` (every field type- and range-checked,
the field named in the message; ``to_dict``/``from_dict``), ``MODEL_NAMES``, the data sets of
a config (the same for every model, splits pairwise disjoint) and ``build_model`` (the paper's
ConvS2S by default, ``model_options`` reaching every kind of model)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
from _tiny import KINDS, SIX_STEPS, tiny_config

from convs2s_edu import MODEL_NAMES, generate_dataset
from convs2s_edu import training as train_mod
from convs2s_edu.training import TrainConfig, build_model, make_datasets, resolve_device
from convs2s_edu.training import config as config_mod

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
        ({"task": "rotate"}, "task must be one of .*'sort'.*got 'rotate'"),
        ({"batching": "sorted"}, "batching must be one of .*'bucket'.*got 'sorted'"),
        ({"lr_schedule": "cosine"}, "lr_schedule must be one of .*got 'cosine'"),
        ({"warmup": 1.0}, r"warmup must be a fraction in \[0, 1\), got 1.0"),
        ({"warmup": -0.1}, "warmup"),
        ({"adam_betas": (0.9,)}, r"adam_betas must be two numbers in \[0, 1\)"),
        ({"adam_betas": (0.9, 1.0)}, "adam_betas"),
        ({"adam_betas": (0.9, 0.98, 0.5)}, "adam_betas"),
        ({"adam_betas": "ab"}, "adam_betas"),
        ({"eval_every": 0}, "eval_every must be an integer in 1.."),
        ({"fresh_data": 1}, "fresh_data must be True or False, got 1"),
    ],
)
def test_train_config_names_the_bad_field_and_the_allowed_values(changes, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**changes)


@pytest.mark.parametrize("device", ["tpu", "meta", "cuda:x", None, 1.5])
def test_resolve_device_refuses_what_is_not_a_cpu_or_cuda_name(device):
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got"):
        resolve_device(device)


def test_resolve_device_reads_auto_names_and_devices(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == resolve_device(torch.device("cpu")) == torch.device("cpu")
    assert resolve_device("cpu:0") == torch.device("cpu:0")


def test_train_config_bounds_are_inclusive():
    cfg = TrainConfig(max_len=512, min_len=512, seed=2**32 - 1, batch_size=4096, epochs=1)
    assert (cfg.max_len, cfg.seed) == (512, 2**32 - 1)
    assert TrainConfig(epochs=np.int64(3)).epochs == 3  # numpy integers accepted, stored as int
    assert type(TrainConfig(epochs=np.int64(3)).epochs) is int


def test_from_dict_refuses_unknown_fields():
    d = TrainConfig().to_dict()
    assert TrainConfig.from_dict(d) == TrainConfig()
    fast = TrainConfig.recipe("fast")
    assert TrainConfig.from_dict(json.loads(json.dumps(fast.to_dict()))) == fast  # betas
    with pytest.raises(ValueError, match="unknown TrainConfig field.*n_heads"):
        TrainConfig.from_dict({**d, "n_heads": 4})


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
    roles = config_mod.STREAM_ROLES
    for role, ds in zip(("training", "held-out", "test"), make_datasets(cfg)):
        assert ds.examples == generate_dataset(len(ds), 8, 20, 50, [cfg.seed, roles[role]])


def test_no_data_stream_is_a_plain_seeds():
    # numpy pads a seed with zeros: [s, 0] once drew seed s's training set, which any
    # generate_dataset(..., seed=s) elsewhere (the longer test sets of an experiment) repeats
    from convs2s_edu.training import training_set

    for seed in range(4):
        cfg = TrainConfig(seed=seed, n_train=20, n_valid=20, n_test=20)
        fresh = training_set(cfg.replace(fresh_data=True), 1)
        for ds in (*make_datasets(cfg), fresh):
            for plain in range(12):
                assert ds.examples != generate_dataset(20, 8, 20, 50, plain), (seed, plain)


def test_no_example_repeats_across_seeds_or_roles():
    # seeds s and s + 1 once shared a set: seed s's test set was seed s + 1's held-out set
    from convs2s_edu.training import training_set

    seen = Counter()
    for seed in range(5):
        cfg = TrainConfig(seed=seed, n_train=300, n_valid=100, n_test=100)
        fresh = cfg.replace(fresh_data=True)  # its held-out and test sets are cfg's
        for ds in (*make_datasets(cfg), training_set(fresh, 1), training_set(fresh, 2)):
            seen.update(tuple(x) for x, _ in ds.examples)
    assert max(seen.values()) == 1 and len(seen) == 5 * (300 + 100 + 100 + 300 + 300)


def test_a_refill_never_repeats_a_source_the_draw_holds():
    # three sources, (1,), (1, 1) and (1, 1, 1); with (1,) excluded, a clashing example is
    # replaced by one whose source the draw does not hold yet
    cfg = tiny_config(vocab_size=1, min_len=1, max_len=3, n_train=2, n_valid=1, n_test=1)
    refilled = 0
    for seed in range(40):
        plain = Counter(tuple(x) for x, _ in generate_dataset(2, 1, 3, 1, seed))
        drawn = Counter(tuple(x) for x, _ in config_mod._draw(cfg, 2, seed, {(1,)}, "held-out"))
        assert sum(drawn.values()) == 2 and (1,) not in drawn
        assert all(n <= max(plain[source], 1) for source, n in drawn.items()), (plain, drawn)
        refilled += drawn != plain
    assert refilled  # some draws clashed


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


# --------------------------------------------------------------------------
# Recipes, and fresh examples every epoch
# --------------------------------------------------------------------------


def test_the_fast_recipe_is_the_pilots():
    fast = TrainConfig.recipe("fast")
    assert fast.total_steps == 800 and fast.steps_per_epoch == 100
    assert fast.fresh_data and fast.lr == 3e-3 and fast.lr_schedule == "warmup-linear"
    assert fast.warmup == 0.05 and fast.adam_betas == (0.9, 0.98)
    assert fast.model_options == {"dropout": 0.0}
    assert TrainConfig.recipe("original") == TrainConfig()
    with pytest.warns(DeprecationWarning, match='"seed" is now called "original"'):
        assert TrainConfig.recipe("seed") == TrainConfig()  # the old name, one release
    assert TrainConfig().total_steps == 30 * 79  # the original notebook's 2,370 steps


def test_recipe_changes_merge_model_options_and_unknown_names_are_refused():
    cfg = TrainConfig.recipe("fast", model="gru", model_options={"hidden_dim": 64})
    assert cfg.model == "gru" and cfg.model_options == {"dropout": 0.0, "hidden_dim": 64}
    with pytest.raises(ValueError, match="unknown recipe 'slow'; allowed: original, fast"):
        TrainConfig.recipe("slow")


def _sources(ds):
    return {tuple(x) for x, _ in ds.examples}


def test_fresh_data_draws_new_examples_every_epoch_never_a_held_out_one():
    from convs2s_edu.training import training_set

    cfg = tiny_config(fresh_data=True, n_train=64, n_valid=40, n_test=40, min_len=2, max_len=4)
    train1, valid, test = make_datasets(cfg)
    held_out = _sources(valid) | _sources(test)
    assert not (_sources(valid) & _sources(test))
    epochs = [training_set(cfg, e) for e in (1, 2, 3)]
    assert _sources(epochs[0]) == _sources(train1)  # epoch 1 is make_datasets' training set
    for ds in epochs:
        assert len(ds) == 64 and not (_sources(ds) & held_out)
    assert epochs[1].examples != epochs[0].examples != epochs[2].examples
    assert training_set(cfg, 2).examples == epochs[1].examples  # the seed fixes every epoch
    fixed = tiny_config(n_train=64)
    assert training_set(fixed, 5).examples == make_datasets(fixed)[0].examples


def test_tasks_reach_the_data_sets():
    cfg = tiny_config(task="reverse")
    for ds in make_datasets(cfg):
        assert ds.task == "reverse" and all(y == x[::-1] for x, y in ds.examples)
    sort = make_datasets(tiny_config())
    assert [x for x, _ in sort[0].examples] == [x for x, _ in make_datasets(cfg)[0].examples]
