"""The CPU plugin's ops against PyTorch CPU: a second reference, independent of hal-conformance's.

Each case runs one catalog op through the hal package and the same computation in torch
(forward ops directly, backward ops through torch.autograd), then compares every output.
"""
import dataclasses
from typing import Callable, List, Optional

import pytest
import torch
import torch.nn.functional as F

from hal import torch_util as tu

torch.manual_seed(0)


@dataclasses.dataclass
class Case:
    op: str
    inputs: Callable[[], list]  # fresh torch inputs (None = absent optional input)
    ref: Callable[..., object]  # torch reference: returns a tensor or a tuple of tensors
    attrs: dict = dataclasses.field(default_factory=dict)
    rtol: float = 1e-5
    atol: float = 1e-5
    name: Optional[str] = None
    backward: bool = False  # counts as a backward case

    @property
    def id(self):
        return self.name or self.op


def rand(*shape, dtype=torch.float32, lo=-2.0, hi=2.0):
    return (torch.rand(*shape, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def positive(*shape, dtype=torch.float32):
    return rand(*shape, dtype=dtype, lo=0.1, hi=3.0)


def vjp(fn, *inputs, grad=None, wrt=None):
    """Gradients of sum(fn(*inputs) * grad) w.r.t. the inputs at positions WRT (default: all tensors)."""
    xs = [x.detach().clone().requires_grad_(i in wrt if wrt is not None else x.is_floating_point())
          if isinstance(x, torch.Tensor) else x for i, x in enumerate(inputs)]
    out = fn(*xs)
    out.backward(grad if grad is not None else torch.ones_like(out))
    idx = wrt if wrt is not None else [i for i, x in enumerate(xs) if isinstance(x, torch.Tensor) and x.requires_grad]
    grads = tuple(xs[i].grad for i in idx)
    return grads[0] if len(grads) == 1 else grads


def unary_backward(fn):
    """A (grad_output, self) -> grad_input reference for an elementwise unary op."""
    return lambda g, x: vjp(fn, x, grad=g)


def output_backward(fn):
    """(grad_output, result) -> grad_input for ops whose backward takes the forward's result."""
    def ref(g, y):
        x = {torch.sigmoid: torch.logit, torch.tanh: torch.atanh}[fn](y.double()).to(y.dtype)
        return vjp(fn, x, grad=g)
    return ref


def sdpa_with_lse(q, k, v):
    """F.scaled_dot_product_attention's output and the per-row logsumexp of its scaled scores."""
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return [F.scaled_dot_product_attention(q, k, v), torch.logsumexp(scores, -1)]


X = lambda: [rand(4, 33)]  # noqa: E731
XG = lambda: [rand(4, 33), rand(4, 33)]  # noqa: E731  (grad_output, self)
XY = lambda: [rand(4, 33), rand(33)]  # noqa: E731  broadcast

CASES: List[Case] = [
    # ---- elementwise unary ----
    Case("abs", X, torch.abs),
    Case("neg", X, torch.neg),
    Case("exp", X, torch.exp),
    Case("log", lambda: [positive(4, 33)], torch.log),
    Case("log1p", lambda: [positive(4, 33)], torch.log1p),
    Case("expm1", X, torch.expm1),
    Case("sqrt", lambda: [positive(4, 33)], torch.sqrt),
    Case("rsqrt", lambda: [positive(4, 33)], torch.rsqrt),
    Case("reciprocal", lambda: [positive(4, 33)], torch.reciprocal),
    Case("sin", X, torch.sin),
    Case("cos", X, torch.cos),
    Case("tanh", X, torch.tanh),
    Case("sigmoid", X, torch.sigmoid),
    Case("relu", X, torch.relu),
    Case("gelu", X, F.gelu),
    Case("gelu", X, lambda x: F.gelu(x, approximate="tanh"), {"approximate": "tanh"}, name="gelu_tanh"),
    Case("silu", X, F.silu),
    Case("erf", X, torch.erf),
    Case("floor", X, torch.floor),
    Case("ceil", X, torch.ceil),
    Case("round", X, torch.round),
    Case("sign", X, torch.sign),
    Case("logical_not", X, torch.logical_not),
    Case("isnan", lambda: [torch.tensor([1.0, float("nan"), float("inf")])], torch.isnan),
    Case("exp", lambda: [torch.arange(-3, 4, dtype=torch.int32)], torch.exp, name="exp_int_promotes"),
    Case("relu_backward", XG, unary_backward(torch.relu), backward=True),
    Case("gelu_backward", XG, unary_backward(F.gelu), backward=True),
    Case("gelu_backward", XG, unary_backward(lambda x: F.gelu(x, approximate="tanh")), {"approximate": "tanh"},
         name="gelu_backward_tanh", backward=True),
    Case("silu_backward", XG, unary_backward(F.silu), backward=True),
    Case("sigmoid_backward", lambda: [rand(4, 33), torch.sigmoid(rand(4, 33))], output_backward(torch.sigmoid),
         rtol=1e-4, backward=True),
    Case("tanh_backward", lambda: [rand(4, 33), torch.tanh(rand(4, 33, lo=-1, hi=1))],
         output_backward(torch.tanh), rtol=1e-4, atol=1e-4, backward=True),
    # ---- elementwise binary ----
    Case("add", XY, lambda a, b: torch.add(a, b, alpha=2.5), {"alpha": 2.5}),
    Case("sub", XY, lambda a, b: torch.sub(a, b, alpha=0.5), {"alpha": 0.5}),
    Case("mul", lambda: [rand(4, 33), torch.arange(33, dtype=torch.int64)], torch.mul, name="mul_promotes"),
    Case("div", lambda: [rand(4, 33), positive(33)], torch.div),
    Case("div", lambda: [rand(4, 33) * 10, positive(33)], lambda a, b: torch.div(a, b, rounding_mode="floor"),
         {"rounding_mode": "floor"}, name="div_floor"),
    Case("div", lambda: [torch.arange(-6, 6).reshape(3, 4), torch.tensor([3, -2, 5, 4])],
         lambda a, b: torch.div(a, b, rounding_mode="trunc"), {"rounding_mode": "trunc"}, name="div_trunc_int"),
    Case("pow", lambda: [positive(4, 33), rand(33)], torch.pow, rtol=1e-5),
    Case("maximum", XY, torch.maximum),
    Case("minimum", XY, torch.minimum),
    Case("fmod", lambda: [rand(4, 33) * 5, positive(33)], torch.fmod),
    Case("remainder", lambda: [rand(4, 33) * 5, positive(33)], torch.remainder, atol=1e-5),
    Case("lt", XY, torch.lt),
    Case("ge", XY, torch.ge),
    Case("eq", lambda: [torch.tensor([1, 2, 3]), torch.tensor([1.0, 2.5, 3.0])], torch.eq),
    Case("logical_xor", XY, torch.logical_xor),
    Case("bitwise_and", lambda: [torch.randint(-100, 100, (4, 8)), torch.randint(-100, 100, (8,))],
         torch.bitwise_and),
    Case("where", lambda: [rand(4, 33) > 0, rand(4, 33), rand(33)], torch.where),
    Case("clamp", lambda: [rand(4, 33), torch.tensor(-0.5), torch.tensor(0.7)], torch.clamp),
    Case("lerp", lambda: [rand(4, 33), rand(4, 33), rand(33, lo=0, hi=1)], torch.lerp),
    Case("addcmul", lambda: [rand(4, 33), rand(4, 33), rand(33)],
         lambda a, b, c: torch.addcmul(a, b, c, value=0.5), {"value": 0.5}),
    Case("addcdiv", lambda: [rand(4, 33), rand(4, 33), positive(33)],
         lambda a, b, c: torch.addcdiv(a, b, c, value=2.0), {"value": 2.0}),
    # ---- reductions ----
    Case("sum", lambda: [rand(4, 5, 6)], lambda x: x.sum((0, 2), keepdim=True), {"dim": [0, 2], "keepdim": True}),
    Case("mean", lambda: [rand(4, 5, 6)], lambda x: x.mean(1), {"dim": [1]}),
    Case("prod", lambda: [rand(3, 7, lo=0.5, hi=1.5)], lambda x: x.prod(1), {"dim": [1]}),
    Case("amax", lambda: [rand(4, 5, 6)], lambda x: x.amax((1, 2)), {"dim": [1, 2]}),
    Case("max", lambda: [rand(4, 9)], lambda x: tuple(torch.max(x, 1)), {"dim": 1}),
    Case("argmax", lambda: [rand(4, 9)], lambda x: x.argmax(1), {"dim": [1]}),
    Case("var", lambda: [rand(4, 9)], lambda x: x.var(1, correction=0), {"dim": [1], "correction": 0}),
    Case("std", lambda: [rand(4, 9)], lambda x: x.std(1), {"dim": [1]}),
    Case("norm", lambda: [rand(4, 9)], lambda x: torch.linalg.vector_norm(x, 3.0, dim=1), {"p": 3.0, "dim": [1]}),
    Case("logsumexp", lambda: [rand(4, 9) * 10], lambda x: torch.logsumexp(x, 1), {"dim": [1]}),
    Case("any", lambda: [rand(4, 9) > 1.5], lambda x: x.any(1), {"dim": [1]}),
    Case("cumsum", lambda: [rand(4, 9)], lambda x: x.cumsum(1), {"dim": 1}),
    Case("cumprod", lambda: [rand(4, 9, lo=0.5, hi=1.5)], lambda x: x.cumprod(1), {"dim": 1}),
    # ---- matmul, convolution, pooling ----
    Case("mm", lambda: [rand(5, 7), rand(7, 3)], torch.mm),
    Case("bmm", lambda: [rand(2, 5, 7), rand(2, 7, 3)], torch.bmm),
    Case("matmul", lambda: [rand(2, 1, 5, 7), rand(3, 7, 4)], torch.matmul),
    Case("addmm", lambda: [rand(3), rand(5, 7), rand(7, 3)],
         lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2.0), {"beta": 0.5, "alpha": 2.0}),
    Case("linear", lambda: [rand(4, 6), rand(5, 6), rand(5)], F.linear),
    Case("linear_backward", lambda: [rand(4, 5), rand(4, 6), rand(5, 6)],
         lambda g, x, w: vjp(F.linear, x, w, torch.zeros(5), grad=g), backward=True),
    Case("conv2d", lambda: [rand(2, 3, 9, 9), rand(4, 3, 3, 3), rand(4)],
         lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), {"stride": [2, 2], "padding": [1, 1]}, atol=1e-4),
    Case("conv1d", lambda: [rand(2, 4, 10), rand(6, 2, 3)], lambda x, w: F.conv1d(x, w, padding=1, groups=2),
         {"padding": [1], "groups": 2}, atol=1e-4),
    Case("conv_backward", lambda: [rand(2, 4, 5, 5), rand(2, 3, 9, 9), rand(4, 3, 3, 3)],
         lambda g, x, w: vjp(lambda x_, w_, b_: F.conv2d(x_, w_, b_, stride=2, padding=1), x, w, torch.zeros(4),
                             grad=g), {"stride": [2, 2], "padding": [1, 1]}, atol=1e-4, backward=True),
    Case("conv_transpose2d", lambda: [rand(2, 4, 5, 5), rand(4, 3, 3, 3)],
         lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
         {"stride": [2, 2], "padding": [1, 1], "output_padding": [1, 1]}, atol=1e-4),
    Case("max_pool2d", lambda: [rand(2, 3, 8, 8)], lambda x: F.max_pool2d(x, 2, return_indices=True),
         {"kernel_size": [2, 2]}),
    Case("max_pool2d_backward",
         lambda: [rand(2, 3, 4, 4), *[(x := rand(2, 3, 8, 8)), F.max_pool2d(x, 2, return_indices=True)[1]]],
         lambda g, x, i: vjp(lambda x_: F.max_pool2d(x_, 2), x, grad=g), {"kernel_size": [2, 2]}, backward=True),
    Case("avg_pool2d", lambda: [rand(2, 3, 8, 8)], lambda x: F.avg_pool2d(x, 3, 2, 1), {"kernel_size": [3, 3],
         "stride": [2, 2], "padding": [1, 1]}),
    Case("avg_pool2d_backward", lambda: [rand(2, 3, 4, 4), rand(2, 3, 8, 8)],
         lambda g, x: vjp(lambda x_: F.avg_pool2d(x_, 3, 2, 1), x, grad=g),
         {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]}, backward=True),
    Case("adaptive_avg_pool2d", lambda: [rand(2, 3, 7, 7)], lambda x: F.adaptive_avg_pool2d(x, 3),
         {"output_size": [3, 3]}),
    Case("adaptive_avg_pool2d_backward", lambda: [rand(2, 3, 3, 3), rand(2, 3, 7, 7)],
         lambda g, x: vjp(lambda x_: F.adaptive_avg_pool2d(x_, 3), x, grad=g), backward=True),
    # ---- normalization, softmax, losses ----
    Case("softmax", lambda: [rand(4, 10) * 5], lambda x: torch.softmax(x, 1), {"dim": 1}),
    Case("log_softmax", lambda: [rand(4, 10) * 5], lambda x: torch.log_softmax(x, 1), {"dim": 1}),
    Case("softmax_backward", lambda: [rand(4, 10), torch.softmax(rand(4, 10), 1)],
         lambda g, y: torch._softmax_backward_data(g, y, 1, torch.float32), {"dim": 1}, backward=True),
    Case("log_softmax_backward", lambda: [rand(4, 10), torch.log_softmax(rand(4, 10), 1)],
         lambda g, y: torch._log_softmax_backward_data(g, y, 1, torch.float32), {"dim": 1}, backward=True),
    Case("layer_norm", lambda: [rand(4, 16), rand(16), rand(16)],
         lambda x, w, b: torch.native_layer_norm(x, [16], w, b, 1e-5), {"normalized_shape": [16]}, atol=1e-4),
    Case("layer_norm_backward",
         lambda: [rand(4, 16), *(lambda x, w: [x, *torch.native_layer_norm(x, [16], w, None, 1e-5)[1:], w])(
             rand(4, 16), rand(16))],
         lambda g, x, m, r, w: torch.ops.aten.native_layer_norm_backward(g, x, [16], m, r, w, torch.zeros(16),
                                                                           [True, True, True]),
         {"normalized_shape": [16]}, atol=1e-4, backward=True),
    Case("group_norm", lambda: [rand(2, 6, 5), rand(6), rand(6)],
         lambda x, w, b: torch.native_group_norm(x, w, b, 2, 6, 5, 3, 1e-5), {"num_groups": 3}, atol=1e-4),
    Case("batch_norm", lambda: [rand(4, 3, 5), rand(3), rand(3), rand(3), positive(3)],
         lambda x, w, b, rm, rv: (*torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5), rm, rv),
         {"training": True}, atol=1e-4),
    Case("cross_entropy", lambda: [rand(8, 5), torch.randint(0, 5, (8,))],
         lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1), {"label_smoothing": 0.1}),
    Case("cross_entropy_backward", lambda: [torch.tensor(1.5), rand(8, 5), torch.tensor([0, 1, 4, -100, 2, 3, 1, 0])],
         lambda g, x, t: vjp(lambda x_: F.cross_entropy(x_, t), x, grad=g), backward=True),
    Case("nll_loss", lambda: [torch.log_softmax(rand(8, 5), 1), torch.randint(0, 5, (8,)), positive(5)],
         lambda x, t, w: F.nll_loss(x, t, w, reduction="sum"), {"reduction": "sum"}),
    Case("nll_loss_backward", lambda: [torch.tensor(1.0), rand(8, 5), torch.randint(0, 5, (8,))],
         lambda g, x, t: vjp(lambda x_: F.nll_loss(x_, t), x, grad=g), backward=True),
    Case("mse_loss", lambda: [rand(4, 6), rand(4, 6)], F.mse_loss),
    Case("mse_loss_backward", lambda: [torch.tensor(2.0), rand(4, 6), rand(4, 6)],
         lambda g, x, t: vjp(lambda x_: F.mse_loss(x_, t), x, grad=g), backward=True),
    Case("binary_cross_entropy_with_logits", lambda: [rand(4, 6), rand(4, 6, lo=0, hi=1)],
         F.binary_cross_entropy_with_logits),
    Case("binary_cross_entropy_with_logits_backward", lambda: [torch.tensor(1.0), rand(4, 6), rand(4, 6, lo=0, hi=1)],
         lambda g, x, t: vjp(lambda x_: F.binary_cross_entropy_with_logits(x_, t), x, grad=g), backward=True),
    # ---- indexing, sorting ----
    Case("embedding", lambda: [rand(10, 4), torch.randint(0, 10, (3, 5))], lambda w, i: F.embedding(i, w)),
    Case("embedding_backward", lambda: [rand(3, 5, 4), torch.randint(0, 10, (3, 5))],
         lambda g, i: vjp(lambda w: F.embedding(i, w), torch.zeros(10, 4), grad=g), {"num_weights": 10},
         backward=True),
    Case("index_select", lambda: [rand(5, 6), torch.tensor([4, 0, 2, 2])], lambda x, i: x.index_select(1, i),
         {"dim": 1}),
    Case("gather", lambda: [rand(4, 6), torch.randint(0, 6, (4, 3))], lambda x, i: x.gather(1, i), {"dim": 1}),
    Case("scatter_add", lambda: [rand(4, 6), torch.randint(0, 6, (4, 3)), rand(4, 3)],
         lambda x, i, s: x.scatter_add(1, i, s), {"dim": 1}),
    Case("masked_fill", lambda: [rand(4, 6), rand(6) > 0], lambda x, m: x.masked_fill(m, -1.5), {"value": -1.5}),
    Case("topk", lambda: [rand(4, 9)], lambda x: tuple(torch.topk(x, 3, 1)), {"k": 3, "dim": 1}),
    Case("sort", lambda: [torch.randint(0, 4, (3, 9)).float()], lambda x: tuple(torch.sort(x, 1, stable=True)),
         {"dim": 1, "stable": True}),
    Case("argsort", lambda: [rand(3, 9)], lambda x: torch.argsort(x, 1, descending=True),
         {"dim": 1, "descending": True}),
    # ---- data movement ----
    Case("copy", lambda: [rand(4, 6) * 100], lambda x: x.to(torch.int32), name="copy_cast_truncates"),
    Case("cat", lambda: [rand(2, 3), rand(4, 3), rand(1, 3)], lambda *xs: torch.cat(xs, 0)),
    Case("stack", lambda: [rand(2, 3), rand(2, 3)], lambda *xs: torch.stack(xs, 1), {"dim": 1}),
    Case("pad", lambda: [rand(2, 3, 5)], lambda x: F.pad(x, [2, 1], mode="reflect"),
         {"pad": [2, 1], "mode": "reflect"}),
    Case("flip", lambda: [rand(3, 4)], lambda x: x.flip([0, 1]), {"dims": [0, 1]}),
    Case("roll", lambda: [rand(3, 4)], lambda x: x.roll([1, -1], [0, 1]), {"shifts": [1, -1], "dims": [0, 1]}),
    Case("repeat", lambda: [rand(2, 3)], lambda x: x.repeat(2, 1, 2), {"repeats": [2, 1, 2]}),
    Case("tril", lambda: [rand(4, 5)], lambda x: x.tril(1), {"diagonal": 1}),
    Case("one_hot", lambda: [torch.tensor([0, 3, 1])], lambda x: F.one_hot(x, 5), {"num_classes": 5}),
    # ---- attention ----
    Case("scaled_dot_product_attention", lambda: [rand(2, 3, 6, 8), rand(2, 3, 7, 8), rand(2, 3, 7, 8)],
         lambda q, k, v: (F.scaled_dot_product_attention(q, k, v, is_causal=True),
                          torch.logsumexp((q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(
                              torch.ones(6, 7, dtype=torch.bool).triu(1), float("-inf")), -1)),
         {"is_causal": True}, atol=1e-4),
    Case("scaled_dot_product_attention_backward",
         lambda: (lambda q, k, v: [rand(2, 3, 6, 8), q, k, v,
                                   *sdpa_with_lse(q, k, v)])(rand(2, 3, 6, 8), rand(2, 3, 7, 8), rand(2, 3, 7, 8)),
         lambda g, q, k, v, o, lse: vjp(F.scaled_dot_product_attention, q, k, v, grad=g), atol=1e-4, backward=True),
    Case("rotary_embedding", lambda: [rand(2, 6, 8), rand(6, 4), rand(6, 4)],
         lambda x, c, s: torch.cat([x[..., :4] * c - x[..., 4:] * s, x[..., 4:] * c + x[..., :4] * s], -1)),
]


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_op_matches_torch(cpu, case):
    inputs = case.inputs()
    expected = _as_tuple(case.ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
    actual = tu.run(cpu, case.op, inputs, [torch.empty_like(e) for e in expected], case.attrs)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, f"{case.id}: output {i} dtype {a.dtype} != torch's {e.dtype}"
        assert a.shape == e.shape, f"{case.id}: output {i} shape {tuple(a.shape)} != torch's {tuple(e.shape)}"
        if e.is_floating_point():
            torch.testing.assert_close(a, e, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                       msg=lambda m: f"{case.id}: output {i}: {m}")
        else:
            assert torch.equal(a, e), f"{case.id}: output {i} differs from torch"


def test_sample_covers_forty_ops_forward_and_backward():
    ops = {c.op for c in CASES}
    backward = {c.op for c in CASES if c.backward}
    assert len(ops) >= 40, f"only {len(ops)} distinct ops are cross-checked"
    assert len(backward) >= 10, f"only {len(backward)} backward ops are cross-checked"
