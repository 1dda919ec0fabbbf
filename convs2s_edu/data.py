r"""The toy task: sort a sequence of random integers.

Every example is a pair ``(input_seq, sorted_seq)``: ``input_seq`` holds
``seq_len`` integers drawn uniformly (with repetition) from ``1..vocab_size``
and ``sorted_seq`` holds the same integers in ascending order. The output is as
long as the input, so a model must learn to *re-arrange* tokens, which is what
attention is good at.

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

A batch (:class:`Batch`, made by :func:`collate_batch`) holds the padded source
``src`` ``(B, S)``, the decoder input ``tgt_in`` ``(B, T)`` that starts with
``<sos>`` and the targets ``tgt_out`` ``(B, T)`` that end with ``<eos>``
(teacher forcing: ``tgt_out[:, t]`` is what the decoder should predict after
reading ``tgt_in[:, :t+1]``), plus padding masks that are ``True`` at padding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from ._checks import check_int

__all__ = [
    "PAD",
    "sos_index",
    "eos_index",
    "n_token_ids",
    "generate_sorting_example",
    "generate_dataset",
    "SortingDataset",
    "Batch",
    "collate_batch",
    "as_token_batch",
]

#: Id of the padding token. Every model derives its padding mask from it.
PAD = 0


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
    seq_len: int,
    vocab_size: int,
    rng: np.random.Generator | None = None,
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
    seed: int | None = 0,
) -> list[tuple[list[int], list[int]]]:
    """Draw ``n_samples`` sorting examples with lengths uniform in ``[min_len, max_len]``.

    Parameters
    ----------
    n_samples : int
        Number of examples, ``>= 1``.
    min_len, max_len : int
        Inclusive range of sequence lengths, ``1 <= min_len <= max_len``.
    vocab_size : int
        Tokens are drawn from ``1..vocab_size``.
    seed : int or None, default 0
        Seed of the :class:`numpy.random.Generator`; the same seed gives the
        same dataset on every machine. ``None`` draws a fresh one.

    Returns
    -------
    list of (list of int, list of int)
        ``(input_seq, sorted_seq)`` pairs, see :func:`generate_sorting_example`.
    """
    n_samples = check_int("n_samples", n_samples)
    min_len = check_int("min_len", min_len)
    max_len = check_int("max_len", max_len)
    if min_len > max_len:
        raise ValueError(f"min_len must be <= max_len, got min_len={min_len} > max_len={max_len}")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=n_samples)
    return [generate_sorting_example(int(n), vocab_size, rng) for n in lengths]


@dataclass
class Batch:
    """A padded batch of sorting examples (all tensors ``torch.long`` or ``torch.bool``).

    Attributes
    ----------
    src : Tensor, shape (B, S)
        Source tokens, right-padded with ``PAD``.
    tgt_in : Tensor, shape (B, T)
        Decoder input: ``<sos>`` followed by the sorted sequence, padded.
    tgt_out : Tensor, shape (B, T)
        Targets: the sorted sequence followed by ``<eos>``, padded. ``T = S_i + 1``
        for each row.
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


#: Token tensor dtypes accepted by the models and the search functions (converted to int64).
TOKEN_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8)


def as_token_batch(x, name: str = "src") -> torch.Tensor:
    """A ``(B, S)`` ``int64`` tensor of token ids from a tensor or a list of token lists.

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
            if (
                isinstance(tok, (bool, np.bool_))
                or not isinstance(tok, int | np.integer)
                and not (
                    isinstance(tok, torch.Tensor) and tok.dim() == 0 and tok.dtype in TOKEN_DTYPES
                )
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
        Fixes the ids of ``<sos>`` (``vocab_size + 1``) and ``<eos>`` (``vocab_size + 2``).

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
    """A :class:`torch.utils.data.Dataset` of sorting examples.

    Parameters
    ----------
    examples : sequence of (input_seq, sorted_seq)
        For instance the output of :func:`generate_dataset`. Must not be empty.
    vocab_size : int
        Size of the integer vocabulary the examples were drawn from; tokens
        outside ``1..vocab_size`` are rejected.

    Notes
    -----
    Pass :meth:`collate` as ``collate_fn`` to a :class:`~torch.utils.data.DataLoader`
    to get padded :class:`Batch` objects::

        loader = DataLoader(ds, batch_size=128, shuffle=True, collate_fn=ds.collate)
    """

    def __init__(self, examples, vocab_size: int):
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.examples = [(list(x), list(y)) for x, y in examples]
        if not self.examples:
            raise ValueError("SortingDataset needs at least one example, got 0")
        for i, (x, y) in enumerate(self.examples):
            for tok in (*x, *y):
                if not 1 <= tok <= self.vocab_size:
                    raise ValueError(
                        f"example {i} holds token {tok}, outside the allowed range "
                        f"1..{self.vocab_size}"
                    )

    @classmethod
    def generate(
        cls, n_samples: int, min_len: int, max_len: int, vocab_size: int, seed: int | None = 0
    ) -> SortingDataset:
        """Build a dataset from :func:`generate_dataset` with the same arguments."""
        return cls(generate_dataset(n_samples, min_len, max_len, vocab_size, seed), vocab_size)

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.examples[i]

    def collate(self, examples) -> Batch:
        """``collate_fn`` for a DataLoader: :func:`collate_batch` with this vocabulary."""
        return collate_batch(examples, self.vocab_size)
