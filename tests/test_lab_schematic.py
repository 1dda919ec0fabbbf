"""Tests of ``convs2s_edu.lab.schematic``: Figure 1 of ConvS2S and of the GRU baseline drawn
with matplotlib (shapes read from a forward pass, every box of the paper's figure, arrows that
end at boxes, readable text), the generic :func:`module_schematic`, the critical path, and the
object a page shows."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import torch
from _tiny import VOCAB, tiny_model
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.patches import BoxStyle, FancyArrowPatch
from torch import nn

from convs2s_edu import collate_batch
from convs2s_edu.data import n_token_ids
from convs2s_edu.lab import schematic
from convs2s_edu.lab.schematic import (
    Schematic,
    convs2s_schematic,
    critical_path,
    gru_schematic,
    module_schematic,
)
from convs2s_edu.lab.site import record_svg
from convs2s_edu.seq2seq import Decoder, Encoder, EncoderDecoder, EncoderOut

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


def patches(fig: Schematic) -> list:
    """The figure's patches: arrows, frames, dots, and the boxes drawn around texts (a box is
    its text's ``bbox``) in the order they were made."""
    ax = fig.figure.axes[0]
    return ax.patches + [t.get_bbox_patch() for t in ax.texts if t.get_bbox_patch()]


def gids(fig: Schematic, kind: str) -> list[str]:
    """The ids (``gid``) of the figure's boxes or arrows, without ``box:`` / ``arrow:`` and a
    repeat's ``#n``."""
    found = [a.get_gid() for a in patches(fig) if a.get_gid()]
    return [g.split(":", 1)[1].split("#")[0] for g in found if g.startswith(kind + ":")]


def labels(fig: Schematic) -> dict[str, list[str]]:
    """Every labelled arrow: its symbol -> the shapes (``"5,16"``) of the arrows with it."""
    found: dict[str, list[str]] = {}
    for gid in gids(fig, "arrow"):
        symbol, shape = gid.rsplit(":", 1)
        found.setdefault(symbol, []).append(shape)
    return found


def visible_text(fig: Schematic) -> str:
    return "\n".join(t.get_text() for t in fig.figure.axes[0].texts)


def polyline(arrow: FancyArrowPatch, display: bool = False):
    """The points of an arrow's line (its head left out), in inches or display pixels; the
    line stops where the head's tip meets the box it points at."""
    path = arrow.get_path()
    end = next((i for i, code in enumerate(path.codes) if i and code == path.MOVETO), None)
    points = path.vertices[:end]
    return arrow.get_transform().transform(points) if display else points


def shape(*sizes) -> str:
    return ",".join(str(n) for n in sizes)


# --------------------------------------------------------------------------
# The SVG and the figure
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_the_svg_is_white_titled_and_has_the_ids_of_boxes_and_arrows(kind):
    _, fig = draw(kind, SIZES[0])
    root = ET.fromstring(fig.svg)
    assert root.tag == f"{NS}svg" and root.get("role") == "img"
    assert record_svg("test", fig.svg) is None  # the landing page accepts it (not recorded)
    # a title and a description first, for screen readers
    title, desc = list(root)[:2]
    assert title.tag == f"{NS}title" and title.text == fig.title
    assert desc.tag == f"{NS}desc" and "Boxes:" in desc.text
    # the figure's background, drawn first, is white: readable on the site's dark theme
    background = root.find(f".//{NS}g[@id='patch_1']/{NS}path")
    assert "fill: #ffffff" in background.get("style")
    assert root.find(f".//{NS}image") is None  # nothing external
    # every box and every arrow of the figure is an element with its id
    ids = {g.get("id") for g in root.iter(f"{NS}g")}
    drawn = [a.get_gid() for a in patches(fig) if a.get_gid()]
    assert len(drawn) >= 40 and set(drawn) <= ids and len(set(drawn)) == len(drawn)


