r"""Schematic Figure 1 of both models: boxes for operations, arrows for tensors, in plain SVG.

:func:`convs2s_schematic` draws the convolutional model the way Figure 1 of Gehring et al. (2017)
[1]_ does: embeddings, a convolution whose output splits into the two halves :math:`A` and
:math:`B` of a gated linear unit, the residual scaled by :math:`\sqrt{0.5}`, the keys :math:`z_j`
and values :math:`z_j + e_j`, and, in every decoder layer, the attention whose context
:math:`W_c c_i` is added to the decoder state. :func:`gru_schematic` draws the recurrent baseline
(Bahdanau et al., 2015 [2]_): a bidirectional GRU, an additive attention and a decoder state that
feeds back into the next step.

Nothing about a shape is typed by hand: each function runs one forward pass of the model it is
given on one example, records what the modules computed with
:func:`~convs2s_edu.lab.figures.capture`, and labels every arrow with the paper's symbol and the
shape of the tensor that flowed there, e.g. ``e_j = w_j + p_j  (S, f) = (6, 128)`` (the batch of
one left out). Beside each diagram, :func:`critical_path`: how many operations of that example must
run one after another, in training and in generation.

The SVG is built as text (no plotting library): a white background, so that it stays readable in
the site's dark theme, a ``viewBox`` and ``width="100%"`` so that it scales to the page, a
``<title>`` and ``<desc>`` for screen readers, and a ``<title>`` (tooltip) on every box and arrow.
Every arrow is a ``<g class="edge">`` with ``data-symbol`` and ``data-shape``, every box a
``<g class="box">`` with ``data-name``, for programs that read the figure.

References
----------
.. [1] J. Gehring, M. Auli, D. Grangier, D. Yarats, Y. N. Dauphin.
   "Convolutional Sequence to Sequence Learning." ICML 2017. arXiv:1705.03122.
.. [2] D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly
   Learning to Align and Translate." ICLR 2015. arXiv:1409.0473.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import torch
import torch.nn.functional as F

from .._checks import check_int
from ..convs2s import SQRT_HALF, ConvDecoder, ConvEncoder, ConvS2S
from ..decode import _inference
from ..rnn import GRUDecoder, GRUEncoder, RNNSeq2Seq
from .figures import capture

__all__ = ["Schematic", "critical_path", "convs2s_schematic", "gru_schematic"]

# ---- Style: dark ink on white, one accent colour for the path the context takes ----

_FONT = "DejaVu Sans, Arial, sans-serif"
_WIDTH = 1000  # viewBox width; the figure scales to the page (width="100%")
_INK = "#1a1a1a"
_MUTED = "#555555"
_ACCENT = "#b34700"  # where the context enters / the recurrence
_FILL = dict(
    io="#f2f2f2", enc="#e6effa", dec="#e8f4e1", att="#fdefd9", op="#ffffff", note="#fafafa"
)
_BOX_FONT = 14
_LABEL_FONT = 12.5
_MARKUP = re.compile(r"([_^])(\{[^}]*\}|.)")


def _plain(markup: str) -> str:
    """``s_{t−1}`` -> ``s_t−1``: the text of a label without its sub/superscript braces."""
    return markup.replace("{", "").replace("}", "")


def _markup(plain: str) -> str:
    """The layer counts of a formula as markup: ``L_enc`` -> ``L_{enc}``."""
    return plain.replace("L_enc", "L_{enc}").replace("L_dec", "L_{dec}")


def _tspans(markup: str, size: float) -> str:
    """SVG ``<tspan>``\\ s for ``markup``: ``x_j`` / ``x_{t−1}`` subscript, ``h^l`` superscript."""
    parts = _MARKUP.split(markup)  # text, then per mark: "_" or "^", what it marks, text
    segments = [(parts[0], 0.0)]
    for mark, body, text in zip(parts[1::3], parts[2::3], parts[3::3]):
        body = body[1:-1] if body.startswith("{") else body
        segments += [(body, 0.3 if mark == "_" else -0.42), (text, 0.0)]
    out, level = [], 0.0
    for text, target in (seg for seg in segments if seg[0] or seg[1]):  # no empty plain text
        attrs = ""
        if target != level:
            attrs += f' dy="{(target - level) * size:.1f}"'
        if target:
            attrs += f' font-size="{0.72 * size:.1f}"'
        out.append(f"<tspan{attrs}>{html.escape(text, quote=False)}</tspan>")
        level = target
    return "".join(out)


def _text(x, y, markup, size, anchor="start", color=_INK, bold=False, halo=True) -> str:
    """A ``<text>`` element of one line of markup (see :func:`_tspans`)."""
    weight = ' font-weight="bold"' if bold else ""
    outline = ' stroke="#ffffff" stroke-width="3" paint-order="stroke"' if halo else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f'fill="{color}"{weight}{outline}>{_tspans(markup, size)}</text>'
    )


def _dims(t: torch.Tensor) -> tuple:
    """The shape of a batch-of-one tensor without its batch dimension."""
    return tuple(int(n) for n in t.shape[1:])


class _Canvas:
    """Boxes, operator circles and labelled arrows, collected as SVG text."""

    def __init__(self, key: str, env: dict):
        self.key = key  # prefix of the marker ids
        self.env = env  # shape symbol -> size, from the model's config and the example
        self.items: list[str] = []
        self.shapes: dict[str, tuple] = {}

    # -- primitives --------------------------------------------------------

    def text(
        self, x, y, markup, *, size=_LABEL_FONT, anchor="start", color=_INK, bold=False, halo=True
    ):
        """A line of ``markup``; ``halo``: a white outline that keeps it legible over lines."""
        self.items.append(_text(x, y, markup, size, anchor, color, bold, halo))

    def box(
        self, name, cx, y, w, h, lines=None, *, fill="op", stroke=_INK, size=_BOX_FONT, bold=0
    ):
        """A rectangle centred on ``cx`` from ``y`` to ``y + h``; ``lines`` of markup inside
        (default: the name). Returns ``(left, top, right, bottom)``."""
        x = cx - w / 2
        lines = [name] if lines is None else lines
        n = len(lines)
        name = _plain(name)
        parts = [
            f'<g class="box" data-name="{html.escape(name)}">'
            f"<title>{html.escape(name)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="6" '
            f'fill="{_FILL[fill]}" stroke="{stroke}" stroke-width="1.4"/>'
        ]
        for i, line in enumerate(lines):
            s = size if i < bold or i == 0 else size - 1.5
            ty = y + h / 2 + (i - (n - 1) / 2) * (size + 3) + 0.35 * s
            weight = ' font-weight="bold"' if i < bold else ""
            parts.append(
                f'<text x="{cx:.1f}" y="{ty:.1f}" font-size="{s}" text-anchor="middle" '
                f'fill="{_INK}"{weight}>{_tspans(line, s)}</text>'
            )
        parts.append("</g>")
        self.items.append("".join(parts))
        return (x, y, x + w, y + h)

    def op(self, name, cx, cy, symbol, *, r=15, fill="op"):
        """A circle with ``symbol`` (⊕, ⊗) centred on ``(cx, cy)``."""
        name = _plain(name)
        self.items.append(
            f'<g class="box" data-name="{html.escape(name)}"><title>{html.escape(name)}</title>'
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r}" fill="{_FILL[fill]}" stroke="{_INK}" '
            f'stroke-width="1.4"/><text x="{cx:.1f}" y="{cy + 7:.1f}" font-size="22" '
            f'text-anchor="middle" fill="{_INK}">{symbol}</text></g>'
        )

    def dot(self, x, y, color=_INK):
        self.items.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.2" fill="{color}"/>')

    def line(self, points):
        """A plain line along ``points``: no arrowhead, no label (a branch, a residual)."""
        pts = " ".join(f"{x},{y}" for x, y in points)
        self.items.append(
            f'<polyline points="{pts}" fill="none" stroke="{_INK}" stroke-width="1.6"/>'
        )

    def frame(self, x, y, w, h, label, *, at, anchor="start"):
        """A dashed rectangle around what repeats, with its label (``× L``) at ``at``."""
        self.items.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="10" '
            f'fill="none" stroke="{_MUTED}" stroke-width="1.3" stroke-dasharray="7 5"/>'
        )
        self.text(*at, label, size=_BOX_FONT, anchor=anchor, color=_MUTED, bold=True)

    def edge(
        self,
        points,
        symbol=None,
        dims=None,
        tensor=None,
        *,
        at=None,
        anchor="start",
        color=_INK,
        width=1.6,
        head=True,
        one_line=False,
    ):
        """An arrow along ``points`` for a tensor, labelled at ``at`` with ``symbol`` and
        ``(dims) = (shape of tensor)``.

        ``dims`` are the symbols of the tensor's sizes (``("S", "f")``); each must equal the
        recorded size, so that a symbol can never disagree with what the model computed.
        """
        shape_text, data = None, ""
        if symbol is not None:
            data += f' data-symbol="{html.escape(_plain(symbol))}"'
        if tensor is not None:
            shape_text = self.shape_text(symbol or "?", dims, tensor)
            data += f' data-shape="{",".join(str(n) for n in _dims(tensor))}"'
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        marker = f' marker-end="url(#{self.key}-{"accent" if color == _ACCENT else "ink"})"'
        title = _plain((symbol or "") + (f": {shape_text}" if shape_text else ""))
        lines = [] if at is None else [s for s in (symbol, shape_text) if s]
        if one_line and len(lines) == 2:
            lines = [f"{symbol}  {shape_text}"]
        labels = "".join(
            _text(at[0], at[1] + i * (_LABEL_FONT + 3), line, _LABEL_FONT, anchor, color)
            for i, line in enumerate(lines)
        )
        self.items.append(
            f'<g class="edge"{data}><title>{html.escape(title)}</title>'
            f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="{width}" '
            f'stroke-linejoin="round"{marker if head else ""}/>{labels}</g>'
        )

    def down(self, x, y0, y1, symbol=None, dims=None, tensor=None, *, dy=22, dx=10, **kw):
        """:meth:`edge` straight down from ``(x, y0)`` to ``(x, y1)``, labelled ``dy`` below its
        start and ``dx`` to its right (to its left with ``anchor="end"``). Returns ``y1``."""
        dx = -dx if kw.get("anchor") == "end" else dx
        self.edge([(x, y0), (x, y1)], symbol, dims, tensor, at=(x + dx, y0 + dy), **kw)
        return y1

    def shape_text(self, symbol, dims, tensor) -> str:
        """``"(S, f) = (6, 128)"`` for ``tensor``, checked against ``dims`` and recorded under
        ``symbol``. Raises ``RuntimeError`` where a symbol's size is not the tensor's."""
        shape = _dims(tensor)
        if len(dims) != len(shape):
            raise ValueError(f"{_plain(symbol)}: {len(shape)} sizes {shape}, symbols {dims}")
        for sym, n in zip(dims, shape):
            if self.env[sym] != n:
                raise RuntimeError(
                    f"{_plain(symbol)}: size {_plain(sym)} = {self.env[sym]} expected, the "
                    f"forward pass gave {n} (shape {shape}): the schematic would be wrong"
                )
        self.shapes[_plain(symbol)] = shape
        return f"({', '.join(dims)}) = ({', '.join(str(n) for n in shape)})"

    # -- the document ------------------------------------------------------

    def render(self, height: float, title: str, desc: str) -> str:
        k = self.key
        markers = "".join(
            f'<marker id="{k}-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
            f'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>'
            for name, color in (("ink", _INK), ("accent", _ACCENT))
        )
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_WIDTH} {height:.0f}" '
            f'width="100%" role="img" aria-labelledby="{k}-title {k}-desc" '
            f'font-family="{_FONT}" style="max-width:{_WIDTH}px;height:auto;'
            f'background:#ffffff">'
            f'<title id="{k}-title">{html.escape(title)}</title>'
            f'<desc id="{k}-desc">{html.escape(desc)}</desc>'
            f"<defs>{markers}</defs>"
            f'<rect x="0" y="0" width="{_WIDTH}" height="{height:.0f}" fill="#ffffff"/>'
            + "".join(self.items)
            + "</svg>"
        )


# ---- The object a page shows ---------------------------------------------


class Schematic:
    """A drawn schematic: the SVG text, the shapes on its arrows and the critical path.

    A notebook cell or a sphinx-gallery code block that ends with a :class:`Schematic`
    shows the figure (its ``_repr_html_`` and ``_repr_svg_``). The parameters are kept as
    attributes of the same names.

    Parameters
    ----------
    svg : str
        The figure, a complete ``<svg>`` element.
    title : str
        What it shows, in words (also the SVG's ``<title>``).
    shapes : dict of str to tuple of int
        Each labelled arrow's symbol and the shape that flowed there (batch left out).
    critical_path : dict
        :func:`critical_path` of the model on the example.
    """

    def __init__(self, svg: str, title: str, shapes: dict, critical_path: dict):
        self.svg, self.title, self.shapes = svg, title, dict(shapes)
        self.critical_path = critical_path

    def __repr__(self) -> str:
        return f"Schematic({self.title!r}, {len(self.shapes)} labelled tensors)"

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        # a white block even where the page is dark; the SVG scales to the block's width
        return (
            f'<div class="convs2s-schematic" style="background:#ffffff;max-width:{_WIDTH}px;'
            f'margin:0.5em 0;padding:4px;border-radius:4px">{self.svg}</div>'
        )

    def save(self, path) -> Path:
        """Write the figure to a file.

        Parameters
        ----------
        path : str or Path
            A ``.html`` (or ``.htm``) file gets a page around the SVG (for a browser or a
            screenshot); any other suffix gets the SVG itself, with its XML declaration.

        Returns
        -------
        Path
            ``path``.
        """
        path = Path(path)
        if path.suffix.lower() in (".html", ".htm"):
            text = (
                '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{html.escape(self.title)}</title></head>"
                f'<body style="margin:8px;background:#ffffff">{self._repr_html_()}</body></html>'
            )
        else:
            text = '<?xml version="1.0" encoding="UTF-8"?>\n' + self.svg
        path.write_text(text, encoding="utf-8")
        return path


# ---- The critical path ---------------------------------------------------


def _parts(model):
    """``(encoder kind, L_enc, decoder kind, L_dec)`` of a model: kinds ``"conv"``/``"gru"``."""
    enc, dec = getattr(model, "encoder", None), getattr(model, "decoder", None)
    kinds = [
        "conv" if isinstance(part, conv) else "gru" if isinstance(part, gru) else None
        for part, conv, gru in ((enc, ConvEncoder, GRUEncoder), (dec, ConvDecoder, GRUDecoder))
    ]
    if None in kinds:
        raise TypeError(f"expected a ConvS2S, RNNSeq2Seq or hybrid model, got {type(model)!r}")
    return kinds[0], enc.cfg.n_encoder_layers, kinds[1], dec.cfg.n_decoder_layers


def critical_path(model, S: int, T: int) -> dict:
    r"""The number of operations that must run one after another for one example.

    Parameters
    ----------
    model : ConvS2S, RNNSeq2Seq or HybridSeq2Seq
        Only its configuration is read (the kind of encoder and decoder and their
        numbers of layers).
    S : int
        Source length (tokens).
    T : int
        Decoder steps: the decoder inputs ``<sos>, y_1, ..., y_{T-1}`` of teacher
        forcing, or the tokens generated.

    Returns
    -------
    dict
        ``{"training": {...}, "generation": {...}}``; each phase holds ``count`` (int),
        ``formula`` (the symbols, e.g. ``"L_enc + L_dec"``) and ``worked`` (the numbers,
        e.g. ``"4 + 4 = 8"``). The dict also holds ``S``, ``T`` and ``unit``.

    Notes
    -----
    A dependent operation is a layer of a convolutional stack, which computes every position at
    once, or one step of one GRU layer. A convolutional encoder costs :math:`L_{enc}` of them
    whatever :math:`S`; a bidirectional GRU encoder :math:`L_{enc} S` (the two directions run side
    by side, but each direction's step :math:`j` needs its step :math:`j \mp 1`, and a layer needs
    the whole layer below). In training (teacher forcing), the convolutional decoder sees the whole
    target prefix at once, :math:`L_{dec}` layers (§3.2); the GRU decoder still needs
    :math:`s_{t-1}` for :math:`s_t`, :math:`L_{dec} T` steps. In generation every decoder produces
    one token per step, :math:`T L_{dec}`:

    .. math::

        \text{ConvS2S: } L_{enc} + L_{dec} \text{ (training)}, \quad
        L_{enc} + T L_{dec} \text{ (generation)}; \qquad
        \text{GRU: } L_{enc} S + L_{dec} T \text{ (both)}.

    With one GRU layer on each side, the GRU's count is :math:`S + T`. The paper's argument for
    convolutions (§1) is the training column: the count does not grow with the length. Attention
    and projections add a fixed number of operations per layer or step and are not counted.

    References
    ----------
    Gehring et al. (2017), §1 and §3.2; Bahdanau et al. (2015), §3.
    """
    S, T = check_int("S", S), check_int("T", T)
    enc, L_enc, dec, L_dec = _parts(model)

    def gru(L, n, layers, length):  # L GRU layers of n steps: "S" or "L_enc·S"
        return (length, f"{n}", n) if L == 1 else (f"{layers}·{length}", f"{L}·{n}", L * n)

    # a convolutional encoder computes every position of a layer at once
    encoder = ("L_enc", f"{L_enc}", L_enc) if enc == "conv" else gru(L_enc, S, "L_enc", "S")
    if dec == "conv":  # training: the whole prefix at once; generation: T steps of L_dec
        training, generation = ("L_dec", f"{L_dec}", L_dec), ("T·L_dec", f"{T}·{L_dec}", T * L_dec)
        decoder = {"training": training, "generation": generation}
    else:  # s_t needs s_{t-1}, with teacher forcing too
        decoder = dict.fromkeys(("training", "generation"), gru(L_dec, T, "L_dec", "T"))
    phases = {}
    for phase, (d_formula, d_worked, d_count) in decoder.items():
        count = encoder[2] + d_count
        formula, worked = f"{encoder[0]} + {d_formula}", f"{encoder[1]} + {d_worked} = {count}"
        phases[phase] = {"count": count, "formula": formula, "worked": worked}
    unit = "dependent operations: a layer of a convolutional stack, or a GRU step"
    return {**phases, "S": S, "T": T, "unit": unit}


def _path_panel(c: _Canvas, x, y, path: dict, notes: dict, *, width=330):
    """The critical-path table of a figure, top left at ``(x, y)``; returns its bottom."""
    rows = [
        ("Critical path on this example", True, _INK),
        (f"(S = {path['S']}, T = {path['T']}): operations that", False, _MUTED),
        ("must run one after another", False, _MUTED),
    ]
    for phase, label in (("training", "training (teacher forcing)"), ("generation", "generation")):
        p = path[phase]
        rows += [
            (label, True, _INK),
            (_markup(f"{p['formula']} = {p['worked']}"), False, _ACCENT),
            (_markup(notes[phase]), False, _MUTED),
        ]
    h = 14 + 19 * len(rows)
    c.items.append(
        f'<g class="box" data-name="critical path"><title>critical path</title>'
        f'<rect x="{x}" y="{y}" width="{width}" height="{h}" rx="6" fill="{_FILL["note"]}" '
        f'stroke="{_MUTED}" stroke-width="1.2"/></g>'
    )
    for i, (text, bold, color) in enumerate(rows):
        c.text(x + 12, y + 26 + 19 * i, text, size=13.5, color=color, bold=bold)
    return y + h


# ---- Running the example -------------------------------------------------


def _example(model, src, tgt_in):
    """Check the model and the example; returns ``(src, tgt_in)`` as ``(1, S)``, ``(1, T)``
    on the model's device."""
    src, tgt_in = model.check_inputs(src, tgt_in)
    if src.shape[0] != 1:
        raise ValueError(f"draw one example (a batch of 1), got a batch of {src.shape[0]}")
    device = next(model.parameters()).device
    return src.to(device), tgt_in.to(device)


# ---- ConvS2S -------------------------------------------------------------


#: The boxes that differ between the two sides of the ConvS2S figure (keyed by ``causal``):
#: whose tokens and their text, the embedding's box, the input projection's box.
_SIDES = {
    False: ("source", "source tokens x_1 … x_S", "embedding", "input projection"),
    True: ("target", "<sos>, y_1 … y_{T−1}", "target embedding", "decoder input projection"),
}


def _glu_block(c, cx, y, conv_in, conv_out, *, causal, k, residual_x):
    """One ConvBlock drawn from ``y``: convolution (``conv_in`` and ``conv_out``: what it read
    and gave), halves A and B, σ(B), ⊗, ⊕ with the block input coming down at ``residual_x``,
    × √0.5. Returns the y of the block's output."""
    n, fill, side = ("T", "dec", "decoder") if causal else ("S", "enc", "encoder")
    zeros = (k - 1) if causal else (k - 1) // 2
    where = "on the left only" if causal else "on each side"
    pad = f"{'k−1' if causal else '(k−1)/2'} = {zeros} zero{'s' * (zeros != 1)} {where}"
    conv = f"{'causal ' if causal else ''}convolution"
    top = c.box(conv, cx, y, 260, 62, [f"{conv}, k = {k}", pad, ""], fill=fill)
    # conv_in: (1, n + k - 1, d)
    padded = c.shape_text(f"{side} convolution input, padded", (f"{n}+k−1", "d"), conv_in)
    note = f"input padded to {padded}"
    c.text(cx, y + 54, note, size=12, anchor="middle", color=_MUTED, halo=False)
    y_conv = top[3]
    y_split = y_conv + 44
    Y = conv_out  # (1, n, 2d)
    c.down(cx, y_conv, y_split, "Y = [A B]", (n, "2d"), Y, dy=17, head=False)
    d = Y.shape[-1] // 2
    A, B = Y[..., :d], Y[..., d:]  # (1, n, d) each: the two halves of the channels
    xa, xb = cx - 95, cx + 95
    c.dot(cx, y_split)
    c.line([(xa, y_split), (xb, y_split)])
    # the labels of A, B and σ(B) sit between the two branches, where nothing else is
    y_sig = y_split + 52
    y_mul = y_sig + 32 + 42
    sig = c.box("σ(B)", xb, y_sig, 70, 32)
    a_in = [(xa, y_split), (xa, y_mul), (cx - 15, y_mul)]  # A: down the left, into ⊗
    c.edge(a_in, "A", (n, "d"), A, at=(xa + 8, y_split + 19), one_line=True)
    c.down(xb, y_split, y_sig, "B", (n, "d"), B, dx=8, dy=38, anchor="end", one_line=True)
    sig_in = [(xb, sig[3]), (xb, y_mul), (cx + 15, y_mul)]  # σ(B): down the right, into ⊗
    sig_at = (xb - 8, sig[3] + 19)
    c.edge(sig_in, "σ(B)", (n, "d"), torch.sigmoid(B), at=sig_at, anchor="end", one_line=True)
    c.op("⊗ (gated linear unit)", cx, y_mul, "⊗")
    y_add = y_mul + 70
    v = F.glu(Y, dim=-1)  # (1, n, d)
    c.down(cx, y_mul + 15, y_add - 15, "v = A ⊗ σ(B)", (n, "d"), v, dy=19)
    c.op("⊕ residual", cx, y_add, "⊕")
    c.edge([(residual_x, y_add), (cx - 15, y_add)])
    y_scale = y_add + 40
    c.box("× √0.5", cx, y_scale, 84, 30)
    c.down(cx, y_add + 15, y_scale)
    c.line([(residual_x, y), (residual_x, y_add)])  # the residual, from the block input down
    return y_scale + 30


def _conv_side(c, x, rx, ids, taps, *, causal, k, positions):
    """One side of the ConvS2S figure on the axis ``x``, from its tokens ``ids`` to the output
    of its first drawn block: embeddings (``positions``: with the position table or not),
    input projection and a ConvBlock whose residual runs down at ``rx``. ``taps``: what the
    forward pass gave: the embeddings, the block input, the convolution's input and output.
    Returns the y of the block's output."""
    whose, text, embedding, projection = _SIDES[causal]
    # the length, the position index, the tokens' and the embeddings' symbols, the colour
    n, i, tok, e, fill = ("T", "i", "y", "g", "dec") if causal else ("S", "j", "x", "e", "enc")
    pos = f"w_{i} + p_{i}" if positions else f"w_{i} (no positions)"
    embedded, block_in, conv_in, conv_out = taps
    c.box(f"{whose} tokens", x, 46, 250, 36, [text], fill="io")
    c.down(x, 82, 126, tok, (n,), ids, dy=26)
    c.box(embedding, x, 126, 250, 40, [f"embeddings {pos}"], fill=fill)
    c.down(x, 166, 226, f"{e}_{i} = {pos}", (n, "f"), embedded)
    c.dot(x, 214)
    c.box(projection, x, 226, 250, 40, ["input projection f → d"], fill=fill)
    c.down(x, 266, 336, "block input", (n, "d"), block_in, dy=30)
    c.dot(x, 312)
    c.edge([(x, 312), (rx, 312), (rx, 336)], head=False)
    c.text(rx + 6, 306, "residual", size=11.5, color=_MUTED)
    return _glu_block(c, x, 336, conv_in, conv_out, causal=causal, k=k, residual_x=rx)


def _finish(c, bottom, panel_y, path, notes, title, desc, *, unit, one_step=""):
    """The critical-path panel (bottom left, from ``panel_y``), the caption under the figure
    and the :class:`Schematic`; ``desc`` ends with the critical path in ``unit``."""
    bottom = max(bottom, _path_panel(c, 20, panel_y, path, notes))
    caption = (
        f"Arrows: tensors, (symbols) = (sizes) of one forward pass on this example "
        f"(S = {path['S']}, T = {path['T']}{one_step}); the batch of 1 is left out."
    )
    c.text(_WIDTH / 2, bottom + 28, caption, size=12.5, anchor="middle", color=_MUTED)
    desc += (
        f" Critical path: {path['training']['count']} {unit} in training, "
        f"{path['generation']['count']} in generation."
    )
    return Schematic(c.render(bottom + 44, title, desc), title, c.shapes, path)


def convs2s_schematic(model: ConvS2S, src, tgt_in) -> Schematic:
    r"""Figure 1 of the paper for ``model``, with the shapes of one forward pass on one example.

    Parameters
    ----------
    model : ConvS2S
        Any sizes, trained or not. It runs in eval mode under :func:`torch.no_grad`
        (its mode is restored).
    src : Tensor or sequence of int, shape (1, S)
        One source sequence (no padding).
    tgt_in : Tensor or sequence of int, shape (1, T)
        Its decoder input: ``<sos>`` and the target prefix (teacher forcing).

    Returns
    -------
    Schematic
        The SVG, the shapes on its arrows (``Schematic.shapes``, batch left out) and
        :func:`critical_path` for ``S`` and ``T``.

    Notes
    -----
    The boxes are the equations of §3 (one encoder block and one decoder layer drawn,
    repeated :math:`L_{enc}` and :math:`L_{dec}` times):

    .. math::

        e_j &= w_j + p_j \quad \text{(§3.1; } g_i \text{ likewise for the decoder input)} \\
        [A\ B] &= W * X + b_w, \qquad v([A\ B]) = A \otimes \sigma(B) \quad \text{(§3.2)} \\
        h^l_i &= \sqrt{0.5}\,\big(v(W^l [h^{l-1}_{i-k+1}, \dots, h^{l-1}_i] + b^l_w)
                 + h^{l-1}_i\big) \quad \text{(§3.2, §3.4)} \\
        d^l_i &= W^l_d h^l_i + b^l_d + g_i \quad \text{(1)} \\
        a^l_{ij} &= \operatorname{softmax}_j(d^l_i \cdot z^u_j), \qquad
        c^l_i = \sum_j a^l_{ij} (z^u_j + e_j) \quad \text{(2)} \\
        h^l_i &\leftarrow \sqrt{0.5}\,(h^l_i + W^l_c c^l_i), \qquad
        p(y_{i+1} \mid y_{\le i}, x) = \operatorname{softmax}(W_o h^L_i + b_o)

    The encoder's convolutions pad :math:`(k-1)/2` zeros on each side, the decoder's :math:`k-1` on
    the left only (causal). The figure's accent colour is the context's path: from the keys
    :math:`z_j` and values :math:`z_j + e_j` through :math:`W_c` into every decoder layer.

    References
    ----------
    Gehring et al. (2017), §3, eqs. 1-2, Figure 1.
    """
    if not isinstance(model, ConvS2S):
        raise TypeError(f"convs2s_schematic draws a ConvS2S, got {type(model).__name__}")
    src, tgt_in = _example(model, src, tgt_in)
    enc, dec, cfg = model.encoder, model.decoder, model.cfg
    att, W_c = dec.attention[0], dec.W_c[0]  # the first attending layer's: the one drawn
    block_e, block_d = enc.blocks[0], dec.blocks[cfg.attending_layers[0]]  # the blocks drawn
    # the modules whose outputs the figure labels: the encoder's, the decoder's, the attention's
    outputs = dict(enc=enc, e=enc.embed, in_e=enc.in_proj, conv_e=block_e.conv, block_e=block_e)
    outputs |= dict(g=dec.embed, in_d=dec.in_proj, conv_d=block_d.conv, block_d=block_d)
    outputs |= dict(W_d=att.W_d, att=att, W_c=W_c, W_o=dec.W_o)
    inputs = dict(conv_e=block_e.conv, conv_d=block_d.conv, W_c=W_c)
    with _inference(model):  # eval mode (no dropout), no autograd
        with capture(outputs) as out, capture(inputs, inputs=True) as inp:
            model(src, tgt_in)
        for name in ("conv_e", "conv_d"):  # nn.Conv1d reads and writes channels first
            inp[name][0], out[name][0] = (t.transpose(1, 2) for t in (inp[name][0], out[name][0]))
        encoded = out["enc"][0]  # EncoderOut: z (1, S, f), e (1, S, f)
        memory = dec.memory(encoded)  # keys z_j and values z_j + e_j, as the decoder read them
        g = out["g"][0]  # (1, T, f)
        h = out["block_d"][0]  # (1, T, d): the drawn layer's block output h_i
        d_i = out["W_d"][0] + att.b_d + g  # (1, T, f)
        scores = torch.bmm(d_i, memory.z.transpose(1, 2))  # (1, T, S)
        c_i, a = out["att"][0]  # (1, T, f), (1, T, S)
        Wc_c = out["W_c"][0]  # (1, T, d)
        h_out = (h + Wc_c) * SQRT_HALF  # (1, T, d)
    S, T, k = src.shape[1], tgt_in.shape[1], cfg.kernel_size
    L_enc, L_dec = cfg.n_encoder_layers, cfg.n_decoder_layers
    f, d, V = cfg.embed_dim, cfg.hidden_dim, out["W_o"][0].shape[-1]
    env = {"S": S, "T": T, "f": f, "d": d, "2d": 2 * d, "V": V}
    env |= {"S+k−1": S + k - 1, "T+k−1": T + k - 1}
    c = _Canvas("convs2s", env)
    path = critical_path(model, S, T)

    EX, AX, DX = 190, 500, 800  # the encoder's, the attention's and the decoder's axis
    for x, title in ((EX, "Encoder: all S positions at once"), (DX, "Decoder: all T at once")):
        c.text(x, 28, title, size=16, anchor="middle", bold=True)

    # ---- encoder ---------------------------------------------------------
    taps = out["e"][0], out["in_e"][0], inp["conv_e"][0], out["conv_e"][0]
    y = _conv_side(c, EX, 46, src, taps, causal=False, k=k, positions=cfg.source_positions)
    c.frame(34, 278, 318, y - 278 + 14, f"× L_{{enc}} = {L_enc}", at=(44, y - 2))
    y = c.down(EX, y, y + 70, "z^l_j", ("S", "d"), out["block_e"][0], dy=24)
    c.box("output projection", EX, y, 250, 40, ["output projection d → f"], fill="enc")
    y += 40
    y_keys = y + 58
    c.down(EX, y, y + 90, "keys z_j = z^u_j", ("S", "f"), memory.z, color=_ACCENT)
    y_zpe = y + 105
    c.op("z + e", EX, y_zpe, "⊕")
    c.text(EX - 22, y_zpe - 20, "z + e", size=12, anchor="end", color=_MUTED)
    # e_j runs down the far left to the values
    c.edge([(EX, 214), (16, 214), (16, y_zpe), (EX - 15, y_zpe)])
    c.text(22, y_zpe - 8, "e_j", size=12.5)

    # ---- decoder: embeddings and the causal block --------------------------
    RX = 656  # the decoder's residual line
    taps = g, out["in_d"][0], inp["conv_d"][0], out["conv_d"][0]
    y = _conv_side(c, DX, RX, tgt_in, taps, causal=True, k=k, positions=cfg.target_positions)

    # ---- the attention of the layer ----------------------------------------
    y_h = y + 40  # h_i branches off to W_d here
    y_block = y  # the drawn layer's block output h_i, down to where W_c c_i enters
    c.dot(DX, y_h)
    c.edge([(DX, y_h), (AX + 90, y_h)])
    c.text(AX, y_h - 40, "Attention of the layer", size=15, anchor="middle", bold=True)
    c.box("W_d", AX, y_h - 20, 180, 40, ["W_d   (d → f)"], fill="att")
    y_d = y_h + 90
    c.down(AX, y_h + 20, y_d - 15, "W_d h_i", ("T", "f"), out["W_d"][0], dy=24)
    c.op("d_i = W_d h_i + b_d + g_i", AX, y_d, "⊕", fill="att")
    c.text(AX + 22, y_d + 5, "+ b_d", size=13)
    GX = 392  # g_i runs down between the encoder and the attention
    c.edge([(DX, 214), (GX, 214), (GX, y_d), (AX - 15, y_d)])
    c.text(GX + 8, y_d - 8, "g_i", size=12.5)
    y_sc = y_d + 76
    c.down(AX, y_d + 15, y_sc, "d_i = W_d h_i + b_d + g_i", ("T", "f"), d_i, dy=21)
    c.box("scores d_i · z_j", AX, y_sc, 200, 40, fill="att")
    c.edge([(EX, y_keys), (360, y_keys), (360, y_sc + 20), (AX - 100, y_sc + 20)], color=_ACCENT)
    y_sm = y_sc + 40 + 58
    c.down(AX, y_sc + 40, y_sm, "d_i · z_j", ("T", "S"), scores)
    c.box("softmax over j", AX, y_sm, 200, 36, fill="att")
    y_c = y_sm + 36 + 58
    c.down(AX, y_sm + 36, y_c, "a_{ij}", ("T", "S"), a)
    c.box("c_i = Σ_j a_{ij} (z_j + e_j)", AX, y_c, 220, 40, fill="att")
    values = [(EX, y_zpe + 15), (EX, y_c + 20), (AX - 110, y_c + 20)]  # from z + e, into c_i
    at = (EX + 10, y_zpe + 40)
    c.edge(values, "values z_j + e_j", ("S", "f"), memory.z_plus_e, at=at, color=_ACCENT)
    y_wc = y_c + 40 + 58
    ctx = "c_i × √m" if cfg.scale_context else "c_i"
    c.down(AX, y_c + 40, y_wc, ctx, ("T", "f"), inp["W_c"][0], color=_ACCENT)
    y_ctx = y_wc + 20  # where W_c c_i enters the decoder
    c.down(DX, y_block, y_ctx - 15, "h_i", ("T", "d"), h)
    c.box("W_c", AX, y_wc, 180, 40, ["W_c   (f → d)"], fill="att")
    enters, at = [(AX + 90, y_ctx), (DX - 15, y_ctx)], (AX + 100, y_ctx - 26)
    c.edge(enters, "W_c c_i: the context enters", ("T", "d"), Wc_c, at=at, color=_ACCENT, width=3)
    c.op("⊕ W_c c_i", DX, y_ctx, "⊕", fill="att")
    y = y_ctx + 40
    c.down(DX, y_ctx + 15, y)
    c.box("× √0.5 (context)", DX, y, 84, 30, ["× √0.5"])
    y += 30
    every = "" if cfg.attention_layers is None else f", attention in {cfg.attention_layers}"
    c.frame(372, 278, 614, y - 278 + 14, f"× L_{{dec}} = {L_dec} layers{every}", at=(384, y - 2))
    y = c.down(DX, y, y + 74, "h^l_i", ("T", "d"), h_out, dy=26)
    c.box("W_o", DX, y, 250, 40, ["output layer W_o  (d → V)"], fill="dec")
    y += 40
    y = c.down(DX, y, y + 56, "logits", ("T", "V"), out["W_o"][0])
    c.box("softmax p(y_{i+1})", DX, y, 250, 40, ["softmax: p(y_{i+1} | y_{≤i}, x)"], fill="io")

    # ---- the critical path, bottom left --------------------------------------
    notes = {
        "training": "layers; each computes all positions",
        "generation": "one token per step, L_dec layers each",
    }
    title = (
        f"ConvS2S (Gehring et al., 2017, Figure 1): {L_enc} encoder blocks, {L_dec} decoder "
        f"layers with attention, f = {f}, d = {d}, k = {k}"
    )
    desc = (
        "Source tokens are embedded, projected, passed through convolutional blocks with "
        "gated linear units and scaled residuals, and projected to keys z and values z + e. "
        "In every decoder layer, a causal convolutional block is followed by an attention: "
        "d = W_d h + b_d + g, weights softmax(d · z), context c = sum of a (z + e), and "
        "W_c c is added to the decoder state."
    )
    return _finish(c, y + 40, y_c + 100, path, notes, title, desc, unit="operations")


# ---- The GRU baseline ----------------------------------------------------


def _recurrence_row(c, x0, x1, y, n_positions, *, forward: bool):
    """One direction of the bidirectional GRU: a cell per position (at most 7 drawn) and the
    arrows that chain them, left to right (forward) or right to left (backward)."""
    labels = [str(j) for j in range(1, n_positions + 1)]
    if n_positions > 7:
        labels = labels[:5] + ["…"] + labels[-1:]
    w, n = 28, len(labels)
    gap = min(24.0, (x1 - x0 - n * w) / max(n - 1, 1))
    left = (x0 + x1) / 2 - (n * w + (n - 1) * gap) / 2
    xs = [left + i * (w + gap) for i in range(n)]
    for x, label in zip(xs, labels):
        if label == "…":
            c.text(x + w / 2, y + 19, "…", size=15, anchor="middle")
            continue
        c.items.append(
            f'<rect x="{x:.1f}" y="{y}" width="{w}" height="26" rx="4" fill="#ffffff" '
            f'stroke="{_INK}" stroke-width="1.2"/>'
        )
        c.text(x + w / 2, y + 18, label, size=12, anchor="middle")
    for a, b in zip(xs, xs[1:]):
        start, end = (a + w, b) if forward else (b, a + w)
        c.edge([(start, y + 13), (end, y + 13)], color=_ACCENT, width=1.6)


def gru_schematic(model: RNNSeq2Seq, src, tgt_in) -> Schematic:
    r"""The GRU + Bahdanau attention baseline, with the shapes of one forward pass on one example.

    Parameters
    ----------
    model : RNNSeq2Seq
        Any sizes, trained or not (eval mode, no autograd, as in :func:`convs2s_schematic`).
    src, tgt_in : Tensor or sequence of int, shapes (1, S) and (1, T)
        One example, as in :func:`convs2s_schematic`.

    Returns
    -------
    Schematic
        The SVG, the shapes on its arrows (one decoder step's, batch left out) and
        :func:`critical_path` for ``S`` and ``T``.

    Notes
    -----
    The boxes are the equations of :mod:`convs2s_edu.rnn` (Bahdanau et al., 2015, §3 and
    appendix A; one decoder step drawn, repeated :math:`T` times):

    .. math::

        h_j &= [\overrightarrow{h}_j; \overleftarrow{h}_j], \qquad
        s_0 = \tanh(W_{init} \overleftarrow{h}_1) \\
        e_{tj} &= v_a^\top \tanh(W_a h_j + U_a s_{t-1} + b_a), \qquad
        a_{tj} = \operatorname{softmax}_j(e_{tj}), \qquad c_t = \sum_j a_{tj} h_j \\
        s_t &= \mathrm{GRU}\big(s_{t-1}, [E y_{t-1}; c_t]\big), \qquad
        p(y_t \mid y_{<t}, x) = \operatorname{softmax}(W_s s_t + b_s)

    The accent colour is the sequential dependency: each direction of the encoder
    steps through the positions one by one, and the arrow back from :math:`s_t` to
    :math:`s_{t-1}` makes every decoder step wait for the one before, in training too.

    References
    ----------
    Bahdanau, Cho & Bengio (2015), §3, appendix A.1.2; Gehring et al. (2017), §1.
    """
    if not isinstance(model, RNNSeq2Seq):
        raise TypeError(f"gru_schematic draws an RNNSeq2Seq, got {type(model).__name__}")
    src, tgt_in = _example(model, src, tgt_in)
    enc, dec, cfg = model.encoder, model.decoder, model.cfg
    att = dec.attention
    # the modules whose outputs the figure labels
    outputs = dict(enc=enc, x=enc.embed, gru_e=enc.gru, W_init=dec.W_init, W_a=att.W_a)
    outputs |= dict(U_a=att.U_a, att=att, y=dec.embed, gru_d=dec.gru, W_s=dec.W_s)
    inputs = {"U_a": att.U_a, "gru_d": dec.gru}
    with _inference(model):  # eval mode (no dropout), no autograd
        with capture(outputs) as out, capture(inputs, inputs=True) as inp:
            # teacher forcing one step at a time (forward() runs the GRU's equations itself)
            state = dec.start(model.encode(src))
            for t in range(tgt_in.shape[1]):
                _, _, state = dec.step(tgt_in[:, t], state)
        h = out["enc"][0].states  # (1, S, 2n): the annotations
        n = h.shape[-1] // 2
        keys = out["W_a"][0] + att.b_a  # (1, S, n'): W_a h_j + b_a, once per source
        s_prev = inp["U_a"][0]  # (1, n): s_0, what the first step's attention read
        energy = att.energy(s_prev, keys)  # (1, S): e_tj of the first step
        c_t, a_t = out["att"][0]  # (1, 2n), (1, S)
        s_t = out["gru_d"][0][0][:, 0]  # (1, n): the first step's new state (top layer)
        h_back_1 = out["gru_e"][0][1][-1]  # (1, n): the backward GRU's last state, ←h_1
    S, T = src.shape[1], tgt_in.shape[1]
    m, A, V = cfg.embed_dim, cfg.attention_dim, out["W_s"][0].shape[-1]
    L_enc, L_dec = cfg.n_encoder_layers, cfg.n_decoder_layers
    env = {"S": S, "T": T, "m": m, "n": n, "2n": 2 * n, "n'": A, "V": V}
    env |= {"m+2n": m + 2 * n, "L_{dec}·n": L_dec * n}
    c = _Canvas("gru", env)
    path = critical_path(model, S, T)

    EX, AX, DX, YX = 180, 500, 740, 920  # encoder, attention, decoder, decoder-input axes
    LOOP = 982  # the recurrence s_t -> s_{t-1} runs back up here
    c.text(EX, 28, "Encoder: a bidirectional GRU", size=16, anchor="middle", bold=True)
    c.text(DX + 40, 28, "Decoder: one step after another", size=16, anchor="middle", bold=True)

    # ---- encoder -----------------------------------------------------------
    c.box("source tokens", EX, 46, 250, 36, ["source tokens x_1 … x_S"], fill="io")
    c.down(EX, 82, 126, "x", ("S",), src, dy=26)
    c.box("embedding", EX, 126, 250, 40, fill="enc")
    c.down(EX, 166, 216, "E x_j", ("S", "m"), out["x"][0], dy=20)
    top = 216
    c.box("bidirectional GRU", EX, top, 310, 142, [""], fill="enc")
    layers = f"bidirectional GRU, {L_enc} layer{'s' * (L_enc > 1)}"
    c.text(EX, top + 20, layers, size=14, anchor="middle", bold=True, halo=False)
    directions = (("forward", "→h_j", h[..., :n]), ("backward", "←h_j", h[..., n:]))  # (1, S, n)
    for row, (name, symbol, half) in enumerate(directions):
        text = f"{name} {symbol}  {c.shape_text(symbol, ('S', 'n'), half)}"
        c.text(EX - 140, top + 42 + 58 * row, text, size=12, color=_MUTED, halo=False)
        _recurrence_row(c, EX - 140, EX + 140, top + 50 + 58 * row, S, forward=row == 0)
    y = top + 142
    y_split = y + 28
    y = c.down(EX, y, y + 58, "h_j = [→h_j; ←h_j]", ("S", "2n"), h)
    c.dot(EX, y_split)
    c.box("W_a", EX, y, 150, 40, ["W_a  (2n → n')"], fill="att")
    y_keys = y + 20

    # ---- s_0 from ←h_1 ------------------------------------------------------------
    to_init = [(EX + 155, top + 121), (355, top + 121), (355, 120), (DX - 110, 120)]
    c.edge(to_init, "←h_1 (the backward GRU's last state)", ("n",), h_back_1, at=(365, 96))
    c.box("W_init", DX, 100, 220, 40, ["s_0 = tanh(W_{init} ←h_1)"], fill="dec")
    c.down(DX, 140, 190, "s_0", ("L_{dec}·n",), out["W_init"][0], dy=20, one_line=True)

    # ---- one decoder step ---------------------------------------------------------
    c.box("decoder state s_{t−1}", DX, 190, 200, 40, fill="dec", stroke=_ACCENT)
    # s_{t-1} to the attention, on the left
    to_attention = [(DX - 100, 210), (600, 210), (600, 290), (AX + 80, 290)]
    c.edge(to_attention, "s_{t−1}", ("n",), s_prev, at=(608, 244))
    c.box("U_a", AX, 270, 160, 40, ["U_a   (n → n')"], fill="att")
    y_e = y_keys - 27  # the keys W_a h_j come in from the left at mid-height
    c.down(AX, 310, y_e, "U_a s_{t−1}", ("n'",), out["U_a"][0], dy=24)
    lines = ["e_{tj} = v_aᵀ tanh(W_a h_j", "+ U_a s_{t−1} + b_a)"]
    c.box(" ".join(lines), AX, y_e, 210, 54, lines, fill="att")  # named by the whole formula
    at = (EX + 82, y_keys - 21)
    c.edge([(EX + 75, y_keys), (AX - 105, y_keys)], "keys W_a h_j", ("S", "n'"), keys, at=at)
    y_sm = y_e + 54 + 56
    c.down(AX, y_e + 54, y_sm, "e_{tj}", ("S",), energy, dy=24)
    c.box("softmax over j", AX, y_sm, 200, 36, fill="att")
    y_c = y_sm + 36 + 56
    c.down(AX, y_sm + 36, y_c, "a_{tj}", ("S",), a_t, dy=24)
    c.box("c_t = Σ_j a_tj h_j", AX, y_c, 200, 40, ["c_t = Σ_j a_{tj} h_j"], fill="att")
    values = [(EX, y_split), (24, y_split), (24, y_c + 20), (AX - 100, y_c + 20)]
    c.edge(values, "values h_j", ("S", "2n"), h, at=(32, y_c + 6), one_line=True)
    y_gru = y_c + 40 + 60
    c_in = [(AX, y_c + 40), (AX, y_gru + 35), (DX - 125, y_gru + 35)]  # into the GRU, left
    c.edge(c_in, "c_t", ("2n",), c_t, at=(AX + 10, y_c + 64), width=2.6)
    # the decoder input: y_{t-1}, embedded, into the GRU from the right
    lines = ["y_{t−1}", "<sos> first"]
    c.box("previous token y_{t−1}", YX, 290, 90, 44, lines, fill="io", size=13)
    c.down(YX, 334, 390, "y", ("T",), tgt_in, dy=26, anchor="end")
    c.box("decoder embedding E", YX, 390, 90, 36, ["E"], fill="dec")
    y_in = [(YX, 426), (YX, y_gru + 35), (DX + 125, y_gru + 35)]
    c.edge(y_in, "E y_{t−1}", ("m",), out["y"][0], at=(YX - 10, 460), anchor="end")
    # s_{t-1} straight down into the GRU
    c.down(DX, 230, y_gru, "s_{t−1}", ("n",), s_prev, dy=190, anchor="end")
    gru_in = c.shape_text("[E y_{t−1}; c_t]", ("m+2n",), inp["gru_d"][0][:, 0])
    lines = ["s_t = GRU(s_{t−1}, [E y_{t−1}; c_t])", f"input [E y_{{t−1}}; c_t] {gru_in}"]
    c.box("decoder GRU", DX, y_gru, 250, 70, lines, fill="dec")
    y = y_gru + 70
    y_loop = y + 28
    c.down(DX, y, y + 92, "s_t", ("n",), s_t, anchor="end")
    c.dot(DX, y_loop)
    loop = [(DX, y_loop), (LOOP, y_loop), (LOOP, 210), (DX + 100, 210)]
    c.edge(loop, "s_t → s_{t−1} (the next step)", color=_ACCENT, width=2.6)
    next_step = "next step: s_t becomes s_{t−1}"
    c.text(DX + 14, y_loop + 20, next_step, size=13, color=_ACCENT, bold=True)
    c.text(DX + 14, y_loop + 37, f"T = {T} steps, one after another", size=13, color=_ACCENT)
    c.frame(365, 176, 632, y + 76 - 176, f"one decoder step, × T = {T}", at=(377, y + 68))
    y += 92
    c.box("W_s", DX, y, 250, 40, ["output layer W_s  (n → V)"], fill="dec")
    y += 40
    y = c.down(DX, y, y + 56, "logits", ("V",), out["W_s"][0])
    c.box("softmax p(y_t)", DX, y, 250, 40, ["softmax: p(y_t | y_{<t}, x)"], fill="io")

    notes = {
        "training": "GRU steps; teacher forcing does not help",
        "generation": "the same steps: one token per step",
    }
    title = (
        f"GRU + Bahdanau attention: bidirectional GRU encoder ({L_enc} layer(s)), GRU decoder "
        f"({L_dec} layer(s)), embeddings m = {m}, states n = {n}, attention n' = {A}"
    )
    desc = (
        "Source tokens are embedded and read by a bidirectional GRU, one position after "
        "another in each direction, giving annotations h_j. At every decoder step, the "
        "previous state s_{t-1} and the keys W_a h_j give energies "
        "e_tj = v_a^T tanh(W_a h_j + U_a s_{t-1} + b_a), softmax weights a_tj and a context "
        "c_t = sum of a_tj h_j; the GRU computes s_t from s_{t-1} and [E y_{t-1}; c_t], and "
        "s_t feeds back as the next step's s_{t-1}."
    )
    one_step = "; one decoder step's"
    return _finish(c, y + 40, y_c + 80, path, notes, title, desc, unit="steps", one_step=one_step)
