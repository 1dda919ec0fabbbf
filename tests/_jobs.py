"""Job functions for the scheduler's tests (``test_training_schedule.py``): its workers import
this module by name, so they take ``PYTHONPATH`` = this folder."""

from __future__ import annotations

import json
import time
from pathlib import Path


def sleep_and_record(folder: str, index: int, seconds: float) -> int:
    """Sleep, recording when this job ran (``span-<index>.json``: start and end, wall clock)."""
    start = time.time()
    time.sleep(seconds)
    Path(folder, f"span-{index}.json").write_text(json.dumps([start, time.time()]))
    Path(folder, f"order-{index}.json").write_text(json.dumps([start, index]))
    return index


def fail(message: str) -> None:
    raise ValueError(message)


def record_pid_and_sleep(folder: str, index: int, seconds: float) -> int:
    """Write this worker's process id (``pid-<index>``), then sleep."""
    import os

    Path(folder, f"pid-{index}").write_text(str(os.getpid()))
    time.sleep(seconds)
    return index


def crash(code: int) -> None:
    """End the worker at once, as a segmentation fault or the out-of-memory killer would."""
    import os
    import sys

    print("the last words of a crashing worker", file=sys.stderr, flush=True)
    os._exit(code)