def _box_outlines(fig):
    """The boxes (rectangles, circles) of the figure in display coordinates."""
    for p in patches(fig):
        if (p.get_gid() or "").startswith("box:"):
            yield p, p.get_window_extent()


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
@pytest.mark.parametrize("sizes", SIZES, ids=["small", "large"])
def test_every_arrow_ends_at_a_box(kind, sizes):
    _, fig = draw(kind, sizes)
    FigureCanvasAgg(fig.figure).draw()
    boxes = list(_box_outlines(fig))
    ends = []
    for p in fig.figure.axes[0].patches:
        if isinstance(p, FancyArrowPatch) and p.get_arrowstyle().__class__.__name__ != "Curve":
            ends.append((p.get_gid(), *polyline(p, display=True)[-1]))
    assert len(ends) >= 20

    def on_border(x, y, patch, box, tol=5.0):  # px; matplotlib stops a line 2-4 px short
        if isinstance(patch.get_boxstyle(), BoxStyle.Circle):
            cx, cy = box.x0 + box.width / 2, box.y0 + box.height / 2
            return abs(((x - cx) ** 2 + (y - cy) ** 2) ** 0.5 - box.width / 2) < tol
        inside = box.x0 - tol <= x <= box.x1 + tol and box.y0 - tol <= y <= box.y1 + tol
        edges = (box.x0, box.x1, x), (box.y0, box.y1, y)
        return inside and any(abs(v - a) < tol or abs(v - b) < tol for a, b, v in edges)

    loose = [g for g, x, y in ends if not any(on_border(x, y, p, b) for p, b in boxes)]
    assert not loose, f"arrows that end in the void: {loose}"


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_text_is_readable_at_the_page_width_and_nothing_overlaps(kind):
    _, fig = draw(kind, {**SIZES[1], "S": 9})  # S = 9: the GRU's cells with an ellipsis
    figure = fig.figure
    renderer = FigureCanvasAgg(figure).get_renderer()
    texts = [t for t in figure.axes[0].texts if t.get_text()]
    px_per_pt = 900 / (72 * figure.get_figwidth())  # the page shows it 900 px wide
    small = [t.get_text() for t in texts if t.get_fontsize() * px_per_pt < 9]
    assert not small, small
    extents = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    crowded = [
        (a, b)
        for i, (a, box_a) in enumerate(extents)
        for b, box_b in extents[i + 1 :]
        if min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0) > 1
        and min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0) > 1
    ]
    assert not crowded, crowded


# --------------------------------------------------------------------------
# Shapes come from the forward pass
# --------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", SIZES, ids=["small", "large"])
def test_convs2s_labels_carry_the_shapes_of_the_forward_pass(sizes):
    model, fig = draw("convs2s", sizes)
    S, f, d, k = sizes["S"], sizes["embed_dim"], sizes["hidden_dim"], sizes["kernel_size"]
    T, V = S + 1, n_token_ids(VOCAB)
    found = labels(fig)
    expected = {
        "x": shape(S),
        "y": shape(T),
        "e_j = w_j + p_j": shape(S, f),
        "g_i = w_i + p_i": shape(T, f),
        "Y = [A B]": shape(T, 2 * d),
        "A": shape(S, d),
        "σ(B)": shape(T, d),
        "v = A ⊗ σ(B)": shape(S, d),
        "keys z_j = z^u_j": shape(S, f),
        "values z_j + e_j": shape(S, f),
        "W_d h_i": shape(T, f),
        "d_i = W_d h_i + b_d + g_i": shape(T, f),
        "d_i · z_j": shape(T, S),
        "a_ij": shape(T, S),
        "c_i": shape(T, f),
        "W_c c_i: the context enters": shape(T, d),
        "h^L_i": shape(T, d),
        "logits": shape(T, V),
    }
    for symbol, sizes_drawn in expected.items():
        assert sizes_drawn in found[symbol], (symbol, found.get(symbol))
    # the labels a reader sees: symbols and sizes; the padded inputs of the convolutions
    text = visible_text(fig)
    assert f"(S, f) = ({S}, {f})" in text and f"(T, V) = ({T}, {V})" in text
    assert f"(S+k−1, d) = ({S + k - 1}, {d})" in text
    assert f"(T+k−1, d) = ({T + k - 1}, {d})" in text
    # the record agrees with a forward pass of the model's own modules
    with torch.no_grad():
        e = model.encoder.embed(example(S)[0])
    assert fig.shapes["e_j = w_j + p_j"] == tuple(e.shape[1:])


