"""Tests of ``convs2s_edu.data``: the sorting task's token ids, reproducible generation, padded
batches (``collate_batch``, ``Batch.to``), ``SortingDataset`` with a DataLoader, and a clear
``ValueError`` for every bad argument or example."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _tiny import VOCAB
from torch.utils.data import DataLoader

from convs2s_edu import PAD, Batch, SortingDataset, eos_index, generate_dataset, sos_index
from convs2s_edu.data import as_token_batch, collate_batch, generate_sorting_example, n_token_ids

# --------------------------------------------------------------------------
# Token ids and generation
# --------------------------------------------------------------------------


def test_special_token_ids_follow_the_vocabulary():
    assert PAD == 0
    assert sos_index(10) == 11
    assert eos_index(10) == 12
    assert n_token_ids(10) == 13
    assert sos_index(1) == 2 and eos_index(1) == 3 and n_token_ids(1) == 4


def test_generate_sorting_example_sorts_its_own_draw():
    x, y = generate_sorting_example(12, 7, np.random.default_rng(3))
    assert len(x) == len(y) == 12
    assert y == sorted(x)
    assert all(1 <= t <= 7 for t in x)


def test_generate_dataset_is_reproducible_from_its_seed():
    a = generate_dataset(50, 2, 9, 20, seed=123)
    b = generate_dataset(50, 2, 9, 20, seed=123)
    assert a == b


def test_generate_dataset_differs_between_seeds():
    a = generate_dataset(50, 2, 9, 20, seed=1)
    b = generate_dataset(50, 2, 9, 20, seed=2)
    assert a != b


def test_generate_dataset_lengths_tokens_and_sorted_targets():
    data = generate_dataset(400, 3, 8, 15, seed=0)
    assert len(data) == 400
    lengths = {len(x) for x, _ in data}
    assert min(lengths) >= 3 and max(lengths) <= 8
    # 400 draws from 6 lengths: both ends of the inclusive range occur
    assert lengths == set(range(3, 9))
    for x, y in data:
        assert len(y) == len(x)
        assert y == sorted(x)
        assert all(1 <= t <= 15 for t in x)
    # tokens cover the whole vocabulary, 0 (PAD) never drawn
    assert {t for x, _ in data for t in x} == set(range(1, 16))


def test_generate_dataset_with_fixed_length():
    data = generate_dataset(20, 4, 4, 5, seed=0)
    assert all(len(x) == 4 for x, _ in data)


# --------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------


def test_collate_pads_and_adds_sos_eos(ragged_batch):
    examples, batch = ragged_batch
    vocab = 10
    sos, eos = sos_index(vocab), eos_index(vocab)
    assert isinstance(batch, Batch)
    B = len(examples)
    S = max(len(x) for x, _ in examples)
    assert batch.src.shape == (B, S)
    assert batch.tgt_in.shape == batch.tgt_out.shape == (B, S + 1)
    for dtype_t in (batch.src, batch.tgt_in, batch.tgt_out, batch.src_lengths):
        assert dtype_t.dtype == torch.long
    assert (batch.tgt_in[:, 0] == sos).all()
    for i, (x, y) in enumerate(examples):
        n = len(x)
        assert batch.src[i, :n].tolist() == x
        assert (batch.src[i, n:] == PAD).all()
        assert batch.tgt_in[i, : n + 1].tolist() == [sos, *y]
        assert batch.tgt_out[i, : n + 1].tolist() == [*y, eos]
        # <eos> sits at the row's true end, not at the batch's last column
        assert batch.tgt_out[i, n] == eos
        assert (batch.tgt_in[i, n + 1 :] == PAD).all()
        assert (batch.tgt_out[i, n + 1 :] == PAD).all()
        assert batch.src_lengths[i] == n
    # teacher forcing: tgt_in is tgt_out shifted right by one, after <sos>
    real = ~batch.tgt_padding_mask
    assert torch.equal(batch.tgt_in[:, 1:][real[:, 1:]], batch.tgt_out[:, :-1][real[:, 1:]])


def test_collate_masks_are_true_exactly_at_padding(ragged_batch):
    examples, batch = ragged_batch
    lengths = torch.tensor([len(x) for x, _ in examples])
    S = batch.src.shape[1]
    T = batch.tgt_out.shape[1]
    expected_src = torch.arange(S)[None, :] >= lengths[:, None]
    expected_tgt = torch.arange(T)[None, :] >= (lengths + 1)[:, None]
    assert batch.src_padding_mask.dtype == torch.bool
    assert torch.equal(batch.src_padding_mask, expected_src)
    assert torch.equal(batch.tgt_padding_mask, expected_tgt)
    assert batch.n_target_tokens == int((lengths + 1).sum())


def test_batch_to_copies_every_tensor(ragged_batch):
    _, batch = ragged_batch
    moved = batch.to("cpu")
    for name in (
        "src",
        "tgt_in",
        "tgt_out",
        "src_padding_mask",
        "tgt_padding_mask",
        "src_lengths",
    ):
        assert torch.equal(getattr(moved, name), getattr(batch, name))


def test_batch_to_returns_new_tensors_and_leaves_the_original(ragged_batch):
    examples, batch = ragged_batch
    moved = batch.to("meta")  # a second device that exists on every machine
    assert isinstance(moved, Batch) and moved is not batch
    for name, tensor in vars(moved).items():
        original = getattr(batch, name)
        assert tensor.device.type == "meta", name
        assert original.device.type == "cpu", name
        assert tensor.shape == original.shape and tensor.dtype == original.dtype, name
    # the original still holds the data
    assert torch.equal(batch.src, collate_batch(examples, 10).src)


# --------------------------------------------------------------------------
# SortingDataset
# --------------------------------------------------------------------------


def test_sorting_dataset_indexing_and_generate_match_generate_dataset():
    ds = SortingDataset.generate(30, 2, 5, 9, seed=4)
    assert len(ds) == 30
    assert [ds[i] for i in range(len(ds))] == generate_dataset(30, 2, 5, 9, seed=4)


def test_dataloader_with_dataset_collate_yields_padded_batches():
    vocab = 9
    ds = SortingDataset.generate(23, 1, 6, vocab, seed=0)
    loader = DataLoader(ds, batch_size=8, shuffle=False, collate_fn=ds.collate)
    batches = list(loader)
    assert [b.src.shape[0] for b in batches] == [8, 8, 7]
    seen = 0
    for b in batches:
        assert isinstance(b, Batch)
        assert (b.tgt_in[:, 0] == sos_index(vocab)).all()
        for i in range(b.src.shape[0]):
            x, y = ds[seen + i]
            n = int(b.src_lengths[i])
            assert n == len(x)
            assert b.src[i, :n].tolist() == x
            assert b.tgt_out[i, n] == eos_index(vocab)
            assert b.tgt_out[i, :n].tolist() == y
        seen += b.src.shape[0]
    assert seen == len(ds)


def test_sorting_dataset_accepts_numpy_integers_and_stores_ints():
    ds = SortingDataset([(np.array([3, 1]), np.array([1, 3]))], 5)
    assert ds[0] == ([3, 1], [1, 3]) and all(type(t) is int for t in ds[0][0])


# --------------------------------------------------------------------------
# Bad arguments and examples: a ValueError that names the value and the allowed range
# --------------------------------------------------------------------------


def test_min_len_greater_than_max_len_is_rejected():
    with pytest.raises(ValueError, match=r"min_len=7 > max_len=3"):
        generate_dataset(10, 7, 3, VOCAB)
    with pytest.raises(ValueError, match=r"min_len=7 > max_len=3"):
        SortingDataset.generate(10, 7, 3, VOCAB)


@pytest.mark.parametrize("value", [0, -2])
@pytest.mark.parametrize("arg", ["n_samples", "min_len", "max_len", "vocab_size"])
def test_generate_dataset_rejects_non_positive_arguments(arg, value):
    kwargs = dict(n_samples=5, min_len=1, max_len=4, vocab_size=VOCAB)
    kwargs[arg] = value
    with pytest.raises(ValueError, match=rf"{arg} must be an integer >= 1, got {value}\b"):
        generate_dataset(**kwargs)


@pytest.mark.parametrize("arg", ["seq_len", "vocab_size"])
def test_generate_sorting_example_rejects_non_positive_arguments(arg):
    kwargs = dict(seq_len=3, vocab_size=VOCAB)
    kwargs[arg] = 0
    with pytest.raises(ValueError, match=rf"{arg} must be an integer >= 1, got 0"):
        generate_sorting_example(**kwargs)


def test_empty_dataset_is_rejected():
    with pytest.raises(ValueError, match=r"at least one example, got 0"):
        SortingDataset([], 10)


def test_dataset_rejects_tokens_outside_vocabulary():
    with pytest.raises(ValueError, match=r"example 1 holds token 11\b.*1\.\.10\b"):
        SortingDataset([([1, 2], [1, 2]), ([11, 3], [3, 11])], 10)
    with pytest.raises(ValueError, match=r"holds token 0\b.*1\.\.10\b"):
        SortingDataset([([0, 2], [0, 2])], 10)


def test_dataset_rejects_non_positive_vocab_size():
    with pytest.raises(ValueError, match=r"vocab_size must be an integer >= 1, got 0"):
        SortingDataset([([1], [1])], 0)


def test_collate_rejects_empty_batches_and_empty_sequences():
    with pytest.raises(ValueError, match=r"empty list of examples"):
        collate_batch([], VOCAB)
    with pytest.raises(ValueError, match=r"example 1 is empty"):
        collate_batch([([1], [1]), ([], [])], VOCAB)


@pytest.mark.parametrize(
    "examples, match",
    [
        ([([3, 1, 2], [3, 1, 2])], r"target \[3, 1, 2\] is not the sorted source \[1, 2, 3\]"),
        ([([3, 1, 2], [1, 2])], "is not the sorted source"),
        ([([2, 2], [2, 2]), ([1, 5], [1, 4])], "example 1"),
        ([([1.5, 2], [1.5, 2])], "holds 1.5; tokens must be integers"),
        ([([True], [True])], "holds True"),
        ([([], [])], "example 0 is empty"),
        ([([1, 2],)], "must be a pair"),
    ],
)
def test_sorting_dataset_refuses_bad_examples(examples, match):
    with pytest.raises(ValueError, match=match):
        SortingDataset(examples, 10)


def test_sorting_dataset_refuses_an_example_of_three_sequences():
    with pytest.raises(ValueError, match=r"example 0 must be a pair"):
        SortingDataset([([1, 2], [1, 2], [1, 2])], 10)


def test_sizes_must_be_integers_not_bools():
    with pytest.raises(ValueError, match=r"n_samples must be an integer >= 1, got True"):
        generate_dataset(True, 1, 4, VOCAB)


def test_token_batches_take_integer_scalars_of_every_kind():
    got = as_token_batch([[torch.tensor(3), np.int16(2), 1], [torch.tensor(4, dtype=torch.uint8)]])
    assert got.tolist() == [[3, 2, 1], [4, PAD, PAD]] and got.dtype == torch.int64
    for bad in (torch.tensor(1.0), torch.tensor(True), np.bool_(True), 1.5):
        with pytest.raises(ValueError, match="must hold integer token ids"):
            as_token_batch([[1, bad]])


def test_data_helpers_defaults_and_messages():
    for f in (sos_index, eos_index, n_token_ids):
        with pytest.raises(ValueError) as info:
            f(2.5)
        assert str(info.value) == "vocab_size must be an integer >= 1, got 2.5"
    x, y = generate_sorting_example(6, 9)  # no rng: a fresh generator
    assert len(x) == 6 and y == sorted(x)
    assert generate_dataset(20, 1, 4, 9) == generate_dataset(20, 1, 4, 9, seed=0)


def test_collate_and_dataset_messages_and_defaults():
    with pytest.raises(ValueError) as info:
        collate_batch([], 10)
    assert str(info.value) == "cannot collate an empty list of examples (need >= 1)"
    for empty in (([], [1]), ([1], [])):  # either side empty
        with pytest.raises(ValueError, match="example 0 is empty"):
            collate_batch([empty], 10)
    with pytest.raises(ValueError) as info:
        SortingDataset([], 10)
    assert str(info.value) == "SortingDataset needs at least one example, got 0"
    assert (
        SortingDataset.generate(9, 1, 3, 5).examples
        == SortingDataset.generate(9, 1, 3, 5, seed=0).examples
    )


# --------------------------------------------------------------------------
# Tasks beside sorting
# --------------------------------------------------------------------------


def test_task_targets_are_sorted_reversed_and_copied():
    from convs2s_edu.data import task_target

    x = [5, 2, 9, 2]
    assert task_target(x, "sort") == [2, 2, 5, 9]
    assert task_target(x, "reverse") == [2, 9, 2, 5]
    assert task_target(x, "copy") == [5, 2, 9, 2]
    with pytest.raises(ValueError, match="'sort', 'reverse', 'copy'.*'shuffle'"):
        task_target(x, "shuffle")


def test_the_three_tasks_share_their_sources():
    sort = generate_dataset(20, 3, 7, 9, seed=4)
    rev = generate_dataset(20, 3, 7, 9, seed=4, task="reverse")
    copy = generate_dataset(20, 3, 7, 9, seed=4, task="copy")
    assert [x for x, _ in sort] == [x for x, _ in rev] == [x for x, _ in copy]
    assert all(y == x[::-1] for x, y in rev) and all(y == x for x, y in copy)


def test_dataset_checks_targets_against_its_task():
    rev = generate_dataset(5, 3, 7, 9, seed=1, task="reverse")
    ds = SortingDataset(rev, 9, task="reverse")
    assert ds.task == "reverse" and len(ds) == 5
    with pytest.raises(ValueError, match="not the sorted source"):
        SortingDataset([([3, 1, 2], [2, 1, 3])], 9)  # reversed, but the task is sort
    with pytest.raises(ValueError, match="not the reversed source"):
        SortingDataset([([3, 1, 2], [1, 2, 3])], 9, task="reverse")
    with pytest.raises(ValueError, match="task must be one of"):
        SortingDataset(rev, 9, task="rotate")


# --------------------------------------------------------------------------
# Batches of equal length
# --------------------------------------------------------------------------


def _lengths(n=1000, lo=8, hi=20, seed=0):
    return [len(x) for x, _ in generate_dataset(n, lo, hi, 50, seed=seed)]


def test_bucket_sampler_deals_every_example_once_in_as_many_batches_as_random():
    from convs2s_edu.data import LengthBucketSampler

    lengths = _lengths(1003)
    sampler = LengthBucketSampler(lengths, 64, generator=torch.Generator().manual_seed(0))
    batches = list(sampler)
    assert len(batches) == len(sampler) == math.ceil(1003 / 64)
    assert sorted(i for b in batches for i in b) == list(range(1003))
    assert all(1 <= len(b) <= 64 for b in batches)


def test_bucket_sampler_batches_have_one_length_except_the_leftovers():
    from convs2s_edu.data import LengthBucketSampler

    lengths = _lengths(1003)
    batches = list(LengthBucketSampler(lengths, 64, shuffle=False))
    mixed = [b for b in batches if len({lengths[i] for i in b}) > 1]
    full = sum(lengths.count(n) // 64 for n in set(lengths))
    # the full batches of every length have one length; only the leftovers mix, in order
    assert len(batches) - len(mixed) >= full
    leftovers = sum(lengths.count(n) % 64 for n in set(lengths))
    assert len(mixed) <= math.ceil(leftovers / 64)
    spans = sorted((min(lengths[i] for i in b), max(lengths[i] for i in b)) for b in mixed)
    for (_, hi), (lo, _) in zip(spans, spans[1:]):  # the leftovers, cut in length order:
        assert hi <= lo  # each leftover batch holds a run of neighbouring lengths


def test_bucket_sampler_cuts_the_padding_of_random_batches():
    from convs2s_edu.data import LengthBucketSampler, padding_fraction

    ds = SortingDataset(
        generate_dataset(10_000, 8, 20, 50, seed=0), 50
    )  # the original notebook's data
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(ds), generator=g).tolist()
    random_batches = [
        ds.collate([ds[j] for j in order[i : i + 128]]) for i in range(0, 10_000, 128)
    ]
    buckets = LengthBucketSampler(ds.lengths, 128, generator=g)
    bucket_batches = [ds.collate([ds[j] for j in b]) for b in buckets]
    assert padding_fraction(random_batches) > 0.2  # the original notebook's data: ~29% padding
    assert padding_fraction(bucket_batches) < 0.02


def test_bucket_sampler_reshuffles_every_epoch_and_repeats_with_the_seed():
    from convs2s_edu.data import LengthBucketSampler

    lengths = _lengths(500)
    a = LengthBucketSampler(lengths, 32, generator=torch.Generator().manual_seed(3))
    b = LengthBucketSampler(lengths, 32, generator=torch.Generator().manual_seed(3))
    first, second = list(a), list(a)
    assert first != second  # a new order every epoch (every iteration)
    assert first == list(b) and second == list(b)  # the same seed, the same epochs
    plain = LengthBucketSampler(lengths, 32, shuffle=False)
    assert list(plain) == list(plain)  # decoding: always the same batches, by length
    assert [lengths[b[0]] for b in plain] == sorted(lengths[b[0]] for b in plain)


def test_bucket_sampler_refuses_bad_input():
    from convs2s_edu.data import LengthBucketSampler

    with pytest.raises(ValueError, match="at least one example"):
        LengthBucketSampler([], 4)
    with pytest.raises(ValueError, match="batch_size"):
        LengthBucketSampler([3, 4], 0)


def test_padding_fraction_by_hand(ragged_batch):
    from convs2s_edu.data import padding_fraction

    _, batch = ragged_batch  # targets of 6, 3 and 5 tokens (with <eos>) padded to 6
    assert padding_fraction([batch]) == pytest.approx((0 + 3 + 1) / 18)
    with pytest.raises(ValueError, match="at least one batch"):
        padding_fraction([])


def test_pooled_batches_sort_each_pool_and_keep_every_example():
    from convs2s_edu.data import LengthBucketSampler, length_batches

    lengths = _lengths(1003)
    g = torch.Generator().manual_seed(1)
    sampler = LengthBucketSampler(lengths, 32, generator=g, pool=4)
    batches = list(sampler)
    assert len(batches) == len(sampler) == math.ceil(1003 / 32)
    assert sorted(i for b in batches for i in b) == list(range(1003))
    # a pool of 4 batches holds ~4/13 of the lengths: its batches span a few neighbouring
    # lengths, but not one length each as buckets do
    spans = [max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches]
    assert max(spans) <= 12 and sum(s > 0 for s in spans) > len(batches) // 2
    width = lambda bs: sum(max(lengths[i] for i in b) * len(b) for b in bs)  # noqa: E731
    order = torch.randperm(1003, generator=torch.Generator().manual_seed(1)).tolist()
    random_batches = [order[i : i + 32] for i in range(0, 1003, 32)]
    assert width(batches) < width(random_batches)  # less padding than random batches
    assert length_batches(lengths, 32, "random") is None
    assert length_batches(lengths, 32, "pooled").pool == 4
    assert length_batches(lengths, 32, "bucket").pool is None
    with pytest.raises(ValueError, match="batching must be 'random' or one of 'bucket', "):
        length_batches(lengths, 32, "sorted")
