r"""Measuring what the incremental decoder state buys: greedy decoding with and without it.

:func:`time_incremental_vs_full` times :func:`~convs2s_edu.greedy_decode` with
``incremental=True`` (one decoder step per token, from the decoder state) and
``incremental=False`` (the decoder re-run over the whole prefix at every step).
It is a measurement helper: nothing asserts a speed, and timings taken on a
busy machine say little.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Sequence

import torch

from ._checks import check_int
from .decode import greedy_decode
from .seq2seq import EncoderDecoder

__all__ = ["time_incremental_vs_full"]


def time_incremental_vs_full(
    model,
    target_lengths: Sequence[int] = (20, 50, 100),
    batch_size: int = 32,
    repeats: int = 3,
    seed: int = 0,
) -> list[dict]:
    r"""Time greedy decoding with and without the incremental state.

    Parameters
    ----------
    model : EncoderDecoder
        ConvS2S, RNNSeq2Seq or a HybridSeq2Seq.
        Lengths beyond ``model.cfg.max_positions`` need a model built with a
        larger ``max_positions``, e.g. ``ConvS2S(ConvS2SConfig(max_positions=100))``.
    target_lengths : sequence of int, default (20, 50, 100)
        Numbers of decoding steps to time, each in ``1..max_positions``.
    batch_size : int, default 32
        Number of sources decoded together, ``>= 1``.
    repeats : int, default 3
        Timed runs per setting, ``>= 1``; the fastest one is reported (after
        one untimed warm-up run of each kind).
    seed : int, default 0
        Seed of the random sources.

    Returns
    -------
    list of dict
        One record per target length with keys ``target_len``, ``batch_size``,
        ``seconds_full``, ``seconds_incremental`` and ``speedup``
        (``seconds_full / seconds_incremental``).

    Notes
    -----
    Each source is a random sequence of ``target_len`` tokens, and decoding is
    forced to exactly ``target_len`` steps (``stop_at_eos=False``), so both
    methods do the same number of steps. The encoder runs once in both. For
    ConvS2S the full recompute costs :math:`\sum_{t=1}^{T} t = T(T+1)/2`
    decoder columns against :math:`T` with the cache, so the speedup should
    grow roughly linearly with :math:`T` (on small models per-call overhead
    hides part of it). Times come from ``time.perf_counter()``, with
    :func:`torch.cuda.synchronize` around each run on a GPU. Nothing here
    asserts a speed; this is a measurement helper.
    """
    if not isinstance(model, EncoderDecoder):
        raise TypeError(f"cannot time a {type(model).__name__}; expected an EncoderDecoder")
    if isinstance(target_lengths, numbers.Integral):
        target_lengths = (target_lengths,)
    target_lengths = list(target_lengths)
    if not target_lengths:
        raise ValueError("target_lengths must hold at least one length, got none")
    lengths = []
    for T in target_lengths:
        if isinstance(T, numbers.Integral) and not isinstance(T, bool) \
                and T > model.max_positions:
            raise ValueError(
                f"target length {T} exceeds the model's max_positions={model.max_positions} "
                f"(allowed 1..{model.max_positions}); build the model with "
                f"max_positions >= {T} to time it"
            )
        lengths.append(check_int("target length", T, 1, model.max_positions))
    batch_size = check_int("batch_size", batch_size)
    repeats = check_int("repeats", repeats)
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(int(seed))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def run(src, T, incremental):
        sync()
        start = time.perf_counter()
        greedy_decode(model, src, max_len=T, incremental=incremental, stop_at_eos=False)
        sync()
        return time.perf_counter() - start

    records = []
    for T in lengths:
        src = torch.randint(1, model.vocab_size + 1, (batch_size, T), generator=gen)  # (B, T)
        src = src.to(device)
        run(src, T, True), run(src, T, False)  # warm-up
        inc = min(run(src, T, True) for _ in range(repeats))
        full = min(run(src, T, False) for _ in range(repeats))
        records.append({"target_len": T, "batch_size": batch_size, "seconds_full": full,
                        "seconds_incremental": inc,
                        "speedup": full / inc if inc > 0 else float("inf")})
    return records