@pytest.mark.parametrize("sizes", SIZES, ids=["small", "large"])
def test_gru_labels_carry_the_shapes_of_the_forward_pass(sizes):
    _, fig = draw("gru", sizes)
    S, m, n, A = sizes["S"], sizes["embed_dim"], sizes["hidden_dim"], sizes["attention_dim"]
    T = S + 1
    found = labels(fig)
    expected = {
        "E x_j": shape(S, m),
        "h_j = [→h_j; ←h_j]": shape(S, 2 * n),
        "←h_1 (the backward GRU's last state)": shape(n),
        "keys W_a h_j": shape(S, A),
        "U_a s_t−1": shape(A),
        "e_tj": shape(S),
        "a_tj": shape(S),
        "c_t": shape(2 * n),
        "values h_j": shape(S, 2 * n),
        "E y_t−1": shape(m),
        "s_t": shape(n),
        "y": shape(T),
    }
    for symbol, sizes_drawn in expected.items():
        assert sizes_drawn in found[symbol], (symbol, found.get(symbol))
    text = visible_text(fig)
    assert f"(m+2n) = ({m + 2 * n})" in text  # the GRU's input [E y_{t-1}; c_t]
    assert f"T = {T} steps" in text


def test_each_residual_comes_down_to_its_sum():
    _, fig = draw("convs2s", SIZES[0])
    boxes = {t.get_bbox_patch(): t for t in fig.figure.axes[0].texts if t.get_bbox_patch()}
    residual = "box:⊕ residual"
    sums = [t.get_position() for p, t in boxes.items() if str(p.get_gid()).startswith(residual)]
    assert len(sums) == 2  # the encoder's block and the decoder's
    arrows = [polyline(p) for p in patches(fig) if isinstance(p, FancyArrowPatch)]
    for cx, cy in sums:  # an arrow down a line left of the ⊕, then into it from the left
        assert any(
            len(v) == 4
            and abs(v[1][0] - v[2][0]) < 1e-6
            and v[1][0] < cx - 1
            and abs(v[-1][1] - cy) < 1e-6
            and v[-1][0] < cx
            for v in arrows
        )


def test_a_symbol_that_disagrees_with_the_forward_pass_is_an_error():
    drawing = schematic._Drawing({"S": 5, "f": 16})
    assert drawing.shape("e", "S f", torch.zeros(1, 5, 16)) == "(S, f) = (5, 16)"
    with pytest.raises(RuntimeError, match="would be wrong"):
        drawing.shape("e", ("S", "f"), torch.zeros(1, 6, 16))


# --------------------------------------------------------------------------
# What the figures show
# --------------------------------------------------------------------------


def test_convs2s_draws_every_box_of_figure_1():
    _, fig = draw("convs2s", SIZES[0])
    names = gids(fig, "box")
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
        "critical path",
    ):
        assert name in names, name
    # √0.5 after both residuals (encoder block, decoder block) and after the context
    assert names.count("× √0.5") == 2 and names.count("⊕ residual") == 2
    assert names.count("σ(B)") == 2 and names.count("⊗ (gated linear unit)") == 2
    for symbol in ("A", "B", "σ(B)", "W_c c_i: the context enters", "values z_j + e_j"):
        assert symbol in labels(fig), symbol
    text = visible_text(fig)
    assert "× $L_{enc}$ = 2" in text and "k−1 = 2 zeros on the left only" in text
    assert "(k−1)/2 = 1 zero on each side" in text


def test_gru_draws_the_attention_and_the_recurrence_back():
    _, fig = draw("gru", SIZES[1])
    names = gids(fig, "box")
    for name in (
        "bidirectional GRU",
        "W_a",
        "U_a",
        "e_tj = v_a^T tanh(W_a h_j + U_a s_t−1 + b_a)",
        "softmax over j",
        "c_t = Σ_j a_tj h_j",
        "decoder state s_t−1",
        "decoder GRU",
        "W_s",
    ):
        assert name in names, name
    # the recurrence: an arrow from s_t back up to the state s_{t-1}
    patches = fig.figure.axes[0].patches
    (loop,) = [
        p for p in patches if (p.get_gid() or "").startswith("arrow:next step: s_t becomes")
    ]
    points = polyline(loop)
    assert points[-1][1] < points[0][1] - 2  # inches, y down
    # both directions of the encoder, one cell per position (S = 7), chained by arrows
    assert sum("cell" in name for name in names) == 2 * SIZES[1]["S"]
    text = visible_text(fig)
    assert "forward $→h_j$" in text and "backward $←h_j$" in text
    # the forward row's arrows point right, the backward row's (below it) left
    rows: dict[float, set[bool]] = {}
    for p in patches:
        v = polyline(p) if isinstance(p, FancyArrowPatch) else None
        if v is not None and len(v) == 2 and abs(v[0][1] - v[1][1]) < 1e-6:
            if abs(v[1][0] - v[0][0]) < 0.3:  # between two cells
                rows.setdefault(round(v[0][1], 3), set()).add(v[1][0] > v[0][0])
    assert [rows[y] for y in sorted(rows)] == [{True}, {False}]


