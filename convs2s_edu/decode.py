r"""Decoding: greedy search, beam search and side-by-side samples for both models.

Training uses *teacher forcing*: the decoder reads the reference prefix. At
test time there is no reference, so the model has to read its own previous
outputs, one token at a time (the left-to-right decoding of Sutskever et al. [2]_):

.. math:: \hat y_{t} = \arg\max_{y}\; p(y \mid \hat y_{<t}, x),
          \qquad \hat y_0 = \texttt{<sos>},

until it emits ``<eos>`` (greedy search, :func:`greedy_decode`), or keeping the
``beam_size`` most probable prefixes at every step (:func:`beam_search`, the
search ConvS2S is evaluated with [1]_, with the length normalisation of [3]_).

Both models are driven through one small interface, :class:`DecoderAdapter`:

==================================  ==========================================================
``start(src)``                      encode the source once, return the decoder state
``step(y_prev, state)``             one decoder step: logits of the next token
``reorder(state, index)``           keep rows ``index`` (beam search prunes hypotheses)
``prefix_logits(prefix, state)``    the slow path: re-run the decoder over the whole prefix
==================================  ==========================================================

For ConvS2S the state is the encoder output plus a
:class:`~convs2s_edu.convs2s.DecoderCache` (every causal convolution keeps its
last :math:`k-1` inputs), so one step costs one column of every layer; for the
GRU it is the encoder output plus the recurrent state :math:`s_{t-1}`.
:func:`time_incremental_vs_full` measures what the cache buys ConvS2S.

Token conventions (see :mod:`convs2s_edu.data`): decoded sequences are lists
of ints *without* ``<sos>`` and ``<eos>``; ``PAD`` and ``<sos>`` are never
produced (their scores are set to :math:`-\infty`).

References
----------
.. [1] J. Gehring et al. "Convolutional Sequence to Sequence Learning."
   ICML 2017, §3 (the decoder) and §5 (beam search, width 5, in the experiments).
.. [2] I. Sutskever, O. Vinyals, Q. V. Le. "Sequence to Sequence Learning with
   Neural Networks." NIPS 2014 (left-to-right beam search).
.. [3] Y. Wu et al. "Google's Neural Machine Translation System." 2016,
   arXiv:1609.08144, §7 (length normalisation).
"""

from __future__ import annotations

import contextlib
import math
import numbers
import time
from typing import Iterator, NamedTuple, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .convs2s import ConvS2S, DecoderCache, EncoderOut
from .data import PAD, eos_index, sos_index
from .rnn import RNNEncoderOut, RNNSeq2Seq

__all__ = [
    "DecoderAdapter",
    "ConvS2SAdapter",
    "RNNAdapter",
    "ConvState",
    "RNNState",
    "make_adapter",
    "Hypothesis",
    "greedy_decode",
    "beam_search",
    "time_incremental_vs_full",
    "predict_samples",
    "format_samples",
]


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def _check_int(name: str, value, low: int = 1, high: int | None = None) -> int:
    """Return ``int(value)`` or raise ``ValueError`` naming the value and the allowed range."""
    allowed = f"{low}..{high}" if high is not None else f">= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer in {allowed}, got {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer in {allowed}, got {value}")
    return int(value)


@contextlib.contextmanager
def _inference(model: nn.Module) -> Iterator[None]:
    """Eval mode and ``torch.no_grad()`` inside the block; every submodule's
    training flag is restored afterwards (even if decoding raises)."""
    modes = {m: m.training for m in model.modules()}
    model.eval()  # dropout off: the incremental cache assumes a deterministic decoder
    try:
        with torch.no_grad():
            yield
    finally:
        for m, mode in modes.items():
            m.training = mode


def _model_device(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")


def _as_src_tensor(src) -> torch.Tensor:
    """A ``(B, S)`` long tensor from a tensor or from a list of token lists (right-padded)."""
    if isinstance(src, torch.Tensor):
        return src
    rows = [[int(t) for t in row] for row in src]
    if not rows:
        raise ValueError("src must hold at least one sequence, got 0")
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), max(width, 1)), PAD, dtype=torch.long)  # (B, S)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
    return out


