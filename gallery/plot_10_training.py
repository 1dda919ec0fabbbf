r"""
Training both models
====================

The central experiment of the original notebook: train ConvS2S and the GRU baseline on
the *same* sorting examples, with the same optimiser, batch size and number of epochs.

This page trains both models (or loads them from the cache, see below), counts their
parameters and draws their loss curves against epochs, then trains both again with a
second recipe, and draws how much of the task each model has learnt after every few
optimiser steps. How fast each model trains, on the clock, is the subject of
:ref:`the speed chapter <sphx_glr_auto_examples_speed_plot_01_training_speed.py>`.
"""

# %%
# Train, or load from the cache
# -----------------------------
# :func:`~convs2s_edu.lab.site.site_config` is the configuration every gallery page
# uses: the original notebook's experiment, or a much smaller one when the site is built
# in quick mode (``CONVS2S_EDU_QUICK=1``). :func:`~convs2s_edu.train_or_load` trains a
# model once and stores the checkpoint, with its timing history, in a cache keyed by the
# configuration, so the pages after this one load the same two models (run on its own,
# this page trains them, which takes a while on a CPU, or reuses your cache).
#
# The device is chosen automatically: a CUDA GPU when there is one, the CPU otherwise;
# the cache keeps CPU and GPU runs apart, since their timings are not comparable. When
# the whole site is built, every model it shows was trained before this page ran,
# several at a time, one process per core (``tools/prepare_site.py``).

import matplotlib.pyplot as plt
import numpy as np
from torch import nn

from convs2s_edu import train_or_load
from convs2s_edu.lab import figures
from convs2s_edu.lab.site import SITE_RECIPES, comparison, quick_caveat, site_config
from convs2s_edu.registry import model_entry

# sphinx_gallery_thumbnail_number = 1
MODELS = ("convs2s", "gru")
LABELS = {name: model_entry(name).label for name in MODELS}
COLOURS = {"convs2s": "C0", "gru": "C1"}

configs = {name: site_config(name) for name in MODELS}
results = {name: train_or_load(configs[name]) for name in MODELS}
histories = {name: results[name].history for name in MODELS}

cfg = configs["convs2s"]
print(f"task: sort {cfg.min_len}-{cfg.max_len} integers from 1..{cfg.vocab_size}")
print(f"data: {cfg.n_train:,} training, {cfg.n_valid:,} held-out, {cfg.n_test:,} test examples")
print(f"schedule: {cfg.epochs} epochs, batches of {cfg.batch_size}, Adam with lr {cfg.lr:g},")
print(f"          gradient norm clipped at {cfg.clip_norm}; {cfg.batching} batches")
print(f"ConvS2S with the paper's normalisation and initialisation: {cfg.paper_normalisation}")
for name, c in configs.items():
    c = results[name].config  # with the path this machine chose (TrainConfig.fast)
    fast = ", fast paths" if c.fast else ""
    path = f"{'compiled' if c.compile else 'eager'}{fast} {c.precision}"
    print(f"{LABELS[name]:16s} trained on: {histories[name].device}; execution path: {path}")

# sphinx_gallery_start_ignore
for name in MODELS:
    h = histories[name]
    assert len(h.epochs) == configs[name].epochs
    assert configs[name].replace(model="convs2s") == cfg  # only the model differs
    assert all(np.isfinite(h.column("train_loss"))) and all(np.isfinite(h.column("valid_loss")))
    assert np.allclose(np.cumsum(h.column("seconds")), h.column("elapsed"))
# sphinx_gallery_end_ignore

# %%
# How big the two models are
# --------------------------
# Both models use the original notebook's sizes (embeddings and hidden states, printed
# below). ConvS2S is trained with the paper's weight normalisation, initialisation and
# gradient and context scaling when the flag printed above is on (see :ref:`the pages on
# the paper's normalisation
# <sphx_glr_auto_examples_normalisation_plot_02_weight_normalisation.py>` and
# :ref:`departures`); weight normalisation adds a length parameter per output unit,
# which the counts include. The trainable parameters include the embedding tables; the
# last column leaves those out, since an embedding lookup costs almost nothing and
# every other weight takes part in a multiply-add for every token it processes: a rough
# proxy for the arithmetic each model does per token.


def n_weights(model, skip_embeddings=False):
    return sum(
        p.numel()
        for m in model.modules()
        for p in m.parameters(recurse=False)
        if p.requires_grad and not (skip_embeddings and isinstance(m, nn.Embedding))
    )


print(
    f"{'model':16s} {'embedding':>9s} {'hidden':>6s} {'parameters':>11s} {'w/o embeddings':>15s}"
)
for name in MODELS:
    model = results[name].model
    print(
        f"{LABELS[name]:16s} {model.cfg.embed_dim:>9d} {model.cfg.hidden_dim:>6d} "
        f"{n_weights(model):>11,} {n_weights(model, True):>15,}"
    )