# --------------------------------------------------------------------------
# Any encoder-decoder
# --------------------------------------------------------------------------


class _MeanEncoder(Encoder):
    """Embeddings, and their mean as the summary."""

    def __init__(self, dim: int):
        super().__init__()
        self.out_dim = self.embed_dim = self.summary_dim = dim
        self.embed = nn.Embedding(n_token_ids(VOCAB), dim)

    def forward(self, src):
        e = self.embed(src)
        return EncoderOut(states=e, embedded=e, padding_mask=src.eq(0), summary=e.mean(1))


class _BagDecoder(Decoder):
    """Each target embedding plus the source summary, to the vocabulary (teacher forcing only)."""

    multi_step = False

    def __init__(self, dim: int):
        super().__init__()
        self.in_dim = dim
        self.embed, self.out = nn.Embedding(n_token_ids(VOCAB), dim), nn.Linear(dim, VOCAB + 3)

    def forward(self, tgt_in, enc):
        h = self.embed(tgt_in) + enc.summary.unsqueeze(1)
        return self.out(h), torch.zeros(h.shape[0], 1, h.shape[1], enc.states.shape[1])


class _NewModel(EncoderDecoder):
    """A model class of its own: its forward normalises the source summary in between."""

    def __init__(self, dim: int = 6):
        super().__init__(_MeanEncoder(dim), _BagDecoder(dim), vocab_size=VOCAB, max_positions=20)
        self.norm = nn.LayerNorm(dim)

    def forward(self, src, tgt_in, return_attention=False, *, check=True):
        enc = self.encoder(src)
        enc = enc._replace(summary=self.norm(enc.summary))
        return self.decoder(tgt_in, enc)[0]


