"""The seed's central measurement: both models, same data, same epochs, side by side.

:func:`compare` trains (or loads from the cache) a ConvS2S and a GRU model
with one :class:`~convs2s_edu.train.TrainConfig` that differs only in
``model``, scores both on the same test set and returns one row per model;
:func:`format_table` prints them as the seed's speed table.
"""

from __future__ import annotations

import statistics

from .metrics import evaluate
from .train import MODEL_NAMES, TrainConfig, TrainResult, make_datasets, train, train_or_load

__all__ = ["summarise", "compare", "format_table"]

#: Columns of :func:`format_table`: (key, header, format).
COLUMNS = [
    ("model", "model", "{}"),
    ("n_parameters", "params", "{:,}"),
    ("sec_per_epoch", "s/epoch (median)", "{:.2f}"),
    ("total_seconds", "total s", "{:.1f}"),
    ("tokens_per_second", "tokens/s", "{:,.0f}"),
    ("final_train_loss", "train loss", "{:.4f}"),
    ("final_valid_loss", "valid loss", "{:.4f}"),
    ("exact_match", "exact match", "{:.1%}"),
    ("token_accuracy", "token acc.", "{:.1%}"),
]


def summarise(result: TrainResult, test_set=None, beam_size: int = 1) -> dict:
    """One row of the speed table for a trained model.

    Parameters
    ----------
    result : TrainResult
    test_set : SortingDataset, optional
        Defaults to the test set of ``result.config``.
    beam_size : int
        1 for greedy decoding.

    Returns
    -------
    dict
        ``model``, ``device``, ``n_parameters``, ``sec_per_epoch`` (median over
        epochs), ``total_seconds``, ``tokens_per_second`` (median),
        ``final_train_loss``, ``final_valid_loss``, ``exact_match``,
        ``token_accuracy``, ``epochs``.
    """
    h = result.history
    if test_set is None:
        test_set = make_datasets(result.config)[2]
    scores = evaluate(result.model, test_set, beam_size=beam_size)
    return {
        "model": result.config.model,
        "device": h.device,
        "n_parameters": h.n_parameters,
        "epochs": len(h.epochs),
        "sec_per_epoch": statistics.median(h.column("seconds")),
        "total_seconds": sum(h.column("seconds")),
        "tokens_per_second": statistics.median(h.column("tokens_per_second")),
        "final_train_loss": h.epochs[-1]["train_loss"],
        "final_valid_loss": h.epochs[-1]["valid_loss"],
        "exact_match": scores["exact_match"],
        "token_accuracy": scores["token_accuracy"],
    }


def compare(cfg: TrainConfig | None = None, use_cache: bool = True, progress: bool | None = None,
            models=MODEL_NAMES[:2]) -> list[dict]:
    """Train every model in ``models`` (default: ConvS2S and the GRU) with ``cfg`` (only ``model`` changes) and summarise each.

    With ``use_cache`` the runs come from (and go to) :func:`~convs2s_edu.train.train_or_load`'s cache.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    test_set = make_datasets(cfg)[2]
    rows = []
    for name in models:
        run_cfg = cfg.replace(model=name)
        result = train_or_load(run_cfg, progress) if use_cache else train(run_cfg, progress=progress)
        rows.append(summarise(result, test_set))
    return rows


def format_table(rows: list[dict]) -> str:
    """The rows as an aligned text table, plus the ratio of the first model's time per epoch
    to every other's."""
    header = [h for _, h, _ in COLUMNS]
    body = [[fmt.format(row[key]) for key, _, fmt in COLUMNS] for row in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    out = [line(header), line(["-" * w for w in widths]), *map(line, body)]
    if len(rows) > 1:
        base = rows[0]
        for other in rows[1:]:
            ratio = other["sec_per_epoch"] / base["sec_per_epoch"]
            out.append(f"{other['model']} / {base['model']} time per epoch: {ratio:.2f}x "
                       f"(on {base['device']})")
    return "\n".join(out)
