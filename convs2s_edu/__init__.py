"""convs2s_edu: Convolutional Sequence to Sequence Learning next to a GRU + Bahdanau
baseline.

The package, bottom to top (a layer imports only the layers below it)::

    the learner's core   data        the sorting task: token ids, examples, padded batches
                         seq2seq     the one interface: Encoder -> EncoderOut -> Decoder
                         convs2s     ConvS2S: embeddings, GLU blocks, multi-step attention
                         rnn         the baseline: GRU encoder, GRU decoder, Bahdanau attention
                         hybrid      a GRU encoder with the convolutional decoder, and the reverse
                         decode      greedy and beam search, for any model
                         metrics     exact match and token accuracy
                         loss        the token-level cross-entropy
    fast/                the speed-ups, apart from the models, each tested equal to them
    training/            config, step, loop, checkpoints, cache, data parallelism
    lab/                 what the site measures and draws (each subpackage lists its modules)
    cli                  ``convs2s-edu train | evaluate | compare | experiment | bench``

Everything a learner needs is importable from here (``from convs2s_edu import
ConvS2S, train``); the lab is imported from its subpackage
(``from convs2s_edu.lab import experiments``).

Importing the package sets OpenMP's ``OMP_WAIT_POLICY=PASSIVE`` and
``OMP_NUM_THREADS`` where the user has not, before anything imports torch:
:mod:`convs2s_edu._threads` says why, and why at import.
"""

# Before anything imports torch: OpenMP threads that sleep instead of spinning (see
# _threads).
from ._threads import apply_defaults as _apply_thread_defaults

_apply_thread_defaults()

from ._version import __version__ as __version__
from .convs2s import (
    ConvBlock,
    ConvDecoder,
    ConvEncoder,
    ConvS2S,
    ConvS2SConfig,
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
    sos_index,
)
from .decode import Hypothesis, beam_search, decode_all, greedy_decode
from .hybrid import HybridConfig, HybridSeq2Seq
from .loss import sequence_loss
from .metrics import evaluate, exact_match, token_accuracy
from .rnn import (
    BahdanauAttention,
    FixedContext,
    GRUDecoder,
    GRUEncoder,
    RNNSeq2Seq,
    RNNSeq2SeqConfig,
)
from .seq2seq import Decoder, Encoder, EncoderDecoder, EncoderOut
from .training import (
    MODEL_NAMES,
    History,
    TrainConfig,
    TrainResult,
    build_model,
    load_checkpoint,
    make_datasets,
    train,
    train_or_load,
)

__all__ = [
    # the sorting task
    "PAD",
    "Batch",
    "SortingDataset",
    "generate_dataset",
    "collate_batch",
    "as_token_batch",
    "sos_index",
    "eos_index",
    # the interface
    "EncoderOut",
    "Encoder",
    "Decoder",
    "EncoderDecoder",
    # ConvS2S
    "TokenPositionEmbedding",
    "ConvBlock",
    "ConvEncoder",
    "MultiStepAttention",
    "ConvDecoder",
    "ConvS2S",
    "ConvS2SConfig",
    "scale_gradient",
    # the GRU + Bahdanau baseline
    "BahdanauAttention",
    "FixedContext",
    "GRUEncoder",
    "GRUDecoder",
    "RNNSeq2Seq",
    "RNNSeq2SeqConfig",
    # hybrids
    "HybridConfig",
    "HybridSeq2Seq",
    # decoding, metrics, the loss
    "greedy_decode",
    "beam_search",
    "decode_all",
    "Hypothesis",
    "evaluate",
    "exact_match",
    "token_accuracy",
    "sequence_loss",
    # training
    "MODEL_NAMES",
    "TrainConfig",
    "make_datasets",
    "build_model",
    "train",
    "train_or_load",
    "load_checkpoint",
    "History",
    "TrainResult",
]