def test_module_schematic_draws_any_encoder_decoder_in_call_order():
    src, tgt_in = example(5)
    fig = module_schematic(_NewModel(), src, tgt_in)
    assert gids(fig, "box") == ["input", "encoder", "norm", "decoder", "output"]
    assert "encoder: _MeanEncoder" in visible_text(fig)
    assert fig.critical_path is None  # no formula for its parts
    assert fig.shapes["src"] == (5,) and fig.shapes["encoder.states"] == (5, 6)
    assert fig.shapes["norm"] == (6,) and fig.shapes["decoder[0]"] == (6, VOCAB + 3)
    assert labels(fig)["norm"] == ["6"]  # the arrow out of norm: its output's shape
    ET.fromstring(fig.svg)


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_module_schematic_of_the_two_models(kind):
    model = tiny_model(kind, embed_dim=16, hidden_dim=20)
    fig = module_schematic(model, *example(5))
    assert gids(fig, "box") == ["input", "encoder", "decoder", "output"]
    dim = 16 if kind == "convs2s" else 2 * 20  # z_j (f) or h_j (2n)
    assert fig.shapes["encoder.states"] == (5, dim)
    assert fig.shapes["decoder[0]"] == (6, n_token_ids(VOCAB))
    assert fig.critical_path == critical_path(model, 5, 6)
    with pytest.raises(TypeError):
        module_schematic(nn.Linear(2, 2), *example(5))


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
    assert path["generation"]["worked"] == "2·5 + 6·3 = 28"
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
    text = visible_text(fig)
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
    ET.fromstring(fig.save(tmp_path / "figure.svg").read_text(encoding="utf-8"))
    html = fig.save(tmp_path / "figure.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and fig.svg in html
    assert fig.save(tmp_path / "figure.png").read_bytes()[:4] == b"\x89PNG"


def test_drawing_leaves_the_model_as_it_was():
    model = tiny_model("convs2s", dropout=0.2).train()
    src, tgt_in = example(5)
    first = convs2s_schematic(model, src, tgt_in)
    assert model.training and all(p.grad is None for p in model.parameters())
    assert convs2s_schematic(model, src, tgt_in).svg == first.svg  # eval mode; no random ids
    with pytest.raises(ValueError, match="batch of 1"):
        convs2s_schematic(model, src.repeat(2, 1), tgt_in.repeat(2, 1))
    with pytest.raises(TypeError):
        gru_schematic(model, src, tgt_in)


def test_convs2s_without_position_tables_says_so():
    model = tiny_model("convs2s", source_positions=False, target_positions=False)
    found = labels(convs2s_schematic(model, *example(5)))
    assert "e_j = w_j (no positions)" in found and "g_i = w_i (no positions)" in found


def test_convs2s_with_attention_in_one_layer_only():
    model = tiny_model("convs2s", n_decoder_layers=3, attention_layers=(2,))
    fig = convs2s_schematic(model, *example(5))
    assert "attention in (2,)" in visible_text(fig)


def test_the_readme_figure_is_todays_trace_of_the_seed_model():
    """``docs/_static/convs2s_figure1.svg`` (the README's figure) is what the schematic draws
    of the original notebook's ConvS2S, with the paper's normalisation, on one sorting
    example: its boxes and arrows, each arrow's id with its shape, are today's (the
    glyphs' paths may differ between matplotlib versions, so the text is not compared)."""
    from pathlib import Path

    from convs2s_edu import ConvS2S, ConvS2SConfig, sos_index

    committed = Path(__file__).resolve().parents[1] / "docs" / "_static" / "convs2s_figure1.svg"
    torch.manual_seed(0)
    model = ConvS2S(ConvS2SConfig.paper())
    svg = convs2s_schematic(model, [[5, 3, 9, 1, 3]], [[sos_index(50), 1, 3, 3, 5, 9]]).svg

    def drawn(text):
        found = [g.get("id", "") for g in ET.fromstring(text).iter(f"{NS}g")]
        return [i for i in found if i.startswith(("box:", "arrow:"))]

    assert drawn(committed.read_text(encoding="utf-8")) == drawn(svg), (
        "regenerate the README's figure: write this test's `svg` to " + str(committed)
    )


def test_boxes_stand_in_columns_sized_to_their_text_and_arrows_join_them():
    """A box goes one labelled arrow below the box drawn last on its axis (or level with
    another), as wide as its text; an arrow is straight, bends once (down then across, across
    then down) or runs along a lane, from border to border."""
    drawing = schematic._Drawing({"S": 5})
    drawing.box("a", None, 2.0)  # a column's first box: its top 0.5 in from the top
    drawing.box("b", "a longer text", 2.0, into=("x", "S", torch.zeros(1, 5)))
    drawing.box("c", None, 6.0, level="b")
    drawing.arrow("a", "c", via="vh")
    drawing.arrow("a", "c", via="hv")
    drawing.arrow("b", "a", via=0.5)
    a, b, c = (drawing.nodes[name] for name in "abc")
    assert a.y - a.hh == pytest.approx(0.5) and b.hw > 2 * a.hw
    assert b.y - b.hh == pytest.approx(a.bottom + 0.62) and c.y == b.y
    expected = [  # in inches, from border to border (a head stops its line ~0.01 short)
        [(2.0, a.bottom), (2.0, b.y - b.hh)],
        [(2.0, a.bottom), (2.0, c.y), (6.0 - c.hw, c.y)],
        [(2.0 + a.hw, a.y), (6.0, a.y), (6.0, c.y - c.hh)],
        [(2.0 - b.hw, b.y), (0.5, b.y), (0.5, a.y), (2.0 - a.hw, a.y)],
    ]
    for arrow, points in zip(drawing.ax.patches, expected, strict=True):
        assert polyline(arrow).tolist() == [pytest.approx(p, abs=0.02) for p in points]
    assert drawing.shapes == {"x": (5,)}
    fig = drawing.done(3, "t", None)
    assert gids(fig, "arrow")[0] == "x:5" and gids(fig, "box") == ["a", "b", "c"]
    # each box drawn is where the layout put it: the size of its node
    FigureCanvasAgg(fig.figure).draw()
    boxes = [p for p in patches(fig) if (p.get_gid() or "").startswith("box:")]
    for box, node in zip(boxes, (a, b, c), strict=True):
        extent = box.get_window_extent().size / fig.figure.dpi / 2
        assert extent.tolist() == [pytest.approx(n, abs=0.01) for n in (node.hw, node.hh)]
