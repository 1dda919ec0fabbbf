"""Tests of ``convs2s_edu.training.loop``, ``train``: what it records per epoch and step, resume
bit for bit (and refused for another config or a longer checkpoint), a diverged run stopped
with the last good checkpoint kept, and its numbers recomputed by another route (the held-out
loss, the batch order of each epoch, the token count behind tokens/s)."""

from __future__ import annotations

import math

import pytest
import torch
from _reference import nll_one_by_one, state_equal
from _tiny import SIX_STEPS, THREE_STEPS, TINY_OPTIONS, copy_run, tiny_config

from convs2s_edu.data import SortingDataset
from convs2s_edu.training import TrainingDivergedError, make_datasets, train
from convs2s_edu.training import loop as train_mod
from convs2s_edu.training import step as step_mod

pytestmark = pytest.mark.usefixtures("single_thread")


# --------------------------------------------------------------------------
# The history of a run
# --------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_history_records_every_epoch_and_step(model):
    cfg = tiny_config(model, **SIX_STEPS, epochs=2)
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


def test_tokens_per_second_counts_real_target_tokens_only():
    cfg = tiny_config(dropout=0.0, **THREE_STEPS, epochs=2)
    result = train(cfg, progress=False)
    # every example contributes its sorted tokens plus <eos>; padding contributes nothing
    n_tokens = sum(len(y) + 1 for _, y in make_datasets(cfg)[0].examples)
    for e in result.history.epochs:
        assert e["tokens_per_second"] * e["seconds"] == pytest.approx(n_tokens, rel=1e-9)


def test_each_epoch_sees_every_example_once_in_a_new_order(monkeypatch):
    cfg = tiny_config(dropout=0.0, **THREE_STEPS, epochs=2)
    train_examples = make_datasets(cfg)[0].examples
    seen = []
    real_collate = SortingDataset.collate

    def recording(self, examples):
        if len(self) == cfg.n_train:
            seen.extend(tuple(x) for x, _ in examples)
        return real_collate(self, examples)

    monkeypatch.setattr(SortingDataset, "collate", recording)
    train(cfg, progress=False)
    first, second = seen[: cfg.n_train], seen[cfg.n_train :]
    assert len(second) == cfg.n_train
    everything = sorted(tuple(x) for x, _ in train_examples)
    assert sorted(first) == everything and sorted(second) == everything
    assert first != second
    assert first != [tuple(x) for x, _ in train_examples]  # shuffled, not the stored order


def test_valid_loss_is_the_eval_mode_token_weighted_mean(monkeypatch):
    monkeypatch.setattr(train_mod, "VALID_BATCH_SIZE", 5)  # several batches of unequal size
    cfg = tiny_config("convs2s", dropout=0.5, min_len=2, n_train=48, n_valid=23)
    result = train(cfg, progress=False)
    valid = make_datasets(cfg)[1].examples
    model = result.model.eval()
    total, n = nll_one_by_one(model, valid, cfg.vocab_size)
    assert result.history.epochs[-1]["valid_loss"] == pytest.approx(total / n, rel=1e-5)


# --------------------------------------------------------------------------
# Resume
# --------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_resume_matches_uninterrupted_run(tmp_path, model):
    cfg = tiny_config(model, **SIX_STEPS, epochs=3)
    full = train(cfg, progress=False)
    part = train(cfg, out_dir=tmp_path, progress=False, stop_after=1)
    assert len(part.history.epochs) == 1
    resumed = train(cfg, out_dir=tmp_path, resume=True, progress=False)
    state_equal(full.model, resumed.model)
    assert resumed.history.step_losses == full.history.step_losses
    assert [e["train_loss"] for e in resumed.history.epochs] == [
        e["train_loss"] for e in full.history.epochs
    ]


