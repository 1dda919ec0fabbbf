r"""Experiments as text, HTML and figures: tables of ``mean [min–max]``, conclusions, the
claims table, bars with a dot per seed."""

from __future__ import annotations

from collections.abc import Sequence

from .registry import LONG_LENGTHS
from .runner import ExperimentResult
from .statistics import VERDICTS, format_spread, verdict

__all__ = [
    "BASE_COLUMNS",
    "format_result",
    "format_beam",
    "conclusion",
    "format_claims",
    "ClaimsTable",
    "plot_arms",
]

BASE_COLUMNS = (
    ("exact_match", "exact match", "{:.1%}"),
    ("token_accuracy", "token acc.", "{:.1%}"),
    ("valid_loss", "held-out loss", "{:.3f}"),
    ("sec_per_epoch", "s/epoch", "{:.2f}"),
)


def _cell(row: dict, key: str, fmt: str) -> str:
    return format_spread(row, key, fmt, one_seed="")


def format_result(result: ExperimentResult, columns: Sequence[tuple] | None = None) -> str:
    """The rows as an aligned text table: ``mean [min–max]`` per measured column.

    ``columns`` (default: the arm's constant columns, then ``BASE_COLUMNS``, then the
    greedy decoding time and longer-length accuracies where measured) are
    ``(key, header, format)`` triples. The ``beam`` experiment's columns per beam size
    are printed by :func:`format_beam`.
    """
    if columns is None:
        first = result.rows[0]
        columns = [(k, k.replace("_", " "), "{}") for k in result.experiment.arms[0].columns]
        columns += BASE_COLUMNS
        if "greedy_seconds" in first:
            columns.append(("greedy_seconds", "greedy s (test set)", "{:.2f}"))
        for lo, hi in LONG_LENGTHS:
            if f"token_accuracy_{lo}_{hi}" in first:
                columns.append((f"token_accuracy_{lo}_{hi}", f"tok. acc. {lo}-{hi}", "{:.1%}"))
    header = ["arm", *(h for _, h, _ in columns)]
    body = [[row["arm"], *(_cell(row, k, f) for k, _, f in columns)] for row in result.rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, body)])


def format_beam(result: ExperimentResult) -> str:
    """The ``beam`` experiment as a long table: one line per (arm, beam size); the times
    cover decoding the first ``BEAM_EXAMPLES`` test examples."""
    lines = [
        f"{'arm':>8}  {'beam':>4}  {'exact match':>24}  {'token acc.':>24}  {'decoding s':>26}"
    ]
    for row in result.rows:
        for k in result.budget.beam_sizes:
            lines.append(
                f"{row['arm']:>8}  {k:>4}  "
                f"{_cell(row, f'exact_match_beam{k}', '{:.1%}'):>24}  "
                f"{_cell(row, f'token_accuracy_beam{k}', '{:.1%}'):>24}  "
                f"{_cell(row, f'seconds_beam{k}', '{:.3f}'):>26}"
            )
    return "\n".join(lines)


def conclusion(
    result: ExperimentResult,
    key: str = "token_accuracy",
    *,
    what: str = "",
    higher_is_better: bool = True,
    fmt: str = "{:.1%}",
) -> str:
    """A sentence computed from the rows: the best arm by mean ``key``, and whether its lead
    over the runner-up is beyond the seed spread (:func:`verdict`).

    Parameters
    ----------
    result : ExperimentResult
    key : str
        A measured column, e.g. ``"token_accuracy"`` or ``"sec_per_epoch"``.
    what : str, optional
        How the sentence names the column (default: ``key`` with spaces).
    higher_is_better : bool
        ``False`` for times and losses.
    fmt : str
        Format of the numbers.

    Returns
    -------
    str
        "... is ahead of every other arm by more than the spread over N seeds." when
        the best arm's seed range lies beyond the runner-up's; otherwise the sentence says
        the difference is not resolved at this scale.
    """
    what = what or key.replace("_", " ")
    rows = sorted(result.rows, key=lambda r: r[key], reverse=higher_is_better)
    best = rows[0]
    if len(rows) == 1:
        return f"{best['arm']}: {what} {format_spread(best, key, fmt)}."
    second = rows[1]
    sign = 1.0 if higher_is_better else -1.0
    a = [sign * x for x in best[f"{key}_values"]]
    ahead = all(
        verdict(a, [sign * x for x in r[f"{key}_values"]]) == VERDICTS[0] for r in rows[1:]
    )
    head = (
        f"By mean {what}, {best['arm']} is first ({format_spread(best, key, fmt)}) and "
        f"{second['arm']} second ({format_spread(second, key, fmt)}): "
    )
    if ahead:
        return head + (
            f"{best['arm']} is ahead of every other arm by more than the spread "
            f"over {best['n_seeds']} seeds."
        )
    if best["n_seeds"] < 2:
        return (
            head + "with one seed per arm there is no spread, so the difference is not "
            "resolved at this scale."
        )
    return head + (
        f"its seed range overlaps that of at least one other arm, so which arm is "
        f"best by {what} is not resolved at this scale."
    )


