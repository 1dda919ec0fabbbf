"""Training: the configuration, the step and the loop, checkpoints, the cache, data
parallelism.

Modules, bottom to top (a module imports only those above it in this list)::

    device      resolve_device, device_label, synchronize: the one device helper;
                cache_dir: the machine's folder of trained runs
    config      TrainConfig (the original notebook's hyperparameters and RECIPES), make_datasets,
                training_set, build_model
    step        make_train_step: the one training step; RunContext: where it runs
                (how it runs, fast paths or compiled, fp32 or bf16: convs2s_edu.fast)
    parallel    DataParallelContext: the step's context for one rank under torchrun
    progress    Progress: a bar on a terminal, one line per epoch in a log
    checkpoint  History, TrainResult, save/read/load a checkpoint
    calibrate   resolve_path(): the fast paths or the reference, timed on this machine
    loop        train(): the timed loop
    cache       train_or_load(): train once, load afterwards (locked per entry)
    schedule    run_jobs(): independent jobs concurrently, one process per core
    launch      spawn_train(): torchrun's job, from Python

The learner's names (``train``, ``train_or_load``, ``TrainConfig``, ...) are
also importable from ``convs2s_edu``.
"""

from .cache import cache_key, train_or_load
from .calibrate import resolve_path
from .checkpoint import (
    CheckpointError,
    CheckpointWriteError,
    History,
    TrainResult,
    load_checkpoint,
    read_checkpoint,
)
from .config import (
    MODEL_NAMES,
    RECIPES,
    TrainConfig,
    build_model,
    make_datasets,
    training_set,
)
from .device import cache_dir, device_label, resolve_device, synchronize
from .launch import spawn_train
from .loop import TrainingDivergedError, lr_factor, train
from .schedule import Job, JobResult, run_jobs, train_job
from .step import RunContext, make_train_step

__all__ = [
    "MODEL_NAMES",
    "RECIPES",
    "TrainConfig",
    "make_datasets",
    "training_set",
    "build_model",
    "resolve_device",
    "device_label",
    "synchronize",
    "RunContext",
    "make_train_step",
    "History",
    "TrainResult",
    "CheckpointError",
    "CheckpointWriteError",
    "read_checkpoint",
    "load_checkpoint",
    "TrainingDivergedError",
    "lr_factor",
    "train",
    "resolve_path",
    "cache_dir",
    "cache_key",
    "train_or_load",
    "spawn_train",
    "Job",
    "JobResult",
    "run_jobs",
    "train_job",
]
