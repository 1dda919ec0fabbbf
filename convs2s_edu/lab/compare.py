"""The seed's central measurement: both models, same data, same epochs, side by side.

:func:`compare` trains (or loads from the cache) a ConvS2S and a GRU model
with one :class:`~convs2s_edu.TrainConfig` that differs only in
``model``, scores both on the same test set, and times both *interleaved*
(:func:`convs2s_edu.lab.timing.measure_config`): the speed figures come from those
alternating windows of training steps, measured in one process on the same
batches, not from the two training runs, which ran at different times and may
have shared the machine with different programs. :func:`format_table` prints
the rows, :func:`format_speed` the measurement and its verdict.
"""

from __future__ import annotations

import statistics
import textwrap
from dataclasses import dataclass, field

from .._checks import check_int
from ..metrics import evaluate
from ..training.cache import train_or_load
from ..training.checkpoint import TrainResult
from ..training.config import MODEL_NAMES, TrainConfig, make_datasets
from ..training.loop import train
from .timing import SpeedMeasurement, SpeedVerdict, measure_config, speed_verdict

__all__ = ["Comparison", "summarise", "compare", "format_table", "format_speed", "epoch_tokens"]

#: Columns of :func:`format_table` when the rows carry an interleaved measurement.
COLUMNS = [
    ("model", "model", "{}"),
    ("n_parameters", "params", "{:,}"),
    ("tokens_per_second", "tokens/s (median)", "{:,.0f}"),
    ("tokens_per_second_range", "windows min-max", "{0[0]:,.0f}-{0[1]:,.0f}"),
    ("sec_per_epoch", "s/epoch", "{:.2f}"),
    ("final_train_loss", "train loss", "{:.4f}"),
    ("final_valid_loss", "valid loss", "{:.4f}"),
    ("exact_match", "exact match", "{:.1%}"),
    ("token_accuracy", "token acc.", "{:.1%}"),
]
#: Columns of :func:`format_table` without one: the training run's own clock.
RUN_COLUMNS = [
    ("model", "model", "{}"),
    ("n_parameters", "params", "{:,}"),
    ("run_sec_per_epoch", "s/epoch (this run)", "{:.2f}"),
    ("run_tokens_per_second", "tokens/s (this run)", "{:,.0f}"),
    *COLUMNS[5:],
]


def epoch_tokens(cfg: TrainConfig) -> int:
    """Target tokens (``<eos>`` included, padding excluded) in one epoch of ``cfg``'s
    training set."""
    return sum(len(y) + 1 for _, y in make_datasets(cfg)[0].examples)


def summarise(
    result: TrainResult,
    test_set=None,
    beam_size: int = 1,
    measurement: SpeedMeasurement | None = None,
) -> dict:
    """One row of the speed table for a trained model.

    Parameters
    ----------
    result : TrainResult
    test_set : SortingDataset, optional
        Defaults to the test set of ``result.config``.
    beam_size : int
        1 for greedy decoding.
    measurement : SpeedMeasurement, optional
        An interleaved measurement that includes ``result.config.model``.

    Returns
    -------
    dict
        ``model``, ``device``, ``n_parameters``, ``epochs``, ``final_train_loss``,
        ``final_valid_loss``, ``exact_match``, ``token_accuracy``, and the
        training run's own clock, ``run_sec_per_epoch`` (median over epochs),
        ``run_total_seconds`` and ``run_tokens_per_second`` (median). With
        ``measurement``: ``tokens_per_second`` (median over its windows),
        ``tokens_per_second_range`` (min, max) and ``sec_per_epoch``: the
        epoch's target tokens divided by that median.
    """
    h = result.history
    if test_set is None:
        test_set = make_datasets(result.config)[2]
    scores = evaluate(result.model, test_set, beam_size=beam_size)
    row = {
        "model": result.config.model,
        "device": h.device,
        "n_parameters": h.n_parameters,
        "epochs": len(h.epochs),
        "run_sec_per_epoch": statistics.median(h.column("seconds")),
        "run_total_seconds": sum(h.column("seconds")),
        "run_tokens_per_second": statistics.median(h.column("tokens_per_second")),
        "final_train_loss": h.epochs[-1]["train_loss"],
        "final_valid_loss": h.epochs[-1]["valid_loss"],
        "exact_match": scores["exact_match"],
        "token_accuracy": scores["token_accuracy"],
    }
    if measurement is not None:
        t = measurement.throughput[result.config.model]
        row["tokens_per_second"] = t.median
        row["tokens_per_second_range"] = (t.min, t.max)
        row["sec_per_epoch"] = epoch_tokens(result.config) / t.median
    return row


