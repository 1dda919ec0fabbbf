"""The site's notebook and landing-page helpers (docs/_ext/convs2s_site.py, issue 11).

They turn the Sphinx markup that sphinx-gallery leaves in a notebook's markdown
into plain markdown, put the set-up header in front of every notebook, and word
the training times on the pages. The module is read from the source tree (it is
part of the site, not of the package) and needs no Sphinx for these functions.
"""

import json
from pathlib import Path

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
            "the `decoding page <sphx_glr_auto_examples_plot_16_decoding.py>` shows",
            "the [decoding page](plot_16_decoding.ipynb) shows",
        ),
        # a page of a subfolder: its notebook lies in that folder of the zip
        (
            "`speed <sphx_glr_auto_examples_speed_plot_01_training_speed.py>`",
            "[speed](speed/plot_01_training_speed.ipynb)",
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
            "`decoding <sphx_glr_auto_examples_plot_16_decoding.py>`",
            f"[decoding]({BASE}/auto_examples/plot_16_decoding.html)",
        ),
        (
            "`the bench <sphx_glr_auto_examples_speed_plot_04_bench.py>`",
            f"[the bench]({BASE}/auto_examples/speed/plot_04_bench.html)",
        ),
        (":doc:`departures`", f"[departures from the paper]({BASE}/departures.html)"),
    ],
)
def test_markdown_with_a_site_address(site, text, expected):
    assert site.convert_markdown(text, BASE + "/", INVENTORY) == expected


@pytest.mark.parametrize(
    "here, expected",
    [
        ("", "[a](plot_16_decoding.ipynb) [b](speed/plot_04_bench.ipynb)"),
        ("speed", "[a](../plot_16_decoding.ipynb) [b](plot_04_bench.ipynb)"),
        ("appendix", "[a](../plot_16_decoding.ipynb) [b](../speed/plot_04_bench.ipynb)"),
    ],
)
def test_links_between_notebooks_follow_their_folders(site, here, expected):
    text = (
        "`a <sphx_glr_auto_examples_plot_16_decoding.py>` "
        "`b <sphx_glr_auto_examples_speed_plot_04_bench.py>`"
    )
    assert site.convert_markdown(text, None, {}, here) == expected


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
            "own_cached": False,
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
    head = {"mode": "quick", "n_train": 2_000, "epochs": 5}
    ratio = (full.n_train * full.epochs) / (2_000 * 5)
    training = {"head": head, "seconds": 120.0, "ratio": ratio, "full": full}
    page = {"seconds": 4.0, "site_models": True, "own_training": False, "own_cached": False}
    text = site.training_sentence(page, training)
    assert "trained on 2,000 examples for 5 epochs" in text
    assert "about 2 min 00 s of training on the machine that built this site with one " in text
    assert "(quick mode; the epochs times the seconds per epoch timed on the speed" in text
    # by hand: 120 s x (10,000 x 30) / (2,000 x 5) = 120 s x 30 = 3600 s
    assert f"does {ratio:.1f} times as much work" in text and ratio == 30
    assert "about 60 min 00 s on the same machine" in text
    assert "Running it took 4.0 s with the models already cached" in text
    # a page that trains nothing of the site's says nothing about it
    plain = site.training_sentence(
        {"seconds": 1.0, "site_models": False, "own_training": False, "own_cached": False},
        training,
    )
    assert plain == "Running it took 1.0 s when this site was built."
    # a page that loads runs of its own which the build trained first (page 12, the beam
    # experiment) says so, and that its time was with them cached
    own = site.training_sentence(
        {"seconds": 2.0, "site_models": False, "own_training": False, "own_cached": True},
        training,
    )
    assert "trains small models of its own once and caches them" in own
    assert "every time it runs" not in own
    assert own.endswith(
        "Running it took 2.0 s with the models already cached when this site was built."
    )


def _generated(tmp_path, speed: bool = True):
    head = {
        "mode": "full",
        "n_train": 10_000,
        "epochs": 30,
        "n_test": 1000,
        "recipes": {
            r: {
                m: {
                    "exact_match": 0.9,
                    "token_accuracy": 0.99,
                    "steps": 2370,
                    "epochs": e,
                    "n_train": n,
                    "fresh_data": r == "fast",
                    "n_parameters": 1000,
                    "device": "cpu",
                }
                for m in ("convs2s", "gru")
            }
            for r, e, n in (("seed", 30, 10_000), ("fast", 8, 12_800))
        },
    }
    (tmp_path / "headline.json").write_text(json.dumps(head))
    level = {"step": 500, "examples": 64_000, "seconds": {"1 thread": 80.0, "2 threads": 60.0}}
    conv = [
        {
            "model": m,
            "steps": 800,
            "timed_on": ["1 thread", "2 threads"],
            "levels": {"0.5": level, "0.9": level, "0.95": None if m == "gru" else level},
        }
        for m in ("convs2s", "gru")
    ]
    per_epoch = {
        "convs2s": {"1 thread": 10.0, "2 threads": 7.0},
        "gru": {"1 thread": 5.0, "2 threads": 4.0},
    }
    if speed:
        (tmp_path / "speed.json").write_text(
            json.dumps(
                {
                    "ok": True,
                    "text": "verdict text.",
                    "cpu": "Test CPU",
                    "recipes": {
                        r: {"sec_per_epoch": per_epoch, "convergence": conv}
                        for r in ("seed", "fast")
                    },
                }
            )
        )


