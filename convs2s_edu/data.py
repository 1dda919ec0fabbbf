r"""The toy task: sort a sequence of random integers (and two siblings that re-order
less).

Every example is a pair ``(input_seq, sorted_seq)``: ``input_seq`` holds
``seq_len`` integers drawn uniformly (with repetition) from ``1..vocab_size``
and ``sorted_seq`` holds the same integers in ascending order. The output is as
long as the input, so a model must learn to *re-arrange* tokens, which is what
attention is good at. A padded batch is a :class:`Batch` (:func:`collate_batch`);
:class:`LengthBucketSampler` draws batches whose examples have the same length where it
can, for training (shuffled) and decoding (in order), and :func:`padding_fraction`
measures what a batching wastes.

Tasks
-----
Sorting is the original notebook's task. Its source is a bag of numbers: the order of
the source carries no information about the target. Two sibling tasks with the same
vocabulary and lengths (:data:`TASKS`) let the experiments ask what positions and
re-ordering cost where order *does* matter:

=============  ===============================  ======================================
``"sort"``     target = the source, ascending   a data-dependent re-ordering
``"reverse"``  target = the source, reversed    a fixed re-ordering: position j -> n+1-j
``"copy"``     target = the source              no re-ordering
=============  ===============================  ======================================

Token ids
---------
=========================  ==========================
``PAD``                    ``0`` (padding)
ordinary tokens            ``1 .. vocab_size``
``<sos>``                  ``vocab_size + 1`` (:func:`sos_index`)
``<eos>``                  ``vocab_size + 2`` (:func:`eos_index`)
=========================  ==========================

so a model's embedding table and output layer have ``vocab_size + 3`` rows
(:func:`n_token_ids`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from ._checks import check_int

__all__ = [
    "PAD",
    "TASKS",
    "sos_index",
    "eos_index",
    "n_token_ids",
    "task_target",
    "generate_sorting_example",
    "generate_dataset",
    "SortingDataset",
    "Batch",
    "collate_batch",
    "as_token_batch",
    "LengthBucketSampler",
    "BATCHING_POOLS",
    "length_batches",
    "padding_fraction",
]

#: Id of the padding token. Every model derives its padding mask from it.
PAD = 0

#: The tasks (see the module's notes): the original notebook's sorting, and two that
#: re-order less.
TASKS = ("sort", "reverse", "copy")


def _check_task(task: str) -> str:
    """``task``, or a ``ValueError`` naming :data:`TASKS` when it is none of them."""
    if task not in TASKS:
        raise ValueError(
            f"task must be one of {', '.join(map(repr, TASKS))}, got {task!r}"
        )
    return task


def task_target(source: Sequence[int], task: str = "sort") -> list[int]:
    """The target of ``source`` in ``task``: sorted, reversed or copied.

    >>> task_target([3, 1, 2]), task_target([3, 1, 2], "reverse"), task_target([3, 1, 2], "copy")
    ([1, 2, 3], [2, 1, 3], [3, 1, 2])
    """
    if _check_task(task) == "sort":
        return sorted(source)
    return list(source)[::-1] if task == "reverse" else list(source)


def sos_index(vocab_size: int) -> int:
    """Id of the start-of-sequence token ``<sos>``: ``vocab_size + 1``."""
    return check_int("vocab_size", vocab_size) + 1


def eos_index(vocab_size: int) -> int:
    """Id of the end-of-sequence token ``<eos>``: ``vocab_size + 2``."""
    return check_int("vocab_size", vocab_size) + 2


def n_token_ids(vocab_size: int) -> int:
    """Number of token ids a model must embed: ``vocab_size + 3`` (pad, tokens, <sos>, <eos>)."""
    return check_int("vocab_size", vocab_size) + 3


def generate_sorting_example(
    seq_len: int, vocab_size: int, rng: np.random.Generator | None = None
) -> tuple[list[int], list[int]]:
    """Draw one sorting example.

    Parameters
    ----------
    seq_len : int
        Length of the sequence, ``>= 1``.
    vocab_size : int
        Tokens are drawn uniformly from ``1..vocab_size`` (with repetition).
    rng : numpy.random.Generator, optional
        Source of randomness; a fresh unseeded generator when omitted.

    Returns
    -------
    input_seq, sorted_seq : list of int
        The random sequence and the same tokens in ascending order.

    Examples
    --------
    >>> import numpy as np
    >>> x, y = generate_sorting_example(5, 9, np.random.default_rng(0))
    >>> y == sorted(x)
    True
    """
    seq_len = check_int("seq_len", seq_len)
    vocab_size = check_int("vocab_size", vocab_size)
    rng = np.random.default_rng() if rng is None else rng
    input_seq = rng.integers(1, vocab_size + 1, size=seq_len).tolist()
    return input_seq, sorted(input_seq)


def generate_dataset(
    n_samples: int,
    min_len: int,
    max_len: int,
    vocab_size: int,
    seed=0,
    task: str = "sort",
) -> list[tuple[list[int], list[int]]]:
    """Draw ``n_samples`` examples with lengths uniform in ``[min_len, max_len]``.

    Parameters
    ----------
    n_samples : int
        Number of examples, ``>= 1``.
    min_len, max_len : int
        Inclusive range of sequence lengths, ``1 <= min_len <= max_len``.
    vocab_size : int
        Tokens are drawn from ``1..vocab_size``.
    seed : int, sequence of int or None, default 0
        Seed of the :class:`numpy.random.Generator` (a sequence of ints seeds a
        :class:`numpy.random.SeedSequence`); the same seed gives the same dataset
        on every machine. ``None`` draws a fresh one.
    task : {"sort", "reverse", "copy"}
        What the target is (:data:`TASKS`); the sources do not depend on it, so the
        three tasks with one seed share their sources.

    Returns
    -------
    list of (list of int, list of int)
        ``(input_seq, target_seq)`` pairs, see :func:`generate_sorting_example`
        and :func:`task_target`.
    """
    n_samples = check_int("n_samples", n_samples)
    min_len, max_len = check_int("min_len", min_len), check_int("max_len", max_len)
    if min_len > max_len:
        raise ValueError(
            f"min_len must be <= max_len, got min_len={min_len} > max_len={max_len}"
        )
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=n_samples)
    sources = [generate_sorting_example(int(n), vocab_size, rng)[0] for n in lengths]
    return [(x, task_target(x, task)) for x in sources]


@dataclass
class Batch:
    """A padded batch of sorting examples (all tensors ``torch.long`` or
    ``torch.bool``).

    Attributes
    ----------
    src : Tensor, shape (B, S)
        Source tokens, right-padded with ``PAD``.
    tgt_in : Tensor, shape (B, T)
        Decoder input: ``<sos>`` followed by the sorted sequence, padded.
    tgt_out : Tensor, shape (B, T)
        Targets: the sorted sequence followed by ``<eos>``, padded. ``T = S_i + 1``
        for each row. Teacher forcing: ``tgt_out[:, t]`` is what the decoder should
        predict after reading ``tgt_in[:, :t+1]``.
    src_padding_mask : Tensor, shape (B, S)
        ``True`` where ``src`` is padding.
    tgt_padding_mask : Tensor, shape (B, T)
        ``True`` where ``tgt_out`` (and ``tgt_in``) is padding.
    src_lengths : Tensor, shape (B,)
        Number of real source tokens per row.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_padding_mask: torch.Tensor
    tgt_padding_mask: torch.Tensor
    src_lengths: torch.Tensor

    def to(self, device) -> Batch:
        """Return a copy with every tensor on ``device``."""
        return Batch(**{k: v.to(device) for k, v in self.__dict__.items()})

    @property
    def n_target_tokens(self) -> int:
        """Number of real (non-padding) target tokens, ``<eos>`` included."""
        return int((~self.tgt_padding_mask).sum())


