"""Tests of ``convs2s_edu.lab.schematic``: the SVG Figure 1 of ConvS2S and of the GRU baseline
(shapes read from a forward pass, every box of the paper's figure, arrows that end at boxes),
the critical path, and the object a page shows."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest
import torch
from _tiny import VOCAB, tiny_model

from convs2s_edu import collate_batch
from convs2s_edu.lab import schematic
from convs2s_edu.lab.schematic import Schematic, convs2s_schematic, critical_path, gru_schematic

pytestmark = pytest.mark.usefixtures("single_thread")

NS = "{http://www.w3.org/2000/svg}"

#: Two sizes and two lengths, so that a shape typed into the module fails one of them.
SIZES = [
    {"embed_dim": 16, "hidden_dim": 16, "kernel_size": 3, "attention_dim": 12, "S": 5},
    {"embed_dim": 24, "hidden_dim": 20, "kernel_size": 5, "attention_dim": 10, "S": 7},
]


def example(S: int):
    """A sorting example of length ``S`` as a batch of one: ``src (1, S)``, ``tgt_in (1, S+1)``."""
    src = [(3 * j + 2) % VOCAB + 1 for j in range(S)]
    batch = collate_batch([(src, sorted(src))], VOCAB)
    return batch.src, batch.tgt_in


def draw(kind: str, sizes: dict):
    sizes = dict(sizes)
    S = sizes.pop("S")
    if kind == "convs2s":
        sizes.pop("attention_dim")
        model = tiny_model("convs2s", n_encoder_layers=2, n_decoder_layers=3, **sizes)
        return model, convs2s_schematic(model, *example(S))
    sizes.pop("kernel_size")
    model = tiny_model("gru", n_encoder_layers=1, n_decoder_layers=1, **sizes)
    return model, gru_schematic(model, *example(S))


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return root


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{NS}g") if g.get("class") == cls]


def visible_text(element: ET.Element) -> str:
    """What a reader sees in ``element`` (its ``<text>``\\ s, not its tooltip)."""
    return " ".join("".join(t.itertext()) for t in element.iter(f"{NS}text"))


def labels(root: ET.Element) -> dict[str, list[str]]:
    """Every labelled arrow: its symbol -> the visible labels of the arrows with that symbol."""
    found: dict[str, list[str]] = {}
    for g in groups(root, "edge"):
        if g.get("data-symbol"):
            found.setdefault(g.get("data-symbol"), []).append(visible_text(g))
    return found


def box_names(root: ET.Element) -> list[str]:
    return [g.get("data-name") for g in groups(root, "box")]


def shape(*sizes) -> str:
    return f"({', '.join(str(n) for n in sizes)})"


# --------------------------------------------------------------------------
# The SVG itself
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_the_svg_parses_scales_and_is_readable_on_a_dark_page(kind):
    _, fig = draw(kind, SIZES[0])
    root = parse(fig.svg)
    width = float(root.get("viewBox").split()[2])
    assert root.get("width") == "100%" and width >= 800
    assert "DejaVu Sans" in root.get("font-family")
    # a white background covering the whole figure, first thing drawn
    background = root.find(f"{NS}rect")
    assert background.get("fill") == "#ffffff" and float(background.get("width")) == width
    # accessible: a title and a description named by aria-labelledby
    assert root.get("role") == "img"
    ids = {e.get("id"): "".join(e.itertext()) for e in root if e.get("id")}
    for ref in root.get("aria-labelledby").split():
        assert ids[ref].strip()
    # no external resources
    assert "http://" not in fig.svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in fig.svg and root.find(f".//{NS}image") is None


def _arrow_ends(root):
    for g in groups(root, "edge"):
        line = g.find(f"{NS}polyline")
        if line.get("marker-end"):
            x, y = line.get("points").split()[-1].split(",")
            yield g.get("data-symbol"), float(x), float(y)


def _targets(root):
    """Rectangles (boxes, the GRU's cells) and circles (⊕, ⊗) an arrow may end at."""
    for r in root.iter(f"{NS}rect"):
        if r.get("fill") not in ("none", None) and float(r.get("x")) > 0:
            x, y, w, h = (float(r.get(a)) for a in ("x", "y", "width", "height"))
            yield ("rect", x, y, w, h)
    for c in root.iter(f"{NS}circle"):
        if float(c.get("r")) > 5:  # not the dots of a branch
            yield ("circle", float(c.get("cx")), float(c.get("cy")), float(c.get("r")), 0)


def _on_border(px, py, target, tol=1.5):
    kind, a, b, c, d = target
    if kind == "circle":
        return abs(math.hypot(px - a, py - b) - c) < tol
    x, y, w, h = a, b, c, d
    on_x = x - tol <= px <= x + w + tol
    on_y = y - tol <= py <= y + h + tol
    return (on_x and (abs(py - y) < tol or abs(py - y - h) < tol)) or (
        on_y and (abs(px - x) < tol or abs(px - x - w) < tol)
    )


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
@pytest.mark.parametrize("sizes", SIZES, ids=["small", "large"])
def test_every_arrow_ends_at_a_box(kind, sizes):
    _, fig = draw(kind, sizes)
    root = parse(fig.svg)
    targets = list(_targets(root))
    ends = list(_arrow_ends(root))
    assert len(ends) >= 15
    loose = [(sym, x, y) for sym, x, y in ends if not any(_on_border(x, y, t) for t in targets)]
    assert not loose, f"arrows that end in the void: {loose}"


# --------------------------------------------------------------------------
# Shapes come from the forward pass
# --------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", SIZES, ids=["small", "large"])
def test_convs2s_labels_carry_the_shapes_of_the_forward_pass(sizes):
    model, fig = draw("convs2s", sizes)
    S, f, d, k = sizes["S"], sizes["embed_dim"], sizes["hidden_dim"], sizes["kernel_size"]
    T, V = S + 1, VOCAB + 3
    found = labels(parse(fig.svg))
    expected = {
        "x": f"(S) = {shape(S)}",
        "y": f"(T) = {shape(T)}",
        "e_j = w_j + p_j": f"(S, f) = {shape(S, f)}",
        "g_i = w_i + p_i": f"(T, f) = {shape(T, f)}",
        "Y = [A B]": f"(S, 2d) = {shape(S, 2 * d)}",
        "A": f"(T, d) = {shape(T, d)}",
        "σ(B)": f"(S, d) = {shape(S, d)}",
        "v = A ⊗ σ(B)": f"(T, d) = {shape(T, d)}",
        "keys z_j = z^u_j": f"(S, f) = {shape(S, f)}",
        "values z_j + e_j": f"(S, f) = {shape(S, f)}",
        "W_d h_i": f"(T, f) = {shape(T, f)}",
        "d_i = W_d h_i + b_d + g_i": f"(T, f) = {shape(T, f)}",
        "d_i · z_j": f"(T, S) = {shape(T, S)}",
        "a_ij": f"(T, S) = {shape(T, S)}",
        "c_i": f"(T, f) = {shape(T, f)}",
        "W_c c_i: the context enters": f"(T, d) = {shape(T, d)}",
        "logits": f"(T, V) = {shape(T, V)}",
    }
    for symbol, text in expected.items():
        assert any(text in label for label in found[symbol]), (symbol, found.get(symbol))
    # the padded inputs of the convolutions: (k-1)/2 zeros each side, k-1 on the left
    text = visible_text(parse(fig.svg))
    assert f"(S+k−1, d) = {shape(S + k - 1, d)}" in text
    assert f"(T+k−1, d) = {shape(T + k - 1, d)}" in text
    # the record agrees with a forward pass of the model's own modules
    with torch.no_grad():
        src, _ = example(S)
        e = model.encoder.embed(src)
    assert fig.shapes["e_j = w_j + p_j"] == tuple(e.shape[1:])


@pytest.mark.parametrize("sizes", SIZES, ids=["small", "large"])
def test_gru_labels_carry_the_shapes_of_the_forward_pass(sizes):
    _, fig = draw("gru", sizes)
    S, m, n, A = sizes["S"], sizes["embed_dim"], sizes["hidden_dim"], sizes["attention_dim"]
    T = S + 1
    found = labels(parse(fig.svg))
    expected = {
        "E x_j": f"(S, m) = {shape(S, m)}",
        "h_j = [→h_j; ←h_j]": f"(S, 2n) = {shape(S, 2 * n)}",
        "keys W_a h_j": f"(S, n') = {shape(S, A)}",
        "U_a s_t−1": f"(n') = {shape(A)}",
        "e_tj": f"(S) = {shape(S)}",
        "a_tj": f"(S) = {shape(S)}",
        "c_t": f"(2n) = {shape(2 * n)}",
        "E y_t−1": f"(m) = {shape(m)}",
        "s_t": f"(n) = {shape(n)}",
        "y": f"(T) = {shape(T)}",
    }
    for symbol, text in expected.items():
        assert any(text in label for label in found[symbol]), (symbol, found.get(symbol))
    text = visible_text(parse(fig.svg))
    assert f"(m+2n) = {shape(m + 2 * n)}" in text  # the GRU's input [E y_{t-1}; c_t]
    assert f"T = {T} steps" in text


def _points(line: ET.Element) -> list[tuple[float, ...]]:
    return [tuple(map(float, p.split(","))) for p in line.get("points").split()]


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_labels_stand_beside_their_vertical_arrows(kind):
    """A label anchored at its end stands left of its arrow, any other right of it."""
    _, fig = draw(kind, SIZES[0])
    checked = 0
    for g in groups(parse(fig.svg), "edge"):
        points = _points(g.find(f"{NS}polyline"))
        if len(points) != 2 or points[0][0] != points[1][0]:
            continue
        for label in g.iter(f"{NS}text"):
            x = float(label.get("x"))
            assert (x < points[0][0]) == (label.get("text-anchor") == "end"), g.get("data-symbol")
            checked += 1
    assert checked >= 10


def test_each_residual_comes_down_to_its_sum():
    _, fig = draw("convs2s", SIZES[0])
    root = parse(fig.svg)
    in_edges = {id(line) for g in groups(root, "edge") for line in g.iter(f"{NS}polyline")}
    plain = [_points(line) for line in root.iter(f"{NS}polyline") if id(line) not in in_edges]
    sums = [
        (float(c.get("cx")), float(c.get("cy")))
        for g in groups(root, "box")
        if g.get("data-name") == "⊕ residual"
        for c in g.iter(f"{NS}circle")
    ]
    assert len(sums) == 2  # the encoder's block and the decoder's
    for cx, cy in sums:  # a plain vertical line, left of the ⊕, down to its height
        assert any(len(p) == 2 and p[0][0] == p[1][0] < cx and p[1][1] == cy for p in plain)


def test_markup_lowers_subscripts_and_raises_superscripts():
    assert schematic._tspans("x_{t−1}", 10) == (
        '<tspan>x</tspan><tspan dy="3.0" font-size="7.2">t−1</tspan>'
    )
    # up for l, from there down below the line for i, back to the line for the rest
    assert schematic._tspans("h^l_i + 1", 10) == (
        '<tspan>h</tspan><tspan dy="-4.2" font-size="7.2">l</tspan>'
        '<tspan dy="7.2" font-size="7.2">i</tspan><tspan dy="-3.0"> + 1</tspan>'
    )


def test_a_symbol_that_disagrees_with_the_forward_pass_is_an_error():
    canvas = schematic._Canvas("t", {"S": 5, "f": 16})
    assert canvas.shape_text("e", ("S", "f"), torch.zeros(1, 5, 16)) == "(S, f) = (5, 16)"
    with pytest.raises(RuntimeError, match="would be wrong"):
        canvas.shape_text("e", ("S", "f"), torch.zeros(1, 6, 16))


# --------------------------------------------------------------------------
# What the figures show
# --------------------------------------------------------------------------


def test_convs2s_draws_every_box_of_figure_1():
    _, fig = draw("convs2s", SIZES[0])
    root = parse(fig.svg)
    names = box_names(root)
    for name in (
        "embedding",
        "input projection",
        "convolution",
        "causal convolution",
        "σ(B)",
        "⊗ (gated linear unit)",
        "⊕ residual",
        "output projection",
        "z + e",
        "W_d",
        "d_i = W_d h_i + b_d + g_i",
        "scores d_i · z_j",
        "softmax over j",
        "c_i = Σ_j a_ij (z_j + e_j)",
        "W_c",
        "⊕ W_c c_i",
        "× √0.5 (context)",
        "W_o",
        "softmax p(y_i+1)",
    ):
        assert name in names, name
    # √0.5 after both residuals (encoder block, decoder block) and after the context
    assert names.count("× √0.5") == 2 and names.count("⊕ residual") == 2
    assert names.count("σ(B)") == 2 and names.count("⊗ (gated linear unit)") == 2
    found = labels(root)
    for symbol in ("A", "B", "σ(B)", "W_c c_i: the context enters", "values z_j + e_j"):
        assert symbol in found, symbol
    text = visible_text(root)
    assert "× L" in text and "k−1 = 2 zeros on the left only" in text
    assert "(k−1)/2 = 1 zero on each side" in text


def test_gru_draws_the_attention_and_the_recurrence_back():
    _, fig = draw("gru", SIZES[1])
    root = parse(fig.svg)
    names = box_names(root)
    for name in (
        "bidirectional GRU",
        "W_a",
        "U_a",
        "e_tj = v_aᵀ tanh(W_a h_j + U_a s_t−1 + b_a)",
        "softmax over j",
        "c_t = Σ_j a_tj h_j",
        "decoder state s_t−1",
        "decoder GRU",
        "W_s",
    ):
        assert name in names, name
    # the recurrence: an arrow from s_t back up to the state s_{t-1}
    (loop,) = [g for g in groups(root, "edge") if g.get("data-symbol", "").startswith("s_t →")]
    points = [
        tuple(map(float, p.split(","))) for p in loop.find(f"{NS}polyline").get("points").split()
    ]
    assert points[-1][1] < points[0][1] - 200
    # both directions of the encoder, one cell per position (S = 7), chained by arrows
    text = visible_text(root)
    assert "forward →h" in text and "backward ←h" in text
    cells = [r for r in root.iter(f"{NS}rect") if r.get("width") == "28"]
    assert len(cells) == 2 * SIZES[1]["S"]
    # the forward row's arrows point right, the backward row's (below it) left
    rows: dict[float, set[bool]] = {}
    for g in groups(root, "edge"):
        points = _points(g.find(f"{NS}polyline"))
        if not g.get("data-symbol") and len(points) == 2 and points[0][1] == points[1][1]:
            if abs(points[1][0] - points[0][0]) < 30:  # between two cells
                rows.setdefault(points[0][1], set()).add(points[1][0] > points[0][0])
    assert [rows[y] for y in sorted(rows)] == [{True}, {False}]


# --------------------------------------------------------------------------
# The critical path
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("n_enc", "n_dec"), [(2, 3), (4, 4)])
@pytest.mark.parametrize(("S", "T"), [(5, 6), (11, 12)])
def test_critical_path_of_convs2s(n_enc, n_dec, S, T):
    model = tiny_model("convs2s", n_encoder_layers=n_enc, n_decoder_layers=n_dec)
    path = critical_path(model, S, T)
    assert path["training"]["count"] == n_enc + n_dec
    assert path["generation"]["count"] == n_enc + T * n_dec
    assert path["training"]["formula"] == "L_enc + L_dec"
    assert path["generation"]["formula"] == "L_enc + T·L_dec"
    assert path["generation"]["worked"] == f"{n_enc} + {T}·{n_dec} = {n_enc + T * n_dec}"


