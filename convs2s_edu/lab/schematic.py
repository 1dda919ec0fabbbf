r"""Figure 1 of both models, drawn with matplotlib and traced from one forward pass.

:func:`convs2s_schematic` draws the convolutional model the way Figure 1 of Gehring et al.
(2017) [1]_ does: embeddings, a convolution whose output splits into the two halves
:math:`A` and :math:`B` of a gated linear unit, the residual scaled by :math:`\sqrt{0.5}`,
the keys :math:`z_j` and values :math:`z_j + e_j`, and, in every decoder layer, the
attention whose context :math:`W_c c_i` is added to the decoder state.
:func:`gru_schematic` draws the recurrent baseline (Bahdanau et al., 2015 [2]_): a
bidirectional GRU, an additive attention and a decoder state that feeds back into the
next step. :func:`module_schematic` draws any
:class:`~convs2s_edu.seq2seq.EncoderDecoder` as the column of its parts, in the order
the forward pass called them.

Nothing about a shape is typed by hand: each function runs the model once on one example
with forward hooks on its modules (and a :class:`~torch.overrides.TorchFunctionMode`
that sees the few tensors computed inside a module, such as the scores
:math:`d_i \cdot z_j`), and labels every arrow with the paper's symbol and the shape of
the tensor that flowed there, e.g. :math:`e_j = w_j + p_j` ``(S, f) = (6, 128)`` (the
batch of one left out). Beside each diagram, :func:`critical_path`: how many operations
of that example must run one after another, in training and in generation.

The figure is a matplotlib :class:`~matplotlib.figure.Figure` (``Schematic.figure``) on
a white background, so that it stays readable in the site's dark theme;
``Schematic.svg`` is its SVG, with a ``<title>`` and ``<desc>`` for screen readers.
Every box has the SVG id (matplotlib's ``gid``) ``box:<name>`` and every arrow
``arrow:<symbol>:<shape>``, e.g. ``arrow:e_j = w_j + p_j:5,128`` (a repeated id ends in
``#2``, ``#3``...), for programs that read the figure.

References
----------
.. [1] J. Gehring, M. Auli, D. Grangier, D. Yarats, Y. N. Dauphin.
   "Convolutional Sequence to Sequence Learning." ICML 2017. arXiv:1705.03122.
.. [2] D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly
   Learning to Align and Translate." ICLR 2015. arXiv:1409.0473.
"""

from __future__ import annotations

import html
import io
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import matplotlib
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.path import Path as Polyline
from torch.overrides import TorchFunctionMode

from .._checks import check_int
from ..convs2s import ConvDecoder, ConvEncoder, ConvS2S
from ..decode import _inference
from ..rnn import GRUDecoder, GRUEncoder, RNNSeq2Seq
from ..seq2seq import EncoderDecoder

__all__ = [
    "Schematic",
    "critical_path",
    "convs2s_schematic",
    "gru_schematic",
    "module_schematic",
]

# ---- Layout: inches on a page 10 inches wide, y pointing down -------------

_W = 10.0  # the site shows it about 900 px wide: 1 pt ≈ 1.25 px
_GAP = 0.62  # a labelled arrow from one box to the next
_BOX = (2.5, 0.38)  # the usual box: width, height
_R = 0.15  # an operator circle's radius
_FS = 9  # pt: the labels (11 px at 900 px wide); boxes 1 pt more, headings 3
_INK, _MUTED, _ACCENT = "#1a1a1a", "#555555", "#b34700"  # accent: context, recurrence
_FILL = dict(io="#f2f2f2", enc="#e6effa", dec="#e8f4e1", att="#fdefd9", op="#ffffff")
# under a label, over a line it crosses
_HALO = {"fc": "white", "ec": "none", "pad": 0.5}


def _plain(label: str) -> str:
    """A label without its mathtext: ``"$a_{ij}$"`` -> ``"a_ij"``."""
    return "".join(ch for ch in label if ch not in "${}\\")


class _Node(NamedTuple):
    """A drawn box or operator circle (or a point: no size): its centre and half sizes."""

    x: float
    y: float
    hw: float = 0.0
    hh: float = 0.0

    @property
    def bottom(self) -> float:
        return self.y + self.hh

    def border(self, p) -> tuple:
        """Where the segment from the centre towards ``p`` (straight down, up, left or
        right, as every arrow leaves or enters) crosses the border."""
        dx, dy = p[0] - self.x, p[1] - self.y
        t = min(self.hw / abs(dx) if dx else 1.0, self.hh / abs(dy) if dy else 1.0)
        return (self.x + t * dx, self.y + t * dy)