def _pad(rows: Sequence[Sequence[int]]) -> torch.Tensor:
    """Right-pad token lists with ``PAD`` into a ``(B, longest)`` long tensor (>= 1 wide)."""
    width = max(1, max(len(r) for r in rows))
    out = torch.full((len(rows), width), PAD, dtype=torch.long)  # (B, S)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
    return out


#: Token tensor dtypes accepted by the models and the search functions (converted to
#: int64).
TOKEN_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8)


def as_token_batch(x, name: str = "src") -> torch.Tensor:
    """A ``(B, S)`` ``int64`` tensor of token ids from a tensor or a list of token
    lists.

    Parameters
    ----------
    x : Tensor, shape (B, S), or sequence of sequence of int
        A tensor of dtype ``int64``, ``int32``, ``int16`` or ``uint8`` (converted
        to ``int64``), or lists of ints, right-padded here with ``PAD``.
    name : str
        Used in error messages (``"src"``, ``"tgt_in"``).

    Returns
    -------
    Tensor, shape (B, S), dtype int64

    Raises
    ------
    ValueError
        For a float or bool tensor, a list holding anything but integers (e.g.
        ``1.7``), or a 1-D input: a batch is 2-D, a list of lists.
    """
    if isinstance(x, torch.Tensor):
        if x.dim() != 2:
            raise ValueError(
                f"{name} must be a 2-D batch (B, S) of token ids (a list of lists), "
                f"got a tensor of shape {tuple(x.shape)}"
            )
        if x.dtype not in TOKEN_DTYPES:
            raise ValueError(f"{name} must hold integer token ids, got dtype {x.dtype}")
        return x.long()
    if isinstance(x, (str, bytes)) or not isinstance(x, Sequence | np.ndarray):
        raise ValueError(
            f"{name} must be a 2-D batch of token ids (a list of lists or a (B, S) "
            f"tensor), got {type(x).__name__}"
        )
    rows = list(x)
    if not rows:
        raise ValueError(f"{name} must hold at least one sequence, got 0")
    for row in rows:
        if isinstance(row, (str, bytes)) or not isinstance(
            row, Sequence | np.ndarray | torch.Tensor
        ):
            raise ValueError(
                f"{name} must be a 2-D batch (a list of lists of token ids); got a "
                f"1-D sequence holding {row!r}"
            )
        for tok in row:
            if isinstance(tok, torch.Tensor):  # a 0-d integer tensor holds a token id
                tok = (
                    tok.item() if tok.dim() == 0 and tok.dtype in TOKEN_DTYPES else tok
                )
            if isinstance(tok, (bool, np.bool_)) or not isinstance(
                tok, int | np.integer
            ):
                raise ValueError(f"{name} must hold integer token ids, got {tok!r}")
    return _pad([[int(t) for t in row] for row in rows])


