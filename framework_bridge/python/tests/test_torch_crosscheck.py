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