class _Drawing:
    """Boxes, operators and labelled arrows on one matplotlib Axes, in inches."""

    def __init__(self, env: dict):
        self.fig = Figure(figsize=(_W, 1.0), facecolor="white")
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_axis_off()
        self.env, self.shapes, self.boxes, self._ids = env, {}, [], Counter()

    def _gid(self, artist, gid: str):
        self._ids[gid] += 1
        artist.set_gid(gid if self._ids[gid] == 1 else f"{gid}#{self._ids[gid]}")
        return artist

    def text(self, x, y, s, *, size=_FS, color=_INK, bold=False, **kw):
        """Text (mathtext between ``$``), by default right of and below ``(x, y)``."""
        kw = {
            "ha": "left",
            "va": "top",
            "fontweight": "bold" if bold else "normal",
        } | kw
        kw |= {"fontsize": size, "color": color, "math_fontfamily": "dejavusans"}
        return self.ax.text(x, y, s, family="DejaVu Sans", **kw)

    def box(self, name, x, y, text=None, *, fill="op", w=_BOX[0], h=_BOX[1], **kw):
        """A box centred on ``x`` from ``y`` down, ``text`` (default ``name``) inside;
        an operator circle where ``text`` is ⊕ or ⊗."""
        op, size = text in ("⊕", "⊗"), kw.pop("size", _FS + 1)
        w, h, size = (2 * _R, 2 * _R, _FS + 6) if op else (w, h, size)
        shape = "round,pad=0,rounding_size=0.06"
        patch = (
            Circle((x, y + _R), _R)
            if op
            else FancyBboxPatch((x - w / 2, y), w, h, shape)
        )
        patch.set(fc=_FILL[fill], ec=kw.pop("ec", _INK), lw=1.2)
        self.ax.add_patch(self._gid(patch, f"box:{name}"))
        self.boxes.append(name)
        va = "center_baseline" if op else "center"
        self.text(
            x, y + h / 2, name if text is None else text, size=size, ha="center", va=va
        )
        return _Node(x, y + h / 2, w / 2, h / 2)

    def down(
        self, node, name, text=None, label=None, dims=(), tensor=None, *, gap=_GAP, **kw
    ):
        """A box ``gap`` below ``node`` (or a point) on its axis and the arrow into it
        for ``tensor``; ``kw``: the box's options (``fill``, ``w``, ``h``, ``size``,
        ``ec``) and the arrow's. Returns the new box."""
        node = node if isinstance(node, _Node) else _Node(*node)
        box = {k: kw.pop(k) for k in ("fill", "w", "h", "size", "ec") if k in kw}
        below = self.box(name, node.x, node.bottom + gap, text, **box)
        self.arrow(node, below, label=label, dims=dims, tensor=tensor, **kw)
        return below

    def chain(self, node, steps, **kw):
        """:meth:`down` from ``node`` for each step
        ``(name, text, label, dims, tensor)`` in turn (a step may end with a dict of its
        own options); returns the boxes."""
        boxes = []
        for name, text, *arrow in steps:
            options = kw | (
                arrow.pop() if arrow and isinstance(arrow[-1], dict) else {}
            )
            boxes.append(node := self.down(node, name, text, *arrow, **options))
        return boxes

    def dot(self, x, y, color=_INK):
        self.ax.add_patch(Circle((x, y), 0.035, color=color))
        return (x, y)

    def frame(self, x0, y0, x1, y1, label):
        """A dashed frame around what repeats, ``label`` in its bottom left corner."""
        patch = FancyBboxPatch(
            (x0, y0), x1 - x0, y1 - y0, "round,pad=0,rounding_size=0.1"
        )
        self.ax.add_patch(patch).set(fc="none", ec=_MUTED, ls=(0, (6, 4)), lw=1.1)
        self.text(
            x0 + 0.12,
            y1 - 0.08,
            label,
            size=_FS + 1,
            color=_MUTED,
            bold=True,
            va="bottom",
        )

    def arrow(
        self, *stops, label=None, dims=(), tensor=None, at=None, side="right", **kw
    ):
        """An arrow through ``stops`` (nodes or points; an end at a node stops at its
        border) for ``tensor``. ``label`` (its symbol) and ``(dims) = (its shape)``
        stand by the first segment, on its ``side`` (or at ``at``). Returns the arrow."""
        pts = [(s.x, s.y) if isinstance(s, _Node) else s for s in stops]
        if isinstance(stops[0], _Node):
            pts[0] = stops[0].border(pts[1])
        if isinstance(stops[-1], _Node):
            pts[-1] = stops[-1].border(pts[-2])
        color, lw, one_line = (
            kw.pop("color", _INK),
            kw.pop("lw", 1.2),
            kw.pop("one_line", 0),
        )
        style = "-|>,head_length=0.7,head_width=0.32" if kw.pop("head", True) else "-"
        patch = FancyArrowPatch(path=Polyline(pts), arrowstyle=style, mutation_scale=10)
        patch.set(color=color, lw=lw, joinstyle="miter", capstyle="butt")
        shape = "" if tensor is None else self.shape(label, dims, tensor)
        sizes = ",".join(str(n) for n in self.shapes[_plain(label)]) if shape else ""
        self.ax.add_patch(self._gid(patch, f"arrow:{_plain(label or '')}:{sizes}"))
        (x0, y0), (x1, y1) = pts[:2]
        if at is None and x0 == x1:  # beside a vertical segment, just below its start
            at = (x0 + (0.08 if side == "right" else -0.08), y0 + 0.07)
        elif at is None:  # above a horizontal one, in its middle
            at, kw = ((x0 + x1) / 2, y0 - 0.05), {"ha": "center", "va": "bottom"} | kw
        kw = {"ha": "left" if side == "right" else "right", "bbox": _HALO} | kw
        text = f"{label}{'  ' if one_line else chr(10)}{shape}" if shape else label
        if label:
            self.text(*at, text, color=color, **kw)
        return patch

    def shape(self, symbol, dims, tensor) -> str:
        """``"(S, f) = (6, 128)"`` for ``tensor`` (batch of one left out), recorded
        under ``symbol``. ``RuntimeError`` where a size symbol disagrees with the
        forward pass."""
        # "S f" or ("S+k−1", "d")
        dims = dims.split() if isinstance(dims, str) else dims
        shape, sizes = (
            tuple(int(n) for n in tensor.shape[1:]),
            tuple(self.env[s] for s in dims),
        )
        if shape != sizes:
            raise RuntimeError(
                f"{_plain(symbol)}: ({', '.join(map(_plain, dims))}) = {sizes} expected, the "
                f"forward pass gave {shape}: the schematic would be wrong"
            )
        self.shapes[_plain(symbol)] = shape
        return f"({', '.join(dims)}) = ({', '.join(str(n) for n in shape)})"

    def finish(self, y, path, notes, title, one_step="") -> Schematic:
        """The critical-path panel from ``y`` on the left (``notes``: a line under each
        phase's count), the caption under everything, and the :class:`Schematic`."""
        S, T = path["S"], path["T"]
        rows = [("Critical path on this example", _INK, "bold")]
        rows += [
            (
                f"(S = {S}, T = {T}): operations that\nmust run one after another",
                _MUTED,
                "",
            )
        ]
        for phase, note in zip(("training", "generation"), notes):
            name = "training (teacher forcing)" if phase == "training" else phase
            formula = f"{path[phase]['formula']} = {path[phase]['worked']}"
            rows += [
                (name, _INK, "bold"),
                (_math(formula), _ACCENT, ""),
                (_math(note), _MUTED, ""),
            ]
        bottom = y + 0.1
        for text, color, weight in rows:
            self.text(
                0.32,
                bottom,
                text,
                size=_FS + 1,
                color=color,
                fontweight=weight or "normal",
            )
            bottom += 0.22 * (1 + text.count("\n"))
        panel = FancyBboxPatch((0.2, y), 3.3, bottom - y + 0.1, "round,pad=0")
        self.ax.add_patch(self._gid(panel, "box:critical path")).set(
            fc="#fafafa", ec=_MUTED
        )
        bottom = max(bottom, max(t.get_position()[1] for t in self.ax.texts)) + 0.45
        caption = f"(S = {S}, T = {T}{one_step}); the batch of 1 is left out."
        caption = (
            "Arrows: tensors, (symbols) = (sizes) of one forward pass on this example "
            + caption
        )
        self.text(_W / 2, bottom, caption, color=_MUTED, ha="center")
        return self.done(bottom + 0.35, title, path)

    def done(self, height, title, path) -> Schematic:
        self.fig.set_size_inches(_W, height)
        self.ax.set(xlim=(0, _W), ylim=(height, 0))
        arrows = "; ".join(f"{name} {shape}" for name, shape in self.shapes.items())
        desc = f"{title}. Boxes: {', '.join(self.boxes)}. Arrows, with their shapes: {arrows}."
        return Schematic(self.fig, title, self.shapes, path, desc)