def collate_batch(
    examples: Sequence[tuple[Sequence[int], Sequence[int]]], vocab_size: int
) -> Batch:
    """Pad a list of ``(input_seq, sorted_seq)`` pairs into a :class:`Batch`.

    Parameters
    ----------
    examples : sequence of (input_seq, sorted_seq)
        At least one example; every sequence non-empty.
    vocab_size : int
        Fixes the ids of ``<sos>`` (``vocab_size + 1``) and ``<eos>``
        (``vocab_size + 2``).

    Returns
    -------
    Batch
    """
    if len(examples) == 0:
        raise ValueError("cannot collate an empty list of examples (need >= 1)")
    sos, eos = sos_index(vocab_size), eos_index(vocab_size)
    for i, (x, y) in enumerate(examples):
        if len(x) == 0 or len(y) == 0:
            raise ValueError(f"example {i} is empty; sequences need length >= 1")
    src = _pad([x for x, _ in examples])  # (B, S)
    tgt_in = _pad([[sos, *y] for _, y in examples])  # (B, T)
    tgt_out = _pad([[*y, eos] for _, y in examples])  # (B, T)
    return Batch(
        src=src,
        tgt_in=tgt_in,
        tgt_out=tgt_out,
        src_padding_mask=src.eq(PAD),
        tgt_padding_mask=tgt_out.eq(PAD),
        src_lengths=torch.tensor([len(x) for x, _ in examples], dtype=torch.long),
    )


