"""Tests of the gallery's pages as text (``gallery/**/plot_*.py``): a page does not type a
comparison of measured results into its prose.

Which of two measured numbers is larger is printed by the page's code
(:func:`convs2s_edu.lab.site.comparison`, :func:`~convs2s_edu.lab.site.trend`), so that the
sentence follows the numbers of every build. A sentence of a text cell (the page's
docstring, the comments after ``# %%``) that holds a comparative word, a measured quantity
and one of the compared things is taken for a typed result unless it is a question or is
listed in :data:`CONCEPTUAL` with the reason it holds whatever the build measures.
"""

from __future__ import annotations

import ast
import re

import pytest
from _files import ROOT

GALLERY = ROOT / "gallery"

COMPARATIVE = re.compile(
    r"\b(higher|lower|faster|slower|better|worse|more accurate|less accurate|falls?|rises?|"
    r"drops?|improves?|outperforms?|beats?|wins?|overtakes?)\b",
    re.IGNORECASE,
)
MEASURED = re.compile(
    r"\b(accuracy|exact match|loss|perplexity|seconds?|tokens/s|tokens per second|time|"
    r"speed|throughput|score|BLEU)\b",
    re.IGNORECASE,
)
COMPARED = re.compile(
    r"\b(ConvS2S|GRU|models?|arms?|beam|greedy|layers?|lengths?|sequences?)\b", re.IGNORECASE
)

#: Sentences that compare but state no result of this build, by page and first words,
#: with why they hold whatever the numbers (keep this list short).
CONCEPTUAL: dict[str, dict[str, str]] = {
    "experiments/plot_03_attention_layers.py": {
        "* Two scores per arm": "which direction of each score is the better one",
        "Lower is better, by how much?": "how a claim orients a loss ratio (a definition)",
    },
}


def text_cells(source: str) -> list[str]:
    """A page's prose: its docstring and every comment block that follows ``# %%``."""
    cells = [ast.get_docstring(ast.parse(source)) or ""]
    lines = source.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "# %%":
            continue
        block = []
        for nxt in lines[i + 1 :]:
            if not nxt.startswith("#"):
                break
            block.append(nxt[1:].strip())
        cells.append("\n".join(block))
    return cells


def sentences(text: str) -> list[str]:
    """Sentences of a text cell: every heading on its own, paragraphs split at full stops;
    math, literals, roles and raw HTML removed (their symbols are not words)."""
    text = re.sub(r"\.\. raw:: html\n(\n|[ \t]+.*\n?)*", "\n\n", text)
    text = re.sub(r"\.\. math::\n(\n|[ \t]+.*\n?)*", "\n\n", text)
    text = re.sub(r":math:`[^`]*`|``[^`]*``|:[a-z:]+:`[^`]*`", " ", text)
    lines = text.splitlines()
    out, paragraph = [], []
    for i, line in enumerate(lines):
        underline = i + 1 < len(lines) and re.fullmatch(r"[=\-~^]{3,}", lines[i + 1].strip())
        if underline or re.fullmatch(r"[=\-~^]{3,}", line.strip()) or not line.strip():
            out.append(" ".join(paragraph))
            paragraph = []
            if underline:
                out.append(line.strip())  # a heading is a sentence of its own
            continue
        paragraph.append(line.strip())
    out.append(" ".join(paragraph))
    return [
        s
        for block in out
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*(])", " ".join(block.split()))
        if s
    ]


def typed_comparisons(source: str) -> list[str]:
    return [
        s
        for cell in text_cells(source)
        for s in sentences(cell)
        if COMPARATIVE.search(s)
        and MEASURED.search(s)
        and COMPARED.search(s)
        and not s.rstrip().endswith("?")
    ]


PAGES = sorted(GALLERY.rglob("plot_*.py"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(GALLERY)))
def test_no_page_types_a_comparison_of_measured_results(page):
    allowed = CONCEPTUAL.get(str(page.relative_to(GALLERY)), {})
    found = [
        s
        for s in typed_comparisons(page.read_text(encoding="utf-8"))
        if not any(s.startswith(start) for start in allowed)
    ]
    assert not found, (
        "print the comparison from the numbers (convs2s_edu.lab.site.comparison / trend), "
        "or list the sentence in CONCEPTUAL with why it holds whatever the build measures:\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(GALLERY)))
def test_every_page_is_one_short_idea_with_exercises_and_a_figure(page):
    """At most 300 lines, a "Try it" section, and a figure of its own (sphinx-gallery
    shows its placeholder thumbnail for a page that draws none)."""
    source = page.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 300, f"{page.name}: split it or tighten it"
    assert "\n# Try it\n# ------\n" in source
    assert "plt.show()" in source or "sphinx_gallery_thumbnail_path" in source


def test_the_scan_finds_a_typed_result_and_passes_a_computed_one():
    typed = '"""T\n=\n\nIntro."""\n\n# %%\n# ConvS2S reaches a higher accuracy than the GRU.\n'
    assert typed_comparisons(typed) == ["ConvS2S reaches a higher accuracy than the GRU."]
    asked = typed.replace("the GRU.", "the GRU?")
    assert typed_comparisons(asked) == []
    printed = typed.replace(
        "# ConvS2S reaches a higher accuracy than the GRU.\n",
        "# The comparison, from the numbers:\n\nprint(comparison('accuracy', scores))\n",
    )
    assert typed_comparisons(printed) == []
