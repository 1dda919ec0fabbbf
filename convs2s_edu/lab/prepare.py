r"""Train everything the site needs, concurrently, before its pages run.

sphinx-gallery runs the pages one after another, and each page trains (or
loads) the models it shows. :func:`prepare_site` trains all of them first, one
process per usable core (:func:`convs2s_edu.training.schedule.run_jobs`), into
the cache the pages then load from: the two main models of every recipe of the
site (:data:`~convs2s_edu.lab.site.SITE_RECIPES`) and every run of the
Experiments section. ``tox -e docs`` and ``tox -e docs-quick`` run it before
``sphinx-build`` (``tools/prepare_site.py``).

Nothing here is timed for the site: the runs share the machine, and the pages
take their timings from interleaved measurements made afterwards, alone.
"""

from __future__ import annotations

from ..training.schedule import Job, JobResult, run_jobs, train_job
from .experiments.registry import EXPERIMENTS, budget
from .experiments.runner import experiment_jobs
from .site import SITE_RECIPES, is_quick_mode, site_config

__all__ = ["site_jobs", "site_scoring_jobs", "prepare_site"]

#: The site's two models.
MAIN_MODELS = ("convs2s", "gru")


def site_jobs(quick: bool | None = None, directory=None) -> list[Job]:
    """The training jobs of the site: the main models of every recipe, then every run of
    every experiment, trained and scored (duplicates, e.g. an arm two experiments share,
    run once).

    Parameters
    ----------
    quick : bool, optional
        The quick site's configurations (default: :func:`~convs2s_edu.lab.site.is_quick_mode`).
        Applied by setting nothing: the configurations read the mode themselves, so
        ``quick`` must agree with it.
    directory : str or Path, optional
        The training cache (default :func:`~convs2s_edu.training.cache_dir`).
    """
    if quick is not None and bool(quick) != is_quick_mode():
        raise ValueError(
            f"quick={quick} but CONVS2S_EDU_QUICK says {is_quick_mode()}: the site's "
            "configurations follow the environment variable; set it instead"
        )
    jobs = [
        train_job(site_config(m, recipe), directory, f"{recipe} recipe: {m}")
        for recipe in SITE_RECIPES
        for m in MAIN_MODELS
    ]
    return jobs + [
        job
        for name in EXPERIMENTS
        for job in experiment_jobs(name, budget(), directory=directory)[0]
    ]


def site_scoring_jobs(directory=None) -> list[Job]:
    """The scoring jobs of every experiment run (test sets, learning-curve summaries, beam
    accuracies), run after :func:`site_jobs`: they decode, they train nothing."""
    b = budget()
    return [
        job for name in EXPERIMENTS for job in experiment_jobs(name, b, directory=directory)[1]
    ]


def prepare_site(
    workers: int | None = None,
    threads: int = 1,
    progress: bool | None = None,
    directory=None,
) -> list[JobResult]:
    """Train every job of :func:`site_jobs` into the cache, ``workers`` at a time.

    Parameters
    ----------
    workers : int, optional
        Concurrent processes (default: the usable cores / ``threads``).
    threads : int
        PyTorch threads per process (default 1: on a small CPU one process per core
        trains more per second than one process with every core).
    progress : bool, optional
        One line per finished job.
    directory : str or Path, optional
        The training cache.
    """
    trained = run_jobs(site_jobs(directory=directory), workers, threads, progress, name="train")
    scored = run_jobs(site_scoring_jobs(directory), workers, threads, progress, name="score")
    return trained + scored
