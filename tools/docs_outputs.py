"""Clear a docs build's outputs, keeping the executed pages when nothing they depend on changed.

``tox -e docs`` and ``tox -e docs-quick`` run this before ``sphinx-build``::

    python tools/docs_outputs.py full   # or: quick; add --clean to re-run every page

The HTML, the API stubs and the test pages are always rebuilt. The *executed* gallery pages
(``docs/auto_examples``, their backreferences in ``docs/gen_modules`` and the numbers the landing
page reads from ``docs/_generated``) are kept when they were made in the same mode (full or quick)
from the same package code, Sphinx configuration and list of gallery files. sphinx-gallery then
re-runs only the pages whose own source changed (it compares each page's MD5), so a rebuild after
editing a page's prose takes minutes, not the hour of a full build.

Anything else (a changed ``convs2s_edu/`` module, ``docs/conf.py``, ``docs/_ext/``, the pinned
versions, the experiment record, a page added or removed, the other mode) clears them, and every
page runs again.
The fingerprint is stored in ``docs/auto_examples/.built-from``.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXECUTED = ("auto_examples", "gen_modules", "_generated")  # made by running the pages
ALWAYS = ("_build/dist", "api/generated", "tests")  # cheap, rebuilt every time
STAMP = DOCS / "auto_examples" / ".built-from"
HTML = {"full": ("_build/html",), "quick": ("_build/html-quick", "_build/screenshots")}


def fingerprint(mode: str) -> str:
    """What the executed pages depend on besides their own source (which sphinx-gallery checks)."""
    h = hashlib.sha256(f"mode={mode}\n".encode())
    watched = sorted(
        [*ROOT.glob("convs2s_edu/**/*.py"), *DOCS.glob("_ext/**/*.py")]
        + [DOCS / "conf.py", ROOT / "constraints.txt", ROOT / "pyproject.toml"]
        + [*DOCS.glob("experiment_record/*/*")]  # the runs the Experiments chapter reads
    )
    for path in watched:
        if path.is_file():
            h.update(f"{path.relative_to(ROOT)}\n".encode())
            h.update(path.read_bytes())
    pages = [p for p in ROOT.glob("gallery/**/*") if p.suffix in (".py", ".rst")]
    for page in sorted(pages):  # the list of pages, not their content
        h.update(f"{page.relative_to(ROOT)}\n".encode())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=sorted(HTML), help="the build about to run")
    parser.add_argument("--clean", action="store_true", help="re-run every page")
    args = parser.parse_args(argv)

    for rel in HTML[args.mode] + ALWAYS:
        shutil.rmtree(DOCS / rel, ignore_errors=True)
    now = fingerprint(args.mode)
    before = STAMP.read_text().strip() if STAMP.is_file() else None
    if args.clean or before != now:
        why = "--clean" if args.clean else "first build" if before is None else "inputs changed"
        for rel in EXECUTED:
            shutil.rmtree(DOCS / rel, ignore_errors=True)
        print(f"docs_outputs: every page will run ({why})")
    else:
        print(
            "docs_outputs: same package, configuration and mode as the last build: "
            "only pages whose source changed will run (delete docs/auto_examples to run all)"
        )
    STAMP.parent.mkdir(parents=True, exist_ok=True)
    STAMP.write_text(now + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
