"""Time a sequence of tox commands: ``start FILE`` records the clock, ``stop FILE`` prints the
wall-clock time since then, with the CPU it ran on and the load average.

tox 4 has no timer of its own; ``tox -e docs`` runs ``start`` first and ``stop`` last, so
the build prints its own measured time at the end::

    docs build: 10 min 3 s wall clock (tox commands only, environment set-up excluded)
      on AMD EPYC 7B13, 2 cores usable; load average now 1.02, 0.98, 0.75 (1, 5, 15 min)

Only the standard library is used (it must run before and after anything is imported).
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path


def cpu_model() -> str:
    """Same rule as :func:`convs2s_edu.lab.timing.cpu_model`."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def human(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) not in (2, 3) or argv[0] not in ("start", "stop"):
        print("usage: timed.py {start,stop} FILE [LABEL]", file=sys.stderr)
        return 2
    action, path, label = argv[0], Path(argv[1]), (argv[2] if len(argv) == 3 else "build")
    if action == "start":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(repr(time.time()))
        return 0
    try:
        start = float(path.read_text())
    except (OSError, ValueError):
        print(
            f"timed.py: no start time in {path} (run `timed.py start {path}` first)",
            file=sys.stderr,
        )
        return 2
    try:
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        load = "unknown"
    print(
        f"{label}: {human(time.time() - start)} wall clock (tox commands only, environment "
        f"set-up excluded)\n  on {cpu_model()}, {cores()} cores usable; load average now "
        f"{load} (1, 5, 15 min)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
