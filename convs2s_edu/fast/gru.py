r"""The GRU model's fast paths: the encoder with its backward pass written out, and the
decoder's teacher forcing over the packed target.

Both compute what :class:`~convs2s_edu.GRUEncoder` and :class:`~convs2s_edu.GRUDecoder`
compute, with the same parameters (``tests/test_fast_gru.py`` compares values and
gradients); :func:`~convs2s_edu.fast.use_fast_paths` switches a model to them.

:class:`FastGRUEncoder`
    Where a gradient is wanted on a CPU, the bidirectional :class:`torch.nn.GRU` runs
    through :func:`packed_bigru`: both directions step together and the backward pass is
    written out. Autograd records every step of the packed :class:`torch.nn.GRU` on its
    own (each step's slice of the input gates gets a zero-filled gradient of the whole
    packed input, and each step multiplies its own small weight gradient); here the
    backward pass keeps only the recurrence step by step and computes the weight and
    input gradients as one matrix product over every step (the equations below).
:class:`FastGRUDecoder`
    Teacher forcing over the packed target, without the module calls of
    :meth:`~convs2s_edu.GRUDecoder.step` (its Notes say what changes).

The GRU, for each direction, step :math:`t` over the rows still running (Cho et al.
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
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ..data import PAD
from ..rnn import GRUDecoder, GRUEncoder
from ..seq2seq import EncoderOut

__all__ = ["fused_applies", "packed_bigru", "FastGRUEncoder", "FastGRUDecoder"]


def _packed_positions(batch_sizes: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Two permutations-by-index of a packed batch (rows longest first, step by step).

    Returns ``reverse`` ``(N,)``: where every packed position's token sits once each row
    is reversed within its length (its own inverse), and ``previous`` ``(N - B,)``: for
    every position after a row's first, the position of the same row one step earlier.
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
    ``(2, 3H, E)``, ``W_h`` ``(2, 3H, H)``, ``b_i``, ``b_h`` ``(2, 3H)``. Returns the
    packed annotations ``[h_fwd; h_rev]`` ``(N, 2H)`` and every row's last state of each
    direction ``(2, B, H)`` (rows in the packed order); :math:`h_0 = 0`.
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
                torch.addcmul(gi_t[..., 2 * H :], r_t, gh[..., 2 * H :]),
                out=h_tilde[:, rows],
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
        d_out = torch.stack(
            [d_annotations[:, :H], d_annotations[:, H:].index_select(0, reverse)]
        )
        d_gi = out.new_empty(2, N, 3 * H)  # ∂L/∂(W_i x_t + b_i)
        d_gh = out.new_empty(2, N, 3 * H)  # ∂L/∂(W_h h_{t-1} + b_h)
        # h_{t-1} of every step, packed like out (h_0 = 0 for the first step)
        h_prevs = torch.cat(
            [out.new_zeros(2, B, H), out.index_select(1, previous)], dim=1
        )
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
    """What ``gru(pack_padded_sequence(x, lengths, True, enforce_sorted=False))``
    computes, unpacked, with the backward pass written out (``_BiGRULayer``).

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
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    batch_sizes = packed.batch_sizes.tolist()
    reverse, previous = (i.to(x.device) for i in _packed_positions(batch_sizes))
    data, h_n = packed.data, []
    for layer in range(gru.num_layers):
        if layer:
            data = nn.functional.dropout(data, gru.dropout, gru.training)
        names = [
            f"{w}_l{layer}" for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        ]
        # each stacked over the two directions, forward first: (2, ...)
        weights = [
            torch.stack([getattr(gru, n), getattr(gru, n + "_reverse")]) for n in names
        ]
        data, last = _BiGRULayer.apply(data, *weights, batch_sizes, reverse, previous)
        h_n.append(last)
    states, _ = pad_packed_sequence(
        packed._replace(data=data), batch_first=True, total_length=x.shape[1]
    )
    unsort = packed.unsorted_indices.to(x.device)
    return states, torch.cat(h_n).index_select(1, unsort)


