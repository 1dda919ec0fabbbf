r"""The training loop: :func:`train` runs a :class:`~convs2s_edu.TrainConfig` for any
model.

What is timed
-------------
An epoch's wall-clock time (:func:`time.perf_counter`, read after
:func:`~convs2s_edu.training.device.synchronize`) covers the training steps only: batching,
forward, backward and the optimiser, not the held-out scoring of ``eval_every``. That
clock measures the machine as much as the model: a run trained beside other runs (the
scheduler's, :mod:`convs2s_edu.training.schedule`) says so in ``History.shared_clock``,
and the site's speed figures come from interleaved measurements instead
(:mod:`convs2s_edu.lab.timing`).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ..fast.paths import (
    ExecutionPath,
    apply_path,
    check_compile_mode,
    check_precision,
    use_fast_paths,
)
from ..metrics import teacher_forced_scores
from ..registry import model_entry
from .calibrate import resolve_path
from .checkpoint import (
    CHECKPOINT_NAME,
    History,
    TrainResult,
    prepare_out_dir,
    read_checkpoint,
    save_checkpoint,
)
from .config import TrainConfig, build_model, make_datasets, training_set
from .device import device_label, provenance, synchronize
from .parallel import setup
from .progress import Progress
from .step import RunContext, make_train_step

__all__ = ["VALID_BATCH_SIZE", "TrainingDivergedError", "lr_factor", "train"]

#: Batch size of the held-out loss (evaluation only: no activations kept for backward).
VALID_BATCH_SIZE = 512


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the message names the epoch and step."""


def lr_factor(
    step: int, total: int, schedule: str = "constant", warmup: float = 0.05
) -> float:
    r"""The learning rate of optimiser step ``step`` (0-based) as a fraction of the
    peak.

    ``"constant"``: 1. ``"warmup-linear"``, with :math:`w = \max(1, \lfloor
    \text{warmup} \cdot \text{total} \rceil)` warm-up steps:

    .. math:: f(s) = \begin{cases} (s + 1) / w & s < w \\
              (\text{total} - s) / (\text{total} - w) & s \ge w \end{cases}

    so it rises linearly to 1 at step :math:`w - 1` and falls linearly to
    :math:`1 / (\text{total} - w)` at the last step (0 after it).

    >>> [round(lr_factor(s, 10, "warmup-linear", 0.2), 3) for s in range(10)]
    [0.5, 1.0, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125]
    """
    if schedule == "constant":  # TrainConfig allows only the two
        return 1.0
    warm = max(1, round(warmup * total))
    if step < warm:
        return (step + 1) / warm
    return max(0.0, (total - step) / max(1, total - warm))


def train(
    cfg: TrainConfig | None = None,
    out_dir=None,
    resume: bool = False,
    progress: bool | None = None,
    stop_after: int | None = None,
    shared_clock: bool = False,
) -> TrainResult:
    """Train ``cfg.model`` on the sorting task.

    Parameters
    ----------
    cfg : TrainConfig, optional
        The original notebook's configuration when omitted.
    out_dir : str or Path, optional
        Where to write ``checkpoint.pt`` after every epoch (atomically). Without
        it nothing is written.
    resume : bool
        Continue from ``out_dir/checkpoint.pt`` if it exists. On the CPU the
        result is bit-for-bit the one of an uninterrupted run.
    progress : bool, optional
        Show a progress bar; by default only when stderr is a terminal (else one line
        per epoch).
    stop_after : int, optional
        Stop after this epoch (as if interrupted), checkpoint included.
    shared_clock : bool
        This run shares the machine with other runs: recorded in
        ``History.shared_clock``.

    Returns
    -------
    TrainResult
        The model (in eval mode, its modules the reference classes even when it trained
        through the fast paths), the config (``fast`` decided) and the :class:`History`.

    Raises
    ------
    TrainingDivergedError
        When a loss is NaN or infinite; the last good checkpoint is kept.
    CheckpointWriteError
        When a checkpoint cannot be written (a full disk); the last good one is kept.

    Notes
    -----
    Started by ``torchrun``, every process trains one share of each batch (of
    ``cfg.batch_size`` in all) through a :class:`~convs2s_edu.training.step.RunContext`
    (:mod:`convs2s_edu.training.parallel`); only rank 0 writes the checkpoint and
    progress.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    begun = (
        resume and out_dir is not None and (Path(out_dir) / CHECKPOINT_NAME).is_file()
    )
    if cfg.fast is None and begun:
        # go on as it began
        cfg = cfg.replace(fast=read_checkpoint(out_dir)["config"].fast)
    # fast=None: the fast paths or the reference, whichever this machine runs faster
    cfg = resolve_path(cfg, say=progress is not False)
    context = setup(cfg.device)  # one process, unless started by torchrun
    try:
        return _train(cfg, out_dir, resume, progress, stop_after, context, shared_clock)
    finally:
        context.close()


def _held_out(model, valid_ds) -> dict:
    """The held-out loss and exact match now, in one teacher-forced pass: the exact
    match is greedy decoding's (:func:`~convs2s_edu.metrics.teacher_forced_scores`)."""
    scores = teacher_forced_scores(model, valid_ds, batch_size=VALID_BATCH_SIZE)
    return {"valid_loss": scores["loss"], "exact_match": scores["exact_match"]}