@pytest.mark.parametrize(
    "change, named",
    [
        ({"lr": 2e-3}, "lr (0.001 -> 0.002)"),
        ({"seed": 1}, "seed (0 -> 1)"),
        ({"batch_size": 8}, "batch_size (16 -> 8)"),
        ({"clip_norm": None}, "clip_norm (1.0 -> None)"),
        ({"model_options": dict(TINY_OPTIONS["convs2s"], dropout=0.3)}, "model_options"),
    ],
)
def test_resume_with_a_changed_config_is_refused(change, named, tiny_runs, tmp_path):
    run = copy_run(tiny_runs, "convs2s", tmp_path)
    before = (run / "checkpoint.pt").read_bytes()
    with pytest.raises(ValueError, match="different config") as info:
        train(tiny_config(epochs=2, **change), out_dir=run, resume=True, progress=False)
    assert named in str(info.value)
    assert (run / "checkpoint.pt").read_bytes() == before
    # the same config with more epochs resumes
    resumed = train(tiny_config(epochs=2), out_dir=run, resume=True, progress=False)
    assert [e["epoch"] for e in resumed.history.epochs] == [1, 2]


def test_resume_refuses_a_checkpoint_longer_than_asked(tmp_path):
    train(tiny_config(**SIX_STEPS, epochs=2), out_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="holds 2 epochs, more than the 1 asked for"):
        train(tiny_config(**SIX_STEPS, epochs=1), out_dir=tmp_path, resume=True, progress=False)


# --------------------------------------------------------------------------
# Divergence
# --------------------------------------------------------------------------


def test_non_finite_loss_names_epoch_and_step_and_keeps_last_good_checkpoint(
    tmp_path, monkeypatch
):
    cfg = tiny_config(**SIX_STEPS, epochs=3)
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
    with pytest.raises(TrainingDivergedError, match=r"epoch 2, step 3 of") as info:
        train(cfg, out_dir=tmp_path, progress=False)
    assert f"the last good checkpoint (epoch 1) is kept in {tmp_path}" in str(info.value)
    kept = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert kept["epoch"] == 1
    assert all(math.isfinite(v.float().sum()) for v in kept["model"].values())


# --------------------------------------------------------------------------
# The learning-rate schedule, the learning curve, fresh examples, equal-length batches
# --------------------------------------------------------------------------


def test_lr_factor_by_hand():
    f = lambda s: train_mod.lr_factor(s, 10, "warmup-linear", 0.2)  # noqa: E731
    # 2 warm-up steps: 1/2, 2/2; then (10 - s) / 8 for s = 2..9
    assert [f(s) for s in range(10)] == [0.5, 1.0] + [(10 - s) / 8 for s in range(2, 10)]
    assert train_mod.lr_factor(3, 10, "constant") == 1.0
    assert train_mod.lr_factor(0, 800, "warmup-linear", 0.05) == 1 / 40  # 40 warm-up steps