class SortingDataset(Dataset):
    """A :class:`torch.utils.data.Dataset` of sorting examples (or of a sibling task).

    Parameters
    ----------
    examples : sequence of (input_seq, sorted_seq)
        For instance the output of :func:`generate_dataset`. Must not be empty.
    vocab_size : int
        Size of the integer vocabulary the examples were drawn from; tokens outside
        ``1..vocab_size``, non-integer tokens, empty sources and targets that are not
        the task's target of the source (the sorted source for ``"sort"``) are rejected
        (``ValueError``).
    task : {"sort", "reverse", "copy"}
        The task the targets follow (:data:`TASKS`; default the original notebook's
        sorting).

    Notes
    -----
    Pass :meth:`collate` as ``collate_fn`` to a :class:`~torch.utils.data.DataLoader`
    to get padded :class:`Batch` objects::

        loader = DataLoader(ds, batch_size=128, shuffle=True, collate_fn=ds.collate)
    """

    def __init__(self, examples, vocab_size: int, task: str = "sort"):
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.task = _check_task(task)
        self.examples, V = [], self.vocab_size
        for i, pair in enumerate(examples):
            try:
                x, y = map(list, pair)
            except (TypeError, ValueError):
                raise ValueError(
                    f"example {i} must be a pair (input_seq, sorted_seq) of token "
                    f"lists, got {pair!r}"
                ) from None
            for tok in (*x, *y):
                if isinstance(tok, (bool, np.bool_)) or not isinstance(
                    tok, (int, np.integer)
                ):
                    raise ValueError(
                        f"example {i} holds {tok!r}; tokens must be integers in 1..{V}"
                    )
                if not 1 <= tok <= V:
                    raise ValueError(
                        f"example {i} holds token {tok}, outside the allowed range 1..{V}"
                    )
            if not x:
                raise ValueError(f"example {i} is empty; sequences need length >= 1")
            x, y = [int(t) for t in x], [int(t) for t in y]
            want = task_target(x, task)
            if y != want:
                what = {"sort": "sorted", "reverse": "reversed", "copy": "copied"}[task]
                raise ValueError(
                    f"example {i}: the target {y} is not the {what} source {want}"
                )
            self.examples.append((x, y))
        if not self.examples:
            raise ValueError("SortingDataset needs at least one example, got 0")

    @classmethod
    def generate(
        cls,
        n_samples: int,
        min_len: int,
        max_len: int,
        vocab_size: int,
        seed: int | None = 0,
        task: str = "sort",
    ) -> SortingDataset:
        """Build a dataset from :func:`generate_dataset` with the same arguments."""
        examples = generate_dataset(n_samples, min_len, max_len, vocab_size, seed, task)
        return cls(examples, vocab_size, task)

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def lengths(self) -> list[int]:
        """The source length of every example (what :class:`LengthBucketSampler` groups by)."""
        return [len(x) for x, _ in self.examples]

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.examples[i]

    def collate(self, examples) -> Batch:
        """``collate_fn`` for a DataLoader: :func:`collate_batch` with this vocabulary."""
        return collate_batch(examples, self.vocab_size)