def _math(formula: str) -> str:
    """The layer counts of a formula in mathtext: ``L_enc`` -> ``$L_{enc}$``."""
    return formula.replace("L_enc", "$L_{enc}$").replace("L_dec", "$L_{dec}$")


# ---- The object a page shows ---------------------------------------------


class Schematic:
    """A drawn schematic: the figure, its SVG, the shapes on its arrows, the critical
    path.

    A notebook cell or a sphinx-gallery code block that ends with a :class:`Schematic`
    shows the figure (its ``_repr_html_`` and ``_repr_svg_``).

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The drawing (not registered with pyplot, so a gallery page does not show it
        twice).
    title : str
        What it shows, in words (also the SVG's ``<title>``).
    shapes : dict of str to tuple of int
        Each labelled arrow's symbol and the shape that flowed there (batch left out).
    critical_path : dict or None
        :func:`critical_path` of the model on the example (None where it has no formula).
    desc : str
        A longer description, the SVG's ``<desc>``.

    Attributes
    ----------
    svg : str
        ``figure`` as an ``<svg>`` element (matplotlib's SVG without its XML prolog),
        white background, glyphs drawn as paths, ``<title>`` and ``<desc>`` first.
    """

    def __init__(self, figure, title: str, shapes: dict, critical_path, desc: str = ""):
        self.figure, self.title, self.shapes = figure, title, dict(shapes)
        self.critical_path, self.desc = critical_path, desc
        buffer = io.StringIO()
        with matplotlib.rc_context(
            {"svg.hashsalt": "convs2s-edu", "svg.fonttype": "path"}
        ):
            figure.savefig(
                buffer, format="svg", facecolor="white", metadata={"Date": None}
            )
        svg = buffer.getvalue()
        svg = svg[svg.index("<svg") :].replace("<svg ", '<svg role="img" ', 1)
        head = f"<title>{html.escape(title)}</title><desc>{html.escape(desc)}</desc>"
        self.svg = svg.replace(">", ">" + head, 1)

    def __repr__(self) -> str:
        return f"Schematic({self.title!r}, {len(self.shapes)} labelled tensors)"

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        # a white block even where the page is dark; the SVG scales to the block's width
        return (
            '<div class="convs2s-schematic" style="background:#ffffff;max-width:960px">'
            "<style>.convs2s-schematic svg{width:100%;height:auto}</style>"
            f"{self.svg}</div>"
        )

    def save(self, path) -> Path:
        """Write the figure to a file.

        Parameters
        ----------
        path : str or Path
            ``.svg``: the attribute ``svg`` with its XML declaration; ``.html`` (or ``.htm``): a
            page around it; any other suffix (``.png``, ``.pdf``): matplotlib's
            ``savefig``.

        Returns
        -------
        Path
            ``path``.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".svg":
            path.write_text(
                '<?xml version="1.0" encoding="utf-8"?>\n' + self.svg, "utf-8"
            )
        elif suffix in (".html", ".htm"):
            page = (
                '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                f"<title>{html.escape(self.title)}</title></head>"
                f'<body style="margin:8px;background:#ffffff">{self._repr_html_()}</body></html>'
            )
            path.write_text(page, encoding="utf-8")
        else:
            self.figure.savefig(path, facecolor="white")
        return path


# ---- The critical path ---------------------------------------------------


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
    A dependent operation is a layer of a convolutional stack, which computes every
    position at once, or one step of one GRU layer. A convolutional encoder costs
    :math:`L_{enc}` of them whatever :math:`S`; a bidirectional GRU encoder
    :math:`L_{enc} S` (the two directions run side by side, but each direction's step
    :math:`j` needs its step :math:`j \mp 1`, and a layer needs the whole layer below).
    In training (teacher forcing), the convolutional decoder sees the whole target
    prefix at once, :math:`L_{dec}` layers (§3.2); the GRU decoder still needs
    :math:`s_{t-1}` for :math:`s_t`, :math:`L_{dec} T` steps. In generation every decoder produces
    one token per step, :math:`T L_{dec}`:

    .. math::

        \text{ConvS2S: } L_{enc} + L_{dec} \text{ (training)}, \quad
        L_{enc} + T L_{dec} \text{ (generation)}; \qquad
        \text{GRU: } L_{enc} S + L_{dec} T \text{ (both)}.

    With one GRU layer on each side, the GRU's count is :math:`S + T`. The paper's
    argument for convolutions (§1) is the training column: the count does not grow with
    the length. Attention and projections add a fixed number of operations per layer or
    step and are not counted.

    References
    ----------
    Gehring et al. (2017), §1 and §3.2; Bahdanau et al. (2015), §3.
    """
    S, T = check_int("S", S), check_int("T", T)
    enc, dec = getattr(model, "encoder", None), getattr(model, "decoder", None)
    if not (
        isinstance(enc, ConvEncoder | GRUEncoder)
        and isinstance(dec, ConvDecoder | GRUDecoder)
    ):
        raise TypeError(
            f"expected a ConvS2S, RNNSeq2Seq or hybrid model, got {type(model)!r}"
        )
    L_enc, L_dec = enc.cfg.n_encoder_layers, dec.cfg.n_decoder_layers

    def steps(L, n, layers, length):  # L GRU layers of n steps each: "S" or "L_enc·S"
        return (
            (length, f"{n}", n) if L == 1 else (f"{layers}·{length}", f"{L}·{n}", L * n)
        )

    # (formula, worked, count) of each part; a convolutional stack computes a layer at
    # once
    conv_enc, conv_dec = isinstance(enc, ConvEncoder), isinstance(dec, ConvDecoder)
    encoder = (
        ("L_enc", f"{L_enc}", L_enc) if conv_enc else steps(L_enc, S, "L_enc", "S")
    )
    decoder = dict.fromkeys(("training", "generation"), steps(L_dec, T, "L_dec", "T"))
    # training: the whole prefix at once; generation: T steps of L_dec layers
    if conv_dec:
        decoder = {"training": ("L_dec", f"{L_dec}", L_dec)}
        decoder["generation"] = ("T·L_dec", f"{T}·{L_dec}", T * L_dec)
    phases = {}
    for phase, (formula, worked, count) in decoder.items():
        count += encoder[2]
        worked = f"{encoder[1]} + {worked} = {count}"
        phases[phase] = {
            "count": count,
            "formula": f"{encoder[0]} + {formula}",
            "worked": worked,
        }
    unit = "dependent operations: a layer of a convolutional stack, or a GRU step"
    return {**phases, "S": S, "T": T, "unit": unit}