@pytest.mark.parametrize(("n_enc", "n_dec"), [(1, 1), (2, 3)])
@pytest.mark.parametrize(("S", "T"), [(5, 6), (11, 12)])
def test_critical_path_of_the_gru(n_enc, n_dec, S, T):
    model = tiny_model("gru", n_encoder_layers=n_enc, n_decoder_layers=n_dec)
    path = critical_path(model, S, T)
    for phase in ("training", "generation"):  # teacher forcing does not shorten it
        assert path[phase]["count"] == n_enc * S + n_dec * T
    if n_enc == n_dec == 1:
        assert path["training"]["formula"] == "S + T"
        assert path["training"]["worked"] == f"{S} + {T} = {S + T}"
    else:
        assert path["training"]["formula"] == "L_enc·S + L_dec·T"


def test_critical_path_of_the_hybrids_and_bad_arguments():
    conv_gru = tiny_model("conv+gru", n_encoder_layers=3, n_decoder_layers=2)
    assert critical_path(conv_gru, 5, 6)["training"]["count"] == 3 + 2 * 6
    gru_conv = tiny_model("gru+conv", n_encoder_layers=2, n_decoder_layers=3)
    path = critical_path(gru_conv, 5, 6)
    assert (path["training"]["count"], path["generation"]["count"]) == (2 * 5 + 3, 10 + 6 * 3)
    with pytest.raises(ValueError, match="S"):
        critical_path(conv_gru, 0, 6)
    with pytest.raises(TypeError):
        critical_path(torch.nn.Linear(2, 2), 5, 6)


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_the_figure_shows_the_critical_path_of_its_example(kind):
    model, fig = draw(kind, SIZES[1])
    S = SIZES[1]["S"]
    path = critical_path(model, S, S + 1)
    assert fig.critical_path == path
    text = visible_text(parse(fig.svg))
    for phase in ("training", "generation"):
        assert path[phase]["worked"] in text
    # the caption under the figure
    one_step = "; one decoder step's" if kind == "gru" else ""
    assert f"(S = {S}, T = {S + 1}{one_step}); the batch of 1 is left out" in text


