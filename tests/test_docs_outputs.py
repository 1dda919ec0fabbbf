"""``tools/docs_outputs.py``: a docs rebuild keeps the executed pages only when that is safe.

Kept pages are how an edit to one page's prose rebuilds in minutes (issue 9); keeping them after
the package changed would put stale numbers on the site, so each input is changed in turn here.
"""

import pytest
from _files import load_module


@pytest.fixture
def tree(tmp_path, monkeypatch):
    tool = load_module("tools/docs_outputs.py", "docs_outputs_under_test")
    for rel, text in {
        "convs2s_edu/model.py": "x = 1\n",
        "docs/conf.py": "project = 'p'\n",
        "docs/_ext/site.py": "",
        "gallery/plot_01_a.py": "print(1)\n",
        "constraints.txt": "torch==2.13.0\n",
        "pyproject.toml": "",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.setattr(tool, "DOCS", tmp_path / "docs")
    monkeypatch.setattr(tool, "STAMP", tmp_path / "docs" / "auto_examples" / ".built-from")
    return tool, tmp_path


def build(tool, root, mode="full"):
    """Run the tool, then 'build': leave an executed page and an HTML page behind."""
    tool.main([mode])
    kept = (root / "docs/auto_examples/plot_01_a.rst").exists()
    assert (root / "docs/_generated/speed.json").exists() == kept  # numbers go with the pages
    for rel in ("docs/auto_examples/plot_01_a.rst", "docs/_generated/speed.json",
                "docs/_build/html/index.html", "docs/_build/html-quick/index.html"):  # fmt: skip
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("built")
    return kept


@pytest.mark.parametrize(
    "change",
    [
        lambda r: (r / "convs2s_edu/model.py").write_text("x = 2\n"),
        lambda r: (r / "docs/conf.py").write_text("project = 'q'\n"),
        lambda r: (r / "docs/_ext/site.py").write_text("# edited\n"),
        lambda r: (r / "constraints.txt").write_text("torch==2.14.0\n"),
        lambda r: (r / "gallery/plot_02_b.py").write_text(""),  # a page added
        lambda r: (r / "gallery/plot_01_a.py").rename(r / "gallery/plot_01_renamed.py"),
    ],
)
def test_pages_run_again_when_what_they_depend_on_changes(tree, change):
    tool, root = tree
    assert not build(tool, root)  # first build: nothing to keep
    assert build(tool, root)  # nothing changed: kept
    change(root)
    assert not build(tool, root)


def test_a_prose_edit_keeps_the_pages_and_html_is_always_rebuilt(tree):
    tool, root = tree
    build(tool, root)
    (root / "gallery/plot_01_a.py").write_text("print(1)  # reworded\n")  # sphinx-gallery's job
    tool.main(["full"])
    assert (root / "docs/auto_examples/plot_01_a.rst").exists()
    assert (root / "docs/_generated/speed.json").exists()
    assert not (root / "docs/_build/html/index.html").exists()


def test_the_other_mode_or_clean_runs_every_page(tree):
    tool, root = tree
    build(tool, root)
    assert not build(tool, root, "quick")  # quick pages must never stand in a full build
    assert build(tool, root, "quick")
    assert not build(tool, root, "full")
    tool.main(["full", "--clean"])
    assert not (root / "docs/auto_examples/plot_01_a.rst").exists()