# ---- Running the example -------------------------------------------------

# the tensors inside a module that the figures show
_OPS = {"pad", "glu", "bmm", "softmax"}


class _Trace(TorchFunctionMode):
    """Record the calls of the named ``modules`` inside a ``with`` block: per name,
    every call's ``args``, ``out`` and ``ops`` (the :data:`_OPS` computed inside it, by
    name: a list of ``(args, out)``); ``order``: the names in call order."""

    def __init__(self, modules: dict):
        super().__init__()
        self.modules, self.calls, self.order = (
            modules,
            {name: [] for name in modules},
            [],
        )
        self._open, self._hooks = [], []

    def __getitem__(self, name):
        return self.calls[name][0]  # the first call: the one a figure draws

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") in _OPS:
            for call in self._open:
                call.ops.setdefault(func.__name__, []).append((args, out))
        return out

    def _pre(self, name, module, args):
        self._open.append(SimpleNamespace(args=args, out=None, ops={}))
        self.calls[name].append(self._open[-1])
        self.order.append(name)

    def __enter__(self):
        for name, m in self.modules.items():
            self._hooks.append(
                m.register_forward_pre_hook(lambda *a, n=name: self._pre(n, *a))
            )
            post = m.register_forward_hook(
                lambda m, args, out: setattr(self._open.pop(), "out", out)
            )
            self._hooks.append(post)
        return super().__enter__()

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()
        return super().__exit__(*exc)


def _example(model, src, tgt_in):
    """Check the model and the example; returns ``(src, tgt_in)`` as ``(1, S)``,
    ``(1, T)`` on the model's device."""
    src, tgt_in = model.check_inputs(src, tgt_in)
    if src.shape[0] != 1:
        raise ValueError(
            f"draw one example (a batch of 1), got a batch of {src.shape[0]}"
        )
    device = next(model.parameters()).device
    return src.to(device), tgt_in.to(device)


# ---- ConvS2S -------------------------------------------------------------


def _conv_side(d, x, t, tokens, *, causal, k, positions):
    """One side of the ConvS2S figure on the axis ``x``: the tokens, the embeddings, the
    input projection and the first block, from the trace ``t``. Returns the input
    projection, the block's last box and the point where the embeddings branch off."""
    n, i, tok, e, side = (
        ("T", "i", "y", "g", "d") if causal else ("S", "j", "x", "e", "e")
    )
    pos = f"w_{i} + p_{i}$" if positions else f"w_{i}$ (no positions)"
    text = "<sos>, $y_1$ … $y_{T−1}$" if causal else "source tokens $x_1$ … $x_S$"
    top = d.box("target tokens" if causal else "source tokens", x, 0.5, text, fill="io")
    block = t[f"block_{side}"]
    # [A B] = W * X + b_w, v = A ⊗ σ(B): (1, n, 2d), (1, n, d)
    (Y,), v = block.ops["glu"][0]
    padded = d.shape(
        f"{side} convolution input, padded", (f"{n}+k−1", "d"), block.ops["pad"][0][1]
    )
    conv, zeros = (
        f"{'causal ' * causal}convolution",
        (k - 1) if causal else (k - 1) // 2,
    )
    pad = f"{'k−1' if causal else '(k−1)/2'} = {zeros} zero{'s' * (zeros != 1)}"
    pad += " on the left only" if causal else " on each side"
    at = (x + 0.08, top.bottom + 2 * _GAP + 2 * _BOX[1] + 0.17)  # below the frame's top
    box = {"gap": _GAP + 0.25, "w": 2.7, "h": 0.62, "size": _FS, "at": at}
    steps = [  # (box, its text, the arrow into it: symbol, sizes, tensor)
        (
            "target embedding" if causal else "embedding",
            "embeddings $" + pos,
            tok,
            n,
            tokens,
        ),
        (
            f"{'decoder ' * causal}input projection",
            "input projection f → d",
            f"${e}_{i} = {pos}",
            f"{n} f",
            t[side].out,
        ),
        (
            conv,
            f"{conv}, k = {k}\n{pad}\ninput padded to {padded}",
            "block input",
            f"{n} d",
            block.args[0],
            box,
        ),
    ]
    emb, proj, box = d.chain(top, steps, fill="dec" if causal else "enc")
    branch = d.dot(x, proj.y - 0.31)
    res, rx, y = d.dot(x, box.y - 0.53), x - 1.45, box.bottom + 0.48  # y: A and B split
    d.arrow(box, (x, y), label="Y = [A B]", dims=f"{n} 2d", tensor=Y, head=False)
    d.arrow((x - 0.95, d.dot(x, y)[1]), (x + 0.95, y), head=False)
    A, B = Y.chunk(2, dim=-1)  # views of the two halves of the channels, (1, n, d) each
    half = {"dims": f"{n} d", "one_line": True}
    at = (x + 0.87, y + 0.3)
    sig = d.down(
        (x + 0.95, y),
        "σ(B)",
        None,
        "B",
        tensor=B,
        gap=0.55,
        w=0.7,
        h=0.32,
        side="left",
        at=at,
        **half,
    )
    mul = d.box("⊗ (gated linear unit)", x, sig.bottom + 0.5 - _R, "⊗")
    d.arrow(
        (x - 0.95, y),
        (x - 0.95, mul.y),
        mul,
        label="A",
        tensor=A,
        at=(x - 0.87, y + 0.1),
        **half,
    )
    # σ(B) is computed inside F.glu and never kept: its arrow carries B's shape
    d.arrow(sig, (x + 0.95, mul.y), mul, label="σ(B)", tensor=B, side="left", **half)
    add = d.down(mul, "⊕ residual", "⊕", "v = A ⊗ σ(B)", f"{n} d", v, gap=0.5)
    d.arrow(res, (rx, res[1]), (rx, add.y), add)
    d.text(rx + 0.06, res[1] - 0.04, "residual", color=_MUTED, va="bottom")
    return proj, d.down(add, "× √0.5", gap=0.17, w=0.84, h=0.3), branch


