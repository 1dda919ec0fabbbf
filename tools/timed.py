"""Time a sequence of tox commands: ``start FILE`` records the clock, ``stop FILE`` prints the
wall-clock time since then, with the CPU it ran on, how busy each core was and the load average.

tox 4 has no timer of its own; ``tox -e docs`` runs ``start`` first and ``stop`` last, so
the build prints its own measured time at the end (``stop FILE LABEL`` names it).

Only the standard library is used (it must run before and after anything is imported): the
machine's description comes from ``convs2s_edu/_machine.py``, loaded by its path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path


def cpu_times() -> list[list[int]]:
    """[busy, total] jiffies of every core from ``/proc/stat`` (empty where it does not exist)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return []
    rows = []
    for name, *values in map(str.split, lines):
        if name.startswith("cpu") and name != "cpu":
            v = [int(x) for x in values]
            idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
            rows.append([sum(v) - idle, sum(v)])
    return rows


def busy_fractions(before: list, after: list) -> list[float]:
    """How busy each core was between two :func:`cpu_times` readings (0..1)."""
    return [(b1 - b0) / (t1 - t0) if t1 > t0 else 0.0 for (b0, t0), (b1, t1) in zip(before, after)]


def machine_line(before: list) -> str:
    """``<CPU>, N cores usable; cores busy a%, b%``: how busy each core was since the
    :func:`cpu_times` reading ``before``. The CPU comes from ``convs2s_edu/_machine.py``,
    loaded by its path: the package (and torch) stay unloaded."""
    path = Path(__file__).resolve().parent.parent / "convs2s_edu" / "_machine.py"
    spec = importlib.util.spec_from_file_location("convs2s_edu_machine", path)
    machine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(machine)
    busy = ", ".join(f"{b:.0%}" for b in busy_fractions(before, cpu_times())) or "unknown"
    return f"{machine.cpu_model()}, {machine.usable_cores()} cores usable; cores busy {busy}"


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
        path.write_text(json.dumps({"time": time.time(), "cpu": cpu_times()}))
        return 0
    try:
        saved = json.loads(path.read_text())
        start, cores_before = float(saved["time"]), saved["cpu"]
    except (OSError, ValueError, KeyError, TypeError):
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
        f"set-up excluded)\n  on {machine_line(cores_before)} (from /proc/stat); load average "
        f"now {load} (1, 5, 15 min)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
