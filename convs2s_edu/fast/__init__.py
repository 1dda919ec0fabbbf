r"""Every speed-up of the package, apart from the models, each proven equal to them (or,
for dropout's random masks, equal in distribution).

The model files (:mod:`convs2s_edu.convs2s`, :mod:`convs2s_edu.rnn`) compute each
equation as the papers write it. What makes training faster lives here, and only here:

==================================  =======================================  =================
fast path                           instead of                               module
==================================  =======================================  =================
:class:`FastConvBlock`              ``ConvBlock.convolve``'s ``nn.Conv1d``:  :mod:`.conv`
                                    one matrix product over the windows
:class:`FastGRUEncoder`             ``nn.GRU``'s autograd, step by step:     :mod:`.gru`
                                    the backward pass written out (CPU,
                                    training)
:class:`FastGRUDecoder`             :meth:`GRUDecoder.step` on every row:    :mod:`.gru`
                                    the packed target, input-only products
                                    hoisted out of the loop
:class:`FastDropout`                :class:`torch.nn.Dropout`'s mask, one    :mod:`.dropout`
                                    random number an element: four 16-bit
                                    numbers from each 64-bit draw
compiled, bf16, CUDA-graph paths    eager fp32                               :mod:`.paths`
==================================  =======================================  =================

One switch turns the first four on: :func:`use_fast_paths` (in place, reversible), or
the field ``TrainConfig.fast``, with which :func:`~convs2s_edu.train` trains through
them and returns the model switched back to the reference classes. By default
(``fast=None``) the machine decides: a short timing of the configuration's training step
chooses the fast paths only where they clear the reference by a margin in every round
(:mod:`convs2s_edu.training.calibrate`); ``convs2s-edu train --fast`` or ``--no-fast``
decides instead. ``tests/test_fast_*.py`` check every fast path's outputs and gradients
against the reference's with :func:`torch.testing.assert_close`, and the fast dropout's
masks against the distribution of :class:`torch.nn.Dropout`'s: a run on the fast paths
draws other masks than one on the reference, so its trained numbers differ as a run on
another machine's path would.
"""

from .conv import FastConvBlock
from .dropout import FastDropout
from .gru import FastGRUDecoder, FastGRUEncoder
from .paths import FAST_CLASSES, use_fast_paths

__all__ = [
    "FAST_CLASSES",
    "FastConvBlock",
    "FastDropout",
    "FastGRUDecoder",
    "FastGRUEncoder",
    "use_fast_paths",
]