def convs2s_schematic(model: ConvS2S, src, tgt_in) -> Schematic:
    r"""Figure 1 of the paper for ``model``, with the shapes of one forward pass on one
    example.

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
        The figure, the shapes on its arrows (``Schematic.shapes``, batch left out) and
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

    The encoder's convolutions pad :math:`(k-1)/2` zeros on each side, the decoder's
    :math:`k-1` on the left only (causal). The accent colour is the context's path: from the
    keys :math:`z_j` and values :math:`z_j + e_j` through :math:`W_c` into every decoder
    layer. The drawn decoder layer is the first that attends. Only :math:`\sigma(B)` is
    not a tensor of the pass (``F.glu`` computes it inside): its arrow has :math:`B`'s
    shape.

    References
    ----------
    Gehring et al. (2017), §3, eqs. 1-2, Figure 1.
    """
    if not isinstance(model, ConvS2S):
        raise TypeError(
            f"convs2s_schematic draws a ConvS2S, got {type(model).__name__}"
        )
    src, tgt_in = _example(model, src, tgt_in)
    enc, dec, cfg = model.encoder, model.decoder, model.cfg
    # the first attending layer's (every layer attends but in convs2s_edu.ablations)
    att, layer = dec.attention[0], getattr(cfg, "attending_layers", (0,))[0]
    modules = dict(
        enc=enc, e=enc.embed, block_e=enc.blocks[0], out_e=enc.out_proj, d=dec.embed
    )
    modules |= dict(
        block_d=dec.blocks[layer], att=att, W_d=att.W_d, W_c=dec.W_c[0], W_o=dec.W_o
    )
    with _inference(model), _Trace(modules) as t:  # eval mode (no dropout), no autograd
        model(src, tgt_in)
    S, T, k, f, dim = (
        src.shape[1],
        tgt_in.shape[1],
        cfg.kernel_size,
        cfg.embed_dim,
        cfg.hidden_dim,
    )
    env = {"S": S, "T": T, "f": f, "d": dim, "2d": 2 * dim, "V": t["W_o"].out.shape[-1]}
    d = _Drawing(env | {"S+k−1": S + k - 1, "T+k−1": T + k - 1})
    EX, AX, DX = 1.9, 5.0, 8.0  # the encoder's, the attention's and the decoder's axes
    for x, title in (
        (EX, "Encoder: all S positions at once"),
        (DX, "Decoder: all T at once"),
    ):
        d.text(x, 0.12, title, size=_FS + 3, bold=True, ha="center")

    # ---- encoder: the keys z_j and the values z_j + e_j ----------------------
    side = {
        "k": k,
        "causal": False,
        "positions": getattr(cfg, "source_positions", True),
    }
    proj, scale, e_branch = _conv_side(d, EX, t, src, **side)
    blocks = f"× $L_{{enc}}$ = {cfg.n_encoder_layers}"
    d.frame(EX - 1.6, proj.bottom + 0.12, EX + 1.6, scale.bottom + 0.14, blocks)
    # below the frame
    first = {"gap": _GAP + 0.2, "at": (EX + 0.08, scale.bottom + 0.2)}
    keys = {"gap": 0.95, "color": _ACCENT}
    steps = [
        (
            "output projection",
            "output projection d → f",
            "$z^l_j$",
            "S d",
            t["out_e"].args[0],
            first,
        ),
        ("z + e", "⊕", "keys $z_j = z^u_j$", "S f", t["enc"].out.states, keys),
    ]
    out, zpe = d.chain(scale, steps, fill="enc")
    # where the keys branch off to the scores
    keys = d.dot(EX, out.bottom + 0.6, _ACCENT)
    d.text(EX - 0.22, zpe.y - 0.18, "z + e", color=_MUTED, ha="right", va="bottom")
    e_j = {"label": "$e_j$", "at": (0.22, zpe.y - 0.05), "va": "bottom"}
    d.arrow(e_branch, (0.16, e_branch[1]), (0.16, zpe.y), zpe, **e_j)

    # ---- decoder: the block, then the attention of the layer -----------------
    side |= {"causal": True, "positions": getattr(cfg, "target_positions", True)}
    dproj, dscale, g_branch = _conv_side(d, DX, t, tgt_in, **side)
    y_h = d.dot(DX, dscale.bottom + 0.5)[1]  # h_i branches off to W_d here
    d.text(
        AX, y_h - 0.5, "Attention of the layer", size=_FS + 2, bold=True, ha="center"
    )
    W_d = d.box("W_d", AX, y_h - 0.19, "$W_d$   (d → f)", fill="att", w=1.8)
    d.arrow((DX, y_h), W_d)
    (query, _), scores = t["att"].ops["bmm"][0]  # d_i · z_j: (1, T, f) times (1, f, S)
    # Σ_j a_ij (z_j + e_j): (1, T, S) times (1, S, f)
    (_, values), _ = t["att"].ops["bmm"][1]
    c_i, a = t["att"].out  # (1, T, f), (1, T, S)
    text, c = (
        "$c_i = Σ_j a_{ij} (z_j + e_j)$",
        "$c_i × √m$" if cfg.scale_context else "$c_i$",
    )
    steps = [  # (box, its text, the arrow into it: symbol, sizes, tensor)
        (
            "d_i = W_d h_i + b_d + g_i",
            "⊕",
            "$W_d h_i$",
            "T f",
            t["W_d"].out,
            {"gap": 0.65},
        ),
        (
            "scores d_i · z_j",
            "scores $d_i · z_j$",
            "$d_i = W_d h_i + b_d + g_i$",
            "T f",
            query,
        ),
        ("softmax over j", None, "$d_i · z_j$", "T S", scores),
        (_plain(text), text, "$a_{ij}$", "T S", a, {"w": 2.3}),
        (
            "W_c",
            "$W_c$   (f → d)",
            c,
            "T f",
            t["W_c"].args[0],
            {"w": 1.8, "color": _ACCENT},
        ),
    ]
    q, score, _, ctx, W_c = d.chain(W_d, steps, fill="att", w=2.0)
    d.text(AX + 0.22, q.y, "+ $b_d$", size=_FS + 1, va="center")
    g_i = {"label": "$g_i$", "at": (4.0, q.y - 0.05), "va": "bottom"}
    d.arrow(g_branch, (3.92, g_branch[1]), (3.92, q.y), q, **g_i)
    d.arrow(keys, (3.6, keys[1]), (3.6, score.y), score, color=_ACCENT)
    values = {"label": "values $z_j + e_j$", "dims": "S f", "tensor": values}
    d.arrow(
        zpe, (EX, ctx.y), ctx, color=_ACCENT, at=(EX + 0.1, zpe.bottom + 0.3), **values
    )
    enters = d.box("⊕ W_c c_i", DX, W_c.y - _R, "⊕", fill="att")
    h_i = {"label": "$h_i$", "dims": "T d", "at": (DX + 0.08, y_h + 0.08)}
    d.arrow(dscale, enters, tensor=t["block_d"].out, **h_i)
    context = {"label": "$W_c c_i$: the context enters", "dims": "T d", "lw": 2.5}
    d.arrow(W_c, enters, tensor=t["W_c"].out, color=_ACCENT, **context)
    last = d.down(enters, "× √0.5 (context)", "× √0.5", gap=0.17, w=0.84, h=0.3)
    only = getattr(cfg, "attention_layers", None)
    every = "" if only is None else f", attention in {only}"
    layers = f"× $L_{{dec}}$ = {cfg.n_decoder_layers} layers{every}"
    d.frame(3.72, dproj.bottom + 0.12, 9.86, last.bottom + 0.14, layers)
    first = {"gap": _GAP + 0.2, "at": (DX + 0.08, last.bottom + 0.2)}  # below the frame
    p = "softmax: $p(y_{i+1} | y_{≤i}, x)$"
    steps = [
        (
            "W_o",
            "output layer $W_o$  (d → V)",
            "$h^L_i$",
            "T d",
            t["W_o"].args[0],
            first,
        ),
        ("softmax p(y_i+1)", p, "logits", "T V", t["W_o"].out, {"fill": "io"}),
    ]
    d.chain(last, steps, fill="dec")
    notes = (
        "layers; each computes all positions",
        "one token per step, L_dec layers each",
    )
    title = (
        f"ConvS2S (Gehring et al., 2017, Figure 1): {cfg.n_encoder_layers} encoder blocks, "
        f"{cfg.n_decoder_layers} decoder layers with attention, f = {f}, d = {dim}, k = {k}"
    )
    return d.finish(ctx.bottom + 0.8, critical_path(model, S, T), notes, title)


