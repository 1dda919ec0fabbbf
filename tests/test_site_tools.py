"""The site's notebook and landing-page helpers (docs/_ext/convs2s_site.py, issue 11).

They turn the Sphinx markup that sphinx-gallery leaves in a notebook's markdown
into plain markdown, put the set-up header in front of every notebook, and word
the training times on the pages. The module is read from the source tree (it is
part of the site, not of the package) and needs no Sphinx for these functions.
"""

import json

import pytest
from _files import load_module


@pytest.fixture(scope="module")
def site():
    return load_module("docs/_ext/convs2s_site.py", "convs2s_site_under_test")


BASE = "https://example.org/convs2s"
INVENTORY = {
    "convs2s_edu.exact_match": (
        "api/generated/convs2s_edu.exact_match.html#convs2s_edu.exact_match"
    ),
    "convs2s_edu.ConvBlock": "api/generated/convs2s_edu.ConvBlock.html#convs2s_edu.ConvBlock",
}


@pytest.mark.parametrize(
    "text, expected",
    [
        (":func:`~convs2s_edu.exact_match` scores it", "`exact_match` scores it"),
        (":class:`convs2s_edu.ConvBlock`", "`convs2s_edu.ConvBlock`"),
        (":meth:`~convs2s_edu.ConvDecoder.step`", "`step`"),
        (":func:`the metric <convs2s_edu.exact_match>`", "`the metric`"),
        (
            "the `decoding page <sphx_glr_auto_examples_plot_08_decoding.py>` shows",
            "the [decoding page](plot_08_decoding.ipynb) shows",
        ),
        ("see :doc:`paper_map`", "see the paper map"),
        ("see `the gallery <gallery>` first", "see the gallery first"),
        (
            "plain text with $\\sqrt{0.5}$ and ``code``",
            "plain text with $\\sqrt{0.5}$ and ``code``",
        ),
    ],
)
def test_markdown_without_a_site_address(site, text, expected):
    assert site.convert_markdown(text, None, INVENTORY) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            ":func:`~convs2s_edu.exact_match`",
            f"[`exact_match`]({BASE}/{INVENTORY['convs2s_edu.exact_match']})",
        ),
        # a short name resolves against the package
        (":class:`ConvBlock`", f"[`ConvBlock`]({BASE}/{INVENTORY['convs2s_edu.ConvBlock']})"),
        # an object the inventory does not know stays code, never a broken link
        (":func:`~convs2s_edu.nowhere`", "`nowhere`"),
        (
            "`decoding <sphx_glr_auto_examples_plot_08_decoding.py>`",
            f"[decoding]({BASE}/auto_examples/plot_08_decoding.html)",
        ),
        (":doc:`departures`", f"[departures from the paper]({BASE}/departures.html)"),
    ],
)
def test_markdown_with_a_site_address(site, text, expected):
    assert site.convert_markdown(text, BASE + "/", INVENTORY) == expected


def test_solution_markup_becomes_a_plain_line(site):
    text = (
        "**1. A question?**\n\n.. raw:: html\n\n"
        '   <details class="solution"><summary>Solution</summary>\n\n'
        "The answer is 3.\n"
    )
    out = site.convert_markdown(text, None, {})
    assert (
        out == "**1. A question?**\n\n**Solution** (predict first, then read on):\n\n"
        "The answer is 3.\n"
    )
    closing = ".. raw:: html\n\n   </details>\n\n**2. Next.**\n"
    assert site.convert_markdown(closing, None, {}) == "**2. Next.**\n"


def _notebook():
    return {
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": "QUICK = True"},
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": "Use :func:`~convs2s_edu.exact_match`.",
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_notebook_gets_one_header_and_plain_markdown_even_when_processed_twice(site):
    nb = _notebook()
    facts = {
        "plot_01_x": {
            "stem": "plot_01_x",
            "title": "X",
            "teaches": "x",
            "seconds": 2.0,
            "site_models": False,
            "own_training": False,
        }
    }
    assert site.process_notebook(nb, "plot_01_x", None, {}, facts, None) is True
    once = json.dumps(nb)
    assert site.process_notebook(nb, "plot_01_x", None, {}, facts, None) is False
    assert json.dumps(nb) == once
    assert [c["cell_type"] for c in nb["cells"]] == ["markdown", "code", "markdown"]
    assert nb["cells"][0]["source"].startswith("**Before you run this notebook.**")
    assert "Running it took 2.0 s" in nb["cells"][0]["source"]
    assert nb["cells"][2]["source"] == "Use `exact_match`."


@pytest.mark.parametrize(
    "seconds, expected",
    [
        (3.24, "3.2 s"),
        (9.96, "10 s"),
        (42.4, "42 s"),
        (59.6, "1 min 00 s"),
        (125, "2 min 05 s"),
        (3600, "60 min 00 s"),
    ],
)
def test_durations(site, seconds, expected):
    assert site._duration(seconds) == expected


def test_training_sentence_scales_the_quick_time_to_the_full_mode(site):
    from convs2s_edu import TrainConfig

    full = TrainConfig()
    head = {
        "mode": "quick",
        "n_train": 2_000,
        "epochs": 5,
        "models": {"convs2s": {"training_seconds": 50.0}, "gru": {"training_seconds": 70.0}},
    }
    ratio = (full.n_train * full.epochs) / (2_000 * 5)
    training = {"head": head, "seconds": 120.0, "ratio": ratio, "full": full}
    page = {"seconds": 4.0, "site_models": True, "own_training": False}
    text = site.training_sentence(page, training)
    assert "trained on 2,000 examples for 5 epochs" in text
    assert "which took 2 min 00 s in this build (quick mode)" in text
    # by hand: 120 s x (10,000 x 30) / (2,000 x 5) = 120 s x 30 = 3600 s
    assert f"does {ratio:.1f} times as much work" in text and ratio == 30
    assert "about 60 min 00 s on the same machine" in text
    assert "Running it took 4.0 s with the models already cached" in text
    # a page that trains nothing of the site's says nothing about it
    plain = site.training_sentence(
        {"seconds": 1.0, "site_models": False, "own_training": False}, training
    )
    assert plain == "Running it took 1.0 s when this site was built."


def test_test_pages_list_every_module_level_test_and_nothing_else(site, tmp_path):
    source = tmp_path / "test_demo.py"
    source.write_text(
        "def test_a():\n    pass\n\n\ndef helper():\n    pass\n\n\n"
        "class TestGroup:\n    def test_inside(self):\n        pass\n\n\n"
        "def test_b():\n    def test_nested():\n        pass\n"
    )
    assert site._test_functions(source) == ["test_a", "test_b"]
    assert site.test_label("test_demo.py", "test_a") == "test-demo-test-a"
    assert site.test_label("test_demo.py", "test_a") != site.test_label("test_demo.py", "test_b")


@pytest.mark.parametrize(
    "source, trains",
    [
        ("results = train(cfg, progress=False)", True),
        ("optimizer = torch.optim.Adam(model.parameters())", True),
        ("loss.backward()  # gradients for a receptive field", False),
        ("results = train_or_load(site_config(name))", False),  # the site's cached models
        ("model.train()", False),
    ],
)
def test_what_counts_as_a_page_training_its_own_models(site, source, trains):
    assert (site.OWN_TRAINING.search(source) is not None) is trains
