"""convs2s_edu: Convolutional Sequence to Sequence Learning next to a GRU + Bahdanau baseline.

Modules
-------
data
    The sorting task: token ids, example generation, dataset and padded batches.
convs2s
    ConvS2S (Gehring et al., 2017): embeddings, GLU blocks, encoder, multi-step
    attention, causal decoder.
rnn
    The baseline: bidirectional GRU encoder, GRU decoder with Bahdanau attention.
train
    ``train.train``: the seed's training configuration, the timed training loop, checkpoints, the cache.
decode
    Greedy and beam search for both models; ConvS2S incremental decoding.
metrics
    Exact-match and token accuracy.
compare
    Both models on the same data: the speed table.
speed
    Timing the models interleaved: windows, spread, the machine, and the verdict.
"""

# Before anything imports torch: OpenMP threads that sleep instead of spinning (see _threads).
from ._threads import apply_defaults as _apply_thread_defaults  # noqa: E402

_apply_thread_defaults()

__version__ = "0.1.0"

from .convs2s import (  # noqa: E402
    ConvBlock,
    ConvDecoder,
    ConvEncoder,
    ConvS2S,
    ConvS2SConfig,
    DecoderCache,
    EncoderOut,
    MultiStepAttention,
    TokenPositionEmbedding,
    scale_gradient,
)
from .data import (  # noqa: E402
    PAD,
    Batch,
    SortingDataset,
    collate_batch,
    eos_index,
    generate_dataset,
    generate_sorting_example,
    n_token_ids,
    sos_index,
)
from .rnn import BahdanauAttention, RNNEncoderOut, RNNSeq2Seq, RNNSeq2SeqConfig  # noqa: E402
from .train import (  # noqa: E402
    History,
    TrainConfig,
    TrainingDivergedError,
    TrainResult,
    build_model,
    load_checkpoint,
    make_datasets,
    train_or_load,
)
from .decode import beam_search, greedy_decode, predict_samples  # noqa: E402
from .metrics import evaluate, exact_match, token_accuracy  # noqa: E402

__all__ = [
    "PAD", "Batch", "SortingDataset", "collate_batch", "eos_index", "generate_dataset",
    "generate_sorting_example", "n_token_ids", "sos_index",
    "ConvBlock", "ConvDecoder", "ConvEncoder", "ConvS2S", "ConvS2SConfig", "DecoderCache",
    "EncoderOut", "MultiStepAttention", "TokenPositionEmbedding", "scale_gradient",
    "BahdanauAttention", "RNNEncoderOut", "RNNSeq2Seq", "RNNSeq2SeqConfig",
    "History", "TrainConfig", "TrainingDivergedError", "TrainResult", "build_model",
    "load_checkpoint", "make_datasets", "train_or_load",
    "beam_search", "greedy_decode", "predict_samples",
    "evaluate", "exact_match", "token_accuracy",
]