# ---- The GRU baseline ----------------------------------------------------


def _cells(d, x, y, S, *, forward: bool):
    """One direction of the bidirectional GRU across ``x ± 1.4`` from ``y``: a cell per
    position (at most 7 drawn) and the arrows that chain them, in the order it reads."""
    labels = [str(j) for j in range(1, S + 1)]
    labels = labels[:5] + ["…"] + labels[-1:] if S > 7 else labels
    n, w = len(labels), 0.28
    step = w + min(0.24, (2.8 - n * w) / max(n - 1, 1))
    xs = [x + (j - (n - 1) / 2) * step for j in range(n)]
    for cx, label in zip(xs, labels):
        name = f"{'forward' if forward else 'backward'} cell {label}"
        d.box(name, cx, y, label, w=w, h=0.26) if label != "…" else d.text(
            cx, y, "…", ha="center"
        )
    for a, b in zip(xs, xs[1:]):
        ends = [(a + w / 2, y + 0.13), (b - w / 2, y + 0.13)]
        d.arrow(*(ends if forward else ends[::-1]), color=_ACCENT)


def gru_schematic(model: RNNSeq2Seq, src, tgt_in) -> Schematic:
    r"""The GRU + Bahdanau attention baseline, with the shapes of one forward pass on
    one example.

    Parameters
    ----------
    model : RNNSeq2Seq
        Any sizes, trained or not (eval mode, no autograd, as in
        :func:`convs2s_schematic`).
    src, tgt_in : Tensor or sequence of int, shapes (1, S) and (1, T)
        One example, as in :func:`convs2s_schematic`.

    Returns
    -------
    Schematic
        The figure, the shapes on its arrows (the first decoder step's, batch left out)
        and
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

    The decoder runs its own :meth:`~convs2s_edu.rnn.GRUDecoder.start` and
    :meth:`~convs2s_edu.rnn.GRUDecoder.step`, one step per input token (teacher forcing).
    The accent colour is the sequential dependency: each direction of the encoder
    steps through the positions one by one, and the arrow back from :math:`s_t` to
    :math:`s_{t-1}` makes every decoder step wait for the one before, in training too.

    References
    ----------
    Bahdanau, Cho & Bengio (2015), §3, appendix A.1.2; Gehring et al. (2017), §1.
    """
    if not isinstance(model, RNNSeq2Seq):
        raise TypeError(
            f"gru_schematic draws an RNNSeq2Seq, got {type(model).__name__}"
        )
    src, tgt_in = _example(model, src, tgt_in)
    enc, dec, cfg = model.encoder, model.decoder, model.cfg
    modules = dict(
        enc=enc, x=enc.embed, W_init=dec.W_init, att=dec.attention, y=dec.embed
    )
    modules |= dict(U_a=dec.attention.U_a, gru=dec.gru, W_s=dec.W_s)
    with _inference(model), _Trace(modules) as t:  # eval mode (no dropout), no autograd
        state = dec.start(model.encode(src))
        for i in range(tgt_in.shape[1]):  # teacher forcing, one step after another
            state = dec.step(tgt_in[:, i], state)[2]
    h, h_back_1 = t["enc"].out.states, t["enc"].out.summary  # (1, S, 2n), (1, n)
    s_prev, keys, values = t["att"].args[:3]  # (1, n), (1, S, n'), (1, S, 2n)
    c_t, a_t = t["att"].out  # (1, 2n), (1, S)
    S, T, m, n, A = (
        src.shape[1],
        tgt_in.shape[1],
        cfg.embed_dim,
        cfg.hidden_dim,
        cfg.attention_dim,
    )
    L_enc, L_dec, V = cfg.n_encoder_layers, cfg.n_decoder_layers, t["W_s"].out.shape[-1]
    env = {
        "S": S,
        "T": T,
        "m": m,
        "n": n,
        "2n": 2 * n,
        "n'": A,
        "V": V,
        "m+2n": m + 2 * n,
    }
    d = _Drawing(env | {"$L_{dec}$·n": L_dec * n})
    # encoder, attention, decoder, decoder-input axes
    EX, AX, DX, YX = 1.8, 5.0, 7.4, 9.2
    d.text(
        EX, 0.12, "Encoder: a bidirectional GRU", size=_FS + 3, bold=True, ha="center"
    )
    d.text(
        DX + 0.4,
        0.12,
        "Decoder: one step after another",
        size=_FS + 3,
        bold=True,
        ha="center",
    )

    # ---- encoder -----------------------------------------------------------
    tokens = d.box("source tokens", EX, 0.5, "source tokens $x_1$ … $x_S$", fill="io")
    W_a = {"w": 1.5, "fill": "att", "gap": _GAP + 0.1}
    steps = [  # (box, its text, the arrow into it: symbol, sizes, tensor)
        ("embedding", None, "x", "S", src),
        ("bidirectional GRU", "", "E $x_j$", "S m", t["x"].out, {"w": 3.1, "h": 1.42}),
        ("W_a", "$W_a$  (2n → n')", "$h_j = [→h_j; ←h_j]$", "S 2n", h, W_a),
    ]
    _, gru, W_a = d.chain(tokens, steps, fill="enc")
    layers = f"bidirectional GRU, {L_enc} layer{'s' * (L_enc > 1)}"
    d.text(EX, gru.y - 0.61, layers, size=_FS + 1, bold=True, ha="center")
    for row, (name, symbol) in enumerate(
        (("forward", "$→h_j$"), ("backward", "$←h_j$"))
    ):
        half = h[..., n:] if row else h[..., :n]  # (1, S, n): one direction's states
        text = f"{name} {symbol}  {d.shape(symbol, 'S n', half)}"
        d.text(EX - 1.4, gru.y - 0.35 + 0.58 * row, text, color=_MUTED)
        _cells(d, EX, gru.y - 0.15 + 0.58 * row, S, forward=row == 0)
    split = d.dot(EX, gru.bottom + 0.3)

    # ---- s_0 from ←h_1, the attention, one decoder step ----------------------
    W_init = d.box(
        "W_init", DX, 0.8, "$s_0 = \\tanh(W_{init}\\ ←h_1)$", fill="dec", w=2.2
    )
    y = gru.bottom - 0.21  # ←h_1 leaves the GRU at the backward row
    last = {
        "label": "$←h_1$ (the backward GRU's last state)",
        "dims": "n",
        "at": (3.65, 0.5),
    }
    d.arrow(
        (EX + 1.55, y), (3.55, y), (3.55, W_init.y), W_init, tensor=h_back_1, **last
    )
    s_0 = (
        "$s_0$",
        ("$L_{dec}$·n",),
        t["W_init"].out,
        {"one_line": True, "ec": _ACCENT},
    )
    s = d.down(
        W_init,
        "decoder state s_t−1",
        "decoder state $s_{t−1}$",
        *s_0[:3],
        **s_0[3],
        fill="dec",
        w=2,
    )
    U_a = d.box("U_a", AX, s.bottom + 0.45, "$U_a$   (n → n')", fill="att", w=1.6)
    s_1 = {
        "label": "$s_{t−1}$",
        "dims": "n",
        "tensor": s_prev,
        "at": (6.08, s.y + 0.25),
    }
    d.arrow(s, (6.0, s.y), (6.0, U_a.y), U_a, **s_1)
    lines = "$e_{tj} = v_a^T \\tanh(W_a h_j$\n$+\\ U_a s_{t−1} + b_a)$"
    energy = d.box(
        _plain(lines.replace("\n", " ")),
        AX,
        W_a.y - 0.28,
        lines,
        fill="att",
        w=2.1,
        h=0.56,
    )
    d.arrow(U_a, energy, label="$U_a s_{t−1}$", dims="n'", tensor=t["U_a"].out)
    d.arrow(W_a, energy, label="keys $W_a h_j$", dims="S n'", tensor=keys)
    (e_tj,), _ = t["att"].ops["softmax"][0]  # (1, S)
    text = "$c_t = Σ_j a_{tj} h_j$"
    steps = [
        ("softmax over j", None, "$e_{tj}$", "S", e_tj),
        (_plain(text), text, "$a_{tj}$", "S", a_t),
    ]
    _, ctx = d.chain(energy, steps, fill="att", w=2)
    vals = {"label": "values $h_j$", "dims": "S 2n", "one_line": True, "va": "bottom"}
    d.arrow(
        split,
        (0.24, split[1]),
        (0.24, ctx.y),
        ctx,
        tensor=values,
        at=(0.32, ctx.y - 0.05),
        **vals,
    )
    gru_in = d.shape("[E y_t−1; c_t]", ("m+2n",), t["gru"].args[0][:, 0])
    lines = (
        "$s_t$ = GRU($s_{t−1}$, [E $y_{t−1}$; $c_t$])\n"
        f"input [E $y_{{t−1}}$; $c_t$] {gru_in}"
    )
    step = d.box("decoder GRU", DX, ctx.bottom + 0.6, lines, fill="dec", h=0.7)
    d.arrow(ctx, (AX, step.y), step, label="$c_t$", dims="2n", tensor=c_t, lw=2.5)
    prev = d.box(
        "previous token y_t−1",
        YX,
        U_a.y - 0.19,
        "$y_{t−1}$\n<sos> first",
        fill="io",
        w=0.9,
        h=0.46,
    )
    E = d.down(
        prev,
        "decoder embedding E",
        "E",
        "y",
        "T",
        tgt_in,
        side="left",
        fill="dec",
        w=0.9,
        h=0.36,
    )
    d.arrow(
        E,
        (YX, step.y),
        step,
        label="E $y_{t−1}$",
        dims="m",
        tensor=t["y"].out,
        side="left",
    )
    d.arrow(
        s,
        step,
        label="$s_{t−1}$",
        dims="n",
        tensor=s_prev,
        side="left",
        at=(DX - 0.08, ctx.y),
    )
    s_t = t["gru"].out[0][:, 0]  # (1, n): the top layer's new state
    steps = [
        (
            "W_s",
            "output layer $W_s$  (n → V)",
            "$s_t$",
            "n",
            s_t,
            {"gap": 1.0, "side": "left"},
        ),
        (
            "softmax p(y_t)",
            "softmax: $p(y_t | y_{<t}, x)$",
            "logits",
            "V",
            t["W_s"].out,
            {"fill": "io"},
        ),
    ]
    d.chain(step, steps, fill="dec")
    y = d.dot(DX, step.bottom + 0.3, _ACCENT)[1]  # s_t goes back to s_{t-1} from here
    loop = {
        "label": "next step: $s_t$ becomes $s_{t−1}$",
        "color": _ACCENT,
        "lw": 2.5,
        "fontweight": "bold",
    }
    d.arrow((DX, y), (9.82, y), (9.82, s.y), s, at=(DX + 0.14, y + 0.06), **loop)
    d.text(
        DX + 0.14,
        y + 0.26,
        f"T = {T} steps, one after another",
        color=_ACCENT,
        size=_FS + 1,
    )
    d.frame(3.65, s.y - 0.33, 9.97, step.bottom + 0.8, f"one decoder step, × T = {T}")
    notes = (
        "GRU steps; teacher forcing does not help",
        "the same steps: one token per step",
    )
    title = (
        f"GRU + Bahdanau attention: bidirectional GRU encoder ({L_enc} layer(s)), GRU decoder "
        f"({L_dec} layer(s)), embeddings m = {m}, states n = {n}, attention n' = {A}"
    )
    path = critical_path(model, S, T)
    return d.finish(
        ctx.bottom + 0.6, path, notes, title, one_step="; one decoder step's"
    )


