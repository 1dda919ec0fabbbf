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
batch of one left out). No tensor of a figure is computed again outside the model:
each is one the pass produced (or a view of one, such as the halves :math:`A` and
:math:`B` of the convolution's output). Beside each diagram, :func:`critical_path`: how
many operations of that example must run one after another, in training and in
generation.

The three figures share one small layout, ``_Drawing``: a box is its text in a frame
(matplotlib's text ``bbox``), as large as the text; boxes stand in columns, each one
labelled arrow below the box drawn before it on the same axis (or level with another
box), so that a figure lists its boxes in the order the data flows through them, each
with the arrow that comes into it, and the arrows between columns name the boxes they
join.

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
from matplotlib.backends.backend_agg import FigureCanvasAgg
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
_R = 0.15  # an operator circle's radius
_FS = 9  # pt: the labels (11 px at 900 px wide); boxes 1 pt more, headings 3
_INK, _MUTED, _ACCENT = "#1a1a1a", "#555555", "#b34700"  # accent: context, recurrence
_FILL = dict(io="#f2f2f2", enc="#e6effa", dec="#e8f4e1", att="#fdefd9", op="#ffffff")
# under a label, over a line it crosses
_HALO = {"fc": "white", "ec": "none", "pad": 0.5}
_HEADING = dict(size=_FS + 3, bold=True, ha="center")


def _plain(label: str) -> str:
    """A label without its mathtext: ``"$a_{ij}$"`` -> ``"a_ij"``."""
    return "".join(ch for ch in label if ch not in "${}\\")


class _Node(NamedTuple):
    """A drawn box (or a point: no size): its centre and half sizes."""

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
    """The layout of a figure: boxes in columns, points, arrows, frames and texts on one
    matplotlib Axes, in inches, y down; records the shape of every tensor it labels.

    A box goes one labelled arrow (:data:`_GAP`) below the box drawn last on its axis
    ``x`` unless told where, so that a column is written in the order the data flows
    down it; an arrow joins two boxes or points by name."""

    def __init__(self, env: dict):
        self.fig = Figure(figsize=(_W, 1.0), facecolor="white")
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_axis_off()
        self.renderer = FigureCanvasAgg(self.fig).get_renderer()
        self.env, self.shapes, self.boxes, self.nodes = env, {}, [], {}
        self.last = {}  # the axis x of a column -> the name of its lowest box
        self._ids = Counter()

    def _gid(self, artist, gid: str):
        self._ids[gid] += 1
        artist.set_gid(gid if self._ids[gid] == 1 else f"{gid}#{self._ids[gid]}")
        return artist

    def text(self, x, y, s, *, size=_FS, color=_INK, bold=False, **kw):
        """Text (mathtext between ``$``), by default right of and below ``(x, y)``."""
        weight = "bold" if bold else "normal"
        kw = {"ha": "left", "va": "top", "fontweight": weight} | kw
        kw |= {"fontsize": size, "color": color, "math_fontfamily": "dejavusans"}
        return self.ax.text(x, y, s, family="DejaVu Sans", **kw)

    def box(
        self,
        name: str,
        text: str | None,
        x: float,
        after: str | float | None = None,
        gap: float = _GAP,
        *,
        into: tuple | None = None,
        fill: str | None = "op",
        level: str | None = None,
        ec: str = _INK,
        size: float = _FS + 1,
    ):
        """The box ``name`` (its id ``box:<name>``; its text ``text``, or its name where
        ``text`` is None) centred on ``x`` and sized to its text: its top ``gap`` below
        the box or point ``after`` (by default the box drawn last on ``x``; a column's
        first box 0.5 inches from the top) or at ``after`` inches, or its centre level
        with the box ``level``. An operator circle where ``text`` is ⊕ or ⊗, no outline
        where ``fill`` is None. ``into``: the label, size symbols and tensor of an
        :meth:`arrow` from ``after`` down into it (``()``: an arrow without a label)."""
        after = self.last.get(x, 0.5) if after is None else after
        op = text in ("⊕", "⊗")
        pad = 0.1 if op else 0.55  # of the font size
        style = "circle" if op else "round,rounding_size=0.45"
        bbox = dict(
            boxstyle=f"{style},pad={pad}", fc=_FILL[fill or "op"], ec=ec, lw=1.2
        )
        text = name if text is None else text
        size = _FS + 6 if op else size
        t = self.text(x, 0, text, size=size, ha="center", va="center", bbox=bbox)
        # the box's half sizes in inches: the text's, padded; a circle's radius
        extent = t.get_window_extent(self.renderer).size / self.fig.dpi
        hw, hh = (float(n) / 2 + pad * size / 72 for n in extent)
        if op:
            hw = hh = max(hw, hh)
        if level is not None:
            y = self.nodes[level].y
        else:
            top = self.nodes[after].bottom + gap if isinstance(after, str) else after
            y = top + hh
        t.set_y(y)
        if fill:
            self._gid(t.get_bbox_patch(), f"box:{name}")
            self.boxes.append(name)
        else:
            t.set_bbox(None)
        self.nodes[name] = _Node(x, y, hw, hh)
        self.last[x] = name
        if into is not None:
            self.arrow(after, name, *into)

    def point(self, name: str, x: float, after: str, gap: float, color=_INK):
        """A point on ``x``, ``gap`` below ``after``, where arrows branch off, start or
        bend: a dot of ``color`` (None: no dot)."""
        self.nodes[name] = _Node(x, self.nodes[after].bottom + gap)
        if color:
            self.ax.add_patch(Circle(self.nodes[name][:2], 0.035, color=color))

    def arrow(
        self,
        src: str,
        dst: str,
        label: str | None = None,
        dims: str | tuple = "",
        tensor: torch.Tensor | None = None,
        via: str | float | None = None,
        *,
        side: str = "right",
        low: bool = False,
        one_line: bool = False,
        color: str = _INK,
        lw: float = 1.2,
        bold: bool = False,
        id: str | None = None,
    ):
        """An arrow from the box or point ``src`` to ``dst``: straight, with one bend
        (``via="vh"``: down then across, ``"hv"``: across then down) or along the lane
        ``x = via``. Where it carries ``tensor``, its ``label`` (the paper's symbol) and
        ``(dims) = (the tensor's sizes)`` (:meth:`shape`) stand ``side`` (right or left)
        of its first vertical segment, at its top (its bottom where ``low``), or above
        the middle of a horizontal arrow. No head where it ends at a point. Its SVG id
        is ``id``, by default ``arrow:<label>:<sizes>``."""
        a, b = self.nodes[src], self.nodes[dst]
        lane = [(via, a.y), (via, b.y)]
        bends = {None: [], "vh": [(a.x, b.y)], "hv": [(b.x, a.y)]}
        pts = [a[:2], *bends.get(via, lane), b[:2]]
        pts[0], pts[-1] = a.border(pts[1]), b.border(pts[-2])
        # a head where it ends at a box, none at a point
        style = "-|>,head_length=0.7,head_width=0.32" if b.hw else "-"
        patch = FancyArrowPatch(path=Polyline(pts), arrowstyle=style, mutation_scale=10)
        patch.set(color=color, lw=lw, joinstyle="miter", capstyle="butt")
        shape = "" if tensor is None else self.shape(label, dims, tensor)
        sizes = ",".join(str(n) for n in tensor.shape[1:]) if shape else ""
        gid = id or f"arrow:{_plain(label or '')}:{sizes}"
        self.ax.add_patch(self._gid(patch, gid))
        if not label:
            return
        vertical = [(p, q) for p, q in zip(pts, pts[1:]) if p[0] == q[0]]
        if vertical:  # beside its first vertical segment, at the top or the bottom
            (x, y0), (_, y1) = vertical[0]
            y = max(y0, y1) - 0.07 if low else min(y0, y1) + 0.07
            at = (x + 0.08 if side == "right" else x - 0.08, y)
            kw = {"ha": "left" if side == "right" else "right"}
            kw["va"] = "bottom" if low else "top"
        else:  # above a horizontal arrow, in its middle
            at = ((pts[0][0] + pts[-1][0]) / 2, pts[0][1] - 0.05)
            kw = {"ha": "center", "va": "bottom"}
        text = f"{label}{'  ' if one_line else chr(10)}{shape}".strip()
        self.text(*at, text, color=color, bold=bold, bbox=_HALO, **kw)

    def frame(self, label: str, x0: float, x1: float, top: tuple, bottom: tuple):
        """A dashed frame around what repeats, from ``gap`` below the box ``top`` to
        ``gap`` below the box ``bottom`` (``(name, gap)`` each), ``label`` in a
        corner."""
        y0 = self.nodes[top[0]].bottom + top[1]
        y1 = self.nodes[bottom[0]].bottom + bottom[1]
        shape = "round,pad=0,rounding_size=0.1"
        patch = FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, shape)
        self.ax.add_patch(patch).set(fc="none", ec=_MUTED, ls=(0, (6, 4)), lw=1.1)
        style = dict(size=_FS + 1, color=_MUTED, bold=True, va="bottom")
        self.text(x0 + 0.12, y1 - 0.08, label, **style)

    def shape(self, symbol, dims, tensor) -> str:
        """``"(S, f) = (6, 128)"`` for ``tensor`` (batch of one left out), recorded
        under ``symbol``; ``dims``: ``"S f"`` or ``("S+k−1", "d")``. ``RuntimeError``
        where a size symbol disagrees with the forward pass."""
        dims = dims.split() if isinstance(dims, str) else dims
        shape = tuple(int(n) for n in tensor.shape[1:])
        sizes = tuple(self.env[s] for s in dims)
        if shape != sizes:
            raise RuntimeError(
                f"{_plain(symbol)}: ({', '.join(map(_plain, dims))}) = {sizes} "
                f"expected, the forward pass gave {shape}: the schematic would be wrong"
            )
        self.shapes[_plain(symbol)] = shape
        return f"({', '.join(dims)}) = ({', '.join(str(n) for n in shape)})"

    def finish(self, below, path, notes, title, one_step="") -> Schematic:
        """The critical-path panel on the left, ``(name, gap)`` below a box (``notes``:
        a line under each phase's count), the caption under everything, and the
        :class:`Schematic`."""
        S, T = path["S"], path["T"]
        y = self.nodes[below[0]].bottom + below[1]
        intro = f"(S = {S}, T = {T}): operations that\nmust run one after another"
        rows = [("Critical path on this example", _INK, True), (intro, _MUTED, False)]
        for phase, note in zip(("training", "generation"), notes):
            formula = f"{path[phase]['formula']} = {path[phase]['worked']}"
            name = "training (teacher forcing)" if phase == "training" else phase
            rows += [
                (name, _INK, True),
                (formula, _ACCENT, False),
                (note, _MUTED, False),
            ]
        bottom = y + 0.1
        for text, color, bold in rows:
            text = text.replace("L_enc", "$L_{enc}$").replace("L_dec", "$L_{dec}$")
            self.text(0.32, bottom, text, size=_FS + 1, color=color, bold=bold)
            bottom += 0.22 * (1 + text.count("\n"))
        panel = FancyBboxPatch((0.2, y), 3.3, bottom - y + 0.1, "round,pad=0")
        self.ax.add_patch(self._gid(panel, "box:critical path"))
        panel.set(fc="#fafafa", ec=_MUTED)
        bottom = max(bottom, max(t.get_position()[1] for t in self.ax.texts)) + 0.45
        caption = (
            "Arrows: tensors, (symbols) = (sizes) of one forward pass on this example "
            f"(S = {S}, T = {T}{one_step}); the batch of 1 is left out."
        )
        self.text(_W / 2, bottom, caption, color=_MUTED, ha="center")
        return self.done(bottom + 0.35, title, path)

    def done(self, height, title, path) -> Schematic:
        """The figure cut to ``height`` inches, as a :class:`Schematic`."""
        self.fig.set_size_inches(_W, height)
        self.ax.set(xlim=(0, _W), ylim=(height, 0))
        arrows = "; ".join(f"{name} {shape}" for name, shape in self.shapes.items())
        boxes = ", ".join(self.boxes)
        desc = f"{title}. Boxes: {boxes}. Arrows, with their shapes: {arrows}."
        return Schematic(self.fig, title, self.shapes, path, desc)


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
        style = {"svg.hashsalt": "convs2s-edu", "svg.fonttype": "path"}
        options = dict(format="svg", facecolor="white", metadata={"Date": None})
        with matplotlib.rc_context(style):
            figure.savefig(buffer, **options)
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
        if L == 1:
            return (length, f"{n}", n)
        return (f"{layers}·{length}", f"{L}·{n}", L * n)

    # (formula, worked, count) of each part; a convolutional stack computes a layer at
    # once
    conv_enc, conv_dec = isinstance(enc, ConvEncoder), isinstance(dec, ConvDecoder)
    encoder = steps(L_enc, S, "L_enc", "S")
    encoder = ("L_enc", f"{L_enc}", L_enc) if conv_enc else encoder
    decoder = dict.fromkeys(("training", "generation"), steps(L_dec, T, "L_dec", "T"))
    # training: the whole prefix at once; generation: T steps of L_dec layers
    if conv_dec:
        decoder = {"training": ("L_dec", f"{L_dec}", L_dec)}
        decoder["generation"] = ("T·L_dec", f"{T}·{L_dec}", T * L_dec)
    phases = {}
    for phase, (formula, worked, count) in decoder.items():
        count += encoder[2]
        formula, worked = f"{encoder[0]} + {formula}", f"{encoder[1]} + {worked}"
        phases[phase] = dict(count=count, formula=formula, worked=f"{worked} = {count}")
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
        self.modules, self.calls = modules, {name: [] for name in modules}
        self.order, self._open, self._hooks = [], [], []

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

    def _post(self, module, args, out):
        self._open.pop().out = out

    def __enter__(self):
        for name, m in self.modules.items():
            pre = m.register_forward_pre_hook(lambda *a, n=name: self._pre(n, *a))
            post = m.register_forward_hook(self._post)
            self._hooks += [pre, post]
        return super().__enter__()

    def __exit__(self, *exc):
        for hook in self._hooks:
            hook.remove()
        return super().__exit__(*exc)


def _example(model, kind: type, src, tgt_in):
    """Check the model (a ``kind``) and the example; returns ``(src, tgt_in)`` as
    ``(1, S)``, ``(1, T)`` on the model's device."""
    if not isinstance(model, kind):
        raise TypeError(f"{kind.__name__} expected, got {type(model).__name__}")
    src, tgt_in = model.check_inputs(src, tgt_in)
    if src.shape[0] != 1:
        raise ValueError(
            f"draw one example (a batch of 1), got a batch of {src.shape[0]}"
        )
    device = next(model.parameters()).device
    return src.to(device), tgt_in.to(device)


# ---- ConvS2S -------------------------------------------------------------


def _conv_side(d, X, tokens, embedded, block, *, causal, k, positions):
    """One side of the ConvS2S figure down the axis ``X``: the tokens, the embeddings,
    the input projection and the first block (``block``: its trace)."""
    if causal:  # the decoder's side: the target prefix, causal convolutions
        n, i, tok, e, side, fill, zeros = "T", "i", "y", "g", "d", "dec", k - 1
        top, emb, proj = "target tokens", "target embedding", "decoder input projection"
        conv, tokens_text = "causal convolution", "<sos>, $y_1$ … $y_{T−1}$"
        pad = f"k−1 = {zeros} zero{'s' * (zeros != 1)} on the left only"
    else:
        n, i, tok, e, side, fill, zeros = "S", "j", "x", "e", "e", "enc", (k - 1) // 2
        top, emb, proj = "source tokens", "embedding", "input projection"
        conv, tokens_text = "convolution", "source tokens $x_1$ … $x_S$"
        pad = f"(k−1)/2 = {zeros} zero{'s' * (zeros != 1)} on each side"
    pos = f"w_{i} + p_{i}$" if positions else f"w_{i}$ (no positions)"
    x_pad = block.ops["pad"][0][1]  # the convolution's input, padded
    padded = d.shape(f"{side} convolution input, padded", (f"{n}+k−1", "d"), x_pad)
    (Y,), v = block.ops["glu"][0]  # [A B] = W * X + b_w and v = A ⊗ σ(B)
    A, B = Y.chunk(2, dim=-1)  # views of the two halves of the channels
    conv_text = f"{conv}, k = {k}\n{pad}\ninput padded to {padded}"
    gate, add, dims = "⊗ (gated linear unit)", "⊕ residual", f"{n} d"
    d.box(top, tokens_text, X, fill="io")
    d.box(emb, f"embeddings ${pos}", X, into=(tok, n, tokens), fill=fill)
    d.box(proj, "input projection f → d", X, fill=fill)
    d.arrow(emb, proj, f"${e}_{i} = {pos}", f"{n} f", embedded)
    d.box(conv, conv_text, X, gap=0.87, fill=fill, size=_FS)
    d.arrow(proj, conv, "block input", dims, block.args[0], low=True)
    d.point(f"{e}_{i} branch", X, emb, 0.5)
    d.point("residual", X, proj, 0.65)
    d.point("Y", X, conv, 0.48)
    d.arrow(conv, "Y", "Y = [A B]", f"{n} 2d", Y)
    d.box("σ(B)", None, X + 0.95, "Y", 0.55)
    d.arrow("Y", "σ(B)", "B", dims, B, "hv", side="left", low=True, one_line=True)
    d.box(gate, "⊗", X, "σ(B)", 0.5 - _R)
    d.arrow("Y", gate, "A", dims, A, via=X - 0.95, one_line=True)
    # σ(B) is computed inside F.glu and never kept: its arrow carries B's shape
    d.arrow("σ(B)", gate, "σ(B)", dims, B, via="vh", side="left", one_line=True)
    d.box(add, "⊕", X, gap=0.5, into=("v = A ⊗ σ(B)", dims, v))
    d.arrow("residual", add, via=X - 1.45)
    above = d.nodes["residual"].y - 0.04  # the lane's name, above its start
    d.text(X - 1.39, above, "residual", color=_MUTED, va="bottom")
    d.box("× √0.5", None, X, gap=0.17, into=())


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
    src, tgt_in = _example(model, ConvS2S, src, tgt_in)
    enc, dec, cfg = model.encoder, model.decoder, model.cfg
    # the first attending layer's (every layer attends but in convs2s_edu.ablations)
    att, layer = dec.attention[0], getattr(cfg, "attending_layers", (0,))[0]
    modules = dict(enc=enc, e=enc.embed, block_e=enc.blocks[0], out_e=enc.out_proj)
    modules |= dict(d=dec.embed, block_d=dec.blocks[layer], att=att, W_d=att.W_d)
    modules |= dict(W_c=dec.W_c[0], W_o=dec.W_o)
    with _inference(model), _Trace(modules) as t:  # eval mode (no dropout), no autograd
        model(src, tgt_in)
    S, T, k = src.shape[1], tgt_in.shape[1], cfg.kernel_size
    f, dim, V = cfg.embed_dim, cfg.hidden_dim, t["W_o"].out.shape[-1]
    env = {"S": S, "T": T, "f": f, "d": dim, "2d": 2 * dim, "V": V}
    d = _Drawing(env | {"S+k−1": S + k - 1, "T+k−1": T + k - 1})
    (query, _), scores = t["att"].ops["bmm"][0]  # d_i · z_j: (1, T, f) times (1, f, S)
    (_, values), _ = t["att"].ops["bmm"][1]  # Σ_j a_ij (z_j + e_j): times (1, S, f)
    a, z = t["att"].out[1], t["enc"].out.states  # (1, T, S), the keys (1, S, f)
    EX, AX, DX = 1.9, 5.0, 8.0  # the encoder's, the attention's and the decoder's axes
    only = getattr(cfg, "attention_layers", None)
    every = "" if only is None else f", attention in {only}"
    c = "$c_i × √m$" if cfg.scale_context else "$c_i$"
    q, ctx = "d_i = W_d h_i + b_d + g_i", "c_i = Σ_j a_ij (z_j + e_j)"
    out, scale, last = "output projection", "× √0.5", "× √0.5 (context)"
    score, enters = "scores d_i · z_j", "⊕ W_c c_i"
    d.text(EX, 0.12, "Encoder: all S positions at once", **_HEADING)
    d.text(DX, 0.12, "Decoder: all T at once", **_HEADING)
    # ---- the encoder; the keys z_j and the values z_j + e_j
    side = dict(k=k, causal=False, positions=getattr(cfg, "source_positions", True))
    _conv_side(d, EX, src, t["e"].out, t["block_e"], **side)
    layers = f"× $L_{{enc}}$ = {cfg.n_encoder_layers}"
    d.frame(layers, EX - 1.6, EX + 1.6, ("input projection", 0.12), (scale, 0.14))
    d.box(out, "output projection d → f", EX, gap=_GAP + 0.2, fill="enc")
    d.arrow(scale, out, "$z^l_j$", "S d", t["out_e"].args[0], low=True)
    d.box("z + e", "⊕", EX, gap=0.95, fill="enc")
    d.arrow(out, "z + e", "keys $z_j = z^u_j$", "S f", z, color=_ACCENT)
    d.point("keys", EX, out, 0.6, _ACCENT)
    d.text(EX - 0.22, d.nodes["z + e"].y - 0.33, "z + e", color=_MUTED, ha="right")
    d.arrow("e_j branch", "z + e", "$e_j$", via=0.16, low=True)
    # ---- the decoder's block, then the attention of its layer
    side |= dict(causal=True, positions=getattr(cfg, "target_positions", True))
    _conv_side(d, DX, tgt_in, t["d"].out, t["block_d"], **side)
    d.point("h_i", DX, scale, 0.5)
    d.text(AX, d.nodes["h_i"].y - 0.5, "Attention of the layer", **_HEADING)
    d.box("W_d", "$W_d$   (d → f)", AX, fill="att", level="h_i")
    d.arrow("h_i", "W_d")
    d.box(q, "⊕", AX, gap=0.65, into=("$W_d h_i$", "T f", t["W_d"].out), fill="att")
    d.box(score, "scores $d_i · z_j$", AX, into=(f"${q}$", "T f", query), fill="att")
    d.box("softmax over j", None, AX, into=("$d_i · z_j$", "T S", scores), fill="att")
    c_i = "$c_i = Σ_j a_{ij} (z_j + e_j)$"
    d.box(ctx, c_i, AX, into=("$a_{ij}$", "T S", a), fill="att")
    d.box("W_c", "$W_c$   (f → d)", AX, fill="att")
    d.arrow(ctx, "W_c", c, "T f", t["W_c"].args[0], color=_ACCENT)
    d.text(AX + 0.22, d.nodes[q].y, "+ $b_d$", size=_FS + 1, va="center")
    d.arrow("g_i branch", q, "$g_i$", via=3.92, low=True)
    d.arrow("keys", score, via=3.6, color=_ACCENT)
    d.arrow("z + e", ctx, "values $z_j + e_j$", "S f", values, "vh", color=_ACCENT)
    # ---- the context enters the decoder layer; the output layer
    d.box(enters, "⊕", DX, fill="att", level="W_c")
    d.arrow(scale, enters, "$h_i$", "T d", t["block_d"].out)
    context = ("$W_c c_i$: the context enters", "T d", t["W_c"].out)
    d.arrow("W_c", enters, *context, color=_ACCENT, lw=2.5)
    d.box(last, "× √0.5", DX, gap=0.17, into=())
    layers = f"× $L_{{dec}}$ = {cfg.n_decoder_layers} layers{every}"
    d.frame(layers, 3.72, 9.86, ("decoder input projection", 0.12), (last, 0.14))
    d.box("W_o", "output layer $W_o$  (d → V)", DX, gap=_GAP + 0.2, fill="dec")
    d.arrow(last, "W_o", "$h^L_i$", "T d", t["W_o"].args[0], low=True)
    p = "softmax: $p(y_{i+1} | y_{≤i}, x)$"
    d.box("softmax p(y_i+1)", p, DX, into=("logits", "T V", t["W_o"].out), fill="io")
    notes = (
        "layers; each computes all positions",
        "one token per step, L_dec layers each",
    )
    title = (
        f"ConvS2S (Gehring et al., 2017, Figure 1): {cfg.n_encoder_layers} encoder "
        f"blocks, {cfg.n_decoder_layers} decoder layers with attention, f = {f}, "
        f"d = {dim}, k = {k}"
    )
    return d.finish((ctx, 0.8), critical_path(model, S, T), notes, title)


# ---- The GRU baseline ----------------------------------------------------


def _cells(d, x, S, y, half, *, forward: bool):
    """One direction of the bidirectional GRU from ``y`` inches down: what it computes
    (``half``: its states) above a cell per position (at most 7 drawn) across
    ``x ± 1.4``, and the arrows that chain the cells in the order it reads."""
    way, symbol = ("forward", "$→h_j$") if forward else ("backward", "$←h_j$")
    labels = [str(j) for j in range(1, S + 1)]
    labels = labels[:5] + ["…"] + labels[-1:] if S > 7 else labels
    step = min(0.52, 2.6 / max(len(labels) - 1, 1))
    text = f"{way} {symbol}  {d.shape(symbol, 'S n', half)}"
    d.text(x - 1.4, y, text, color=_MUTED)
    names = [f"{way} cell {label}" for label in labels]
    for j, (name, label) in enumerate(zip(names, labels)):
        at = x + (j - (len(labels) - 1) / 2) * step
        d.box(name, label, at, y + 0.2, fill=None if label == "…" else "op")
    for a, b in zip(names, names[1:]) if forward else zip(names[1:], names):
        d.arrow(a, b, color=_ACCENT)


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
    src, tgt_in = _example(model, RNNSeq2Seq, src, tgt_in)
    enc, dec, cfg = model.encoder, model.decoder, model.cfg
    modules = dict(enc=enc, x=enc.embed, W_init=dec.W_init, att=dec.attention)
    modules |= dict(y=dec.embed, U_a=dec.attention.U_a, gru=dec.gru, W_s=dec.W_s)
    with _inference(model), _Trace(modules) as t:  # eval mode (no dropout), no autograd
        state = dec.start(model.encode(src))
        for i in range(tgt_in.shape[1]):  # teacher forcing, one step after another
            state = dec.step(tgt_in[:, i], state)[2]
    h, h_back_1 = t["enc"].out.states, t["enc"].out.summary  # (1, S, 2n), (1, n)
    s_prev, keys, values = t["att"].args[:3]  # (1, n), (1, S, n'), (1, S, 2n)
    c_t, a_t = t["att"].out  # (1, 2n), (1, S)
    (e_tj,), _ = t["att"].ops["softmax"][0]  # (1, S)
    s_t = t["gru"].out[0][:, 0]  # (1, n): the top layer's new state
    S, T, m, n = src.shape[1], tgt_in.shape[1], cfg.embed_dim, cfg.hidden_dim
    A, L_enc, L_dec = cfg.attention_dim, cfg.n_encoder_layers, cfg.n_decoder_layers
    env = {"S": S, "T": T, "m": m, "n": n, "2n": 2 * n, "n'": A, "m+2n": m + 2 * n}
    d = _Drawing(env | {"V": t["W_s"].out.shape[-1], "$L_{dec}$·n": L_dec * n})
    EX, AX, DX, YX = 1.8, 5.0, 7.4, 9.2  # encoder, attention, decoder, decoder input
    gru_in = d.shape("[E y_t−1; c_t]", ("m+2n",), t["gru"].args[0][:, 0])
    gru = "bidirectional GRU"
    energy = "e_tj = v_a^T tanh(W_a h_j + U_a s_t−1 + b_a)"
    ctx, s, step = "c_t = Σ_j a_tj h_j", "decoder state s_t−1", "decoder GRU"
    prev, E = "previous token y_t−1", "decoder embedding E"
    texts = dict(  # the longer texts of the boxes and labels below
        layers=f"bidirectional GRU, {L_enc} layer{'s' * (L_enc > 1)}",
        h_1="$←h_1$ (the backward GRU's last state)",
        energy="$e_{tj} = v_a^T \\tanh(W_a h_j$\n$+\\ U_a s_{t−1} + b_a)$",
        step=f"$s_t$ = GRU($s_{{t−1}}$, [E $y_{{t−1}}$; $c_t$])\n"
        f"input [E $y_{{t−1}}$; $c_t$] {gru_in}",
        loop="next step: $s_t$ becomes $s_{t−1}$",
        steps=f"T = {T} steps, one after another",
        frame=f"one decoder step, × T = {T}",
    )
    d.text(EX, 0.12, "Encoder: a bidirectional GRU", **_HEADING)
    d.text(DX + 0.4, 0.12, "Decoder: one step after another", **_HEADING)
    # ---- the encoder
    d.box("source tokens", "source tokens $x_1$ … $x_S$", EX, fill="io")
    d.box("embedding", None, EX, into=("x", "S", src), fill="enc")
    top = d.nodes["embedding"].bottom + _GAP  # the GRU's box, around its cells
    box = FancyBboxPatch((EX - 1.55, top), 3.1, 1.42, "round,pad=0,rounding_size=0.06")
    d.ax.add_patch(d._gid(box, f"box:{gru}")).set(fc=_FILL["enc"], ec=_INK, lw=1.2)
    d.nodes[gru] = _Node(EX, top + 0.71, 1.55, 0.71)
    d.boxes.append(gru)
    d.arrow("embedding", gru, "E $x_j$", "S m", t["x"].out)
    d.text(EX, top + 0.1, texts["layers"], size=_FS + 1, bold=True, ha="center")
    _cells(d, EX, S, top + 0.36, h[..., :n], forward=True)
    _cells(d, EX, S, top + 0.94, h[..., n:], forward=False)
    d.box("W_a", "$W_a$  (2n → n')", EX, gru, _GAP + 0.1, fill="att")
    d.arrow(gru, "W_a", "$h_j = [→h_j; ←h_j]$", "S 2n", h)
    d.point("h_j", EX, gru, 0.3)
    # ---- s_0 from ←h_1, the attention, one decoder step
    d.box("W_init", "$s_0 = \\tanh(W_{init}\\ ←h_1)$", DX, 0.8, fill="dec")
    d.point("←h_1", EX + 1.55, gru, -0.21, None)  # the backward row's end
    d.arrow("←h_1", "W_init", texts["h_1"], "n", h_back_1, via=3.55)
    d.box(s, "decoder state $s_{t−1}$", DX, fill="dec", ec=_ACCENT)
    d.arrow("W_init", s, "$s_0$", "$L_{dec}$·n", t["W_init"].out, one_line=True)
    d.box("U_a", "$U_a$   (n → n')", AX, s, 0.45, fill="att")
    d.arrow(s, "U_a", "$s_{t−1}$", "n", s_prev, via=6.0, low=True)
    d.box(energy, texts["energy"], AX, fill="att", level="W_a")
    d.arrow("U_a", energy, "$U_a s_{t−1}$", "n'", t["U_a"].out)
    d.arrow("W_a", energy, "keys $W_a h_j$", "S n'", keys)
    d.box("softmax over j", None, AX, into=("$e_{tj}$", "S", e_tj), fill="att")
    d.box(ctx, "$c_t = Σ_j a_{tj} h_j$", AX, into=("$a_{tj}$", "S", a_t), fill="att")
    d.arrow("h_j", ctx, "values $h_j$", "S 2n", values, 0.24, low=True, one_line=True)
    d.box(step, texts["step"], DX, ctx, 0.6, fill="dec")
    d.arrow(ctx, step, "$c_t$", "2n", c_t, via="vh", lw=2.5)
    d.box(prev, "$y_{t−1}$\n<sos> first", YX, fill="io", level="U_a")
    d.box(E, "E", YX, fill="dec")
    d.arrow(prev, E, "y", "T", tgt_in, side="left")
    d.arrow(E, step, "E $y_{t−1}$", "m", t["y"].out, via="vh", side="left")
    d.arrow(s, step, "$s_{t−1}$", "n", s_prev, side="left", low=True)
    d.box("W_s", "output layer $W_s$  (n → V)", DX, step, 1.0, fill="dec")
    d.arrow(step, "W_s", "$s_t$", "n", s_t, side="left")
    p = "softmax: $p(y_t | y_{<t}, x)$"
    d.box("softmax p(y_t)", p, DX, into=("logits", "V", t["W_s"].out), fill="io")
    d.point("s_t", DX, step, 0.3, _ACCENT)  # s_t goes back to s_{t-1} from here
    recurrence = dict(color=_ACCENT, lw=2.5, bold=True)
    d.arrow("s_t", s, texts["loop"], via=9.82, side="left", low=True, **recurrence)
    d.text(9.74, d.nodes["s_t"].y + 0.06, texts["steps"], color=_ACCENT, ha="right")
    d.frame(texts["frame"], 3.65, 9.97, ("W_init", 0.48), (step, 0.8))
    notes = (
        "GRU steps; teacher forcing does not help",
        "the same steps: one token per step",
    )
    title = (
        f"GRU + Bahdanau attention: bidirectional GRU encoder ({L_enc} layer(s)), GRU "
        f"decoder ({L_dec} layer(s)), embeddings m = {m}, states n = {n}, attention "
        f"n' = {A}"
    )
    path = critical_path(model, S, T)
    return d.finish((ctx, 0.6), path, notes, title, one_step="; one decoder step's")


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
    src, tgt_in = _example(model, EncoderDecoder, src, tgt_in)
    with _inference(model), _Trace(dict(model.named_children())) as t:
        model(src, tgt_in)
    runs = []  # [name, number of consecutive calls]
    for name in t.order:
        runs += [[name, 0]] if not runs or runs[-1][0] != name else []
        runs[-1][1] += 1
    d, source = _Drawing({}), "input"
    leaves = _leaves(src, "src") + _leaves(tgt_in, "tgt_in")
    d.box(source, "src, tgt_in", _W / 2, fill="io")
    for name, count in [*runs, ("output", 0)]:
        kind = type(getattr(model, name, None)).__name__
        text = f"{name}: {kind}{f'  × {count}' * (count > 1)}" if count else name
        label = "\n".join(f"{k} ({', '.join(map(str, v))})" for k, v in leaves)
        sizes = ";".join(",".join(map(str, v)) for _, v in leaves)
        fill, gap = "enc" if count else "io", 0.3 + 0.19 * len(leaves)
        d.box(name, text, _W / 2, gap=gap, fill=fill)
        d.arrow(source, name, label, id=f"arrow:{source}:{sizes}")
        d.shapes |= dict(leaves)
        source, leaves = name, _leaves(t.calls[name][-1].out, name) if count else []
    try:
        path = critical_path(model, src.shape[1], tgt_in.shape[1])
    except TypeError:
        path = None  # parts without a formula
    title = (
        f"{type(model).__name__}: its parts in the order the forward pass called them"
    )
    return d.done(d.nodes["output"].bottom + 0.3, title, path)