def test_training_cost_comes_from_the_interleaved_seconds_never_the_runs_clocks(
    site, tmp_path, monkeypatch
):
    monkeypatch.setattr(site, "GENERATED", tmp_path)
    _generated(tmp_path)
    t = site.training_summary()
    assert t["seconds"] == pytest.approx(10.0 * 30 + 5.0 * 30)  # epochs x s/epoch, 1 thread
    lines = "\n".join(site.headline_table(t["head"], t["speed"]))
    assert "seconds per epoch (1 thread, 2 threads)" in lines
    assert "10.0 / 7.0" in lines and "5.0 / 4.0" in lines
    assert "500 / 500" in lines and "500 / not reached" in lines
    assert "80 / 60" in lines and "not reached in 800 steps" in lines
    assert "fast (fresh, 2,370 steps)" in lines and "seed (10,000 x 30 epochs)" in lines
    _generated(tmp_path, speed=False)
    (tmp_path / "speed.json").unlink()
    t = site.training_summary()
    assert t["seconds"] is None and "not measured" in "\n".join(
        site.headline_table(t["head"], None)
    )


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


# ---- the reading path and the old addresses (issue 17) ------------------------------


def test_reading_path_covers_every_page_but_the_experiments_in_reading_order(site):
    facts = site.page_facts()
    paths = [page["path"] for page in facts]
    gallery = site.GALLERY
    expected = [
        f"{folder}/{p.stem}" if folder else p.stem
        for folder, _ in site.CHAPTERS
        for p in sorted((gallery / folder).glob("plot_*.py"))
    ]
    assert paths == expected
    assert [folder for folder, _ in site.CHAPTERS] == ["", "speed", "appendix"]
    assert {p.parent.name for p in gallery.rglob("plot_*.py")} == {
        "gallery",
        "speed",
        "experiments",
        "appendix",
    }
    # one line per page, and no line for a page that is gone
    assert set(site.TEACHES) == set(paths)
    # the notebooks are matched to their page by file name
    assert len({page["stem"] for page in facts}) == len(facts)
    assert facts[0]["stem"] == "plot_00_sorting_task"
    assert site.gallery_label("speed/plot_01_training_speed") == (
        "sphx_glr_auto_examples_speed_plot_01_training_speed.py"
    )


def test_every_old_address_sends_to_pages_that_exist_and_is_no_page_itself(site):
    pages = {
        p.relative_to(site.GALLERY).with_suffix("").as_posix()
        for p in site.GALLERY.rglob("plot_*.py")
    }
    for old, new in site.REDIRECTS.items():
        assert old not in pages, old
        assert new and set(new) <= pages, (old, new)


def test_redirect_stub_refreshes_links_and_names_the_canonical_page(site):
    titles = {"speed/plot_04_bench": "Speed & the bench", "plot_13_training": "Training"}
    stub = site.redirect_stub("plot_12_speed", ("speed/plot_04_bench",), titles)
    assert '<meta http-equiv="refresh" content="0; url=speed/plot_04_bench.html">' in stub
    assert '<link rel="canonical" href="speed/plot_04_bench.html">' in stub
    assert '<a href="speed/plot_04_bench.html">Speed &amp; the bench</a>' in stub
    assert "<script" not in stub  # works without scripts, offline
    # with the site's public address, the canonical link is absolute
    stub = site.redirect_stub("plot_12_speed", ("speed/plot_04_bench",), titles, BASE + "/")
    assert f'<link rel="canonical" href="{BASE}/auto_examples/speed/plot_04_bench.html">' in stub
    # a page that was split lists where its other parts went
    stub = site.redirect_stub(
        "plot_05_training", ("plot_13_training", "speed/plot_04_bench"), titles
    )
    assert "url=plot_13_training.html" in stub
    assert '<li><a href="speed/plot_04_bench.html">Speed &amp; the bench</a></li>' in stub


def _gallery_page(stem: str) -> str:
    return (
        f'<html><body><article><a href="{stem}.ipynb">nb</a> <a href="{stem}.py">py</a>'
        "</article></body></html>"
    )


def test_check_site_accepts_redirect_stubs_and_finds_the_broken_ones(site, tmp_path):
    check = load_module("tools/check_site.py", "check_site_under_test")
    gallery, html = tmp_path / "gallery", tmp_path / "html" / "auto_examples"
    for rel in ("plot_01_a", "speed/plot_01_b"):
        (gallery / rel).parent.mkdir(parents=True, exist_ok=True)
        (gallery / f"{rel}.py").write_text('"""A page."""\n')
        (html / rel).parent.mkdir(parents=True, exist_ok=True)
        (html / f"{rel}.html").write_text(_gallery_page(Path(rel).name))
        for ext in (".ipynb", ".py"):
            (html / f"{rel}{ext}").write_text("")
    titles = {"speed/plot_01_b": "B"}
    (html / "plot_00_old.html").write_text(
        site.redirect_stub("plot_00_old", ("speed/plot_01_b",), titles)
    )
    (html / "plot_02_to_nowhere.html").write_text(
        site.redirect_stub("plot_02_to_nowhere", ("plot_09_missing",), titles)
    )
    (html / "plot_03_stale.html").write_text(_gallery_page("plot_03_stale"))
    extension = tmp_path / "ext.py"
    extension.write_text(
        'REDIRECTS = {"plot_00_old": ("speed/plot_01_b",), "plot_04_gone": ("plot_01_a",)}\n'
    )
    checker = check.Checker(tmp_path / "html", gallery, tmp_path, tmp_path, extension)
    checker.check_gallery()
    failures = "\n".join(checker.failures)
    assert "plot_00_old" not in failures  # a good stub: no notebook demanded from it
    assert "auto_examples/plot_02_to_nowhere.html: redirect stub points to a missing" in failures
    assert "auto_examples/plot_03_stale.html: a gallery page without a script" in failures
    assert "auto_examples/plot_04_gone.html: no redirect stub" in failures
    assert len(checker.failures) == 3, failures
    assert "gallery: 2 pages, 1 redirect stubs" in checker.notes
