"""A fingerprint of exactly the code that shapes a trained model's numbers.

The training cache keys its entries with it
(:func:`~convs2s_edu.training.cache.cache_key`), and the experiment record
(:mod:`convs2s_edu.lab.experiments.record`) stores it, so that a change to that code
trains again, and a record made by older code says which files changed. A version number
would do neither: code changes between versions, and most changes of a version (the
docs, the lab's plumbing, a comment) leave every trained number as it was.

Each file is read as Python's parser sees it, without its docstrings: the syntax tree
with the docstrings removed, written out by :func:`canonical`, which has no comments, no
formatting and no line numbers, and is the same text on every Python version. So a
reworded docstring, a comment or a rewrap leaves the fingerprint as it was; a changed
expression, default or constant changes it.
"""

from __future__ import annotations

import ast
import hashlib
from functools import cache
from pathlib import Path

__all__ = [
    "TRAINING_FILES",
    "EXPERIMENT_FILES",
    "canonical",
    "source_hash",
    "file_hashes",
    "fingerprint",
    "changed_files",
]

_PACKAGE = Path(__file__).resolve().parent.parent

#: What a trained model's numbers depend on, relative to the package: the models, the
#: data, the loss, the training step and loop, the execution paths.
TRAINING_FILES = (
    "convs2s.py",
    "ablations.py",
    "rnn.py",
    "seq2seq.py",
    "hybrid.py",
    "loss.py",
    "data.py",
    "registry.py",
    "training/config.py",
    "training/step.py",
    "training/loop.py",
    "training/checkpoint.py",
    "training/device.py",
    "training/parallel.py",
    "fast/conv.py",
    "fast/dropout.py",
    "fast/gru.py",
    "fast/paths.py",
)

#: What an experiment's numbers depend on beyond its runs' training: decoding and the
#: metrics that score them, and the experiments' budgets, arms and scoring.
EXPERIMENT_FILES = TRAINING_FILES + (
    "decode.py",
    "metrics.py",
    "lab/experiments/registry.py",
    "lab/experiments/runner.py",
)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(
            node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            continue
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            if isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def canonical(node) -> str:
    """A syntax tree as text, the same on every Python version that parses it alike.

    ``ast.dump`` is not: Python 3.12 added fields that are empty in code without the
    new syntax (``type_params=[]``), and 3.13 leaves empty fields out by default. Here a
    node is its class name and its fields that hold something, in the tree's order.

    >>> canonical(ast.parse("f(x)").body[0])
    "Expr(value=Call(func=Name(id='f', ctx=Load()), args=[Name(id='x', ctx=Load())]))"
    """
    if isinstance(node, ast.AST):
        fields = (
            f"{k}={canonical(v)}"
            for k, v in ast.iter_fields(node)
            if v not in (None, [])
        )
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(map(canonical, node))}]"
    return repr(node)


def source_hash(source: str) -> str:
    """The hash of one file's code: its syntax tree without docstrings
    (:func:`canonical`), 16 hex digits."""
    tree = _without_docstrings(ast.parse(source))
    return hashlib.sha256(canonical(tree).encode()).hexdigest()[:16]


@cache
def _loaded_hash(path: Path) -> str:
    """The hash of a file of this package as this process first read it: an edit made
    while it runs (a notebook, a long build) is not the code it trains with."""
    return source_hash(path.read_text(encoding="utf-8"))


def file_hashes(files=EXPERIMENT_FILES, root=None) -> dict[str, str]:
    """``{file: source_hash}`` of ``files``: the package's own, as this process first
    read them (by default), or the files under ``root`` as they are now."""
    if root is None:
        return {f: _loaded_hash(_PACKAGE / f) for f in files}
    return {f: source_hash((Path(root) / f).read_text(encoding="utf-8")) for f in files}


def fingerprint(files=EXPERIMENT_FILES, root=None) -> str:
    """One hash of every file of ``files`` (:func:`file_hashes`), 16 hex digits."""
    blob = "\n".join(f"{f} {h}" for f, h in sorted(file_hashes(files, root).items()))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def changed_files(recorded: dict[str, str], root=None) -> list[str]:
    """The files whose code differs from ``recorded`` (a :func:`file_hashes` of older
    code), those added to or removed from the fingerprinted set included."""
    now = file_hashes(EXPERIMENT_FILES, root)
    return sorted(f for f in set(now) | set(recorded) if now.get(f) != recorded.get(f))
