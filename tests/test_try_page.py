"""The checks around the "Try the models" page (issue 20) that need no browser.

``tools/try_page_check.py`` compares what the page decoded with PyTorch; its comparison must
fail on a real difference and accept only a near-tie (the two tokens' log-probabilities
closer than the tolerance), and the inputs it draws must be the cases it promises.
``tools/check_site.py`` must refuse a built page whose models or runtime are missing.
"""

import json
import random

import numpy as np
import pytest
from _files import load_module

IDS = {"pad": 0, "sos": 6, "eos": 7}
V = 5  # ordinary tokens 1..5, ids 0..7


@pytest.fixture(scope="module")
def check_tool():
    pytest.importorskip("onnxruntime")  # the tool imports tools/export_onnx.py
    return load_module("tools/try_page_check.py", "try_page_check_under_test")


def _reference(tokens):
    """PyTorch's side: every step puts log-probability -0.1 on its token, -5 elsewhere."""
    logp = np.full((len(tokens), 8), -5.0)
    for t, tok in enumerate(tokens):
        logp[t, tok] = -0.1
    attention = np.full((len(tokens), 1, 3), 1 / 3)
    return tokens, logp, attention


def _page(tokens, logp, shift=0.0):
    steps = [
        {
            "token": tok,
            "top": [[tok, float(logp[t, tok]) + shift]],
            "attention": [[1 / 3, 1 / 3, 1 / 3]],
        }
        for t, tok in enumerate(tokens)
    ]
    return {"tokens": tokens, "steps": steps}


def test_the_same_decoding_passes(check_tool):
    check = check_tool.Checker()
    ref = _reference([1, 2, 3, IDS["eos"]])
    line = check_tool.compare_model(check, "case", "convs2s", _page(ref[0], ref[1]), ref, IDS)
    assert check.problems == [] and "4 tokens as PyTorch" in line


def test_a_log_probability_off_by_more_than_the_tolerance_fails(check_tool):
    check = check_tool.Checker()
    ref = _reference([1, 2, IDS["eos"]])
    shift = 10 * check_tool.export_onnx.TOL
    check_tool.compare_model(check, "case", "gru", _page(ref[0], ref[1], shift), ref, IDS)
    assert check.problems and "log p(1)" in check.problems[0]


def test_a_different_token_fails_unless_it_is_a_near_tie(check_tool):
    tokens, logp, attention = _reference([1, 2, IDS["eos"]])
    page_tokens = [1, 3, IDS["eos"]]
    # far apart: PyTorch puts -0.1 on 2 and -5 on 3
    check = check_tool.Checker()
    check_tool.compare_model(
        check, "c", "gru", _page(page_tokens, logp), (tokens, logp, attention), IDS
    )
    assert check.problems and "they part at step 2" in check.problems[0]
    # a near-tie: 2 and 3 equally probable (to within the tolerance) for PyTorch
    logp[1, 3] = logp[1, 2] - check_tool.export_onnx.TOL / 2
    check = check_tool.Checker()
    line = check_tool.compare_model(
        check, "c", "gru", _page(page_tokens, logp), (tokens, logp, attention), IDS
    )
    assert check.problems == [] and "near-tie at step 2" in line


def test_the_drawn_cases_are_what_they_say(check_tool):
    manifest = {"vocab_size": 50, "max_positions": 64, "train_lengths": [8, 20]}
    for seed in range(20):
        rng = random.Random(seed)
        cases = check_tool.draw_cases(rng, manifest)
        assert len(set(cases["duplicates"])) < len(cases["duplicates"])
        assert 8 <= len(cases["duplicates"]) <= 20
        assert len(cases["longest"]) == 64
        assert len(set(cases["all-equal"])) == 1 and 8 <= len(cases["all-equal"]) <= 20
        for tokens in cases.values():
            assert all(1 <= x <= 50 for x in tokens)
        bad = check_tool.bad_inputs(rng, manifest)
        assert [name for name, _, _ in bad] == [
            "empty",
            "not-a-number",
            "zero",
            "too-high",
            "too-long",
        ]
        assert len(bad[-1][1].split(",")) == 65


def _site(tmp_path, files):
    site = tmp_path / "html"
    folder = site / "_static" / "try"
    (folder / "ort").mkdir(parents=True)
    (site / "try.html").write_text("<html></html>")
    manifest = {
        "runtime": {"script": "ort.wasm.min.js"},
        "models": {"convs2s": {"files": {"decoder": "convs2s.onnx"}}},
    }
    (folder / "models.json").write_text(json.dumps(manifest))
    for rel in files:
        (folder / rel).write_bytes(b"x")
    return site


def test_check_site_refuses_a_try_page_without_its_files(tmp_path):
    check = load_module("tools/check_site.py", "check_site_try_under_test")
    every = [
        "try.js",
        "try.css",
        "ort/ort.wasm.min.js",
        "ort/ort-wasm-simd-threaded.wasm",
        "ort/ort-wasm-simd-threaded.mjs",
        "convs2s.onnx",
    ]
    site = _site(tmp_path / "a", every)
    checker = check.Checker(site, tmp_path, tmp_path, tmp_path, tmp_path / "none.py")
    checker.check_try_page()
    assert checker.failures == []
    site = _site(tmp_path / "b", [f for f in every if not f.endswith(".wasm")])
    checker = check.Checker(site, tmp_path, tmp_path, tmp_path, tmp_path / "none.py")
    checker.check_try_page()
    assert checker.failures == [
        "try.html: _static/try/ort/ort-wasm-simd-threaded.wasm is missing or empty"
    ]
