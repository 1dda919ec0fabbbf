"""Reference computations shared by the test files, written without the package's code paths:
the loss of examples one at a time, and bit-for-bit equal weights."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from convs2s_edu.data import eos_index, sos_index


def nll_one_by_one(model, examples, vocab) -> tuple[float, int]:
    """Sum of -log p(y_t | y_<t, x) over every target token (<eos> included) and their number,
    each example alone and unpadded, so padding cannot enter."""
    total, n = 0.0, 0
    sos, eos = sos_index(vocab), eos_index(vocab)
    with torch.no_grad():
        for x, y in examples:
            logits = model(torch.tensor([x]), torch.tensor([[sos, *y]]))[0]  # (T, V)
            logp = F.log_softmax(logits.double(), dim=-1)
            target = [*y, eos]
            total -= sum(float(logp[t, tok]) for t, tok in enumerate(target))
            n += len(target)
    return total, n


def state_equal(a, b):
    """Assert that two models hold the same parameters and buffers, bit for bit."""
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0, msg=k)
