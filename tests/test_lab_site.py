"""Tests of ``convs2s_edu.lab.site``, the documentation site's plumbing: the quick mode
shrinks the site's training config, numbers are recorded only in a docs build, and the
sentences that compare measured numbers read their direction off them."""

import json

import pytest

from convs2s_edu.lab.site import site_config


def test_quick_mode_shrinks_the_site_config(monkeypatch):
    monkeypatch.delenv("CONVS2S_EDU_QUICK", raising=False)
    full = site_config("gru")
    assert (full.n_train, full.epochs, full.batch_size, full.lr) == (10_000, 30, 128, 1e-3)
    monkeypatch.setenv("CONVS2S_EDU_QUICK", "1")
    quick = site_config("gru")
    assert quick.n_train < full.n_train and quick.epochs < full.epochs
    assert (quick.vocab_size, quick.min_len, quick.max_len) == (50, 8, 20)


def test_site_config_merges_model_options_into_the_recipes():
    """A model option given to a recipe keeps the recipe's own (the fast recipe's dropout 0),
    and empty changes are the recipe's configuration (one cache entry, trained once)."""
    fixed = site_config("gru", "fast", model_options={"attention": False})
    assert fixed.model_options == {"dropout": 0.0, "attention": False}
    assert site_config("gru", "fast", task="sort", model_options={}) == site_config("gru", "fast")


def test_record_writes_only_in_a_docs_build(monkeypatch, tmp_path):
    from convs2s_edu.lab.site import record

    monkeypatch.delenv("CONVS2S_EDU_SITE_DATA", raising=False)
    assert record("speed", {"ok": True}) is None
    monkeypatch.setenv("CONVS2S_EDU_SITE_DATA", str(tmp_path / "data"))
    path = record("speed", {"ok": True, "ratio": 1.5})
    assert path == tmp_path / "data" / "speed.json"
    assert json.loads(path.read_text()) == {"ok": True, "ratio": 1.5}


def test_comparison_reads_its_direction_off_the_numbers():
    from convs2s_edu.lab.site import comparison

    up = comparison("exact match", {"ConvS2S": 0.97, "GRU": 0.925})
    down = comparison("exact match", {"ConvS2S": 0.90, "GRU": 0.925})
    assert up == "The exact match of ConvS2S (97.0%) is higher than that of GRU (92.5%)."
    assert down == "The exact match of ConvS2S (90.0%) is lower than that of GRU (92.5%)."
    speed = comparison("speed", {"a": 2.0, "b": 1.0}, fmt="{:.1f}", higher="faster")
    assert "a (2.0) is faster than that of b (1.0)" in speed
    same = comparison("loss", {"a": 0.50, "b": 0.51}, fmt="{:.2f}", tie=0.02)
    assert "are about the same (within 0.02)" in same
    assert "about the same" not in comparison("loss", {"a": 0.50, "b": 0.53}, tie=0.02)
    with pytest.raises(ValueError, match="exactly two values, got 3"):
        comparison("x", {"a": 1, "b": 2, "c": 3})
    with pytest.raises(ValueError, match="tie must be a number >= 0, got -1"):
        comparison("x", {"a": 1, "b": 2}, tie=-1)


def test_trend_reads_its_direction_off_the_ends():
    from convs2s_edu.lab.site import trend

    assert trend("token accuracy", [8, 14, 20], [0.99, 0.97, 0.91]) == (
        "Token accuracy falls from 99.0% at length 8 to 91.0% at length 20."
    )
    assert trend("loss", [1, 2], [0.1, 0.3], along="epoch", fmt="{:.1f}") == (
        "Loss rises from 0.1 at epoch 1 to 0.3 at epoch 2."
    )
    assert "stays about the same" in trend("x", [1, 2], [0.50, 0.51], tie=0.02)
    with pytest.raises(ValueError, match="two or more"):
        trend("x", [1], [0.5])


def test_record_svg_writes_a_figure_only_in_a_docs_build(monkeypatch, tmp_path):
    from convs2s_edu.lab.site import record_svg

    svg = '<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>'
    monkeypatch.delenv("CONVS2S_EDU_SITE_DATA", raising=False)
    assert record_svg("figure", svg) is None
    monkeypatch.setenv("CONVS2S_EDU_SITE_DATA", str(tmp_path))
    assert record_svg("figure", svg).read_text() == svg
    with pytest.raises(ValueError, match="needs the text of an <svg> element"):
        record_svg("figure", "<html></html>")


def test_code_lines_show_the_equation_comment_and_its_statement_at_their_line_numbers():
    import inspect

    from convs2s_edu import ConvBlock
    from convs2s_edu.lab.site import code_lines

    shown = code_lines(ConvBlock.forward, "v([A B])")
    head, comment, statement = shown.split("\n")
    assert head.startswith("convs2s.py, ConvBlock.forward, lines ")
    first, last = (int(n) for n in head.rsplit(" ", 1)[1].rstrip(":").split("-"))
    source = open(inspect.getsourcefile(ConvBlock), encoding="utf-8").read().splitlines()
    assert last == first + 1
    assert comment.strip() == source[first - 1].strip() == "# v([A B]) = A ⊗ σ(B)"
    assert statement.strip() == source[last - 1].strip()
    assert statement.startswith("    v = F.glu(")  # dedented to the method's body, then 4
    with pytest.raises(ValueError, match=r"no comment holding 'W x' in convs2s.py, ConvBlock"):
        code_lines(ConvBlock.forward, "W x")


def test_a_quick_build_says_where_its_numbers_cannot_show_the_finding(monkeypatch, capsys):
    from convs2s_edu.lab.site import quick_caveat

    monkeypatch.setenv("CONVS2S_EDU_QUICK", "1")
    quick_caveat("the figure above")
    said = capsys.readouterr().out
    assert "read the figure above for how this page works, not for what it finds" in said
    monkeypatch.setenv("CONVS2S_EDU_QUICK", "0")
    quick_caveat("the figure above")
    assert capsys.readouterr().out == ""  # the full build says nothing