class FastGRUEncoder(GRUEncoder):
    """:class:`~convs2s_edu.GRUEncoder` whose GRU
    (:meth:`~convs2s_edu.GRUEncoder.recur`) runs through :func:`packed_bigru` where
    :func:`fused_applies` (a gradient wanted, on a CPU, eagerly); elsewhere the
    reference's own. Same parameters, same function."""

    def recur(self, x: torch.Tensor, lengths: torch.Tensor):
        if not fused_applies(self.embed.weight):
            return super().recur(x, lengths)
        return packed_bigru(x, lengths, self.gru)  # (B, S, 2n), (2 L_enc, B, n)


def _gru_update(
    x_gates: torch.Tensor, h_gates: torch.Tensor, s_prev: torch.Tensor
) -> torch.Tensor:
    r"""One GRU step from its two matrix products, as :class:`torch.nn.GRU` computes it.

    ``x_gates`` :math:`W_i x_t + b_i` and ``h_gates`` :math:`W_h s_{t-1} + b_h`, both
    ``(B, 3n)`` in the gate order :math:`r, z, \tilde s`; ``s_prev`` ``(B, n)``.
    """
    n = s_prev.shape[-1]
    # r_t, z_t = σ(W_ir x + b_ir + W_hr s_{t-1} + b_hr), σ(W_iz x + b_iz + W_hz s_{t-1}
    # + b_hz)
    rz = torch.sigmoid(x_gates[:, : 2 * n] + h_gates[:, : 2 * n])
    r, z = rz[:, :n], rz[:, n:]
    # s~_t = tanh(W_in x + b_in + r_t ⊙ (W_hn s_{t-1} + b_hn))
    s_tilde = torch.tanh(torch.addcmul(x_gates[:, 2 * n :], r, h_gates[:, 2 * n :]))
    # s_t = (1 - z_t) ⊙ s~_t + z_t ⊙ s_{t-1}
    return torch.addcmul(s_tilde, z, s_prev - s_tilde)


