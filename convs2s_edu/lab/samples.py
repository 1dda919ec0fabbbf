"""Side-by-side sample outputs: several models, greedy and beam search, as a plain-text table."""

from __future__ import annotations

from collections.abc import Sequence

from ..data import as_token_batch
from ..decode import beam_search, greedy_decode

__all__ = ["predict_samples", "format_samples"]


def predict_samples(
    models: dict, examples, beam_size: int = 5, max_len: int | None = None
) -> list[dict]:
    """Greedy and beam-search outputs of several models, side by side.

    Parameters
    ----------
    models : dict of str to EncoderDecoder
        Name -> model, e.g. ``{"convs2s": conv, "gru": rnn}``.
    examples : sequence of (source, reference)
        Token lists, e.g. a :class:`~convs2s_edu.data.SortingDataset` or a slice
        of :func:`~convs2s_edu.data.generate_dataset`.
    beam_size : int, default 5
        Beam width of the beam-search column, ``>= 1``.
    max_len : int, optional
        Passed to :func:`~convs2s_edu.greedy_decode` and
        :func:`~convs2s_edu.beam_search`.

    Returns
    -------
    list of dict
        One dict per example with keys ``"source"``, ``"reference"`` and, for every
        model name, ``"<name> greedy"`` and ``"<name> beam=<K>"`` (lists of int), in
        that order.
    """
    if not models:
        raise ValueError("models must hold at least one model, got an empty dict")
    examples = [(list(map(int, x)), list(map(int, y))) for x, y in examples]
    if not examples:
        raise ValueError(
            "examples must hold at least one (source, reference) pair, got 0"
        )
    src = as_token_batch([x for x, _ in examples])  # (B, S), PAD-padded
    rows = [{"source": x, "reference": y} for x, y in examples]
    for name, model in models.items():
        greedy = greedy_decode(model, src, max_len=max_len)
        beam = beam_search(model, src, beam_size=beam_size, max_len=max_len)
        for row, g, b in zip(rows, greedy, beam):
            row.update({f"{name} greedy": g, f"{name} beam={beam_size}": b})
    return rows


def format_samples(
    rows: Sequence[dict], layout: str = "table", mark_errors: bool = True
) -> str:
    """Format :func:`predict_samples` rows as aligned plain text.

    Parameters
    ----------
    rows : sequence of dict
        Every dict has the same keys; values are token lists (or anything printable).
    layout : {"table", "blocks"}, default "table"
        ``"table"``: one line per example, one column per key. ``"blocks"``: one ``key :
        tokens`` line per key, a block per example (better for long sequences).
    mark_errors : bool, default True
        Append ``*`` to every output that differs from the ``"reference"``.

    Returns
    -------
    str

    Examples
    --------
    >>> print(format_samples([{"source": [3, 1], "reference": [1, 3], "m greedy": [1, 1]}]))
    #  source  reference  m greedy
    0  3 1     1 3        1 1*
    * differs from the reference
    """
    if layout not in ("table", "blocks"):
        raise ValueError(f"layout must be 'table' or 'blocks', got {layout!r}")
    rows = list(rows)
    if not rows:
        return ""
    keys = list(rows[0].keys())
    outputs = [k for k in keys if k not in ("source", "reference")]
    check = mark_errors and "reference" in keys

    def cell(row, key):
        v = row[key]
        text = " ".join(str(t) for t in v) if isinstance(v, (list, tuple)) else str(v)
        if check and key in outputs and list(v) != list(row["reference"]):
            text += "*"
        return text

    table = [[str(i)] + [cell(r, k) for k in keys] for i, r in enumerate(rows)]
    if layout == "table":
        table = [["#"] + keys, *table]
        widths = [max(len(x) for x in col) for col in zip(*table)]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table
        ]
    else:
        w = max(len(k) for k in keys)
        lines = []
        for i, line in enumerate(table):
            lines.append(f"example {i}")
            lines.extend(f"  {k.ljust(w)} : {c}" for k, c in zip(keys, line[1:]))
    if check:
        lines.append("* differs from the reference")
    return "\n".join(lines)
