"""nn.LSTM on "hal" with whole-sequence projections.

PyTorch's aten::lstm (CompositeImplicitAutograd) precomputes the input
projection of every time step in one GEMM only for CPU tensors; on an
accelerator it runs two small matmuls and a fused cell per step, and its
autograd adds two more matmuls per step and accumulates the weight gradients
step by step. This kernel (registered for AutogradPrivateUse1, so it owns the
op's autograd on "hal") keeps PyTorch's cell and its order of operations but
projects the whole sequence at once: per layer and direction one GEMM for the
inputs, one matmul and one fused cell (the catalog's lstm_cell) per step, and
in the backward one matmul and one fused cell backward per step, then three
GEMMs over the whole sequence for the input and weight gradients.

Calls it does not cover (projections, tensors on other devices, hidden
states of the wrong shape) run PyTorch's composite unchanged, errors
included. Higher-order gradients through it raise (once_differentiable).
"""
import torch

aten = torch.ops.aten


class _LstmLayer(torch.autograd.Function):
    """One layer and direction: x [T, B, I], h0/c0 [B, H] -> (out [T, B, H], hT, cT)."""

    @staticmethod
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse):
        T, B = x.shape[0], x.shape[1]
        H = w_hh.shape[1]
        x2d = x.reshape(T * B, x.shape[2])
        gates_in = torch.mm(x2d, w_ih.t()).view(T, B, 4 * H)
        order = range(T - 1, -1, -1) if reverse else range(T)
        h, c = h0, c0
        hs, cs, ws = [], [], []
        for t in order:
            h, c, w = aten._thnn_fused_lstm_cell(gates_in[t], torch.mm(h, w_hh.t()), c, b_ih, b_hh)
            hs.append(h)
            cs.append(c)
            ws.append(w)
        out = torch.stack(hs) if T else x.new_empty(0, B, H)
        # In processing order: the state each step started from, and what it made.
        h_prev = torch.stack([h0] + hs[:-1]) if T else out
        c_prev = torch.stack([c0] + cs[:-1]) if T else out
        ctx.save_for_backward(x2d, w_ih, w_hh, h_prev, c_prev, torch.stack(cs) if T else out,
                              torch.stack(ws) if T else out)
        ctx.meta = (T, B, x.shape[2], H, reverse, b_ih is not None)
        return (out.flip(0) if reverse else out), h, c

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_out, g_h, g_c):
        x2d, w_ih, w_hh, h_prev, c_prev, c_next, ws = ctx.saved_tensors
        T, B, I, H, reverse, has_bias = ctx.meta
        if g_out is not None and reverse:
            g_out = g_out.flip(0)
        dh = g_h if g_h is not None else h_prev.new_zeros(B, H)
        dc = g_c if g_c is not None else h_prev.new_zeros(B, H)
        d_gates = [None] * T
        for s in range(T - 1, -1, -1):
            gh = dh if g_out is None else dh + g_out[s]
            d_gates[s], dc, _ = aten._thnn_fused_lstm_cell_backward_impl(gh, dc, c_prev[s], c_next[s], ws[s], False)
            dh = torch.mm(d_gates[s], w_hh)
        if T:
            dg = torch.stack(d_gates).view(T * B, 4 * H)  # processing order
            g_w_hh = torch.mm(dg.t(), h_prev.reshape(T * B, H))
            dg_time = dg.view(T, B, 4 * H).flip(0).reshape(T * B, 4 * H) if reverse else dg
            g_x = torch.mm(dg_time, w_ih).view(T, B, I)
            g_w_ih = torch.mm(dg_time.t(), x2d)
            g_b = dg.sum(0) if has_bias else None
        else:
            g_x = x2d.new_zeros(0, B, I)
            g_w_ih, g_w_hh = torch.zeros_like(w_ih), torch.zeros_like(w_hh)
            g_b = w_ih.new_zeros(4 * H) if has_bias else None
        return g_x, dh, dc, g_w_ih, g_w_hh, g_b, g_b, None


def _covered(x, hx, params, has_biases, num_layers, bidirectional):
    """Whether the time-major X and the rest are a call _LstmLayer runs as PyTorch would."""
    per_layer = 4 if has_biases else 2
    dirs = 2 if bidirectional else 1
    if x.dim() != 3 or len(hx) != 2 or len(params) != per_layer * num_layers * dirs:
        return False  # projections (w_hr) and malformed calls: PyTorch's composite
    tensors = list(hx) + list(params)
    if any(t.device != x.device or t.dtype != x.dtype for t in tensors):
        return False
    H = params[1].shape[1]
    return all(t.shape == (num_layers * dirs, x.shape[1], H) for t in hx)


def _lstm_input(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    x = input.transpose(0, 1) if batch_first else input
    if not _covered(x, hx, params, has_biases, num_layers, bidirectional):
        return aten.lstm.input.decompose(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                          batch_first)
    if torch.is_autocast_enabled(x.device.type):
        # Autocast: the matmuls and the fused cell are on its lower-precision
        # list; cast every operand once (differentiably: the gradients come
        # back in their own dtypes, as through PyTorch's per-op casts) and run
        # the layers in that dtype.
        dtype = torch.get_autocast_dtype(x.device.type)
        x, hx, params = x.to(dtype), [t.to(dtype) for t in hx], [t.to(dtype) for t in params]
        with torch.autocast(x.device.type, enabled=False):
            return _layers(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
    return _layers(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


def _layers(x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    dirs = 2 if bidirectional else 1
    per_layer = 4 if has_biases else 2
    h0, c0 = hx
    hy, cy = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            i = layer * dirs + d
            w = params[i * per_layer:(i + 1) * per_layer]
            b_ih, b_hh = (w[2], w[3]) if has_biases else (None, None)
            out, h, c = _LstmLayer.apply(x, h0[i], c0[i], w[0], w[1], b_ih, b_hh, d == 1)
            outs.append(out)
            hy.append(h)
            cy.append(c)
        x = outs[0] if dirs == 1 else torch.cat(outs, 2)
        if dropout > 0 and train and layer + 1 < num_layers:
            x = torch.dropout(x, dropout, train)
    return (x.transpose(0, 1) if batch_first else x), torch.stack(hy), torch.stack(cy)


_LIB = torch.library.Library("aten", "IMPL")  # noqa: the registration lives as long as the module
_LIB.impl("lstm.input", _lstm_input, "AutogradPrivateUse1")