def _resume(ckpt_path, cfg, model, optimizer, scheduler, shuffle, context: RunContext):
    """Load the checkpoint's model, optimiser and random states; return its history and
    epoch. A checkpoint of another configuration, or of more epochs, is a
    ``ValueError``."""
    state = read_checkpoint(ckpt_path)
    saved = state["config"].replace(device=cfg.device, epochs=cfg.epochs).to_dict()
    ignored = model_entry(cfg.model).ignores  # the same run whatever their value
    changed = [
        f"{k} ({saved[k]!r} -> {v!r})"
        for k, v in cfg.to_dict().items()
        if saved[k] != v and k not in ignored
    ]
    if changed:
        raise ValueError(
            f"cannot resume: {ckpt_path} was written with a different config: {', '.join(changed)}"
        )
    if state["epoch"] > cfg.epochs:
        raise ValueError(
            f"cannot resume: {ckpt_path} holds {state['epoch']} epochs, more than "
            f"the {cfg.epochs} asked for"
        )
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"]["torch"])
    if context.device.type == "cuda" and state["rng"]["cuda"]:
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    shuffle.set_state(state["rng"]["shuffle"])
    context.seed_ranks(cfg.seed, resumed_epoch=state["epoch"])
    return History.from_dict(state["history"]), state["epoch"]


