"""convs2s_edu: Convolutional Sequence to Sequence Learning next to a GRU + Bahdanau baseline.

Modules
-------
data
    The sorting task: token ids, example generation, dataset and padded batches.
seq2seq
    The common interface: ``EncoderOut``, ``Encoder``, ``Decoder``, ``EncoderDecoder``.
convs2s
    ConvS2S (Gehring et al., 2017): embeddings, GLU blocks, encoder, multi-step
    attention, causal decoder.
rnn
    The baseline: bidirectional GRU encoder, GRU decoder with Bahdanau attention.
hybrid
    A GRU encoder with the convolutional decoder, and the reverse.
train
    ``train.train``: the seed's training configuration, the timed training loop, checkpoints,
    the cache.
decode
    Greedy and beam search for any ``EncoderDecoder``.
samples
    Side-by-side sample outputs of several models.
speed
    Timing the models interleaved (windows, spread, the machine, the verdict), and incremental
    against full-recompute decoding.
metrics
    Exact-match and token accuracy.
compare
    Both models on the same data: the speed table.
site
    The configurations the documentation site trains (quick mode).
fast
    Execution paths: torch.compile, bf16 autocast, CUDA graphs; the fastest path of a device.
bench
    ``convs2s-edu bench``: throughput per path, FLOPs per token, fraction of measured peak.
distributed
    Data-parallel training (DistributedDataParallel) under torchrun.
"""

# Before anything imports torch: OpenMP threads that sleep instead of spinning (see _threads).
from ._threads import apply_defaults as _apply_thread_defaults

_apply_thread_defaults()

from ._version import __version__ as __version__  # noqa: E402
from .bench import BenchBudget, format_bench, run_bench  # noqa: E402
from .compare import (  # noqa: E402
    Comparison,
    epoch_tokens,
    format_speed,
    format_table,
    summarise,
)
from .convs2s import (  # noqa: E402
    ConvBlock,
    ConvDecoder,
    ConvEncoder,
    ConvMemory,
    ConvS2S,
    ConvS2SConfig,
    DecoderCache,
    MultiStepAttention,
    TokenPositionEmbedding,
    scale_gradient,
)
from .data import (
    PAD,
    Batch,
    SortingDataset,
    as_token_batch,
    collate_batch,
    eos_index,
    generate_dataset,
    generate_sorting_example,
    n_token_ids,
    sos_index,
)
from .decode import Hypothesis, beam_search, greedy_decode
from .distributed import spawn_train  # noqa: E402
from .fast import available_paths, bf16_support, fastest_path  # noqa: E402
from .hybrid import HYBRID_NAMES, HybridConfig, HybridSeq2Seq
from .metrics import evaluate, exact_match, token_accuracy
from .rnn import (
    BahdanauAttention,
    GRUDecoder,
    GRUDecoderState,
    GRUEncoder,
    RNNSeq2Seq,
    RNNSeq2SeqConfig,
)
from .samples import format_samples, predict_samples
from .seq2seq import Decoder, Encoder, EncoderDecoder, EncoderOut
from .site import is_quick_mode, site_config
from .speed import (  # noqa: E402
    MachineInfo,
    SpeedMeasurement,
    SpeedVerdict,
    WindowStats,
    machine_info,
    measure_config,
    measure_training,
    speed_verdict,
    time_incremental_vs_full,
    time_interleaved,
    training_flops_per_token,
)
from .train import (
    MODEL_NAMES,
    History,
    TrainConfig,
    TrainingDivergedError,
    TrainResult,
    build_model,
    load_checkpoint,
    make_datasets,
    resolve_device,
    sequence_loss,
    train_or_load,
)

__all__ = [
    "PAD",
    "Batch",
    "SortingDataset",
    "as_token_batch",
    "collate_batch",
    "eos_index",
    "generate_dataset",
    "generate_sorting_example",
    "n_token_ids",
    "sos_index",
    "EncoderOut",
    "Encoder",
    "Decoder",
    "EncoderDecoder",
    "ConvBlock",
    "ConvDecoder",
    "ConvEncoder",
    "ConvMemory",
    "ConvS2S",
    "ConvS2SConfig",
    "DecoderCache",
    "MultiStepAttention",
    "TokenPositionEmbedding",
    "scale_gradient",
    "BahdanauAttention",
    "GRUDecoder",
    "GRUDecoderState",
    "GRUEncoder",
    "RNNSeq2Seq",
    "RNNSeq2SeqConfig",
    "HYBRID_NAMES",
    "HybridConfig",
    "HybridSeq2Seq",
    "MODEL_NAMES",
    "History",
    "TrainConfig",
    "TrainingDivergedError",
    "TrainResult",
    "build_model",
    "load_checkpoint",
    "make_datasets",
    "resolve_device",
    "sequence_loss",
    "train_or_load",
    "Hypothesis",
    "beam_search",
    "greedy_decode",
    "predict_samples",
    "format_samples",
    "time_incremental_vs_full",
    "evaluate",
    "exact_match",
    "token_accuracy",
    "Comparison",
    "epoch_tokens",
    "format_speed",
    "format_table",
    "summarise",
    "MachineInfo",
    "SpeedMeasurement",
    "SpeedVerdict",
    "WindowStats",
    "machine_info",
    "measure_config",
    "measure_training",
    "speed_verdict",
    "time_interleaved",
    "training_flops_per_token",
    "is_quick_mode",
    "site_config",
    "BenchBudget",
    "format_bench",
    "run_bench",
    "spawn_train",
    "available_paths",
    "bf16_support",
    "fastest_path",
]
