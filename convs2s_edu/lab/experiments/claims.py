r"""The claims of the paper and of the seed article, and how the experiments check them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from .statistics import format_spread, verdict

__all__ = ["Claim", "CLAIMS", "check_claims"]


@dataclass(frozen=True)
class Claim:
    """One claim of the paper or the seed article and how it is checked.

    Attributes
    ----------
    text : str
        The claim: a quotation (in quotation marks) or, for the paper, a paraphrase.
    source : str
        Where it is made.
    experiment : str
        The :data:`EXPERIMENTS` key that checks it.
    claimed : tuple of (str, str)
        ``(arm, column)`` of what the claim says is larger.
    others : tuple of (str, str)
        Candidates it must beat; the one with the highest mean is used.
    paired : bool
        Compare per seed (same runs), see :func:`verdict`.
    """

    text: str
    source: str
    experiment: str
    claimed: tuple
    others: tuple
    paired: bool = False

    def replace(self, **changes) -> Claim:
        return replace(self, **changes)


_TOK = "token_accuracy"

#: The claims checked on the site. Accuracy claims are judged on token accuracy: at the
#: experiments' budget exact match is near zero for most arms (it is printed too).
CLAIMS = (
    Claim(
        '"an RNN (encoder) - CNN (decoder) architecture can be expected to achieve better '
        'performance" (here: than the best of the other three combinations)',
        "seed article, §1 Encoder-decoder Architecture",
        "encoder_decoder",
        ("gru+conv", _TOK),
        (("convs2s", _TOK), ("gru", _TOK), ("conv+gru", _TOK)),
    ),
    Claim(
        '"A CNN-decoder has an advantage over an RNN-decoder in handling such target '
        'language texts" (with a GRU encoder)',
        "seed article, §2 Selections Based on Data Characteristics",
        "encoder_decoder",
        ("gru+conv", _TOK),
        (("gru", _TOK),),
    ),
    Claim(
        '"A CNN-decoder has an advantage over an RNN-decoder in handling such target '
        'language texts" (with a convolutional encoder)',
        "seed article, §2 Selections Based on Data Characteristics",
        "encoder_decoder",
        ("convs2s", _TOK),
        (("conv+gru", _TOK),),
    ),
    Claim(
        "Position embeddings help (paraphrased; the model with positions on both sides "
        "against none)",
        "paper, §5.4 Position Embeddings",
        "positions",
        ("both", _TOK),
        (("none", _TOK),),
    ),
    Claim(
        "Removing the source positions costs more than removing the target positions "
        "(paraphrased)",
        "paper, §5.4 Position Embeddings",
        "positions",
        ("source", _TOK),
        (("target", _TOK),),
    ),
    Claim(
        "Attention in every decoder layer is better than in one layer (paraphrased)",
        "paper, §5.5 Multi-step Attention",
        "attention_layers",
        ("all", _TOK),
        (("first", _TOK), ("last", _TOK)),
    ),
    Claim(
        "More layers improve accuracy (paraphrased; 4 against 2 layers, k = 3)",
        "paper, §5.6 Kernel Size and Depth",
        "depth_kernel",
        ("L4-k3", _TOK),
        (("L2-k3", _TOK),),
    ),
    Claim(
        "ConvS2S generates faster than a recurrent model (paraphrased; the paper compares "
        "with GNMT on a GPU and CPUs, here the greedy decoding time of the test set: the "
        "GRU model's against ConvS2S's)",
        "paper, §5.3 Generation Speed",
        "encoder_decoder",
        ("gru", "greedy_seconds"),
        (("convs2s", "greedy_seconds"),),
    ),
    Claim(
        "Decoding with a wider beam takes longer (paraphrased; ConvS2S, beam 10 against 1)",
        "paper, §5.3 Generation Speed",
        "beam",
        ("convs2s", "seconds_beam10"),
        (("convs2s", "seconds_beam1"),),
        paired=True,
    ),
    Claim(
        'beam search "selects the translation that is most likely to be correct" '
        "(ConvS2S, beam 5 against greedy)",
        "seed article, §2 Selections Based on Data Characteristics",
        "beam",
        ("convs2s", "token_accuracy_beam5"),
        (("convs2s", "token_accuracy_beam1"),),
        paired=True,
    ),
    Claim(
        'beam search "selects the translation that is most likely to be correct" '
        "(GRU, beam 5 against greedy)",
        "seed article, §2 Selections Based on Data Characteristics",
        "beam",
        ("gru", "token_accuracy_beam5"),
        (("gru", "token_accuracy_beam1"),),
        paired=True,
    ),
)


def check_claims(results: dict, claims: Sequence[Claim] = CLAIMS) -> list[dict]:
    """One row per claim, filled in from the experiments' results.

    Parameters
    ----------
    results : dict
        :data:`EXPERIMENTS` key -> :class:`ExperimentResult`, for every experiment the
        claims use.
    claims : sequence of Claim

    Returns
    -------
    list of dict
        ``claim``, ``source``, ``experiment``, ``measured`` (the two sides, mean and
        min–max), ``verdict`` (:func:`verdict`) and ``n_seeds``.
    """
    rows = []
    for claim in claims:
        if claim.experiment not in results:
            raise ValueError(
                f"no result of experiment {claim.experiment!r} for the claim "
                f"{claim.text[:40]!r}; have {sorted(results)}"
            )
        res = results[claim.experiment]
        arm, key = claim.claimed
        a_row = res.row(arm)
        others = [(res.row(o_arm), o_key) for o_arm, o_key in claim.others]
        b_row, b_key = max(others, key=lambda rk: rk[0][rk[1]])
        fmt = "{:.3f} s" if "seconds" in key or key.startswith("sec_") else "{:.1%}"
        v = verdict(a_row[f"{key}_values"], b_row[f"{b_key}_values"], paired=claim.paired)
        rows.append(
            {
                "claim": claim.text,
                "source": claim.source,
                "experiment": claim.experiment,
                "measured": (
                    f"{arm} {key.replace('_', ' ')} {format_spread(a_row, key, fmt)} vs "
                    f"{b_row['arm']} {b_key.replace('_', ' ')} "
                    f"{format_spread(b_row, b_key, fmt)}"
                ),
                "verdict": v,
                "n_seeds": min(a_row["n_seeds"], b_row["n_seeds"]),
            }
        )
    return rows
