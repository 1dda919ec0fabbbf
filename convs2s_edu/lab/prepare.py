r"""Train everything the site needs, concurrently, before its pages run.

sphinx-gallery runs the pages one after another, and each page trains (or loads) the
models it shows. :func:`prepare_site` trains all of them first (:func:`site_jobs`), one
process per usable core (:func:`convs2s_edu.training.schedule.run_jobs`), into the cache
the pages then load from. ``tox -e docs`` and ``tox -e docs-quick`` run it before
``sphinx-build`` (``tools/prepare_site.py``). Nothing here is timed for the site: the
runs share the machine, and the pages take their timings from interleaved measurements
made afterwards, alone.
"""

from __future__ import annotations

from ..training.schedule import Job, JobResult, run_jobs, train_job
from .experiments.record import distinct_runs, load_record
from .experiments.registry import budget
from .experiments.runner import measure_groups_job
from .site import SITE_RECIPES, is_quick_mode, short_runs, site_config

__all__ = ["site_jobs", "prepare_site"]

#: The site's two models.
MAIN_MODELS = ("convs2s", "gru")


def site_jobs(quick: bool | None = None, directory=None) -> list[Job]:
    """The jobs of the site: the main models of every recipe (``SITE_RECIPES``), the
    short runs of the original notebook's ConvS2S against the paper's
    (:func:`~convs2s_edu.lab.site.short_runs`), every distinct run of the experiments,
    trained and scored once with the union of what the experiments measure on it (no
    timing; with an experiment record,
    :func:`~convs2s_edu.lab.experiments.load_record`, only the ``generation`` experiment's,
    whose models the claims page times), then the runs two pages ask for at the
    experiments' budget
    (:meth:`Budget.config <convs2s_edu.lab.experiments.Budget.config>`): the GRU without
    attention on sorting and reversing, ConvS2S with attention values z or e alone.

    Parameters
    ----------
    quick : bool, optional
        The quick site's configurations: must agree with (and defaults to)
        :func:`~convs2s_edu.lab.site.is_quick_mode`, which the configurations read.
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
    for name, cfgs in short_runs().items():
        jobs += [
            train_job(c, directory, f"seed against paper/{name} seed {c.seed}")
            for c in cfgs
        ]
    b = budget()
    # with an experiment record the pages read the runs from it: only the models that
    # the claims page times (generation speed) are trained here
    names = ["generation"] if load_record() is not None else None
    for r in distinct_runs(b, names).values():
        jobs.append(
            measure_groups_job(
                r["config"], r["measures"], b.beam_sizes, directory, r["label"]
            )
        )
    # the runs besides experiment arms that the bottleneck and attention-values pages
    # load
    for task in ("sort", "reverse"):
        cfg = b.config("gru", task, attention=False)
        jobs.append(
            train_job(cfg, directory, f"bottleneck/{task}/gru without attention")
        )
    for values in ("z", "e"):
        cfg = b.config("convs2s", attention_values=values)
        jobs.append(train_job(cfg, directory, f"attention values/{values} alone"))
    return jobs


def prepare_site(
    workers: int | None = None,
    threads: int = 1,
    progress: bool | None = None,
    directory=None,
) -> list[JobResult]:
    """Run every job of :func:`site_jobs`, ``workers`` at a time.

    Parameters
    ----------
    workers : int, optional
        Concurrent processes (default: the usable cores / ``threads``).
    threads : int
        PyTorch threads per process (default 1: one process per core).
    progress : bool, optional
        One line per finished job.
    directory : str or Path, optional
        The training cache.
    """
    return run_jobs(
        site_jobs(directory=directory), workers, threads, progress, name="prepare"
    )