def _train(
    cfg, out_dir, resume, progress, stop_after, context: RunContext, shared_clock=False
) -> TrainResult:
    dev = context.device
    check_precision(cfg.precision, dev)
    check_compile_mode(cfg.compile_mode, dev)
    ckpt = prepare_out_dir(out_dir)
    writes = ckpt is not None and context.is_main  # only rank 0 writes files

    train_ds, valid_ds, test_ds = make_datasets(cfg)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg).to(dev)
    # the fast paths or the reference, compiled or not (TrainConfig.fast, .compile)
    apply_path(model, ExecutionPath.of(cfg))
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.adam_betas)
    shuffle = torch.Generator().manual_seed(cfg.seed)
    context.seed_ranks(cfg.seed)
    loader = context.loader(train_ds, cfg.batch_size, shuffle, cfg.batching)
    total_steps = cfg.epochs * len(loader)  # every epoch has as many batches
    # lr_t = lr * f(t): the warm-up and decay of "warmup-linear" (f = 1: constant)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda t: lr_factor(t, total_steps, cfg.lr_schedule, cfg.warmup)
    )
    step = make_train_step(
        context.wrap(model), optimizer, cfg.clip_norm, cfg.precision, context
    )
    n_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    path = ExecutionPath.of(cfg).name
    where = provenance(dev, path)
    history = History(
        device=device_label(dev), n_parameters=n_parameters, provenance=where
    )
    start_epoch, t_start = 0, time.perf_counter()
    if resume and ckpt is not None and ckpt.is_file():
        history, start_epoch = _resume(
            ckpt, cfg, model, optimizer, scheduler, shuffle, context
        )
    wall_before = history.provenance.get("wall_seconds", 0.0)
    history.shared_clock = history.shared_clock or shared_clock
    evaluates = cfg.eval_every is not None and context.is_main

    last = cfg.epochs if stop_after is None else min(cfg.epochs, stop_after)
    shown = progress if context.is_main else False
    with Progress((last - start_epoch) * len(loader), cfg.model, shown) as bar:
        for epoch in range(start_epoch + 1, last + 1):
            model.train()
            if cfg.fresh_data and epoch > 1:  # n_train examples never seen before
                epoch_ds = training_set(cfg, epoch, (valid_ds, test_ds))
                loader = context.loader(epoch_ds, cfg.batch_size, shuffle, cfg.batching)
            context.start_epoch(loader, epoch)
            step_losses, n_tokens, paused = [], 0, 0.0
            synchronize(dev)
            t0 = time.perf_counter()
            for batch in loader:
                # on the CPU: no device sync in the loop
                n_tokens += batch.n_target_tokens
                step_losses.append(step(batch.to(dev)))
                scheduler.step()
                history.steps += 1
                bar.update()
                if evaluates and (
                    history.steps % cfg.eval_every == 0 or history.steps == total_steps
                ):
                    synchronize(dev)
                    t_eval = time.perf_counter()  # the scoring is not part of the clock
                    scores = _held_out(model, valid_ds)
                    examples = history.steps * cfg.batch_size
                    history.evals.append(
                        {"step": history.steps, "examples": examples, **scores}
                    )
                    model.train()
                    paused += time.perf_counter() - t_eval
            synchronize(dev)
            seconds = time.perf_counter() - t0 - paused

            # every rank: the global losses and tokens, so that all agree on stopping
            # one transfer
            losses = context.all_sum(torch.stack(step_losses).float()).cpu()
            n_tokens = int(context.all_sum(torch.tensor([n_tokens], device=dev)))
            _check_finite(losses, cfg, epoch, ckpt)
            history.step_losses.extend(losses.tolist())
            loss, speed = float(losses.mean()), n_tokens / seconds
            elapsed = (
                history.epochs[-1]["elapsed"] if history.epochs else 0.0
            ) + seconds
            scored = history.evals[-1] if history.evals else {}
            # scored at this very step: same weights
            if scored.get("step") == history.steps:
                valid_loss = scored["valid_loss"]
            else:
                valid_loss = _held_out(model, valid_ds)["valid_loss"]
            record = {"epoch": epoch, "train_loss": loss, "valid_loss": valid_loss}
            record |= {
                "seconds": seconds,
                "tokens_per_second": speed,
                "elapsed": elapsed,
            }
            history.epochs.append(record)
            line = f"{cfg.model}: epoch {epoch}/{last}, train loss {loss:.4f}"
            if evaluates and history.evals:
                line += f", held-out exact match {history.evals[-1]['exact_match']:.1%}"
            line += f", {seconds:.1f} s ({speed:,.0f} tokens/s)"
            bar.note(line, epoch=epoch, loss=f"{loss:.3f}", tok_s=f"{speed:,.0f}")
            history.provenance["wall_seconds"] = (
                wall_before + time.perf_counter() - t_start
            )
            if writes:
                save_checkpoint(
                    ckpt, model, optimizer, cfg, history, shuffle, epoch, scheduler
                )
    model.eval()
    use_fast_paths(model, False)  # the trained model, as the model files write it
    return TrainResult(model, cfg, history, ckpt)


def _check_finite(
    losses: torch.Tensor, cfg: TrainConfig, epoch: int, ckpt_path
) -> None:
    """Raise :class:`TrainingDivergedError` at the first NaN or infinite step loss."""
    bad = (~torch.isfinite(losses)).nonzero()
    if len(bad):
        step = int(bad[0]) + 1
        kept = ""
        if ckpt_path is not None and epoch > 1:
            kept = (
                f"; the last good checkpoint (epoch {epoch - 1}) is kept in {ckpt_path}"
            )
        raise TrainingDivergedError(
            f"{cfg.model}: non-finite loss ({float(losses[step - 1])}) at epoch {epoch}, "
            f"step {step} of {len(losses)}{kept}. Try a smaller lr (now {cfg.lr}) "
            f"or gradient clipping (clip_norm={cfg.clip_norm})."
        )
