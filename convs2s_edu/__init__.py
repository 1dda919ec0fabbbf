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
"""

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

__all__ = [
    "PAD", "Batch", "SortingDataset", "collate_batch", "eos_index", "generate_dataset",
    "generate_sorting_example", "n_token_ids", "sos_index",
    "ConvBlock", "ConvDecoder", "ConvEncoder", "ConvS2S", "ConvS2SConfig", "DecoderCache",
    "EncoderOut", "MultiStepAttention", "TokenPositionEmbedding", "scale_gradient",
    "BahdanauAttention", "RNNEncoderOut", "RNNSeq2Seq", "RNNSeq2SeqConfig",
]