# ---- Any encoder-decoder ---------------------------------------------------


def _leaves(value, name: str) -> list:
    """``(name, shape)`` of every tensor in ``value``, a tensor or a (named) tuple of
    them, the batch dimension left out: ``[("encoder.states", (5, 128)), ...]``."""
    if torch.is_tensor(value):
        return [(name, tuple(int(n) for n in value.shape[1:]))]
    if not isinstance(value, tuple):
        return []
    keys = getattr(value, "_fields", None) or [f"[{i}]" for i in range(len(value))]
    keys = [f"{name}{'.' * (key[0] != '[')}{key}" for key in keys]
    return [leaf for key, v in zip(keys, value) for leaf in _leaves(v, key)]


def module_schematic(model: EncoderDecoder, src, tgt_in) -> Schematic:
    r"""Any encoder-decoder as the column of its parts, in the order its forward pass
    ran them.

    Parameters
    ----------
    model : EncoderDecoder
        Any :class:`~convs2s_edu.seq2seq.EncoderDecoder` (eval mode, no autograd, as in
        :func:`convs2s_schematic`), a new model class included.
    src, tgt_in : Tensor or sequence of int, shapes (1, S) and (1, T)
        One example, as in :func:`convs2s_schematic`.

    Returns
    -------
    Schematic
        The figure; ``shapes`` maps ``"src"``, ``"tgt_in"`` and ``"<child>.<field>"``
        (or ``"<child>[i]"``) to shapes (batch left out); ``critical_path`` is
        :func:`critical_path` where the model's parts have one, None otherwise.

    Notes
    -----
    ``model(src, tgt_in)`` runs once with forward hooks on the model's direct children
    (``named_children``): a box per call, consecutive calls of one child drawn as one
    box (``× n``), each arrow labelled with the shapes of every tensor the box above
    returned (the fields of a named tuple such as
    :class:`~convs2s_edu.seq2seq.EncoderOut` by name). The column is the order of the
    calls, not every path of the data: the decoder also reads ``tgt_in``.
    :func:`convs2s_schematic` and :func:`gru_schematic` draw the inside of the two
    models of the paper.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(
            f"module_schematic draws an EncoderDecoder, got {type(model).__name__}"
        )
    src, tgt_in = _example(model, src, tgt_in)
    with _inference(model), _Trace(dict(model.named_children())) as t:
        model(src, tgt_in)
    runs = []  # [name, number of consecutive calls]
    for name in t.order:
        runs += [[name, 0]] if not runs or runs[-1][0] != name else []
        runs[-1][1] += 1
    d, source = _Drawing({}), "input"
    leaves = _leaves(src, "src") + _leaves(tgt_in, "tgt_in")
    node = d.box(source, _W / 2, 0.5, "src, tgt_in", fill="io")
    for name, count in [*runs, ("output", 0)]:
        kind = type(getattr(model, name, None)).__name__
        text = f"{name}: {kind}{f'  × {count}' * (count > 1)}" if count else name
        label = "\n".join(f"{k} ({', '.join(map(str, v))})" for k, v in leaves)
        gap = 0.3 + 0.19 * len(leaves)
        node = d.down(
            node, name, text, label, gap=gap, fill="enc" if count else "io", w=3.2
        )
        sizes = ";".join(",".join(map(str, v)) for _, v in leaves)
        d.ax.patches[-1].set_gid(f"arrow:{source}:{sizes}")  # the arrow just drawn
        d.shapes |= dict(leaves)
        source, leaves = name, _leaves(t.calls[name][-1].out, name) if count else []
    try:
        path = critical_path(model, src.shape[1], tgt_in.shape[1])
    except TypeError:
        path = None  # parts without a formula
    title = (
        f"{type(model).__name__}: its parts in the order the forward pass called them"
    )
    return d.done(node.bottom + 0.3, title, path)