@dataclass
class Comparison:
    """What :func:`compare` returns.

    Attributes
    ----------
    rows : list of dict
        :func:`summarise` of every model, with the interleaved speed figures.
    results : dict of str to TrainResult
        The trained models.
    speed : SpeedMeasurement or None
        The interleaved measurement (``None`` when ``measure=False``).
    verdict : SpeedVerdict or None
        :func:`~convs2s_edu.lab.timing.speed_verdict` of ``speed``.
    """

    rows: list
    results: dict = field(repr=False, default_factory=dict)
    speed: SpeedMeasurement | None = None
    verdict: SpeedVerdict | None = None

    def to_dict(self) -> dict:
        """Rows, measurement and verdict as plain JSON-ready data."""
        return {
            "rows": self.rows,
            "speed": None if self.speed is None else self.speed.to_dict(),
            "verdict": None
            if self.verdict is None
            else {
                "ok": self.verdict.ok,
                "resolved": self.verdict.resolved,
                "text": self.verdict.text,
                "faster": self.verdict.faster,
            },
        }


def compare(
    cfg: TrainConfig | None = None,
    use_cache: bool = True,
    progress: bool | None = None,
    models=MODEL_NAMES[:2],
    measure: bool = True,
    steps_per_window: int = 4,
    n_rounds: int = 6,
    warmup_steps: int = 2,
    max_spread: float = 1.5,
) -> Comparison:
    """Train every model in ``models`` (default: ConvS2S and the GRU) with ``cfg`` (only
    ``model`` changes), score each, and
    time them interleaved.

    With ``use_cache`` the runs come from (and go to)
    :func:`~convs2s_edu.train_or_load`'s cache. The speed figures come from
    :func:`~convs2s_edu.lab.timing.measure_config` (``steps_per_window``, ``n_rounds``,
    ``warmup_steps``), measured afresh on every call; ``max_spread`` goes to
    :func:`~convs2s_edu.lab.timing.speed_verdict`.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    check_int("n_rounds", n_rounds, 2)  # before any training
    check_int("steps_per_window", steps_per_window, 1)
    check_int("warmup_steps", warmup_steps, 0)
    test_set = make_datasets(cfg)[2]
    results = {}
    for name in models:
        run_cfg = cfg.replace(model=name)
        results[name] = (
            train_or_load(run_cfg, progress) if use_cache else train(run_cfg, progress=progress)
        )
    m = verdict = None
    if measure and len(models) >= 2:
        m = measure_config(
            cfg,
            models,
            steps_per_window=steps_per_window,
            n_rounds=n_rounds,
            warmup_steps=warmup_steps,
        )
        verdict = speed_verdict(m, max_spread=max_spread)
    rows = [summarise(results[name], test_set, measurement=m) for name in models]
    return Comparison(rows, results, m, verdict)


def format_table(rows: list[dict]) -> str:
    """The rows as an aligned text table.

    Rows with interleaved speed figures (``tokens_per_second``) show those;
    otherwise the training run's own clock, marked "(this run)".
    """
    columns = COLUMNS if all("tokens_per_second" in r for r in rows) else RUN_COLUMNS
    header = [h for _, h, _ in columns]
    body = [[fmt.format(row[key]) for key, _, fmt in columns] for row in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, body)])


def format_speed(
    m: SpeedMeasurement,
    verdict: SpeedVerdict | None = None,
    labels: dict | None = None,
    width: int = 99,
) -> str:
    """The interleaved measurement in a few lines: method, per-model throughput with its
    range, every model's throughput ratio to the first with its range, the verdict, the
    machine; long lines wrapped at ``width``."""
    labels = labels or {}
    lab = lambda n: labels.get(n, n)  # noqa: E731

    def fill(text, indent=""):
        return textwrap.fill(text, width, subsequent_indent=indent)

    mach = m.machine
    out = [
        fill(
            f"speed, measured interleaved: {m.n_rounds} windows of {m.steps_per_window} "
            f"training steps per model, in the order {', '.join(map(lab, m.models))}, then "
            f"back, on the same batches, after {m.warmup_steps} warm-up steps"
        )
    ]
    name_width = max(len(lab(n)) for n in m.models)
    for n in m.models:
        t = m.throughput[n]
        out.append(
            fill(
                f"  {lab(n):{name_width}s} {t.median:>8,.0f} tokens/s  "
                f"(windows {t.min:,.0f}-{t.max:,.0f}, spread {t.spread:.2f}x)",
                "    ",
            )
        )
    ref = m.models[0]
    for n in m.models[1:]:
        r = m.ratios[n]
        out.append(
            fill(
                f"  throughput ratio {lab(n)} / {lab(ref)}: {r.median:.2f} (per round "
                f"{r.min:.2f}-{r.max:.2f}; above 1: {lab(n)} faster)",
                "    ",
            )
        )
    if verdict is not None:
        out.append(fill(verdict.text))
    load = lambda x: "unknown" if x is None else f"{x:.2f}"  # noqa: E731
    out.append(
        fill(
            f"machine: {mach.cpu}; {mach.cores} cores usable, {mach.threads} PyTorch "
            f"thread(s), OMP_WAIT_POLICY={mach.omp_wait_policy or 'unset'}; device "
            f"{mach.device}; torch {mach.torch_version}; load average "
            f"{load(mach.load_before)} before, {load(mach.load_after)} after",
            "    ",
        )
    )
    return "\n".join(out)
