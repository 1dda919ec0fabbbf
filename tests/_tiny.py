"""A tiny training configuration for the tests that train: seconds per run on a CPU."""

from convs2s_edu.training import TrainConfig

#: Small model sizes (the GRU and ConvS2S fields; hybrids take the defaults).
TINY_OPTIONS = {
    "convs2s": {"embed_dim": 16, "hidden_dim": 16, "n_encoder_layers": 2, "n_decoder_layers": 2},
    "gru": {"embed_dim": 16, "hidden_dim": 16, "attention_dim": 16},
}


def tiny_config(model: str = "convs2s", **changes) -> TrainConfig:
    """The sorting task on 32 short examples, one epoch, with ``changes`` applied."""
    cfg = TrainConfig(
        model=model,
        vocab_size=10,
        min_len=3,
        max_len=6,
        n_train=32,
        n_valid=16,
        n_test=16,
        batch_size=16,
        epochs=1,
        device="cpu",
        model_options=TINY_OPTIONS.get(model, {}),
    )
    return cfg.replace(**changes)


#: CLI options for the seed's models on a tiny slice of the task: each command takes seconds.
SMALL = [
    "--n-train",
    "64",
    "--epochs",
    "1",
    "--max-len",
    "6",
    "--min-len",
    "3",
    "--device",
    "cpu",
    "--quiet",
]
