"""Training loop, checkpoints, resume, the cache and divergence handling."""

import math

import pytest
import torch
from _tiny import tiny_config  # noqa: E402

from convs2s_edu import training as train_mod
from convs2s_edu.lab.site import site_config
from convs2s_edu.training import (
    TrainingDivergedError,
    build_model,
    cache_key,
    load_checkpoint,
    make_datasets,
    train,
    train_or_load,
)
from convs2s_edu.training import cache as cache_mod
from convs2s_edu.training import step as step_mod

pytestmark = pytest.mark.usefixtures("single_thread")


def tiny(model="convs2s", **changes):
    return tiny_config(
        model, **{"n_train": 96, "n_valid": 32, "n_test": 32, "epochs": 2, **changes}
    )


def state_equal(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0, msg=k)


def test_both_models_see_identical_data():
    a = make_datasets(tiny("convs2s"))
    b = make_datasets(tiny("gru"))
    for da, db in zip(a, b):
        assert da.examples == db.examples
    train_set, valid_set, test_set = a
    assert train_set.examples != test_set.examples  # different seeds per split


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_history_records_every_epoch_and_step(model):
    cfg = tiny(model)
    result = train(cfg, progress=False)
    h = result.history
    assert [e["epoch"] for e in h.epochs] == [1, 2]
    steps_per_epoch = math.ceil(cfg.n_train / cfg.batch_size)
    assert len(h.step_losses) == cfg.epochs * steps_per_epoch
    for e in h.epochs:
        assert e["seconds"] > 0 and e["tokens_per_second"] > 0
        assert math.isfinite(e["train_loss"]) and math.isfinite(e["valid_loss"])
    # epoch train loss is the mean of that epoch's step losses
    first = h.step_losses[:steps_per_epoch]
    assert h.epochs[0]["train_loss"] == pytest.approx(sum(first) / len(first), rel=1e-6)
    assert h.epochs[1]["elapsed"] == pytest.approx(h.epochs[0]["seconds"] + h.epochs[1]["seconds"])
    assert h.n_parameters == sum(p.numel() for p in result.model.parameters())
    assert h.device == "cpu"
    assert not result.model.training


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_resume_matches_uninterrupted_run(tmp_path, model):
    cfg = tiny(model, epochs=3)
    full = train(cfg, progress=False)
    part = train(cfg, out_dir=tmp_path, progress=False, stop_after=1)
    assert len(part.history.epochs) == 1
    resumed = train(cfg, out_dir=tmp_path, resume=True, progress=False)
    state_equal(full.model, resumed.model)
    assert resumed.history.step_losses == full.history.step_losses
    assert [e["train_loss"] for e in resumed.history.epochs] == [
        e["train_loss"] for e in full.history.epochs
    ]


def test_checkpoint_roundtrip_is_weights_only_and_atomic(tmp_path):
    cfg = tiny()
    result = train(cfg, out_dir=tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]  # no temp files left
    # loads without unpickling arbitrary objects
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["epoch"] == cfg.epochs
    loaded = load_checkpoint(tmp_path)
    state_equal(result.model, loaded.model)
    assert loaded.config == cfg
    assert loaded.history.epochs == result.history.epochs


def test_non_finite_loss_names_epoch_and_step_and_keeps_last_good_checkpoint(
    tmp_path, monkeypatch
):
    cfg = tiny(epochs=3)
    steps_per_epoch = math.ceil(cfg.n_train / cfg.batch_size)
    real_loss = step_mod.sequence_loss
    calls = {"n": 0}

    def poisoned(logits, tgt_out, reduction="mean"):
        loss = real_loss(logits, tgt_out, reduction)
        calls["n"] += 1  # the training step's loss only (the held-out loss is the loop's)
        if calls["n"] == steps_per_epoch + 3:  # epoch 2, step 3
            return loss * float("nan")
        return loss

    monkeypatch.setattr(step_mod, "sequence_loss", poisoned)
    with pytest.raises(TrainingDivergedError, match=r"epoch 2, step 3 of"):
        train(cfg, out_dir=tmp_path, progress=False)
    kept = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert kept["epoch"] == 1
    assert all(math.isfinite(v.float().sum()) for v in kept["model"].values())