class FastGRUDecoder(GRUDecoder):
    r""":class:`~convs2s_edu.GRUDecoder` whose teacher forcing runs over the packed
    target.

    Notes
    -----
    The forward pass computes what the reference's :meth:`~convs2s_edu.GRUDecoder.start`
    and :meth:`~convs2s_edu.GRUDecoder.step` repeated compute, at every position up to a
    row's last non-``PAD`` token; after it, logits and attention are zero (the loss
    reads nothing there, so the gradients are those of the reference).

    * **Packed rows.** As :func:`~torch.nn.utils.rnn.pack_padded_sequence` does for the
      encoder, the rows are put longest first, so that the rows still running at step
      :math:`t` are the first :math:`n_t` (``batch_sizes[t]``): the right padding is
      never computed.
    * **What depends only on the inputs runs once.** Under teacher forcing every
      :math:`y_{t-1}` is known in advance: the embeddings :math:`E y_{t-1}`, their share
      :math:`W_{iy} E y_{t-1} + b_i` of the GRU's input gates (:math:`W_i = [W_{iy}\;
      W_{ic}]` splits over the input :math:`[E y_{t-1}; c_t]`) and, after the loop, the
      output layer :math:`W_s s_t + b_s` are one matrix product each. What needs
      :math:`s_{t-1}` (the attention, the context's share :math:`W_{ic} c_t`, the
      recurrence) runs step by step: the sequential part the paper's argument is about.
    * **tanh through the sigmoid.** :math:`\tanh(x) = 2\sigma(2x) - 1`, so
      :math:`v_a^\top \tanh(x) = 2 v_a^\top \sigma(2x) - \sum v_a`: the softmax over
      :math:`j` ignores the constant, and :math:`\sigma` costs a CPU less than
      :math:`\tanh`.
    * The GRU's equations are written out with the weights of ``self.gru``
      (``_gru_update``), so a forward hook on ``gru``, ``attention`` or ``embed``
      sees nothing of a teacher-forced forward. Dropout draws its masks once for the
      packed embeddings and the stacked outputs instead of once per step.
    """

    def forward(self, tgt_in: torch.Tensor, enc: EncoderOut):
        B, T = tgt_in.shape
        # a row's length: up to its last non-PAD token (at least 1)
        position = torch.arange(1, T + 1, device=tgt_in.device)  # (T,)
        lengths = (tgt_in.ne(PAD) * position).amax(dim=1).clamp(min=1)  # (B,)
        packed = pack_padded_sequence(tgt_in, lengths.cpu(), True, enforce_sorted=False)
        sizes = packed.batch_sizes.tolist()  # n_t, non-increasing
        state = self.reorder(self.start(enc), packed.sorted_indices.to(tgt_in.device))
        h, mask = state.h, state.padding_mask  # (B, S, 2n), (B, S)
        keys2 = 2 * state.keys  # 2 (W_a h_j + b_a)  (B, S, A)
        # 2 U_a (A, n), 2 v_a
        U2, v2 = 2 * self.attention.U_a.weight, 2 * self.attention.v_a
        s = list(state.s.unbind(0))  # s_{t-1} of every layer, (B, n) each
        gru, E = self.gru, self.cfg.embed_dim
        # (3n, E), (3n, 2n)
        W_iy, W_ic = gru.weight_ih_l0[:, :E], gru.weight_ih_l0[:, E:]
        # W_iy E y_{t-1} + b_i for every step at once, split into the steps  (n_t, 3n) each
        y = self.dropout(self.embed(packed.data))  # E y_{t-1}, packed  (Σ n_t, E)
        gates_y = F.linear(y, W_iy, gru.bias_ih_l0).split(sizes)
        tops, attention = [], []
        for t, n_t in enumerate(sizes):  # inherently sequential: s_t needs s_{t-1}
            # the rows whose target has ended leave (the last ones)
            if n_t < h.shape[0]:
                h, keys2, mask = h[:n_t], keys2[:n_t], mask[:n_t]
                s = [s_l[:n_t] for s_l in s]
            # a_tj = softmax_j(v_a^T tanh(W_a h_j + b_a + U_a s_{t-1}))
            #      = softmax_j(2 v_a^T σ(2 (W_a h_j + b_a) + 2 U_a s_{t-1}))
            x = keys2 + F.linear(s[-1], U2).unsqueeze(1)  # (n_t, S, A)
            e = torch.sigmoid(x) @ v2  # e_tj + Σ v_a  (n_t, S)
            a = torch.softmax(e.masked_fill(mask, float("-inf")), dim=-1)  # (n_t, S)
            # c_t = Σ_j a_tj h_j
            c = torch.bmm(a.unsqueeze(1), h).squeeze(1)  # (n_t, 2n)
            # W_i [E y_{t-1}; c_t] + b_i = (W_iy E y_{t-1} + b_i) + W_ic c_t
            x_gates = torch.addmm(gates_y[t], c, W_ic.t())  # (n_t, 3n)
            for layer in range(len(s)):
                W_i, b_i, W_h, b_h = (
                    gru.get_parameter(f"{w}_l{layer}")
                    for w in ("weight_ih", "bias_ih", "weight_hh", "bias_hh")
                )
                # a stacked layer reads the one below (dropout between, as nn.GRU)
                if layer:
                    x_gates = F.linear(
                        F.dropout(s[layer - 1], gru.dropout, gru.training), W_i, b_i
                    )
                s[layer] = _gru_update(x_gates, F.linear(s[layer], W_h, b_h), s[layer])
            tops.append(s[-1])
            attention.append(a)
        # p(y_t) = softmax(W_s s_t + b_s), every step at once
        logits = self.W_s(self.dropout(torch.cat(tops)))  # (Σ n_t, V)

        # (Σ n_t, ...) packed -> (B, T, ...) in the batch's order, 0 at padding
        def unpack(x):
            padded, _ = pad_packed_sequence(
                packed._replace(data=x), True, total_length=T
            )
            return padded

        return unpack(logits), unpack(torch.cat(attention)).unsqueeze(1)
