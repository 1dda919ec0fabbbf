r"""Experiments as text, HTML and figures: tables of ``mean [min–max]``, conclusions,
the claims table, bars with a dot per seed, learning curves."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .inference import VERDICTS, paired_test
from .runner import ExperimentResult
from .statistics import format_spread

__all__ = [
    "BASE_COLUMNS",
    "format_result",
    "format_beam",
    "conclusion",
    "format_claims",
    "ClaimsTable",
    "plot_arms",
    "plot_curves",
]

BASE_COLUMNS = (
    ("exact_match", "exact match", "{:.1%}"),
    ("token_accuracy", "token acc.", "{:.1%}"),
    ("valid_loss", "held-out loss", "{:.4f}"),
    ("steps_to_0.9", "steps to 90%", "{:,.0f}"),
)


def _cell(row: dict, key: str, fmt: str) -> str:
    return format_spread(row, key, fmt, one_seed="")


def format_result(
    result: ExperimentResult, columns: Sequence[tuple] | None = None
) -> str:
    """The rows as an aligned text table: ``mean [min–max]`` per measured column.

    ``columns`` (default: the arm's task and constant columns, then ``BASE_COLUMNS``)
    are ``(key, header, format)`` triples. Steps to 90% held-out exact match are over
    the seeds that got there (the cell says how many when not all did; ``never`` when
    none). The ``beam`` experiment's columns per beam size are printed by
    :func:`format_beam`.
    """
    if columns is None:
        columns = [("task", "task", "{}")]
        columns += [
            (k, k.replace("_", " "), "{}") for k in result.experiment.arms[0].columns
        ]
        columns += BASE_COLUMNS
    header = ["arm", *(h for _, h, _ in columns)]
    body = [
        [row["arm"], *(_cell(row, k, f) for k, _, f in columns)] for row in result.rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, body)])


def format_beam(result: ExperimentResult) -> str:
    """The ``beam`` experiment as a long table: one line per (arm, beam size), on the
    first ``Budget.beam_examples`` test examples."""
    lines = [f"{'arm':>8}  {'beam':>4}  {'exact match':>26}  {'token acc.':>26}"]
    for row in result.rows:
        for k in result.budget.beam_sizes:
            lines.append(
                f"{row['arm']:>8}  {k:>4}  "
                f"{_cell(row, f'exact_match_beam{k}', '{:.1%}'):>26}  "
                f"{_cell(row, f'token_accuracy_beam{k}', '{:.1%}'):>26}"
            )
    return "\n".join(lines)


def conclusion(
    result: ExperimentResult,
    key: str = "exact_match",
    *,
    what: str = "",
    higher_is_better: bool = True,
    fmt: str = "{:.1%}",
) -> str:
    """A sentence computed from the rows: the first two arms by mean ``key``, and the
    paired difference between them over the seeds with its 90% interval.

    The verdicts of the claims (a minimum effect, a correction across claims) are on the
    claims page; this sentence only says where the two leading arms stand and how
    precisely the seeds pin their difference down.
    """
    what = what or key.replace("_", " ")
    rows = [r for r in result.rows if math.isfinite(r[key])]
    if not rows:
        return f"No arm has a value of {what}."
    rows.sort(key=lambda r: r[key], reverse=higher_is_better)
    best = rows[0]
    if len(rows) == 1:
        return f"{best['arm']}: {what} {format_spread(best, key, fmt)}."
    second = rows[1]
    head = (
        f"By mean {what}, {best['arm']} is first ({format_spread(best, key, fmt)}) and "
        f"{second['arm']} second ({format_spread(second, key, fmt)})"
    )
    a, b = best[f"{key}_values"], second[f"{key}_values"]
    pairs = [(x, y) for x, y in zip(a, b) if math.isfinite(x) and math.isfinite(y)]
    if len(pairs) < 2:
        return head + "; too few seeds with both values for a paired interval."
    t = paired_test([x for x, _ in pairs], [y for _, y in pairs], min_effect=1e-9)
    lo, hi = t.interval(0.90)
    where = "excludes" if lo > 0 or hi < 0 else "includes"
    return (
        head + f": the paired difference over {t.n} seeds is {fmt.format(t.mean)} "
        f"(90% interval {fmt.format(lo)} to {fmt.format(hi)}, which {where} zero)."
    )


def _effect(row: dict) -> str:
    """What a row of :func:`~convs2s_edu.lab.experiments.check_claims` measured, in
    short: the difference (with its 90% interval) of the pair that decided it, named when
    the row has several; for a row that measured nothing, why."""
    pairs = row.get("pairs") or []
    if len(pairs) < 2:
        return row.get("difference") or row["reason"]
    decided = next((p for p in pairs if p["against"] == row["decided_by"]), pairs[0])
    return f"against {decided['against']}: {decided['difference']}"


def format_claims(rows: Sequence[dict], compact: bool = False) -> str:
    """The rows of :func:`~convs2s_edu.lab.experiments.check_claims` as numbered
    paragraphs, or with ``compact`` one line each: the claim in short, the verdict, the
    deciding pair's difference with its interval and the source's numbers in short."""
    if compact:
        return "\n".join(
            f"{i}. {r['claim'].short}: {r['verdict']}; {_effect(r)}; "
            f"the source: {r['claim'].reported_short}"
            for i, r in enumerate(rows, 1)
        )
    out = []
    for i, r in enumerate(rows, 1):
        c = r["claim"]
        lines = [
            f"{i}. {c.text}",
            f"   source: {c.source}; kind: {c.kind}; judged at {r['budget']}",
            f"   the source reports: {c.reported}",
        ]
        if "measured" in r:
            lines.append(f"   measured: {r['measured']}; difference {r['difference']}")
            lines.append(
                f"   minimum effect {r['min_effect']} ({c.why}); detectable with these seeds: "
                f"{r['detectable'] or 'n/a (not judged)'}"
            )
        lines.append(
            f"   verdict: {r['verdict'].upper()}"
            + (f" ({r['reason']})" if r["reason"] else "")
            + f"; agrees with the source: {r['agrees']}"
        )
        out.append("\n".join(lines))
    return "\n\n".join(out)


class ClaimsTable:
    """The rows of :func:`~convs2s_edu.lab.experiments.check_claims` as a table: HTML in
    a notebook or a gallery page (``_repr_html_``), plain text otherwise
    (:func:`format_claims`).

    Parameters
    ----------
    rows : sequence of dict
    compact : bool, optional
        One short line a claim, for the top of a page: the claim in a few words, the
        verdict, the difference of the pair that decided it with its 90% interval, and
        the source's numbers in a few words. By default every column: the claim as its
        source states it, the measurements of both sides, the minimum effect and what
        the seeds can detect, the verdict's reason.
    """

    #: Green supported, red contradicted, blue no practical difference; grey the rest
    #: (not resolved, not tested, measured or derived but not judged).
    _COLOURS = {
        VERDICTS[0]: "#1a7f37",
        VERDICTS[1]: "#b3261e",
        VERDICTS[2]: "#1f5fa8",
    }

    def __init__(self, rows: Sequence[dict], compact: bool = False):
        self.rows, self.compact = list(rows), compact

    def __repr__(self) -> str:
        return format_claims(self.rows, self.compact)

    def _verdict(self, row: dict) -> str:
        from html import escape

        colour = self._COLOURS.get(row["verdict"], "#6e6e6e")
        return f'<strong style="color:{colour}">{escape(row["verdict"])}</strong>'

    def _table(self, heads: Sequence[str], body: Sequence[Sequence[str]]) -> str:
        cell = '<{0} style="text-align:left">{1}</{0}>'
        head = "".join(cell.format("th", h) for h in heads)
        rows = "".join(
            "<tr>" + "".join(cell.format("td", x) for x in cells) + "</tr>"
            for cells in body
        )
        kind = "claims-summary" if self.compact else "claims-table"
        # the summary a little smaller than the text, to fit the first screen
        style = ' style="font-size:0.9em"' if self.compact else ""
        # in a box that scrolls sideways where the page is narrower than the table
        table = (
            f'<div style="overflow-x:auto"><table class="table {kind}"{style}>'
            f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
        )  # the theme sizes <small> by the page's font, larger than a table cell's
        return table.replace("<small>", '<small style="font-size:0.85em">')

    def _repr_html_(self) -> str:
        from html import escape

        if self.compact:
            heads = (
                "#",
                "claim",
                "verdict",
                "measured here (90% interval)",
                "the source",
            )
            body = [
                (
                    str(i),
                    escape(r["claim"].short),
                    self._verdict(r),
                    escape(_effect(r)),
                    escape(r["claim"].reported_short),
                )
                for i, r in enumerate(self.rows, 1)
            ]
            return self._table(heads, body)
        heads = ("#", "claim", "the source reports", "kind", "measured here", "verdict")
        body = []
        for i, r in enumerate(self.rows, 1):
            c = r["claim"]
            ours = ""
            if "measured" in r:
                ours = (
                    f"{escape(r['measured'])}<br>difference {escape(r['difference'])}<br>"
                    f"<small>minimum effect {escape(r['min_effect'])} ({escape(c.why)}); "
                    f"detectable: "
                    f"{escape(r['detectable'] or 'n/a (not judged)')}</small>"
                )
            reason = f"<br><small>{escape(r['reason'])}</small>" if r["reason"] else ""
            body.append(
                (
                    str(i),
                    f"{escape(c.text)}<br><small>{escape(c.source)}</small>"
                    + (
                        f"<br><small><em>{escape(c.note)}</em></small>"
                        if c.note
                        else ""
                    ),
                    escape(c.reported),
                    f"{escape(c.kind)}<br><small>at {escape(r['budget'])}</small>",
                    ours,
                    self._verdict(r)
                    + reason
                    + f"<br><small>agrees with the source: {escape(r['agrees'])}</small>",
                )
            )
        return self._table(heads, body)


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def plot_arms(
    ax,
    result: ExperimentResult,
    key: str = "exact_match",
    *,
    label: str | None = None,
    percent: bool = True,
    offset: float = 0.0,
    width: float = 0.7,
    color=None,
    legend: str | None = None,
    arms: Sequence[str] | None = None,
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
    arms : sequence of str, optional
        Only these arms, in this order (default: all).

    Returns
    -------
    matplotlib.container.BarContainer
    """
    rows = result.rows if arms is None else [result.row(a) for a in arms]
    scale = 100.0 if percent else 1.0
    xs = [i + offset for i in range(len(rows))]
    # the mean and its min-max whiskers; none where no seed has a value
    some = [math.isfinite(r[key]) for r in rows]
    means = [r[key] * scale if ok else 0.0 for r, ok in zip(rows, some)]
    lo = [(r[key] - r[f"{key}_min"]) * scale if ok else 0 for r, ok in zip(rows, some)]
    hi = [(r[f"{key}_max"] - r[key]) * scale if ok else 0 for r, ok in zip(rows, some)]
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
    for x, r in zip(xs, rows):
        vals = [v * scale for v in r[f"{key}_values"] if math.isfinite(v)]
        ax.plot([x] * len(vals), vals, "k.", ms=4, zorder=3)
    if offset == 0.0:
        ax.set_xticks(range(len(rows)), [r["arm"] for r in rows])
    ax.set_ylabel(label or key.replace("_", " ") + (" (%)" if percent else ""))
    return bars


def plot_curves(
    ax, result: ExperimentResult, arms: Sequence[str] | None = None, directory=None
):
    """Held-out exact match against the optimiser step: one line per arm (the mean over
    its seeds), each seed thin, from the runs' learning curves (the experiment record's,
    or the training cache's).

    ``arms`` (default: every arm ``result`` holds) must be arms of ``result``: a curve
    is read from the cache, never trained here (an arm the build left out, or a run
    missing from the cache, is a ``ValueError``)."""
    from ...training.cache import is_cached, train_or_load

    have = [r["arm"] for r in result.rows]
    missing = [a for a in (arms or ()) if a not in have]
    if missing:
        raise ValueError(
            f"no runs of arm(s) {missing} in this result of {result.experiment.name!r}; "
            f"allowed: {', '.join(have)}"
        )
    chosen = result.experiment.select(have if arms is None else arms)
    for i, arm in enumerate(chosen):
        curves = []
        for seed in result.budget.seeds_of(result.experiment.name, arm.name):
            if result.curves is not None:  # from the experiment record
                evals = result.curves[arm.name, seed]
            else:
                cfg = result.budget.train_config(arm, seed)
                if not is_cached(cfg, directory):
                    raise ValueError(
                        f"the run of arm {arm.name!r} seed {seed} is not in the training "
                        f"cache (run_experiment({result.experiment.name!r}) trains it first)"
                    )
                evals = train_or_load(
                    cfg, progress=False, directory=directory
                ).history.evals
            curves.append(evals)
            ax.plot(
                [e["step"] for e in evals],
                [100 * e["exact_match"] for e in evals],
                color=f"C{i}",
                lw=0.6,
                alpha=0.4,
            )
        steps = [e["step"] for e in curves[0]]
        mean = [
            100 * sum(c[j]["exact_match"] for c in curves) / len(curves)
            for j in range(len(steps))
        ]
        ax.plot(steps, mean, color=f"C{i}", lw=2, label=arm.name)
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("held-out exact match (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