ratio_params = histories["convs2s"].n_parameters / histories["gru"].n_parameters
print(f"ConvS2S has {ratio_params:.1f}x the parameters of the GRU model.")
no_emb = {LABELS[n]: n_weights(results[n].model, True) for n in MODELS}
words = dict(higher="larger", lower="smaller")
print(comparison("weight count without embeddings", no_emb, fmt="{:,}", **words))

# sphinx_gallery_start_ignore
for name in MODELS:
    assert n_weights(results[name].model) == histories[name].n_parameters
# sphinx_gallery_end_ignore

# %%
# Loss against epochs
# -------------------
# The training loss of the optimiser steps (a running mean over a quarter of an epoch,
# thin lines) and the loss on the held-out examples after every epoch (dots): the
# cross-entropy per target token, padding excluded, on a log scale. The training loss
# is measured with dropout on and the held-out loss with dropout off, so the first can
# sit above the second without any overfitting being involved. The figure asks *how
# much* each model learns per pass over the data; :ref:`the training speed page
# <sphx_glr_auto_examples_speed_plot_01_training_speed.py>` puts them on a clock.

fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
figures.loss_curves(
    ax, {LABELS[n]: histories[n] for n in MODELS}, {LABELS[n]: COLOURS[n] for n in MODELS}
)
ax.set(xlabel="epoch", title=f"Loss per epoch, trained on {histories['convs2s'].device}")
plt.show()

# %%
# Where the two runs ended (the dots of the last epoch). This describes these two runs,
# one seed of each model, not the two architectures: another seed moves such numbers,
# and one pair of runs cannot say by how much. :ref:`The encoder/decoder experiment
# <sphx_glr_auto_examples_experiments_plot_01_encoder_decoder.py>` trains both models
# over several seeds, and :ref:`the claims page
# <sphx_glr_auto_examples_experiments_plot_06_claims.py>` gives the difference its
# interval and a verdict from a rule stated beforehand.

final = {LABELS[n]: histories[n].epochs[-1]["valid_loss"] for n in MODELS}
print(comparison("final held-out loss", final, fmt="{:.4f}"))

# %%
# A second recipe
# ---------------
# The original recipe is the notebook's: 10,000 examples seen 30 times, a
# constant learning rate, dropout. Training a transformer made another kind standard,
# and the ``"fast"`` recipe of :meth:`TrainConfig.recipe <convs2s_edu.TrainConfig.recipe>` is
# one of them: every optimiser step sees 128 examples it never saw before (on this task
# they cost nothing to draw, so nothing needs repeating), the learning rate rises
# linearly over the first 5% of the steps to a peak three times the original notebook's,
# then falls linearly to zero, Adam's :math:`\beta_2` is 0.98 instead of 0.999 (a
# shorter memory of the gradients' scale, which the changing learning rate calls for),
# and there is no dropout (with fresh data there is nothing to overfit). The cell prints
# the two recipes side by side, with their numbers of steps.

recipes = {r: {n: site_config(n, r) for n in MODELS} for r in SITE_RECIPES}
runs = {r: {n: train_or_load(recipes[r][n]) for n in MODELS} for r in SITE_RECIPES}
for r, by_model in recipes.items():
    c = by_model["convs2s"]
    data = "fresh examples every step" if c.fresh_data else f"{c.n_train:,} examples x {c.epochs}"
    print(
        f"{r:>4} recipe: {c.total_steps:,} steps of {c.batch_size}, {data}, "
        f"lr {c.lr:g} ({c.lr_schedule}), Adam betas {c.adam_betas}, "
        f"dropout {c.model_options.get('dropout', 0.1)}"
    )

# sphinx_gallery_start_ignore
assert runs["original"]["convs2s"].history.evals == histories["convs2s"].evals
for r in SITE_RECIPES:
    for n in MODELS:
        h = runs[r][n].history
        assert h.steps == recipes[r][n].total_steps and h.evals[-1]["step"] == h.steps
# sphinx_gallery_end_ignore

# %%
# How much each step teaches
# --------------------------
# Every run decoded the held-out examples greedily every few optimiser steps and
# recorded the fraction it sorted exactly right (the learning curve, ``History.evals``).
# The figure draws it against the optimiser step for both models and both recipes; the
# dotted lines mark the 50%, 90% and 95% levels whose first crossing :ref:`the speed
# page <sphx_glr_auto_examples_speed_plot_01_training_speed.py>` turns into seconds.
# Steps, not epochs, are the common unit: the two recipes' epochs differ.

fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
for r, style in zip(SITE_RECIPES, ("-", "--")):
    for n in MODELS:
        steps, em = zip(*[(e["step"], 100 * e["exact_match"]) for e in runs[r][n].history.evals])
        ax.plot(steps, em, style, color=COLOURS[n], label=f"{LABELS[n]}, {r} recipe")
