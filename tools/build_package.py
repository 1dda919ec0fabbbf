#!/usr/bin/env python
"""Build the wheel and the sdist of convs2s_edu and check them (``tox -e package``).

Usage::

    python tools/build_package.py [--outdir dist]

1. ``python -m build`` makes ``convs2s_edu-<version>-py3-none-any.whl`` and
   ``convs2s_edu-<version>.tar.gz`` in ``--outdir`` (emptied first);
2. ``twine check`` reads both (metadata, the README as the long description);
3. the wheel must hold every module of ``convs2s_edu/`` and the console script,
   and no tests, gallery pages or docs; the sdist must hold the sources, the
   README and ``pyproject.toml``.

Exits non-zero with the list of problems when one check fails.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def problems_of_wheel(wheel: Path) -> list[str]:
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = [p.relative_to(ROOT).as_posix() for p in (ROOT / "convs2s_edu").rglob("*.py")]
    problems = [f"{wheel.name}: misses {rel}" for rel in sorted(modules) if rel not in names]
    for name in names:
        if name.startswith(("tests/", "gallery/", "docs/", "tools/")):
            problems.append(f"{wheel.name}: holds {name}, which is not part of the package")
    entry_points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    if not entry_points or b"convs2s-edu" not in zipfile.ZipFile(wheel).read(entry_points[0]):
        problems.append(f"{wheel.name}: no convs2s-edu console script")
    return problems


def problems_of_sdist(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    wanted = ["pyproject.toml", "README.md", "convs2s_edu/__init__.py", "convs2s_edu/cli.py"]
    wanted += ["convs2s_edu/training/loop.py", "convs2s_edu/lab/experiments/runner.py"]
    return [f"{sdist.name}: misses {w}" for w in wanted if w not in names]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outdir", type=Path, default=ROOT / "dist")
    args = parser.parse_args(argv)
    shutil.rmtree(args.outdir, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(args.outdir), ROOT], check=True)
    wheels = sorted(args.outdir.glob("convs2s_edu-*-py3-none-any.whl"))
    sdists = sorted(args.outdir.glob("convs2s_edu-*.tar.gz"))
    problems = []
    if len(wheels) != 1:
        problems.append(f"expected one pure-Python wheel in {args.outdir}, found {len(wheels)}")
    if len(sdists) != 1:
        problems.append(f"expected one sdist in {args.outdir}, found {len(sdists)}")
    if wheels and sdists:
        twine = [sys.executable, "-m", "twine", "check", "--strict", wheels[0], sdists[0]]
        twine = subprocess.run(twine, capture_output=True, text=True, check=False)
        print(twine.stdout.strip())
        if twine.returncode != 0:
            problems.append(f"twine check failed:\n{twine.stdout}{twine.stderr}")
        problems += problems_of_wheel(wheels[0]) + problems_of_sdist(sdists[0])
    if problems:
        print("build_package: " + "\n  - ".join(["problems:", *problems]), file=sys.stderr)
        return 1
    print(f"build_package: OK ({wheels[0].name}, {sdists[0].name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
