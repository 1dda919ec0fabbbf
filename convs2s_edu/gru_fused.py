r"""The bidirectional GRU layer with its backward pass written out, for training on a CPU.

:class:`~convs2s_edu.GRUEncoder` reads the source with a :class:`torch.nn.GRU`, and that
module holds the weights; this module runs the same equations on a packed batch, with
both directions stepped together, and computes the gradients by hand instead of through
autograd's record of every step. The result is the same function with the same
gradients (``tests/test_gru_fused.py`` compares both with :class:`torch.nn.GRU` and
with :func:`torch.autograd.gradcheck`). Autograd records every step of the packed
:class:`torch.nn.GRU` on its own: each step's slice of the packed input gates gets a
zero-filled gradient of the whole packed input, and each step multiplies its own small
weight gradient. Here the backward pass keeps only the recurrence step by step and
computes the weight and input gradients as one matrix product over every step.

Forward, for each direction, step :math:`t` over the rows still running (Cho et al.
2014; the gate layout of :class:`torch.nn.GRU`):

.. math::

    r_t &= \sigma(W_{ir} x_t + b_{ir} + W_{hr} h_{t-1} + b_{hr}) \\
    z_t &= \sigma(W_{iz} x_t + b_{iz} + W_{hz} h_{t-1} + b_{hz}) \\
    \tilde h_t &= \tanh\big(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn})\big) \\
    h_t &= (1 - z_t) \odot \tilde h_t + z_t \odot h_{t-1}

Backward, from :math:`g_t = \partial L / \partial h_t` (the output's gradient plus what
step :math:`t+1` sent back), the only part that must run step by step:

.. math::

    \delta\tilde h_t &= g_t \odot (1 - z_t) \odot (1 - \tilde h_t^2) \\
    \delta z_t &= g_t \odot (h_{t-1} - \tilde h_t) \odot z_t (1 - z_t) \\
    \delta r_t &= \delta\tilde h_t \odot (W_{hn} h_{t-1} + b_{hn}) \odot r_t (1 - r_t) \\
    g_{t-1} &\mathrel{+}= g_t \odot z_t
        + W_{h}^\top [\delta r_t; \delta z_t; r_t \odot \delta\tilde h_t]

The weight gradients are then one matrix product over every step at once, e.g.
:math:`\partial L / \partial W_h = \sum_t [\delta r_t; \delta z_t; r_t \odot
\delta\tilde h_t]\, h_{t-1}^\top`, and so are the input's.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = ["fused_applies", "packed_bigru"]


def _packed_positions(batch_sizes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Two permutations-by-index of a packed batch (rows longest first, step by step).

    Returns ``reverse`` ``(N,)``: where every packed position's token sits once each row is
    reversed within its length (its own inverse), and ``previous`` ``(N - B,)``: for every
    position after a row's first, the position of the same row one step earlier.
    """
    sizes = torch.tensor(batch_sizes)
    S, B = len(batch_sizes), batch_sizes[0]
    offsets = torch.cumsum(sizes, 0) - sizes  # (S,) first packed position of every step
    lengths = (sizes[None, :] > torch.arange(B)[:, None]).sum(1)  # (B,) rows' lengths
    t, i = torch.arange(S)[:, None], torch.arange(B)[None, :]
    running = i < sizes[:, None]  # (S, B)
    reverse = offsets[(lengths[None, :] - 1 - t).clamp(min=0)] + i  # (S, B)
    previous = (offsets[:, None] + i)[:-1]  # (S - 1, B): step t-1's position of row i
    return reverse[running], previous[running[1:]]


