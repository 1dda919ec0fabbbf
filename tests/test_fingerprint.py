"""The code fingerprint: the cache's key and the experiment record's staleness check.

A copy of the fingerprinted files is edited the way a developer would: a docstring, a
comment or a rewrap must leave the fingerprint as it is; a changed budget or expression must
change it and be named.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

import convs2s_edu
from convs2s_edu.training.fingerprint import (
    EXPERIMENT_FILES,
    TRAINING_FILES,
    canonical,
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


#: Modules the training files import that do not shape a trained model's numbers, and why.
NOT_TRAINING = {
    "_checks.py": "argument checks: they raise or pass a value through",
    "_machine.py": "reads the CPU's name and flags for the run's provenance",
    "_version.py": "the version written into a checkpoint",
    "metrics.py": "scores the held-out set (EXPERIMENT_FILES holds it)",
    "training/progress.py": "the progress bar",
    "training/fingerprint.py": "the fingerprint itself",
    "training/calibrate.py": "chooses `fast`, which the config (and the cache's key) holds",
    "training/cache.py": "where runs are kept (its key holds the config)",
}


def _package_imports(relative: str) -> set[str]:
    """The package's files that ``relative`` imports (relative imports only)."""
    path = PACKAGE / relative
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            names = [node.module] if node.module else [a.name for a in node.names]
            for name in names:
                target = base.joinpath(*name.split("."))
                for candidate in (target.with_suffix(".py"), target / "__init__.py"):
                    if candidate.is_file():
                        found.add(candidate.relative_to(PACKAGE).as_posix())
    return found


def test_every_module_the_training_files_import_is_fingerprinted():
    # a module that shapes the numbers but is missing from TRAINING_FILES would let a
    # cached run, or the experiment record, outlive a change to it
    for f in TRAINING_FILES:
        for imported in _package_imports(f):
            if imported.endswith("__init__.py"):
                continue  # re-exports
            assert imported in TRAINING_FILES or imported in NOT_TRAINING, (
                f"{f} imports {imported}: add it to TRAINING_FILES or say why not"
            )


def test_the_canonical_tree_is_the_same_text_on_every_python():
    # ast.dump differs between Python versions (3.12: type_params=[]; 3.13 omits empty
    # fields): the record made on one must not look stale on another for that alone
    tree = ast.parse("def f(x: int = 1) -> int:\n    return x + 1").body[0]
    assert canonical(tree) == (
        "FunctionDef(name='f', args=arguments(args=[arg(arg='x', annotation=Name(id='int', "
        "ctx=Load()))], defaults=[Constant(value=1)]), body=[Return(value=BinOp(left=Name("
        "id='x', ctx=Load()), op=Add(), right=Constant(value=1)))], returns=Name(id='int', "
        "ctx=Load()))"
    )
    tree.type_params = []  # as Python 3.12 parses it
    tree._fields = (*tree._fields, "type_params")
    assert "type_params" not in canonical(tree)
