"""The documentation site's plumbing: its configurations (quick mode), the numbers it
records, and the sentences that compare them.

The gallery pages call :func:`site_config` for every model they train, so that
``CONVS2S_EDU_QUICK=1`` shrinks the whole site at once; a page that measures a number
the landing page states hands it to :func:`record`. A page never types which of two
measured numbers is larger: :func:`comparison` and :func:`trend` write that sentence
from the numbers (``tests/test_gallery.py`` flags a typed one).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..training.config import TrainConfig

__all__ = [
    "QUICK_ENV",
    "SITE_DATA_ENV",
    "SITE_RECIPES",
    "SITE_BATCHING",
    "is_quick_mode",
    "quick_caveat",
    "site_config",
    "SHORT_RUN_SEEDS",
    "short_runs",
    "record",
    "record_svg",
    "comparison",
    "trend",
    "code_lines",
]

#: Environment variable: ``1`` makes :func:`site_config` small (quick docs builds).
QUICK_ENV = "CONVS2S_EDU_QUICK"

#: Environment variable: the folder where :func:`record` writes (set by
#: ``docs/conf.py``).
SITE_DATA_ENV = "CONVS2S_EDU_SITE_DATA"


def is_quick_mode() -> bool:
    """True when ``$CONVS2S_EDU_QUICK`` is ``1`` (or ``true``/``yes``)."""
    return os.environ.get(QUICK_ENV, "").strip().lower() in ("1", "true", "yes")


def quick_caveat(what: str) -> None:
    """In a quick build, print at this place of a page that ``what`` (e.g. "the figure
    above") cannot show the page's finding: its models trained a few steps only."""
    if is_quick_mode():
        print(
            f"Quick build ({QUICK_ENV}=1): the models trained a few steps only; read "
            f"{what} for how this page works, not for what it finds; the full site "
            "(tox -e docs) has the finding."
        )


#: The recipes the site trains both models with
#: (:data:`~convs2s_edu.training.config.RECIPES`).
SITE_RECIPES = ("original", "fast")

#: How the site batches its training examples (``TrainConfig.batching``): the original
#: notebook's random batches; equal-length ones cost the GRU accuracy (tools/measure_bucketing.py,
#: departures).
SITE_BATCHING = "random"

#: ``eval_every`` of :func:`site_config`, per recipe and quick mode.
_EVAL_EVERY = {
    ("original", False): 50,
    ("fast", False): 20,
    ("original", True): 8,
    ("fast", True): 8,
}

#: What quick mode changes, per recipe (see :func:`site_config`).
_QUICK = {
    "original": {"n_train": 2_000, "n_valid": 300, "n_test": 300, "epochs": 6},
    "fast": {"n_train": 1_280, "n_valid": 300, "n_test": 300, "epochs": 8},
}


def site_config(model: str, recipe: str = "original", **changes) -> TrainConfig:
    """The configuration the gallery pages train: a recipe's (the original notebook's by default),
    with ``changes``, its learning curve (``eval_every``: about 50 held-out scorings per
    run) and
    :data:`SITE_BATCHING`. Quick mode (``CONVS2S_EDU_QUICK=1``) keeps the task and the models
    and shrinks the data and the schedule (the original recipe: 2,000 training examples,
    6 epochs; the fast one: 80 steps), so that the whole site builds in minutes.
    ``model_options`` of ``changes`` are merged into the recipe's, as
    :meth:`TrainConfig.recipe` merges them."""
    quick = is_quick_mode()
    cfg = TrainConfig.recipe(
        recipe,
        model=model,
        batching=SITE_BATCHING,
        eval_every=_EVAL_EVERY[(recipe, quick)],
    )
    if quick:
        cfg = cfg.replace(**_QUICK[recipe])
    if "model_options" in changes:
        changes["model_options"] = {**cfg.model_options, **changes["model_options"]}
    return cfg.replace(**changes)


#: Seeds of :func:`short_runs`: a seed fixes the data, their order and the
#: initialisation of both configurations, so that the two are compared seed by seed.
SHORT_RUN_SEEDS = (0, 1, 2)


def short_runs() -> dict[str, list[TrainConfig]]:
    """The short runs of the page that trains the original notebook's ConvS2S against
    the paper's.

    ``{"original": [...], "paper": [...]}``: ConvS2S without and with the paper's three
    flags (``paper_normalisation``), one run per seed of :data:`SHORT_RUN_SEEDS`, on 640
    training examples in batches of 16 for 8 epochs (2 in quick mode), the held-out loss
    after every epoch on 200 examples. ``tools/prepare_site.py`` trains them; the page
    loads them.
    """
    short = TrainConfig(
        n_train=640,
        n_valid=200,
        n_test=1,
        batch_size=16,
        epochs=2 if is_quick_mode() else 8,
    )
    return {
        name: [
            short.replace(paper_normalisation=flags, seed=seed)
            for seed in SHORT_RUN_SEEDS
        ]
        for name, flags in (("original", False), ("paper", True))
    }


def _site_data(filename: str) -> Path | None:
    folder = os.environ.get(SITE_DATA_ENV)
    if not folder:
        return None
    path = Path(folder) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def record(name: str, numbers: dict) -> Path | None:
    """Write ``numbers`` as ``<name>.json`` for the site's build (``docs/_ext`` makes
    the landing page's tables from them); nothing outside a docs build (no
    ``$CONVS2S_EDU_SITE_DATA``). Returns the file written, or ``None``."""
    path = _site_data(f"{name}.json")
    if path is not None:
        path.write_text(json.dumps(numbers, indent=2), encoding="utf-8")
    return path


def record_svg(name: str, svg: str) -> Path | None:
    """:func:`record` for a figure drawn as SVG text: ``<name>.svg``, for the landing page."""
    if not svg.lstrip().startswith("<svg"):
        raise ValueError(
            f"record_svg needs the text of an <svg> element, got {svg[:40]!r}"
        )
    path = _site_data(f"{name}.svg")
    if path is not None:
        path.write_text(svg, encoding="utf-8")
    return path


def comparison(
    quantity: str,
    values: Mapping[str, float],
    *,
    fmt: str = "{:.1%}",
    tie: float = 0.0,
    higher: str = "higher",
    lower: str = "lower",
) -> str:
    """One sentence that compares two measured numbers, its direction read off them.

    Parameters
    ----------
    quantity : str
        What was measured, e.g. ``"exact match"``.
    values : mapping of str to float
        Exactly two entries, label -> value, in the order the sentence names them.
    fmt : str
        How a value is printed.
    tie : float
        Differences up to this (absolute) are "about the same" (default: only equal
        values).
    higher, lower : str
        The comparative words (``"faster"``/``"slower"`` for speeds, ...).

    Returns
    -------
    str
        E.g. ``"The exact match of ConvS2S (97.0%) is higher than
        that of GRU (92.5%)."``

    Examples
    --------
    >>> comparison("exact match", {"ConvS2S": 0.97, "GRU": 0.925})
    'The exact match of ConvS2S (97.0%) is higher than that of GRU (92.5%).'
    >>> comparison("loss", {"a": 0.50, "b": 0.51}, fmt="{:.2f}", tie=0.02)
    'The loss of a (0.50) and that of b (0.51) are about the same (within 0.02).'
    """
    if len(values) != 2:
        raise ValueError(f"comparison needs exactly two values, got {len(values)}")
    if not isinstance(tie, (int, float)) or tie < 0:
        raise ValueError(f"tie must be a number >= 0, got {tie!r}")
    (la, a), (lb, b) = values.items()
    fa, fb = fmt.format(a), fmt.format(b)
    if abs(a - b) <= tie:
        within = f" (within {fmt.format(tie)})" if tie else ""
        return f"The {quantity} of {la} ({fa}) and that of {lb} ({fb}) are about the same{within}."
    word = higher if a > b else lower
    return f"The {quantity} of {la} ({fa}) is {word} than that of {lb} ({fb})."


def trend(
    quantity: str,
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    along: str = "length",
    fmt: str = "{:.1%}",
    tie: float = 0.0,
) -> str:
    """One sentence on how a measured quantity moves from the first point to the last:
    it "rises", "falls" or "stays about the same" (within ``tie``). Only the two ends
    are compared: the sentence names them, and the page shows the rest.

    Examples
    --------
    >>> trend("token accuracy", [8, 14, 20], [0.99, 0.97, 0.91])
    'Token accuracy falls from 99.0% at length 8 to 91.0% at length 20.'
    """
    xs, ys = list(xs), list(ys)
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(
            f"trend needs two or more (x, y) points of equal count, got {len(xs)} and {len(ys)}"
        )
    first, last = ys[0], ys[-1]
    verb = "rises" if last > first else "falls"
    if abs(last - first) <= tie:
        verb = "stays about the same"
    return (
        f"{quantity[:1].upper()}{quantity[1:]} {verb} from {fmt.format(first)} at {along} "
        f"{xs[0]:g} to {fmt.format(last)} at {along} {xs[-1]:g}."
    )


def code_lines(func, comment: str) -> str:
    """The lines of ``func`` that compute an equation, read from the package's source:
    the comment line holding ``comment`` and the statement below it, under the file and
    line numbers. ``ValueError`` names the comment and ``func`` when no comment holds
    it."""
    lines, first = inspect.getsourcelines(func)
    where = f"{Path(inspect.getsourcefile(func)).name}, {func.__qualname__}"
    for n, line in enumerate(lines[:-1]):
        if line.lstrip().startswith("#") and comment in line:
            indent = len(line) - len(line.lstrip())
            shown = "".join(f"    {text[indent:]}" for text in lines[n : n + 2])
            return f"{where}, lines {first + n}-{first + n + 1}:\n{shown.rstrip()}"
    raise ValueError(f"no comment holding {comment!r} in {where}")
