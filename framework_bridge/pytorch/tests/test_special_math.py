"""Catalog 1.4's math ops (trigonometric, hyperbolic, logarithmic, special
functions, atan2/hypot/fmax/fmin/nextafter/copysign/zeta) through the aten
table: every one against PyTorch CPU, with no CPU fallback."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_hal


def run_on_both(fn, *cpu_args, decompositions_allowed=False):
    """fn on hal and on CPU; asserts no CPU fallback; returns (hal result on CPU, CPU result)."""
    expected = fn(*[a.clone() for a in cpu_args])
    torch_hal.reset_fallback_stats()
    got = fn(*[a.to("hal") for a in cpu_args])
    stats = torch_hal.fallback_stats()
    assert stats == {}, stats
    if not decompositions_allowed:
        assert stats.decompositions == {}, stats
    if isinstance(got, (tuple, list)):
        return [g.cpu() for g in got], list(expected)
    return got.cpu(), expected


def _close(fn, *args, rtol=1.3e-6, atol=1e-5, **kw):
    got, expected = run_on_both(fn, *args, **kw)
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True)


UNARY = {
    # name: (torch function, input range)
    "tan": (torch.tan, (-1.4, 1.4)),
    "asin": (torch.asin, (-1, 1)),
    "acos": (torch.acos, (-1, 1)),
    "atan": (torch.atan, (-5, 5)),
    "sinh": (torch.sinh, (-5, 5)),
    "cosh": (torch.cosh, (-5, 5)),
    "asinh": (torch.asinh, (-5, 5)),
    "acosh": (torch.acosh, (1, 6)),
    "atanh": (torch.atanh, (-0.99, 0.99)),
    "log2": (torch.log2, (0.01, 9)),
    "log10": (torch.log10, (0.01, 9)),
    "exp2": (torch.exp2, (-9, 9)),
    "trunc": (torch.trunc, (-9, 9)),
    "fix": (torch.fix, (-9, 9)),
    "erfc": (torch.erfc, (-4, 4)),
    "erfcx": (torch.special.erfcx, (-3, 20)),
    "erfinv": (torch.erfinv, (-0.999, 0.999)),
    "ndtri": (torch.special.ndtri, (0.001, 0.999)),
    "lgamma": (torch.lgamma, (-4.5, 9)),
    "digamma": (torch.digamma, (-4.5, 9)),
    "i0": (torch.i0, (-12, 12)),
    "i0e": (torch.special.i0e, (-12, 12)),
    "i1": (torch.special.i1, (-12, 12)),
    "i1e": (torch.special.i1e, (-12, 12)),
    "modified_bessel_i0": (torch.special.modified_bessel_i0, (-12, 12)),
    "modified_bessel_i1": (torch.special.modified_bessel_i1, (-12, 12)),
    "signbit": (torch.signbit, (-3, 3)),
    "bessel_j0": (torch.special.bessel_j0, (-20, 20)),
    "bessel_j1": (torch.special.bessel_j1, (-20, 20)),
    "bessel_y0": (torch.special.bessel_y0, (0.01, 20)),
    "bessel_y1": (torch.special.bessel_y1, (0.01, 20)),
    "modified_bessel_k0": (torch.special.modified_bessel_k0, (0.01, 30)),
    "modified_bessel_k1": (torch.special.modified_bessel_k1, (0.01, 30)),
    "scaled_modified_bessel_k0": (torch.special.scaled_modified_bessel_k0, (0.01, 300)),
    "scaled_modified_bessel_k1": (torch.special.scaled_modified_bessel_k1, (0.01, 300)),
    "spherical_bessel_j0": (torch.special.spherical_bessel_j0, (-20, 20)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unary_matches_cpu(name, dtype):
    fn, (lo, hi) = UNARY[name]
    x = torch.empty(4, 37, dtype=dtype).uniform_(lo, hi, generator=torch.Generator().manual_seed(1))
    rtol = 1e-5 if name in ("lgamma", "digamma") else 1.3e-6  # relative error near the roots of lgamma/digamma
    atol64 = 1e-12
    if name.startswith("bessel_"):
        atol64, rtol = 1e-6, 1e-5  # PyTorch's own float64 J/Y are off by up to 2e-7 (the C library's: 1e-16)
    _close(fn, x, rtol=rtol if dtype == torch.float32 else max(rtol if atol64 > 1e-12 else 0, 1e-12),
           atol=1e-5 if dtype == torch.float32 else atol64)
    _close(fn, x.t())  # a non-contiguous view


def test_unary_special_values_match_cpu():
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, math.inf, -math.inf, math.nan, 30.0, -30.0, 1e-30])
    for name, (fn, _) in UNARY.items():
        if name in ("i0", "i1", "modified_bessel_i0", "modified_bessel_i1", "bessel_j0", "bessel_j1", "bessel_y0",
                    "bessel_y1"):
            continue  # PyTorch gives NaN at ±inf (its forms' overflow), the catalog the limits: compared below
        _close(fn, x)
    got, _ = run_on_both(torch.i0, torch.tensor([math.inf, -math.inf, 20.0]))
    assert got[0] == math.inf and got[1] == math.inf
    for fn in (torch.special.bessel_j0, torch.special.bessel_j1, torch.special.bessel_y0, torch.special.bessel_y1):
        got, expected = run_on_both(fn, x[x.isfinite()])
        torch.testing.assert_close(got, expected, equal_nan=True)
        got, _ = run_on_both(fn, torch.tensor([math.inf]))
        assert got.tolist() == [0.0]


def test_integer_inputs_promote_to_float32():
    x = torch.tensor([1, 2, 3, -4])
    for fn in (torch.tan, torch.atan, torch.exp2, torch.log2, torch.erfc, torch.lgamma):
        got, expected = run_on_both(fn, x)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, expected, equal_nan=True)
    got, expected = run_on_both(torch.atan2, x, torch.tensor([2, -1, 0, 3]))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma(n):
    x = torch.linspace(-3.7, 9, 51)
    got, expected = run_on_both(lambda t: torch.polygamma(n, t), x)
    torch.testing.assert_close(got, expected, rtol=2e-5, atol=1e-4, equal_nan=True)
    got, expected = run_on_both(lambda t: t.polygamma_(n), x.clone())
    torch.testing.assert_close(got, expected, rtol=2e-5, atol=1e-4, equal_nan=True)
    poles, _ = run_on_both(lambda t: torch.polygamma(n, t), torch.tensor([0.0, -1.0, -2.0]))
    if n >= 2:  # PyTorch's sign: (-1)^(n+1)·inf
        assert torch.equal(poles, torch.full((3,), math.inf if n % 2 else -math.inf))


def test_polygamma_negative_order_is_refused():
    x = torch.rand(3).to("hal")
    with pytest.raises(RuntimeError, match="polygamma"):
        torch.polygamma(-1, x)


@pytest.mark.parametrize(
    "fn",
    [
        torch.atan2,
        torch.hypot,
        torch.fmax,
        torch.fmin,
        torch.nextafter,
        torch.copysign,
        lambda a, b: torch.copysign(a, -2.0),
        lambda a, b: torch.special.zeta(a.abs() + 1.5, b.abs() + 0.1),
        lambda a, b: torch.special.zeta(a.abs() + 1.5, 2.0),
        lambda a, b: a.clone().atan2_(b),
        lambda a, b: a.clone().hypot_(b),
        lambda a, b: torch.arctan2(a, b),
    ],
)
def test_binary_matches_cpu(fn):
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(3, 17, generator=g), torch.randn(17, generator=g)
    b[3] = math.nan
    a[1, 2] = math.nan
    _close(fn, a, b)


@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac, torch.special.gammainc, torch.special.gammaincc])
def test_incomplete_gamma(fn):
    g = torch.Generator().manual_seed(3)
    a = torch.cat([torch.rand(200, generator=g) * 8, torch.tensor([0.0, 0.0, 1.0, -1.0, 1.0, math.inf, math.inf, 2.0])])
    x = torch.cat([torch.rand(200, generator=g) * 12, torch.tensor([1.0, 0.0, 0.0, 1.0, -1.0, 1.0, math.inf, math.inf])])
    got, expected = run_on_both(fn, a, x)
    torch.testing.assert_close(got, expected, equal_nan=True)
    got, expected = run_on_both(lambda p, q: p.clone().igamma_(q), a, x)
    torch.testing.assert_close(got, expected, equal_nan=True)


def test_fmax_fmin_ignore_one_nan():
    a = torch.tensor([math.nan, 1.0, math.nan, -0.0])
    b = torch.tensor([2.0, math.nan, math.nan, 0.0])
    got, expected = run_on_both(torch.fmax, a, b)
    assert got[:2].tolist() == [2.0, 1.0] and math.isnan(got[2])
    torch.testing.assert_close(got, expected, equal_nan=True)


def test_gradients_use_device_formulas():
    x = torch.rand(5, 7, dtype=torch.float64) * 0.8 + 0.1

    def grads(t):
        t = t.detach().requires_grad_(True)
        y = (torch.tan(t) + torch.asin(t) + torch.atanh(t) + torch.log2(t) + torch.erfinv(t) + torch.lgamma(t)
             + torch.special.i0e(t) + torch.atan2(t, t + 1) + torch.hypot(t, t * 2)).sum()
        (g,) = torch.autograd.grad(y, t)
        return g

    got, expected = run_on_both(grads, x, decompositions_allowed=True)
    torch.testing.assert_close(got, expected)