def test_train_or_load_trains_once_then_reuses(tmp_path, monkeypatch):
    cfg = tiny()
    first = train_or_load(cfg, progress=False, directory=tmp_path)

    def must_not_train(*args, **kwargs):
        raise AssertionError("train() called although the cache holds the run")

    monkeypatch.setattr(cache_mod, "train", must_not_train)
    again = train_or_load(cfg, progress=False, directory=tmp_path)
    state_equal(first.model, again.model)
    assert again.history.epochs == first.history.epochs


def test_cache_key_depends_on_config():
    assert cache_key(tiny()) == cache_key(tiny())
    assert cache_key(tiny()) != cache_key(tiny(epochs=3))
    assert cache_key(tiny()) != cache_key(tiny("gru"))
    assert cache_key(tiny(model_options={"embed_dim": 8})) != cache_key(tiny())
    assert cache_key(tiny(paper_normalisation=False)) != cache_key(tiny())
    # the GRU ignores the ConvS2S switch, so both spellings share one cached run
    assert cache_key(tiny("gru", paper_normalisation=False)) == cache_key(tiny("gru"))


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "c"))
    assert train_mod.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("CONVS2S_EDU_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert train_mod.cache_dir() == tmp_path / "xdg" / "convs2s_edu"


def test_quick_mode_shrinks_the_site_config(monkeypatch):
    monkeypatch.delenv("CONVS2S_EDU_QUICK", raising=False)
    full = site_config("gru")
    assert (full.n_train, full.epochs, full.batch_size, full.lr) == (10_000, 30, 128, 1e-3)
    monkeypatch.setenv("CONVS2S_EDU_QUICK", "1")
    quick = site_config("gru")
    assert quick.n_train < full.n_train and quick.epochs < full.epochs
    assert (quick.vocab_size, quick.min_len, quick.max_len) == (50, 8, 20)


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
        tiny(**changes)


def test_unknown_model_option_is_a_value_error():
    with pytest.raises(ValueError, match="bad model_options"):
        build_model(tiny(model_options={"n_heads": 4}))


def test_cuda_requested_without_cuda_is_rejected(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        tiny(device="cuda")


def test_paper_normalisation_selects_the_papers_convs2s():
    paper = build_model(tiny()).cfg
    assert (paper.weight_norm, paper.scale_encoder_grad, paper.scale_context) == (True, True, True)
    seed = build_model(tiny(paper_normalisation=False)).cfg
    assert (seed.weight_norm, seed.scale_encoder_grad, seed.scale_context) == (False, False, False)
    # model_options win over the switch; the GRU ignores it
    mixed = build_model(tiny(model_options={"scale_context": False})).cfg
    assert (mixed.weight_norm, mixed.scale_context) == (True, False)
    assert (
        build_model(tiny("gru", paper_normalisation=True)).cfg
        == build_model(tiny("gru", paper_normalisation=False)).cfg
    )


def test_checkpoint_from_a_gpu_run_loads_on_a_cpu_only_machine(tmp_path, monkeypatch):
    train(tiny(), out_dir=tmp_path, progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    state["train_config"]["device"] = "cuda"  # as written by a run on a GPU
    torch.save(state, tmp_path / "checkpoint.pt")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = load_checkpoint(tmp_path, device="cpu")
    assert next(loaded.model.parameters()).device.type == "cpu"
    assert load_checkpoint(tmp_path).config.device == "auto"


def test_unreadable_checkpoint_is_a_value_error(tmp_path):
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable convs2s_edu checkpoint"):
        load_checkpoint(tmp_path)


def test_resume_refuses_a_checkpoint_longer_than_asked(tmp_path):
    train(tiny(epochs=2), out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="holds 2 epochs, more than the 1 asked for"):
        train(tiny(epochs=1), out_dir=tmp_path, resume=True, progress=False)


@pytest.mark.parametrize("model", ["convs2s", "gru", "gru+conv", "conv+gru"])
def test_model_options_reach_every_kind_of_model(model):
    m = train_mod.build_model(train_mod.TrainConfig(model=model, model_options={"embed_dim": 24}))
    # the token embedding table of the encoder has the asked width, whatever the parts
    tables = [x for x in m.modules() if isinstance(x, torch.nn.Embedding)]
    assert tables and all(t.embedding_dim == 24 for t in tables), model


def test_a_two_layer_gru_encoder_drops_out_between_its_layers():
    m = train_mod.build_model(
        train_mod.TrainConfig(model="gru", model_options={"n_encoder_layers": 2, "dropout": 0.25})
    )
    grus = [x for x in m.modules() if isinstance(x, torch.nn.GRU) and x.num_layers == 2]
    assert grus and grus[0].dropout == 0.25
