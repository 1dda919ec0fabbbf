"""The code fingerprint: the cache's key and the experiment record's staleness check.

A copy of the fingerprinted files is edited the way a developer would: a docstring, a
comment or a rewrap must leave the fingerprint as it is; a changed budget or expression must
change it and be named.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import convs2s_edu
from convs2s_edu.training.fingerprint import (
    EXPERIMENT_FILES,
    TRAINING_FILES,
    changed_files,
    file_hashes,
    fingerprint,
    source_hash,
)

PACKAGE = Path(convs2s_edu.__file__).resolve().parent


@pytest.fixture
def copy(tmp_path):
    for f in EXPERIMENT_FILES:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PACKAGE / f, tmp_path / f)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_every_fingerprinted_file_exists_and_training_is_a_part():
    assert set(TRAINING_FILES) < set(EXPERIMENT_FILES)
    assert all((PACKAGE / f).is_file() for f in EXPERIMENT_FILES)
    # the package's files as this process read them are the files on disk (none edited)
    assert file_hashes() == file_hashes(root=PACKAGE)


def test_docstrings_comments_and_layout_leave_it(copy):
    before = file_hashes(root=copy)
    _edit(
        copy / "convs2s.py",
        '"""',
        '"""A reworded first line.\n\n',
    )
    _edit(
        copy / "lab/experiments/registry.py", "FULL_SEEDS = 5", "FULL_SEEDS = (  # five\n    5\n)"
    )
    src = "def f(x):\n    '''Doc.'''\n    return x + 1  # one\n"
    assert source_hash(src) == source_hash("def f(x):\n\n    return (x\n            + 1)\n")
    assert file_hashes(root=copy) == before
    assert changed_files(before, root=copy) == []


def test_a_budget_or_an_expression_changes_it_and_is_named(copy):
    before = file_hashes(root=copy)
    _edit(copy / "lab/experiments/registry.py", '"steps": 800', '"steps": 900')
    assert changed_files(before, root=copy) == ["lab/experiments/registry.py"]
    assert fingerprint(root=copy) != fingerprint(EXPERIMENT_FILES, root=PACKAGE)
    # the training scope ignores the experiments' files, and sees the models'
    assert fingerprint(TRAINING_FILES, root=copy) == fingerprint(TRAINING_FILES, root=PACKAGE)
    _edit(copy / "convs2s.py", "math.sqrt(0.5)", "math.sqrt(0.4)")
    assert changed_files(before, root=copy) == ["convs2s.py", "lab/experiments/registry.py"]
    assert fingerprint(TRAINING_FILES, root=copy) != fingerprint(TRAINING_FILES, root=PACKAGE)


def test_a_docstring_only_body_and_a_removed_file():
    # a function whose body is only its docstring is still a function of its own
    assert source_hash("def f():\n    'doc'\n") == source_hash("def f():\n    pass\n")
    assert source_hash("def f():\n    'doc'\n") != source_hash("def g():\n    pass\n")
    recorded = {**file_hashes(), "gone.py": "0" * 16}
    assert changed_files(recorded) == ["gone.py"]