class _BiGRULayer(torch.autograd.Function):
    """One bidirectional layer over packed data, both directions as a batch of two.

    ``x`` ``(N, E)``: the packed input (rows longest first, as
    :func:`~torch.nn.utils.rnn.pack_padded_sequence` orders them); the reverse direction
    reads it through ``reverse`` (``_packed_positions``), so both directions step
    through the same ``batch_sizes``. Weights stacked over the directions: ``W_i``
    ``(2, 3H, E)``, ``W_h`` ``(2, 3H, H)``, ``b_i``, ``b_h`` ``(2, 3H)``. Returns the packed
    annotations ``[h_fwd; h_rev]`` ``(N, 2H)`` and every row's last state of each direction
    ``(2, B, H)`` (rows in the packed order); :math:`h_0 = 0`.
    """

    @staticmethod
    def forward(ctx, x, W_i, W_h, b_i, b_h, batch_sizes: list[int], reverse, previous):
        H = W_h.shape[-1]
        B, N = batch_sizes[0], x.shape[0]
        xs = torch.stack([x, x.index_select(0, reverse)])  # (2, N, E)
        # the input's share of every gate, every step at once: W_i x_t + b_i  (2, N, 3H)
        gi = torch.baddbmm(b_i.unsqueeze(1), xs, W_i.transpose(1, 2))
        W_hT, b_h1 = W_h.transpose(1, 2), b_h.unsqueeze(1)
        out = x.new_empty(2, N, H)  # h_t of every step, packed
        rz = x.new_empty(2, N, 2 * H)  # r_t, z_t
        h_tilde = x.new_empty(2, N, H)  # h~_t
        gh_n = x.new_empty(2, N, H)  # W_hn h_{t-1} + b_hn
        h_last = x.new_empty(2, B, H)
        h_prev = x.new_zeros(2, B, H)  # h_0
        offset = 0
        for t, n in enumerate(batch_sizes):
            rows = slice(offset, offset + n)
            hp = h_prev[:, :n]  # (2, n, H)
            gh = torch.baddbmm(b_h1, hp, W_hT)  # W_h h_{t-1} + b_h  (2, n, 3H)
            gi_t = gi[:, rows]
            # r_t, z_t = σ(W_i x_t + b_i + W_h h_{t-1} + b_h)  for r and z
            rz_t = torch.sigmoid(gi_t[..., : 2 * H] + gh[..., : 2 * H], out=rz[:, rows])
            r_t, z_t = rz_t[..., :H], rz_t[..., H:]
            gh_n[:, rows] = gh[..., 2 * H :]
            # h~_t = tanh(W_in x_t + b_in + r_t ⊙ (W_hn h_{t-1} + b_hn))
            n_t = torch.tanh(
                torch.addcmul(gi_t[..., 2 * H :], r_t, gh[..., 2 * H :]), out=h_tilde[:, rows]
            )
            # h_t = (1 - z_t) ⊙ h~_t + z_t ⊙ h_{t-1}
            h_prev = torch.addcmul(n_t, z_t, hp - n_t, out=out[:, rows])
            n_next = batch_sizes[t + 1] if t + 1 < len(batch_sizes) else 0
            h_last[:, n_next:n] = h_prev[:, n_next:]  # the rows whose last step this is
            offset += n
        ctx.batch_sizes = batch_sizes
        ctx.save_for_backward(xs, W_i, W_h, out, rz, h_tilde, gh_n, reverse, previous)
        return torch.cat([out[0], out[1].index_select(0, reverse)], dim=-1), h_last

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_annotations, d_last):
        xs, W_i, W_h, out, rz, h_tilde, gh_n, reverse, previous = ctx.saved_tensors
        batch_sizes = ctx.batch_sizes
        H, B, N = W_h.shape[-1], batch_sizes[0], xs.shape[1]
        d_out = torch.stack([d_annotations[:, :H], d_annotations[:, H:].index_select(0, reverse)])
        d_gi = out.new_empty(2, N, 3 * H)  # ∂L/∂(W_i x_t + b_i)
        d_gh = out.new_empty(2, N, 3 * H)  # ∂L/∂(W_h h_{t-1} + b_h)
        # h_{t-1} of every step, packed like out (h_0 = 0 for the first step)
        h_prevs = torch.cat([out.new_zeros(2, B, H), out.index_select(1, previous)], dim=1)
        g = out.new_zeros(2, B, H)  # ∂L/∂h_t sent back from step t+1
        offset = N
        for t in range(len(batch_sizes) - 1, -1, -1):
            n = batch_sizes[t]
            offset -= n
            rows = slice(offset, offset + n)
            n_next = batch_sizes[t + 1] if t + 1 < len(batch_sizes) else 0
            g[:, n_next:n] = d_last[:, n_next:n]  # the rows that end here
            g_t = d_out[:, rows] + g[:, :n]  # (2, n, H)
            args = h_prevs[:, rows], rz[:, rows], h_tilde[:, rows], gh_n[:, rows]
            d_gi[:, rows], d_gh[:, rows], g_z = _gates_backward(g_t, *args)
            # ∂L/∂h_{t-1} = g ⊙ z + W_hᵀ [δr; δz; r ⊙ δh~]
            g[:, :n] = torch.baddbmm(g_z, d_gh[:, rows], W_h)
        # every step at once: the weight, bias and input gradients
        d_W_h = torch.bmm(d_gh.transpose(1, 2), h_prevs)  # (2, 3H, H)
        d_W_i = torch.bmm(d_gi.transpose(1, 2), xs)  # (2, 3H, E)
        d_xs = torch.bmm(d_gi, W_i)  # (2, N, E)
        d_x = d_xs[0] + d_xs[1].index_select(0, reverse)
        return d_x, d_W_i, d_W_h, d_gi.sum(1), d_gh.sum(1), None, None, None