# ---- Batches of equal length ---------------------------------------------
class LengthBucketSampler(Sampler):
    r"""Batches of example indices of equal length where possible (shuffled buckets).

    The examples are grouped by length (one *bucket* per length). Each bucket is cut
    into full batches of ``batch_size``; the few examples each bucket has left over are
    put together in length order and cut into batches too, so those batches mix
    neighbouring lengths only. There are exactly as many batches as random batching
    makes, :math:`\lceil n / B \rceil`, so an epoch takes the same number of optimiser
    steps.

    Parameters
    ----------
    lengths : sequence of int
        The length of every example (e.g. :attr:`SortingDataset.lengths`).
    batch_size : int
        Examples per batch, ``>= 1``.
    shuffle : bool, default True
        Training: the examples are shuffled within their bucket and the batches' order
        is shuffled, with ``generator``, every time the sampler is iterated (every
        epoch). ``False`` (decoding): buckets in length order, examples in their order.
    generator : torch.Generator, optional
        The random source of the shuffling (its state is what a checkpoint saves,
        so a resumed run draws the same batches).
    pool : int, optional
        ``None`` (default): the buckets above, one length per batch. An integer
        :math:`P`: the shuffled examples are taken :math:`P` batches at a time, each
        such pool sorted by length and cut into :math:`P` batches, so a batch holds
        neighbouring lengths of its pool rather than one length (less padding than
        random batches, more mixing than buckets).

    Yields
    ------
    list of int
        The indices of one batch. Pass the sampler as ``batch_sampler`` to a
        :class:`~torch.utils.data.DataLoader`.

    Notes
    -----
    Within a batch every sequence then has (nearly) the same length, so padding, which
    every model still computes on, almost disappears (:func:`padding_fraction`). What
    changes for the optimiser is the mix of a batch: short and long sequences no longer
    share a step, which is why the site measures the accuracy reached with and without
    it before using it. Vaswani et al. (2017) and fairseq batch by length too; Gehring
    et al. (2017) decode in batches of equal length (Table 3).
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        *,
        shuffle: bool = True,
        generator: torch.Generator | None = None,
        pool: int | None = None,
    ):
        self.lengths = [check_int("length", n) for n in lengths]
        if not self.lengths:
            raise ValueError("LengthBucketSampler needs at least one example, got 0")
        self.batch_size = check_int("batch_size", batch_size)
        self.shuffle = bool(shuffle)
        self.generator = generator
        self.pool = None if pool is None else check_int("pool", pool)

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)  # ceil(n / B)

    def _permutation(self, n: int) -> list[int]:
        if not self.shuffle:
            return list(range(n))
        return torch.randperm(n, generator=self.generator).tolist()

    def __iter__(self):
        B, order = self.batch_size, self._permutation(len(self.lengths))
        batches = []
        if self.pool is not None:  # sorted pools of `pool` batches, cut into batches
            size = self.pool * B
            for start in range(0, len(order), size):
                chunk = sorted(
                    order[start : start + size], key=lambda i: self.lengths[i]
                )
                batches += [chunk[j : j + B] for j in range(0, len(chunk), B)]
        else:
            buckets: dict[int, list[int]] = {}
            for i in order:  # shuffled within each bucket
                buckets.setdefault(self.lengths[i], []).append(i)
            rest = []
            for length in sorted(buckets):
                idx = buckets[length]
                full = len(idx) - len(idx) % B
                batches += [idx[j : j + B] for j in range(0, full, B)]
                # in length order: leftover batches mix neighbouring lengths
                rest += idx[full:]
            batches += [rest[j : j + B] for j in range(0, len(rest), B)]
            # in length order (a leftover batch by its shortest example)
            if not self.shuffle:
                batches.sort(key=lambda b: self.lengths[b[0]])
        for k in self._permutation(len(batches)):
            yield batches[k]


#: The :class:`LengthBucketSampler` ``pool`` of each batching of :func:`length_batches`.
BATCHING_POOLS = {"bucket": None, "pooled": 4}


def length_batches(
    lengths: Sequence[int], batch_size: int, batching: str, generator=None
) -> LengthBucketSampler | None:
    """The batch sampler of a batching: ``None`` for ``"random"`` (the DataLoader's own
    shuffled batches), else a :class:`LengthBucketSampler` (``"bucket"``: one length per
    batch; ``"pooled"``: sorted pools of :data:`BATCHING_POOLS` ``["pooled"]`` batches)."""
    if batching == "random":
        return None
    if batching not in BATCHING_POOLS:
        raise ValueError(
            f"batching must be 'random' or one of {', '.join(map(repr, BATCHING_POOLS))}, "
            f"got {batching!r}"
        )
    pool = BATCHING_POOLS[batching]
    return LengthBucketSampler(lengths, batch_size, generator=generator, pool=pool)


def padding_fraction(batches) -> float:
    """The fraction of the target positions of ``batches`` that are padding.

    Parameters
    ----------
    batches : iterable of Batch
        Padded batches (:func:`collate_batch`).

    Returns
    -------
    float
        Padding positions / all positions of ``tgt_out`` over all batches: what the
        decoder computes for nothing (the encoder's share of its source is the same
        up to the one ``<eos>``).
    """
    masks = [b.tgt_padding_mask for b in batches]
    total = sum(m.numel() for m in masks)
    if total == 0:
        raise ValueError("padding_fraction needs at least one batch, got none")
    return sum(int(m.sum()) for m in masks) / total