def _mask_special(scores: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Forbid ``PAD`` and ``<sos>`` as outputs: their scores become :math:`-\\infty`."""
    scores = scores.clone()
    scores[:, PAD] = float("-inf")
    scores[:, sos_index(vocab_size)] = float("-inf")
    return scores


# --------------------------------------------------------------------------
# One interface for both models
# --------------------------------------------------------------------------


class DecoderAdapter:
    """Uniform step-by-step decoding interface over a seq2seq model.

    Subclasses wrap one model type (:class:`ConvS2SAdapter`, :class:`RNNAdapter`);
    :func:`make_adapter` picks the right one. The decoding algorithms in this
    module only ever call the methods below, so a new model needs only a new
    adapter.

    Parameters
    ----------
    model : torch.nn.Module
        The wrapped model; it must have a ``cfg`` with ``vocab_size`` and
        ``max_positions``, and a ``check_inputs(src)`` method.

    Attributes
    ----------
    model : torch.nn.Module
    vocab_size : int
        Number of ordinary tokens; ``<sos>`` and ``<eos>`` follow.
    max_positions : int
        The most decoder inputs (``<sos>`` + generated tokens) the model accepts,
        hence the most decoding steps.
    """

    def __init__(self, model: nn.Module):
        self.model = model
        self.vocab_size = int(model.cfg.vocab_size)
        self.max_positions = int(model.cfg.max_positions)

    def prepare(self, src) -> torch.Tensor:
        """Validate ``src`` and move it to the model's device; returns ``(B, S)``."""
        src = _as_src_tensor(src)
        self.model.check_inputs(src)
        empty = src.ne(PAD).sum(dim=1).eq(0)  # (B,)
        if bool(empty.any()):
            row = int(empty.nonzero()[0, 0])
            raise ValueError(f"src row {row} holds only padding; every source needs >= 1 token")
        return src.to(_model_device(self.model))

    def start(self, src: torch.Tensor):
        """Encode ``src`` ``(B, S)``; return the decoder state before the first step."""
        raise NotImplementedError

    def step(self, y_prev: torch.Tensor, state):
        """Feed ``y_prev`` ``(B,)``; return ``(logits (B, V), attention, new_state)``."""
        raise NotImplementedError

    def reorder(self, state, index: torch.Tensor):
        """Return the state of rows ``index`` ``(B',)`` (rows may repeat)."""
        raise NotImplementedError

    def prefix_logits(self, prefix: torch.Tensor, state):
        """Slow path: logits ``(B, V)`` and attention of the *last* position of
        ``prefix`` ``(B, t)``, recomputed from scratch (``state`` is only read for
        the encoder output)."""
        raise NotImplementedError


class ConvState(NamedTuple):
    """Decoding state of :class:`ConvS2SAdapter`.

    Attributes
    ----------
    enc : EncoderOut
        Encoder output, one row per hypothesis.
    cache : DecoderCache
        Last ``k-1`` inputs of every causal convolution and the next position.
    """

    enc: EncoderOut
    cache: DecoderCache


class ConvS2SAdapter(DecoderAdapter):
    """:class:`DecoderAdapter` for :class:`~convs2s_edu.convs2s.ConvS2S`.

    Notes
    -----
    A causal convolution of width :math:`k` at position :math:`i` reads the
    inputs :math:`i-k+1, \\dots, i` only. Keeping the last :math:`k-1` inputs of
    every layer (the :class:`~convs2s_edu.convs2s.DecoderCache`) is therefore
    enough to compute position :math:`i` without re-running positions
    :math:`0..i-1`: :meth:`DecoderAdapter.step` costs :math:`O(L\\,k\\,d^2)` instead of the
    :math:`O(L\\,i\\,k\\,d^2)` of :meth:`DecoderAdapter.prefix_logits`.
    Attention is ``(B, n_decoder_layers, S)``, one distribution per layer.
    """

    def start(self, src: torch.Tensor) -> ConvState:
        enc = self.model.encode(src)  # z, z + e: (B, S, f)
        cache = self.model.decoder.new_cache(src.shape[0], device=enc.z.device, dtype=enc.z.dtype)
        return ConvState(enc, cache)

    def step(self, y_prev: torch.Tensor, state: ConvState):
        # the cache is updated in place: windows shift by one, position += 1
        logits, attn = self.model.decoder.step(y_prev, state.enc, state.cache)  # (B, V), (B, L, S)
        return logits, attn, state

    def reorder(self, state: ConvState, index: torch.Tensor) -> ConvState:
        enc = EncoderOut(*(t.index_select(0, index) for t in state.enc))
        return ConvState(enc, state.cache.reorder(index))

    def prefix_logits(self, prefix: torch.Tensor, state: ConvState):
        # the whole decoder over the whole prefix, every step again
        logits, attn = self.model.decoder(prefix, state.enc)  # (B, t, V), (B, L, t, S)
        return logits[:, -1], attn[:, :, -1]  # (B, V), (B, L, S)


class RNNState(NamedTuple):
    """Decoding state of :class:`RNNAdapter`.

    Attributes
    ----------
    enc : RNNEncoderOut
        Encoder output, one row per hypothesis (``s0`` has the batch in dim 1).
    s : Tensor, shape (n_decoder_layers, B, n)
        :math:`s_{t-1}`, the GRU state.
    """

    enc: RNNEncoderOut
    s: torch.Tensor


class RNNAdapter(DecoderAdapter):
    """:class:`DecoderAdapter` for :class:`~convs2s_edu.rnn.RNNSeq2Seq`.

    Notes
    -----
    The recurrent state :math:`s_{t-1}` already summarises the prefix, so a
    step is incremental by nature. The batch is dimension 1 of the GRU state
    ``(n_layers, B, n)``; :meth:`DecoderAdapter.reorder` selects along it. Attention is
    ``(B, S)``.
    """

    def start(self, src: torch.Tensor) -> RNNState:
        enc = self.model.encode(src)
        return RNNState(enc, enc.s0)  # s0: (L, B, n)

    def step(self, y_prev: torch.Tensor, state: RNNState):
        logits, attn, s = self.model.step(y_prev, state.enc, state.s)  # (B, V), (B, S), (L, B, n)
        return logits, attn, RNNState(state.enc, s)

    def reorder(self, state: RNNState, index: torch.Tensor) -> RNNState:
        e = state.enc
        enc = RNNEncoderOut(
            h=e.h.index_select(0, index),  # (B', S, 2n)
            keys=e.keys.index_select(0, index),  # (B', S, A)
            padding_mask=e.padding_mask.index_select(0, index),  # (B', S)
            s0=e.s0.index_select(1, index),  # (L, B', n)
        )
        return RNNState(enc, state.s.index_select(1, index))

    def prefix_logits(self, prefix: torch.Tensor, state: RNNState):
        # re-run the recurrence from s_0 over the whole prefix
        s = state.enc.s0
        for t in range(prefix.shape[1]):
            logits, attn, s = self.model.step(prefix[:, t], state.enc, s)
        return logits, attn


def make_adapter(model) -> DecoderAdapter:
    """Return the :class:`DecoderAdapter` for ``model`` (an adapter is returned unchanged).

    Parameters
    ----------
    model : ConvS2S, RNNSeq2Seq or DecoderAdapter

    Returns
    -------
    DecoderAdapter

    Raises
    ------
    TypeError
        For any other model type.
    """
    if isinstance(model, DecoderAdapter):
        return model
    if isinstance(model, ConvS2S):
        return ConvS2SAdapter(model)
    if isinstance(model, RNNSeq2Seq):
        return RNNAdapter(model)
    raise TypeError(
        f"cannot decode with a {type(model).__name__}; expected ConvS2S, RNNSeq2Seq or a "
        f"DecoderAdapter subclass"
    )


def _step_limits(src: torch.Tensor, max_len, max_positions: int) -> torch.Tensor:
    """Most decoding steps per row, ``(B,)``.

    ``None``: the source length + 1 (a sorted copy plus ``<eos>``), capped at
    ``max_positions``. An int: that many steps for every row, ``1..max_positions``.
    """
    if max_len is None:
        src_len = src.ne(PAD).sum(dim=1)  # (B,)
        return (src_len + 1).clamp(max=max_positions)
    max_len = _check_int("max_len", max_len, 1, max_positions)
    return torch.full((src.shape[0],), max_len, dtype=torch.long, device=src.device)


# --------------------------------------------------------------------------
# Greedy search
# --------------------------------------------------------------------------


def greedy_decode(
    model,
    src,
    max_len: int | None = None,
    incremental: bool = True,
    return_attention: bool = False,
    stop_at_eos: bool = True,
):
    r"""Greedy decoding of a batch of sources, for ConvS2S and the GRU model alike.

    Parameters
    ----------
    model : ConvS2S, RNNSeq2Seq or DecoderAdapter
        Put in eval mode and run under :func:`torch.no_grad` for the call; the
        training flags of all its modules are restored afterwards.
    src : Tensor, shape (B, S), or list of list of int
        Source tokens, right-padded with ``PAD`` (lists are padded here).
        Moved to the model's device.
    max_len : int, optional
        Most decoding steps, ``<eos>`` included, ``1..max_positions``. Default:
        per row, the source length + 1 (for sorting, the output is as long as
        the input), capped at ``max_positions``.
    incremental : bool, default True
        ``True``: one :meth:`DecoderAdapter.step` per token (ConvS2S reuses its
        :class:`~convs2s_edu.convs2s.DecoderCache`). ``False``: recompute the
        decoder over the whole prefix at every step (the slow reference, same
        tokens).
    return_attention : bool, default False
        Also return the attention of every step.
    stop_at_eos : bool, default True
        ``False`` decodes exactly the step limit for every row and keeps any
        ``<eos>`` as an ordinary token (used to time a fixed amount of work).

    Returns
    -------
    tokens : list of list of int
        One list per source, without ``<sos>``/``<eos>``; at most ``max_len``
        tokens (``max_len`` tokens and no ``<eos>`` when the limit was hit).
    attention : list of Tensor
        Only with ``return_attention=True``. Row ``b`` has shape
        ``(n_decoder_layers, T_b, S_b)`` for ConvS2S (layout of
        ``ConvS2S(..., return_attention=True)``) and ``(T_b, S_b)`` for the GRU;
        ``S_b`` is the source length without padding and ``T_b`` the number of
        steps taken, i.e. ``len(tokens[b])`` plus one for the step that
        produced ``<eos>``.

    Notes
    -----
    At every step each row takes the single most probable next token

    .. math:: \hat y_t = \arg\max_{y \ne \texttt{PAD}, \texttt{<sos>}}
              \; \log p(y \mid \hat y_{<t}, x),

    a row stops at its first ``<eos>`` or at its step limit, and the loop
    ends when every row has stopped. Rows that have stopped keep being fed
    ``PAD`` (their outputs are ignored): the batch keeps its shape, which is
    simpler than removing rows and costs little on this task.

    Greedy search is not exact: a locally best token can lead to a worse
    sequence; :func:`beam_search` keeps more candidates.

    Examples
    --------
    >>> import torch
    >>> from convs2s_edu import ConvS2S, ConvS2SConfig
    >>> model = ConvS2S(ConvS2SConfig(vocab_size=9, embed_dim=16, hidden_dim=16))
    >>> out = greedy_decode(model, torch.tensor([[3, 1, 2], [5, 4, 0]]))
    >>> [len(o) <= 4 for o in out]  # at most source length + 1 tokens
    [True, True]
    """
    adapter = make_adapter(model)
    eos = eos_index(adapter.vocab_size)
    with _inference(adapter.model):
        src = adapter.prepare(src)  # (B, S)
        B = src.shape[0]
        limits = _step_limits(src, max_len, adapter.max_positions)  # (B,)
        state = adapter.start(src)
        prefix = torch.full((B, 1), sos_index(adapter.vocab_size), dtype=torch.long,
                            device=src.device)  # (B, 1): <sos>
        done = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
        n_steps = limits.clone()  # (B,) steps taken per row (final once done)
        attentions = []
        for t in range(int(limits.max())):
            if incremental:
                logits, attn, state = adapter.step(prefix[:, -1], state)  # (B, V)
            else:
                logits, attn = adapter.prefix_logits(prefix, state)  # (B, V)
            if return_attention:
                attentions.append(attn)  # (B, L, S) or (B, S)
            # y_t = argmax_y log p(y | y_<t, x), never PAD or <sos>
            y = _mask_special(logits, adapter.vocab_size).argmax(dim=-1)  # (B,)
            y = y.masked_fill(done, PAD)  # stopped rows: filler, ignored
            prefix = torch.cat([prefix, y.unsqueeze(1)], dim=1)  # (B, t + 2)
            stop = (t + 1) >= limits  # (B,)
            if stop_at_eos:
                stop = stop | y.eq(eos)
            newly = stop & ~done
            n_steps[newly] = t + 1
            done |= stop
            if bool(done.all()):
                break

        out = []
        for b in range(B):
            seq = prefix[b, 1 : 1 + int(n_steps[b])].tolist()
            if stop_at_eos and seq and seq[-1] == eos:
                seq = seq[:-1]
            out.append(seq)
        if not return_attention:
            return out
        attn = torch.stack(attentions, dim=1)  # (B, T, L, S) or (B, T, S)
        src_len = src.ne(PAD).sum(dim=1)  # (B,)
        rows = []
        for b in range(B):
            a = attn[b, : int(n_steps[b]), ..., : int(src_len[b])]  # (T_b, [L,] S_b)
            if a.dim() == 3:
                a = a.transpose(0, 1)  # (L, T_b, S_b)
            rows.append(a.cpu())
        return out, rows


# --------------------------------------------------------------------------
# Beam search
# --------------------------------------------------------------------------


class Hypothesis(NamedTuple):
    """A finished beam-search hypothesis.

    Attributes
    ----------
    tokens : list of int
        The output, without ``<sos>``/``<eos>``.
    log_prob : float
        :math:`\\log p(y \\mid x)` summed over the generated tokens, ``<eos>``
        included when the hypothesis ended with it.
    score : float
        ``log_prob / length ** length_penalty``, the value beams are ranked by.
    ended_with_eos : bool
        ``False`` when the hypothesis was cut at the step limit.
    """

    tokens: list
    log_prob: float
    score: float
    ended_with_eos: bool


def beam_search(
    model,
    src,
    beam_size: int = 5,
    max_len: int | None = None,
    length_penalty: float = 1.0,
    return_hypotheses: bool = False,
):
    r"""Batched beam search for ConvS2S and the GRU model alike.

    Parameters
    ----------
    model : ConvS2S, RNNSeq2Seq or DecoderAdapter
        Run in eval mode under :func:`torch.no_grad`; training flags are restored.
    src : Tensor, shape (B, S), or list of list of int
        Right-padded source tokens.
    beam_size : int, default 5
        :math:`K`, the number of hypotheses kept per source, ``>= 1``.
        ``beam_size=1`` gives exactly :func:`greedy_decode`'s output.
    max_len : int, optional
        Most decoding steps, ``<eos>`` included (default: source length + 1 per
        row), as in :func:`greedy_decode`.
    length_penalty : float, default 1.0
        :math:`\alpha \ge 0` in the score :math:`\log p(y \mid x) / |y|^\alpha`;
        ``0`` ranks by raw log-probability, ``1`` by the average per token.
    return_hypotheses : bool, default False
        Return up to ``beam_size`` :class:`Hypothesis` per source, best first,
        instead of the best token list.

    Returns
    -------
    list of list of int, or list of list of Hypothesis
        The best hypothesis per source (tokens without ``<sos>``/``<eos>``).

    Notes
    -----
    All :math:`B K` hypotheses advance in *one* decoder call per step. The
    encoder runs once on the :math:`B` sources; its output is then repeated
    :math:`K` times (``reorder`` with index ``[0,..,0, 1,..,1, ...]``), so row
    :math:`bK + k` is hypothesis :math:`k` of source :math:`b`.

    At step :math:`t`, every alive hypothesis :math:`h` with cumulative
    log-probability :math:`s_h` is extended by every token:

    .. math:: s(h, y) = s_h + \log p(y \mid h, x).

    The :math:`2K` best extensions per source are taken (at most :math:`K`
    of them can end in ``<eos>``, one per hypothesis, so at least :math:`K`
    do not). Those among the best :math:`K` that end in ``<eos>`` (or all of
    them at the step limit) are *finished* and stored with the length-normalised score

    .. math:: \mathrm{score}(y) = \frac{\log p(y \mid x)}{|y|^{\alpha}},

    :math:`|y|` counting ``<eos>``. The :math:`K` best extensions that do not
    end in ``<eos>`` stay alive; the decoder state follows them with
    :meth:`DecoderAdapter.reorder` (``DecoderCache.reorder`` for ConvS2S,
    ``index_select`` on dimension 1 of the GRU state). A source is done once
    it has :math:`K` finished hypotheses or reaches its step limit (the
    stopping rule of fairseq); the answer is its finished hypothesis of
    highest score.

    Beam search is still approximate: the best sequence can be pruned early,
    so a wider beam does not guarantee a more probable output than greedy
    search. At step 0 only the first copy of each source is alive (the others
    start at :math:`-\infty`), so the beam does not fill with duplicates.

    References
    ----------
    Sutskever et al. (2014); Wu et al. (2016), §7 (length normalisation);
    Gehring et al. (2017), §5 (beam width 5).
    """
    K = _check_int("beam_size", beam_size, 1)
    if (isinstance(length_penalty, bool) or not isinstance(length_penalty, numbers.Real)
            or not math.isfinite(length_penalty) or length_penalty < 0):
        raise ValueError(f"length_penalty must be a finite number >= 0, got {length_penalty!r}")
    alpha = float(length_penalty)
    adapter = make_adapter(model)
    V_words = adapter.vocab_size
    eos = eos_index(V_words)
    with _inference(adapter.model):
        src = adapter.prepare(src)  # (B, S)
        B, device = src.shape[0], src.device
        limits = _step_limits(src, max_len, adapter.max_positions)  # (B,)
        state = adapter.start(src)
        # row b*K + k is hypothesis k of source b
        state = adapter.reorder(state, torch.arange(B, device=device).repeat_interleave(K))
        scores = torch.full((B, K), float("-inf"), device=device)  # (B, K) cumulative log p
        scores[:, 0] = 0.0  # only the first copy is alive at step 0
        tokens = torch.empty((B, K, 0), dtype=torch.long, device=device)  # (B, K, t)
        y_prev = torch.full((B * K,), sos_index(V_words), dtype=torch.long, device=device)
        finished: list[list[Hypothesis]] = [[] for _ in range(B)]
        done = [False] * B
        base = torch.arange(B, device=device).unsqueeze(1) * K  # (B, 1)

        for t in range(int(limits.max())):
            logits, _, state = adapter.step(y_prev, state)  # (B K, V)
            lprobs = _mask_special(F.log_softmax(logits.float(), dim=-1), V_words)  # (B K, V)
            V = lprobs.shape[-1]
            # s(h, y) = s_h + log p(y | h, x)
            cand = scores.unsqueeze(-1) + lprobs.view(B, K, V)  # (B, K, V)
            top_scores, top_idx = cand.view(B, K * V).topk(2 * K, dim=1)  # (B, 2K)
            top_beam = torch.div(top_idx, V, rounding_mode="floor")  # (B, 2K) parent hypothesis
            top_tok = top_idx % V  # (B, 2K) appended token
            is_eos = top_tok.eq(eos)  # (B, 2K)
            last = ((t + 1) >= limits).tolist()  # (B,) the step limit is reached

            # finish the hypotheses among the best K that end in <eos> (all at the limit)
            ts, tb, tt, te = (x.tolist() for x in (top_scores, top_beam, top_tok, is_eos))
            for b in range(B):
                if done[b]:
                    continue
                for j in range(K):
                    if ts[b][j] == float("-inf") or not (te[b][j] or last[b]):
                        continue
                    seq = tokens[b, tb[b][j]].tolist() + ([] if te[b][j] else [tt[b][j]])
                    length = len(seq) + int(te[b][j])  # |y|, <eos> included
                    # score = log p(y | x) / |y|^alpha
                    finished[b].append(Hypothesis(seq, ts[b][j], ts[b][j] / length ** alpha,
                                                  bool(te[b][j])))
                if len(finished[b]) >= K or last[b]:
                    done[b] = True
            if all(done):
                break

            # the K best extensions that do not end in <eos> stay alive
            alive_scores = top_scores.masked_fill(is_eos, float("-inf"))  # (B, 2K)
            scores, pick = alive_scores.topk(K, dim=1)  # (B, K), indices into the 2K
            parent = top_beam.gather(1, pick)  # (B, K)
            new_tok = top_tok.gather(1, pick)  # (B, K)
            # tokens of the parents, then the new token
            tokens = torch.cat(
                [tokens.gather(1, parent.unsqueeze(-1).expand(-1, -1, tokens.shape[-1])),
                 new_tok.unsqueeze(-1)], dim=-1)  # (B, K, t + 1)
            state = adapter.reorder(state, (base + parent).view(-1))  # rows of the parents
            y_prev = new_tok.view(-1)  # (B K,)

    ranked = [sorted(f, key=lambda h: h.score, reverse=True)[:K] for f in finished]
    if return_hypotheses:
        return ranked
    return [r[0].tokens for r in ranked]


# --------------------------------------------------------------------------
# Benchmark: incremental vs full-recompute decoding
# --------------------------------------------------------------------------


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
    model : ConvS2S or RNNSeq2Seq
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
    adapter = make_adapter(model)
    if isinstance(target_lengths, numbers.Integral):
        target_lengths = (target_lengths,)
    target_lengths = list(target_lengths)
    if not target_lengths:
        raise ValueError("target_lengths must hold at least one length, got none")
    lengths = []
    for T in target_lengths:
        if isinstance(T, numbers.Integral) and not isinstance(T, bool) and T > adapter.max_positions:
            raise ValueError(
                f"target length {T} exceeds the model's max_positions={adapter.max_positions} "
                f"(allowed 1..{adapter.max_positions}); build the model with "
                f"max_positions >= {T} to time it"
            )
        lengths.append(_check_int("target length", T, 1, adapter.max_positions))
    batch_size = _check_int("batch_size", batch_size, 1)
    repeats = _check_int("repeats", repeats, 1)
    device = _model_device(adapter.model)
    gen = torch.Generator().manual_seed(int(seed))

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def run(src, T, incremental):
        sync()
        start = time.perf_counter()
        greedy_decode(adapter, src, max_len=T, incremental=incremental, stop_at_eos=False)
        sync()
        return time.perf_counter() - start

    records = []
    for T in lengths:
        src = torch.randint(1, adapter.vocab_size + 1, (batch_size, T), generator=gen)  # (B, T)
        src = src.to(device)
        run(src, T, True), run(src, T, False)  # warm-up
        inc = min(run(src, T, True) for _ in range(repeats))
        full = min(run(src, T, False) for _ in range(repeats))
        records.append({"target_len": T, "batch_size": batch_size, "seconds_full": full,
                        "seconds_incremental": inc, "speedup": full / inc if inc > 0 else float("inf")})
    return records


# --------------------------------------------------------------------------
# Side-by-side samples
# --------------------------------------------------------------------------


def predict_samples(
    models: dict,
    examples,
    beam_size: int = 5,
    max_len: int | None = None,
) -> list[dict]:
    """Greedy and beam-search outputs of several models, side by side.

    Parameters
    ----------
    models : dict of str to model
        Name -> ConvS2S / RNNSeq2Seq, e.g. ``{"convs2s": conv, "gru": rnn}``.
    examples : sequence of (source, reference)
        Token lists, e.g. a :class:`~convs2s_edu.data.SortingDataset` or a slice
        of :func:`~convs2s_edu.data.generate_dataset`.
    beam_size : int, default 5
        Beam width of the beam-search column, ``>= 1``.
    max_len : int, optional
        Passed to :func:`greedy_decode` and :func:`beam_search`.

    Returns
    -------
    list of dict
        One dict per example with keys ``"source"``, ``"reference"`` and, for
        every model name, ``"<name> greedy"`` and ``"<name> beam=<K>"`` (lists
        of int), in that order. :func:`format_samples` prints them.
    """
    beam_size = _check_int("beam_size", beam_size, 1)
    if not models:
        raise ValueError("models must hold at least one model, got an empty dict")
    examples = [(list(map(int, x)), list(map(int, y))) for x, y in examples]
    if not examples:
        raise ValueError("examples must hold at least one (source, reference) pair, got 0")
    src = _as_src_tensor([x for x, _ in examples])  # (B, S)
    rows = [{"source": x, "reference": y} for x, y in examples]
    for name, model in models.items():
        greedy = greedy_decode(model, src, max_len=max_len)
        beam = beam_search(model, src, beam_size=beam_size, max_len=max_len)
        for row, g, b in zip(rows, greedy, beam):
            row[f"{name} greedy"] = g
            row[f"{name} beam={beam_size}"] = b
    return rows


def format_samples(rows: Sequence[dict], layout: str = "table", mark_errors: bool = True) -> str:
    """Format :func:`predict_samples` rows as aligned plain text.

    Parameters
    ----------
    rows : sequence of dict
        Every dict has the same keys; values are token lists (or anything
        printable).
    layout : {"table", "blocks"}, default "table"
        ``"table"``: one line per example, one column per key. ``"blocks"``:
        one ``key : tokens`` line per key, a block per example (better for
        long sequences).
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
    lines = []
    if layout == "table":
        header = ["#"] + keys
        widths = [max(len(x) for x in col) for col in zip(header, *table)]
        for line in [header, *table]:
            lines.append("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    else:
        w = max(len(k) for k in keys)
        for i, line in enumerate(table):
            lines.append(f"example {i}")
            lines.extend(f"  {k.ljust(w)} : {c}" for k, c in zip(keys, line[1:]))
    if check:
        lines.append("* differs from the reference")
    return "\n".join(lines)