def format_claims(rows: Sequence[dict]) -> str:
    """The rows of :func:`check_claims` as numbered plain-text paragraphs."""
    out = []
    for i, r in enumerate(rows, 1):
        out.append(
            f"{i}. {r['claim']}\n   source: {r['source']}; experiment: "
            f"{r['experiment']}\n   measured: {r['measured']}\n   verdict: "
            f"{r['verdict'].upper()}"
        )
    return "\n\n".join(out)


class ClaimsTable:
    """The rows of :func:`check_claims` as a table: HTML in a notebook or a gallery page
    (``_repr_html_``), plain text otherwise (:func:`format_claims`).

    Parameters
    ----------
    rows : sequence of dict
        From :func:`check_claims`.
    """

    _COLOURS = {VERDICTS[0]: "#1a7f37", VERDICTS[1]: "#b3261e", VERDICTS[2]: "#6e6e6e"}

    def __init__(self, rows: Sequence[dict]):
        self.rows = list(rows)

    def __repr__(self) -> str:
        return format_claims(self.rows)

    def _repr_html_(self) -> str:
        from html import escape

        head = "".join(
            f'<th style="text-align:left">{h}</th>'
            for h in ("#", "claim", "source", "experiment", "measured", "verdict")
        )
        body = []
        for i, r in enumerate(self.rows, 1):
            colour = self._COLOURS[r["verdict"]]
            cells = [
                str(i),
                escape(r["claim"]),
                escape(r["source"]),
                escape(r["experiment"]),
                escape(r["measured"]),
                f'<strong style="color:{colour}">{escape(r["verdict"])}</strong>',
            ]
            body.append(
                "<tr>" + "".join(f'<td style="text-align:left">{c}</td>' for c in cells) + "</tr>"
            )
        return (
            f'<table class="table claims-table"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>"
        )


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def plot_arms(
    ax,
    result: ExperimentResult,
    key: str = "token_accuracy",
    *,
    label: str | None = None,
    percent: bool = True,
    offset: float = 0.0,
    width: float = 0.7,
    color=None,
    legend: str | None = None,
):
    """Bars of the mean of ``key`` per arm, min–max whiskers and a dot per seed.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    result : ExperimentResult
    key : str
        A measured column.
    label : str, optional
        The y-axis label.
    percent : bool
        Multiply by 100 (accuracies).
    offset, width : float
        Bar position offset and width (for grouped bars).
    color : optional
        A matplotlib colour.
    legend : str, optional
        The bars' legend label.

    Returns
    -------
    matplotlib.container.BarContainer
    """
    scale = 100.0 if percent else 1.0
    xs = [i + offset for i in range(len(result.rows))]
    means = [r[key] * scale for r in result.rows]
    lo = [(r[key] - r[f"{key}_min"]) * scale for r in result.rows]
    hi = [(r[f"{key}_max"] - r[key]) * scale for r in result.rows]
    bars = ax.bar(
        xs,
        means,
        width=width,
        color=color,
        label=legend,
        alpha=0.8,
        yerr=[lo, hi],
        capsize=4,
        error_kw={"elinewidth": 1.2},
    )
    for x, r in zip(xs, result.rows):
        vals = [v * scale for v in r[f"{key}_values"]]
        ax.plot([x] * len(vals), vals, "k.", ms=4, zorder=3)
    if offset == 0.0:
        ax.set_xticks(range(len(result.rows)), [r["arm"] for r in result.rows])
    ax.set_ylabel(label or key.replace("_", " ") + (" (%)" if percent else ""))
    return bars