# --------------------------------------------------------------------------
# The object a page shows
# --------------------------------------------------------------------------


def test_schematic_shows_in_a_notebook_and_saves(tmp_path):
    model, fig = draw("convs2s", SIZES[0])
    assert isinstance(fig, Schematic)
    page = fig._repr_html_()
    assert fig.svg in page and "background:#ffffff" in page
    assert fig._repr_svg_() == fig.svg
    assert len(repr(fig)) < 200
    parse(fig.save(tmp_path / "figure.svg").read_text(encoding="utf-8"))
    html = fig.save(tmp_path / "figure.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and fig.svg in html


def test_drawing_leaves_the_model_as_it_was():
    model = tiny_model("convs2s", dropout=0.2).train()
    src, tgt_in = example(5)
    first = convs2s_schematic(model, src, tgt_in)
    assert model.training and all(p.grad is None for p in model.parameters())
    assert convs2s_schematic(model, src, tgt_in).svg == first.svg  # eval mode: no dropout
    with pytest.raises(ValueError, match="batch of 1"):
        convs2s_schematic(model, src.repeat(2, 1), tgt_in.repeat(2, 1))
    with pytest.raises(TypeError):
        gru_schematic(model, src, tgt_in)


def test_convs2s_without_position_tables_says_so():
    model = tiny_model("convs2s", source_positions=False, target_positions=False)
    found = labels(parse(convs2s_schematic(model, *example(5)).svg))
    assert "e_j = w_j (no positions)" in found and "g_i = w_i (no positions)" in found


def test_convs2s_with_attention_in_one_layer_only():
    model = tiny_model("convs2s", n_decoder_layers=3, attention_layers=(2,))
    fig = convs2s_schematic(model, *example(5))
    assert "attention in (2,)" in visible_text(parse(fig.svg))


def test_the_readme_figure_is_todays_trace_of_the_seed_model():
    """``docs/_static/convs2s_figure1.svg`` (the README's figure) is what the schematic draws
    of the seed's ConvS2S, with the paper's normalisation, on one sorting example: every
    label is a shape, so a change to the model or to the drawing shows here."""
    from pathlib import Path

    from convs2s_edu import ConvS2S, ConvS2SConfig, sos_index

    committed = Path(__file__).resolve().parents[1] / "docs" / "_static" / "convs2s_figure1.svg"
    torch.manual_seed(0)
    model = ConvS2S(ConvS2SConfig.paper())
    svg = convs2s_schematic(model, [[5, 3, 9, 1, 3]], [[sos_index(50), 1, 3, 3, 5, 9]]).svg
    assert committed.read_text(encoding="utf-8") == svg, (
        "regenerate the README's figure: write this test's `svg` to " + str(committed)
    )