def _gates_backward(g, s_prev, rz, s_tilde, h_gates_n):
    """The gradients of a GRU step's gates from ``g`` = ∂L/∂s_t (the formulas above):
    ``(∂L/∂(W_i x + b_i), ∂L/∂(W_h s_{t-1} + b_h), g ⊙ z)``, each ``(..., 3H)`` but the
    last ``(..., H)``, the part of ∂L/∂s_{t-1} that does not pass through ``W_h``."""
    H = s_prev.shape[-1]
    r, z = rz[..., :H], rz[..., H:]
    # δs~ = g ⊙ (1 - z) ⊙ (1 - s~²)
    d_n = g * (1 - z) * (1 - s_tilde * s_tilde)
    # δr = δs~ ⊙ (W_hn s_{t-1} + b_hn) ⊙ r (1 - r);  δz = g ⊙ (s_{t-1} - s~) ⊙ z (1 - z)
    d_rz = torch.cat([d_n * h_gates_n, g * (s_prev - s_tilde)], dim=-1) * rz * (1 - rz)
    return torch.cat([d_rz, d_n], dim=-1), torch.cat([d_rz, d_n * r], dim=-1), g * z


def fused_applies(x: torch.Tensor) -> bool:
    """Whether :func:`packed_bigru` serves here: a gradient is wanted, on a CPU, in
    float32 or float64, eagerly (not under autocast, :func:`torch.compile`, tracing or
    export, which see :class:`torch.nn.GRU` itself)."""
    return (
        torch.is_grad_enabled()
        and x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.float64)
        and not torch.is_autocast_enabled("cpu")
        and not torch.compiler.is_compiling()
        and not torch.jit.is_tracing()
        and not torch.jit.is_scripting()
        and not torch.onnx.is_in_onnx_export()
    )


def packed_bigru(
    x: torch.Tensor, lengths: torch.Tensor, gru: nn.GRU
) -> tuple[torch.Tensor, torch.Tensor]:
    """What ``gru(pack_padded_sequence(x, lengths, True, enforce_sorted=False))`` computes,
    unpacked, with the backward pass written out (``_BiGRULayer``).

    Parameters
    ----------
    x : Tensor, shape (B, S, E)
        The padded input, batch first.
    lengths : Tensor, shape (B,)
        Every row's length (on the CPU, at least 1).
    gru : torch.nn.GRU
        A bidirectional, batch-first GRU with biases; its weights are used, and its
        dropout between layers applies in its training mode, as in the module.

    Returns
    -------
    states : Tensor, shape (B, S, 2H)
        ``[h_fwd; h_rev]`` of the top layer, zero at padding.
    h_n : Tensor, shape (2 L, B, H)
        Every layer's and direction's last state, as :class:`torch.nn.GRU` returns it.
    """
    if not (gru.bidirectional and gru.batch_first and gru.bias):
        raise ValueError("packed_bigru needs a bidirectional, batch-first nn.GRU with biases")
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    batch_sizes = packed.batch_sizes.tolist()
    reverse, previous = (i.to(x.device) for i in _packed_positions(batch_sizes))
    data, h_n = packed.data, []
    for layer in range(gru.num_layers):
        if layer:
            data = nn.functional.dropout(data, gru.dropout, gru.training)
        weights = [
            torch.stack(
                [getattr(gru, f"{name}_l{layer}"), getattr(gru, f"{name}_l{layer}_reverse")]
            )
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        ]
        data, last = _BiGRULayer.apply(data, *weights, batch_sizes, reverse, previous)
        h_n.append(last)
    states, _ = pad_packed_sequence(
        packed._replace(data=data), batch_first=True, total_length=x.shape[1]
    )
    unsort = packed.unsorted_indices.to(x.device)
    return states, torch.cat(h_n).index_select(1, unsort)