for level in (50, 90, 95):
    ax.axhline(level, color="0.6", lw=0.8, ls=":")
top = max(
    100 * e["exact_match"] for r in SITE_RECIPES for n in MODELS for e in runs[r][n].history.evals
)
ax.set(
    xlabel="optimiser step",
    ylabel="held-out exact match (%)",
    ylim=(0, min(100, max(5, 1.1 * top))),
)
ax.legend(fontsize=9, loc="lower right")
ax.set_title("Learning curves")
plt.show()
quick_caveat("the learning curves above")

# %%
# What the recipe is worth, in steps and in exact match at the end of each run
# (computed from the curves above):

for n in MODELS:
    ends = {f"the {r} recipe": runs[r][n].history.evals[-1]["exact_match"] for r in SITE_RECIPES}
    steps = {f"the {r} recipe": runs[r][n].history.steps for r in SITE_RECIPES}
    print(f"{LABELS[n]}: " + comparison("final held-out exact match", ends))
    print(" " * len(LABELS[n]) + "  " + comparison("number of steps", steps, fmt="{:,}"))

# %%
# Headline numbers of this build
# ------------------------------
# Exact match (every token right) and token accuracy on the test set with greedy
# decoding, for both recipes, measured when this site was built. The landing page shows
# the same numbers, next to the training speed and the convergence speed of the two
# models timed side by side in :ref:`the speed chapter
# <sphx_glr_auto_examples_speed_plot_01_training_speed.py>` (a training run's own clock
# also measures whatever else the machine was doing, and when the site is built the
# runs share the machine on purpose). :ref:`The evaluation page
# <sphx_glr_auto_examples_plot_11_evaluation.py>` takes the scores apart.

from convs2s_edu import evaluate, make_datasets

test_set = make_datasets(cfg)[2]
headline = {"recipes": {}}
for r in SITE_RECIPES:
    headline["recipes"][r] = {}
    for name in MODELS:
        scores = evaluate(runs[r][name].model, make_datasets(recipes[r][name])[2])
        h = runs[r][name].history
        m = headline["recipes"][r][name] = {
            "exact_match": scores["exact_match"],
            "token_accuracy": scores["token_accuracy"],
            "steps": h.steps,
            "epochs": len(h.epochs),
            "n_train": recipes[r][name].n_train,
            "fresh_data": recipes[r][name].fresh_data,
            "n_parameters": h.n_parameters,
            "device": h.device,
        }
        print(
            f"{LABELS[name]:16s} {r:>4} recipe: exact match {m['exact_match']:6.1%}  "
            f"token accuracy {m['token_accuracy']:6.1%}  after {m['steps']:,} steps"
        )
headline.update(n_test=len(test_set), n_train=cfg.n_train, epochs=cfg.epochs)

# sphinx_gallery_start_ignore
# The site's build (docs/conf.py) sets CONVS2S_EDU_SITE_DATA: the landing page
# includes a table made from these numbers.
from convs2s_edu.lab.site import is_quick_mode, record

headline["mode"] = "quick" if is_quick_mode() else "full"
_ = record("headline", headline)  # the path written: not shown
# sphinx_gallery_end_ignore

# %%
# What you saw
# ------------
# * Both models trained on the same examples with the same optimiser, batch size and
#   number of epochs; the loss curves compare what each learns *per epoch*.
# * A second recipe, ``"fast"`` (:data:`~convs2s_edu.training.config.RECIPES`: fresh
#   examples every step, warm-up and linear decay, Adam's :math:`\beta_2 = 0.98`, no
#   dropout, for the number of steps printed above), trains the same two models; the
#   learning curves show what each step teaches under each recipe.
# * The next pages look at how well each sorts after the same number of epochs:
#   :ref:`evaluation <sphx_glr_auto_examples_plot_11_evaluation.py>`,
#   :ref:`attention <sphx_glr_auto_examples_plot_12_attention_heatmaps.py>` and
#   :ref:`decoding <sphx_glr_auto_examples_plot_15_decoding.py>`;
#   :ref:`the speed chapter <sphx_glr_auto_examples_speed_plot_01_training_speed.py>`
#   times them.
#
# Try it
# ------
# **1. Twice the batch size.** How many optimiser steps does an epoch take
# with batches of 256 instead of 128?
#
# .. raw:: html
#
#    <details class="solution"><summary>Solution</summary>
#
# Half as many (rounded up): every step reads twice the examples. The arithmetic per
# epoch stays the same, so an epoch gets faster only where the hardware has idle
# parallel units for the larger batch (usually a GPU, rarely a two-core CPU).

import math

cfg_ex = site_config("convs2s")
for size in (cfg_ex.batch_size, 2 * cfg_ex.batch_size):
    print(f"batch {size}: {math.ceil(cfg_ex.n_train / size)} steps per epoch")

# %%
# .. raw:: html
#
#    </details>