def test_every_step_uses_the_schedules_learning_rate(monkeypatch):
    seen = []
    real_step = torch.optim.Adam.step

    def spy(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    cfg = tiny_config(**SIX_STEPS, epochs=2, lr=0.01, lr_schedule="warmup-linear", warmup=0.25)
    train(cfg, progress=False)
    total = 12
    want = [0.01 * train_mod.lr_factor(s, total, "warmup-linear", 0.25) for s in range(total)]
    assert seen == pytest.approx(want)
    assert seen[2] == pytest.approx(0.01)  # the peak after 3 warm-up steps


def test_adam_betas_reach_the_optimiser(monkeypatch):
    made = []
    real = torch.optim.Adam.__init__

    def spy(self, params, **kwargs):
        made.append(kwargs.get("betas"))
        real(self, params, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "__init__", spy)
    train(tiny_config(adam_betas=(0.8, 0.95)), progress=False)
    assert made == [(0.8, 0.95)]


def test_learning_curve_is_recorded_every_eval_every_steps_and_at_the_end():
    from convs2s_edu.metrics import evaluate

    cfg = tiny_config(**SIX_STEPS, epochs=2, eval_every=5)
    result = train(cfg, progress=False)
    evals = result.history.evals
    assert [e["step"] for e in evals] == [5, 10, 12]
    assert [e["examples"] for e in evals] == [80, 160, 192]
    assert result.history.steps == 12
    valid = make_datasets(cfg)[1]
    final = evaluate(result.model, valid)  # the last point is greedy decoding's score
    assert evals[-1]["exact_match"] == final["exact_match"]
    assert set(evals[-1]) == {"step", "examples", "valid_loss", "exact_match"}
    assert evals[-1]["valid_loss"] == pytest.approx(result.history.epochs[-1]["valid_loss"])
    assert train(tiny_config(**SIX_STEPS), progress=False).history.evals == []


def test_the_epoch_clock_leaves_the_held_out_scoring_out(monkeypatch):
    import time

    def slow(*args):
        time.sleep(1.0)
        return {"valid_loss": 1.0, "exact_match": 0.0}

    monkeypatch.setattr(train_mod, "_held_out", slow)
    cfg = tiny_config(**SIX_STEPS, eval_every=2)  # three scorings of 1 s in the epoch
    h = train(cfg, progress=False).history
    assert len(h.evals) == 3
    assert h.epochs[0]["seconds"] < 1.0  # six tiny steps, without the 3 s of scoring


def test_an_epoch_that_ends_on_an_evaluation_reuses_its_held_out_loss(monkeypatch):
    real, calls = train_mod._held_out, []
    monkeypatch.setattr(train_mod, "_held_out", lambda *a: calls.append(1) or real(*a))
    # scorings at steps 4, 8, 12; epochs end at 6 (scored apart) and 12 (the scoring's)
    h = train(tiny_config(**SIX_STEPS, epochs=2, eval_every=4), progress=False).history
    assert [e["step"] for e in h.evals] == [4, 8, 12] and len(calls) == 4
    assert h.epochs[1]["valid_loss"] == h.evals[-1]["valid_loss"]


def test_fresh_data_trains_every_epoch_on_its_own_draw(monkeypatch):
    drawn = []
    real = train_mod.training_set

    def spy(cfg, epoch, held_out=None):
        drawn.append(epoch)
        return real(cfg, epoch, held_out)

    monkeypatch.setattr(train_mod, "training_set", spy)
    cfg = tiny_config(**SIX_STEPS, epochs=3, fresh_data=True)
    train(cfg, progress=False)
    assert drawn == [2, 3]  # epoch 1 is make_datasets' training set


def test_bucketed_batches_reach_the_loop(monkeypatch):
    widths = []
    real = step_mod.RunContext.loader

    def spy(self, dataset, batch_size, generator, batching="random"):
        loader = real(self, dataset, batch_size, generator, batching)
        widths.append(batching)
        return loader

    monkeypatch.setattr(step_mod.RunContext, "loader", spy)
    cfg = tiny_config(**SIX_STEPS, batching="bucket", min_len=2)
    h = train(cfg, progress=False).history
    assert widths == ["bucket"] and len(h.step_losses) == 6


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_resume_is_bit_for_bit_with_fresh_data_schedule_buckets_and_curve(tmp_path, model):
    cfg = tiny_config(
        model,
        **SIX_STEPS,
        epochs=3,
        fresh_data=True,
        batching="bucket",
        lr_schedule="warmup-linear",
        eval_every=4,
        min_len=2,
    )
    whole = train(cfg, progress=False)
    train(cfg, out_dir=tmp_path, progress=False, stop_after=1)
    resumed = train(cfg, out_dir=tmp_path, resume=True, progress=False)
    assert resumed.history.step_losses == whole.history.step_losses
    assert resumed.history.evals == whole.history.evals
    state_equal(resumed.model, whole.model)


def test_shared_clock_is_recorded():
    assert train(tiny_config(), progress=False, shared_clock=True).history.shared_clock
    assert not train(tiny_config(), progress=False).history.shared_clock
