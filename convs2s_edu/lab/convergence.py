r"""Convergence speed: the optimiser steps, examples and seconds a model needs to learn the task.

The seed notebook asks for two measurements: time per epoch and *convergence speed*. The first
is a property of the hardware and the model's arithmetic; the second also of the recipe and of
how much each step teaches. For every model, :func:`convergence` reads off the learning curve
that training records (:attr:`History.evals <convs2s_edu.training.History>`, every
``TrainConfig.eval_every`` steps) the first evaluation at which held-out exact match reached
each level of :data:`LEVELS` (``None``: never reached within the run), and gives

* **steps**: that evaluation's optimiser step (an upper bound: the level was reached at
  most ``eval_every`` steps earlier);
* **examples**: steps x batch size (training examples read, repeats included);
* **seconds**: steps x the median seconds per step of the *interleaved* timing windows
  (:mod:`convs2s_edu.lab.timing`), at each thread count measured, so that whatever else the
  machine did during training stays out (``History.shared_clock``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..training.checkpoint import History, TrainResult

__all__ = ["LEVELS", "hardware_label", "convergence", "format_convergence"]

#: Held-out exact-match levels whose first crossing is reported (the issue's 50/90/95%).
LEVELS = (0.5, 0.9, 0.95)


def hardware_label(threads: int | None = None, device: str = "cpu") -> str:
    """How tables name where a step was timed: ``"1 thread"``, ``"2 threads"``, or the device.

    >>> hardware_label(1), hardware_label(2), hardware_label(device="cuda (NVIDIA H200)")
    ('1 thread', '2 threads', 'cuda (NVIDIA H200)')
    """
    if threads is None:
        return device
    return f"{threads} thread{'s' if threads != 1 else ''}"


def convergence(
    results: Mapping[str, TrainResult],
    seconds_per_step: Mapping[str, Mapping[str, float]] | None = None,
    levels: Sequence[float] = LEVELS,
    metric: str = "exact_match",
    unsteady: Sequence[str] = (),
) -> list[dict]:
    """Steps, examples and seconds to reach every level, per model.

    ``results`` are trained runs whose history holds a learning curve
    (``TrainConfig.eval_every`` set); ``levels`` are levels of ``metric`` (a key of the
    curve's records, ``"exact_match"`` or ``"token_accuracy"``) in ``(0, 1]``.
    ``seconds_per_step`` (optional; without it no seconds are given): per model, the median
    seconds per step by :func:`hardware_label`, as
    :func:`~convs2s_edu.lab.compare.seconds_per_step` gives them; ``unsteady``: the hardware
    labels whose timing windows were not steady, whose seconds are kept but flagged.

    Returns, per model, a dict: ``model``, ``eval_every``, ``steps`` (the run's total),
    ``final`` (the last evaluation's ``metric``), ``timed_on`` (the hardware labels of
    ``seconds_per_step``), ``unsteady`` (those of them in ``unsteady``) and ``levels``: per
    level (as ``str``, e.g. ``"0.9"``) ``None`` when never reached, else ``step``, ``examples``
    and ``seconds`` (by hardware label). Raises ``ValueError`` for a run without a learning
    curve or a level outside ``(0, 1]``.
    """
    for level in levels:
        if not 0 < level <= 1:
            raise ValueError(f"levels must lie in (0, 1], got {level!r}")
    rows = []
    for name, result in results.items():
        h: History = result.history
        if not h.evals:
            raise ValueError(
                f"{name}: the run has no learning curve; train it with TrainConfig.eval_every"
            )
        per_step = dict((seconds_per_step or {}).get(name, {}))
        row = {
            "model": name,
            "eval_every": result.config.eval_every,
            "steps": h.steps,
            "final": h.evals[-1][metric],
            "timed_on": list(per_step),
            "unsteady": [t for t in per_step if t in set(unsteady)],
            "levels": {},
        }
        for level in levels:
            hit = h.reached(level, metric)  # None: never reached
            row["levels"][str(level)] = hit and {
                "step": hit["step"],
                "examples": hit["examples"],
                "seconds": {k: hit["step"] * s for k, s in per_step.items()},
            }
        rows.append(row)
    return rows


def format_convergence(rows: Sequence[dict], labels: Mapping[str, str] | None = None) -> str:
    """The rows of :func:`convergence` as a text table: one line per model and level."""
    labels = dict(labels or {})
    threads = list(dict.fromkeys(t for r in rows for t in r.get("timed_on", [])))
    unsteady = {t for r in rows for t in r.get("unsteady", [])}
    head = ["model", "held-out exact match", "steps", "examples"]
    head += [f"seconds, {t}" + ("*" if t in unsteady else "") for t in threads]
    body = []
    for r in rows:
        for level, v in r["levels"].items():
            cells = [labels.get(r["model"], r["model"]), f">= {float(level):.0%}"]
            if v is None:
                cells += [f"not reached in {r['steps']:,}", ""] + ["" for _ in threads]
            else:
                cells += [f"{v['step']:,}", f"{v['examples']:,}"]
                cells += [f"{v['seconds'][t]:,.0f}" if t in v["seconds"] else "" for t in threads]
            body.append(cells)
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    every = sorted({r["eval_every"] for r in rows})
    note = f"(first held-out evaluation at or above the level; evaluated every {every[0]} steps"
    note += ")" if len(every) == 1 else f"-{every[-1]} steps)"
    if unsteady:
        where = ", ".join(t for t in threads if t in unsteady)
        note += (
            f"\n* {where}: the timing windows were not steady (see the speed verdict), so "
            "these seconds are rough"
        )
    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body), note])
