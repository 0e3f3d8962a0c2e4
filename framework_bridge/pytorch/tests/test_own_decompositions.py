"""torch_hal's own decompositions (torch_hal/_decompositions.py): aten calls
without a catalog row, or whose row declines, run as device ops with
PyTorch CPU's answer and errors, never on the CPU fallback."""
import math

import pytest
import torch
import torch.nn.functional as F

import torch_hal
from test_special_math import run_on_both as _run


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, i, j: x[i, j],
        lambda x, i, j: x[:, i, j],
        lambda x, i, j: x[i, :, j],  # not adjacent: the indexed dims go first
        lambda x, i, j: x[i[:, None], j],  # broadcast index tensors
        lambda x, i, j: x[-i - 1, j],  # negative indices
        lambda x, i, j: x[x > 0],  # a bool mask
        lambda x, i, j: x[x[:, 0, 0] > 0, 1],
        lambda x, i, j: torch.ops.aten._unsafe_index(x, [None, i[:, None], j]),
    ],
)
def test_multi_index_gathers_on_device(fn):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 5, 6, generator=g)
    i = torch.tensor([0, 3, 2, 1])
    j = torch.tensor([1, 0, 4, 3])
    got, expected = _run(fn, x, i, j, decompositions_allowed=True)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_multi_index_out_of_range_raises_index_error():
    x = torch.randn(4, 5).to("hal")
    i = torch.tensor([0, 1]).to("hal")
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 5"):
        x[i, torch.tensor([0, 5]).to("hal")]
    with pytest.raises(IndexError, match="index -6 is out of bounds for dimension 1 with size 5"):
        x[i, torch.tensor([0, -6]).to("hal")]
    with pytest.raises(IndexError, match="shape of the mask"):
        x[torch.ones(3, dtype=torch.bool).to("hal")]


def test_var_std_with_a_non_integral_correction():
    x = torch.randn(5, 6, 7, generator=torch.Generator().manual_seed(4))
    for fn in (
        lambda t: torch.var(t, dim=1, correction=1.3),
        lambda t: torch.std(t, correction=0.5, keepdim=True),
        lambda t: torch.var_mean(t, dim=(0, 2), correction=2.5),
        lambda t: torch.var(t[:1, :1, :1], correction=2.5),  # N - correction < 0: inf or nan as PyTorch
    ):
        got, expected = _run(fn, x, decompositions_allowed=True)
        torch.testing.assert_close(got, expected, equal_nan=True)


@pytest.mark.parametrize("fn", [F.hardshrink, F.softshrink, lambda t: F.hardshrink(t, 1.2)])
def test_shrink_backward(fn):
    x = torch.randn(4, 9, generator=torch.Generator().manual_seed(5))

    def grad(t):
        t = t.detach().requires_grad_(True)
        (g,) = torch.autograd.grad((fn(t) * torch.arange(9.0, device=t.device)).sum(), t)
        return g

    got, expected = _run(grad, x, decompositions_allowed=True)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: F.interpolate(t, scale_factor=2, mode="nearest"),
        lambda t: F.interpolate(t, size=(7, 5), mode="nearest-exact"),
        lambda t: F.interpolate(t, size=(7, 5), mode="bilinear", align_corners=False),
        lambda t: F.interpolate(t, size=(3, 9), mode="bilinear", align_corners=True),
        lambda t: F.interpolate(t, scale_factor=1.5, mode="bicubic"),
        lambda t: F.interpolate(t[:, :, 0], size=11, mode="linear"),
        lambda t: F.interpolate(t[:, :, 0], size=11, mode="nearest"),
        lambda t: F.interpolate(t[:, :, None].expand(-1, -1, 3, -1, -1), size=(4, 5, 6), mode="trilinear"),
        lambda t: F.interpolate(t[:, :, None].expand(-1, -1, 3, -1, -1), size=(4, 5, 6), mode="nearest"),
        lambda t: F.pad(t, (1, 2, 2, 1), mode="reflect"),
        lambda t: F.pad(t, (2, 1, 1, 3), mode="replicate"),
        lambda t: F.pad(t[:, :, 0], (2, 3), mode="reflect"),
        lambda t: F.pad(t[:, :, 0], (2, 3), mode="replicate"),
    ],
)
def test_upsample_and_pad_forward_backward_on_device(fn):
    x = torch.randn(2, 3, 4, 6, generator=torch.Generator().manual_seed(6))
    w = torch.randn(64, generator=torch.Generator().manual_seed(7))

    def forward_backward(t):
        t = t.detach().requires_grad_(True)
        y = fn(t)
        weights = w.to(t.device).repeat(y.numel() // 64 + 1)[: y.numel()].reshape(y.shape)
        (g,) = torch.autograd.grad((y * weights).sum(), t)
        return y, g

    got, expected = _run(forward_backward, x, decompositions_allowed=True)
    torch.testing.assert_close(got, expected)


def _forward_backward(fn):
    def run(t):
        t = t.detach().requires_grad_(True)
        y = fn(t)
        y = y[0] if isinstance(y, tuple) else y
        weights = torch.arange(y.numel(), dtype=y.dtype, device=y.device).reshape(y.shape).sin()
        (g,) = torch.autograd.grad((y * weights).sum(), t)
        return y, g

    return run


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: F.adaptive_max_pool2d(t, (7, 3)),  # windows PyTorch's decomposition takes
        lambda t: F.adaptive_max_pool3d(t, (1, 7, 3)),
        lambda t: F.max_pool3d(t, 2),
        lambda t: F.max_pool3d(t, (1, 3, 2), stride=(1, 2, 1), padding=(0, 1, 1)),
        lambda t: F.multi_margin_loss(t[0, 0], torch.tensor([1, 0, 2, 2, 4, 1, 0], device=t.device)),
        lambda t: F.multi_margin_loss(t[0, 0], torch.tensor([1, 0, 2, 2, 4, 1, 0], device=t.device), p=2, margin=0.5,
                                      reduction="sum"),
        lambda t: torch.logit(t.sigmoid(), 1e-3),
    ],
)
def test_pooling_loss_and_logit_backwards_on_device(fn):
    x = torch.randn(2, 3, 7, 9, generator=torch.Generator().manual_seed(8))
    got, expected = _run(_forward_backward(fn), x, decompositions_allowed=True)
    torch.testing.assert_close(got, expected)


def test_dtype_arguments_reach_decompositions_as_dtypes():
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(10))
    got, expected = _run(lambda t: torch.linalg.vector_norm(t, 2, dim=1, dtype=torch.float64), x,
                         decompositions_allowed=True)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    "name, draw, median",
    [
        ("exponential", lambda t: t.exponential_(2.0), math.log(2) / 2),
        ("cauchy", lambda t: t.cauchy_(1.0, 0.5), 1.0),
        ("log_normal", lambda t: t.log_normal_(0.5, 0.25), math.exp(0.5)),
        ("normal", lambda t: torch.normal(t + 3.0, 2.0), 3.0),
        ("normal tensor std", lambda t: torch.normal(t, t + 0.5), 0.0),
    ],
)
def test_random_distributions_draw_from_the_device_generator(name, draw, median):
    t = torch.zeros(20000, device="hal")
    torch.manual_seed(11)
    torch_hal.reset_fallback_stats()
    a = draw(t.clone())
    assert torch_hal.fallback_stats() == {}, name
    torch.manual_seed(11)
    b = draw(t.clone())
    assert torch.equal(a.cpu(), b.cpu())  # the seed decides, as on CUDA
    assert abs(float(a.cpu().median()) - median) < 0.05


def test_geometric_values_are_positive_integers():
    t = torch.zeros(20000, device="hal").geometric_(0.3).cpu()
    assert torch.equal(t, t.round()) and t.min() >= 1 and abs(float(t.mean()) - 1 / 0.3) < 0.1


def test_a_cpu_generator_keeps_the_cpu_stream():
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    torch_hal.reset_fallback_stats()
    a = torch.zeros(8, device="hal").exponential_(generator=g1)
    assert torch_hal.fallback_stats() == {"aten::exponential_": 1}
    torch.testing.assert_close(a.cpu(), torch.zeros(8).exponential_(generator=g2))


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a.put_(torch.tensor([0, 11, -1, 5], device=a.device), torch.tensor([1.0, 2, 3, 4], device=a.device)),
        lambda a: a.put_(torch.tensor([0, 0, -1], device=a.device), torch.tensor([1.0, 2, 3], device=a.device),
                         accumulate=True),
        lambda a: a.t().put_(torch.tensor([0, 11, 2], device=a.device), torch.tensor([1.0, 2, 3], device=a.device)),
        lambda a: torch.take(a, torch.tensor([[0, 11], [3, -4]], device=a.device)),
        lambda a: a.masked_scatter(a > 0, torch.arange(20.0, device=a.device)),
        lambda a: a.masked_scatter(torch.tensor([True, False, True, True], device=a.device),
                                   torch.arange(20.0, device=a.device)),
        lambda a: torch.nonzero_static(a > 0, size=4),
        lambda a: torch.nonzero_static(a > 0, size=20, fill_value=-7),
        lambda a: torch.addbmm(a[:, :2], a[None, :, :3].expand(2, -1, -1) * torch.tensor([[[1.0]], [[-2.0]]], device=a.device),
                               a[None, :3, :2].expand(2, -1, -1), beta=0.5, alpha=2),
        lambda a: torch.angle(torch.cat([a.reshape(-1), torch.tensor([-0.0, math.nan, -math.inf], device=a.device)])),
        lambda a: torch.histc(a, bins=5, min=-1, max=1),
        lambda a: torch.histc(a, bins=7),
        lambda a: torch.histc(torch.linspace(0, 1, 101, device=a.device), bins=4, min=0, max=1),  # edge values
    ],
)
def test_put_masked_scatter_nonzero_static_addbmm_angle_histc(fn):
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(12))
    got, expected = _run(fn, x, decompositions_allowed=True)
    torch.testing.assert_close(got, expected, equal_nan=True)


def test_histc_counts_integers_as_cuda_does():
    h = torch.histc(torch.tensor([1, 2, 2, 5, 9]).to("hal"), bins=4, min=1, max=9)
    assert h.dtype == torch.int64 and h.cpu().tolist() == [3, 0, 1, 1]


def test_bad_inputs_of_own_decompositions_raise_pytorch_errors_and_write_nothing():
    x = torch.zeros(4, device="hal")
    with pytest.raises(IndexError, match="out of range: tried to access index 4 on a tensor of 4 elements"):
        x.put_(torch.tensor([1, 4], device="hal"), torch.tensor([1.0, 2.0], device="hal"))
    with pytest.raises(RuntimeError, match="Expected a long tensor for index"):
        x.put_(torch.tensor([1], dtype=torch.int32, device="hal"), torch.tensor([1.0], device="hal"))
    with pytest.raises((RuntimeError, IndexError), match="same number of elements"):
        x.put_(torch.tensor([1, 2], device="hal"), torch.tensor([1.0], device="hal"))
    with pytest.raises(RuntimeError, match="boolean masks"):
        x.masked_scatter_(torch.ones(4, dtype=torch.uint8, device="hal"), torch.ones(4, device="hal"))
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        x.masked_scatter_(torch.ones(4, dtype=torch.bool, device="hal"), torch.ones(3, device="hal"))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        torch.histc(x, bins=0)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(x, bins=3, min=2, max=1)
    assert torch.equal(x.cpu(), torch.zeros(4))


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_scatter_reduce_and_index_reduce(reduce, include_self, dtype):
    g = torch.Generator().manual_seed(13)
    self = (torch.randn(5, 4, generator=g) * 4).to(dtype)
    src = (torch.randn(6, 3, generator=g) * 4).to(dtype)
    src[0, 0] = math.nan if dtype.is_floating_point else src[0, 0]  # NaN propagates through amax/amin as on CPU
    idx0, idx1 = torch.randint(0, 5, (6, 3), generator=g), torch.randint(0, 4, (2, 3), generator=g)
    for fn in (
        lambda s, x: s.scatter_reduce(0, idx0.to(s.device), x, reduce, include_self=include_self),
        lambda s, x: s.scatter_reduce(1, idx1.to(s.device), x, reduce, include_self=include_self),
        lambda s, x: s.clone().scatter_reduce_(0, idx0.to(s.device), x, reduce, include_self=include_self),
    ):
        got, expected = _run(fn, self, src, decompositions_allowed=True)
        torch.testing.assert_close(got, expected, equal_nan=True)
    if reduce != "sum":  # index_reduce has prod, mean, amax, amin
        index = torch.tensor([0, 2, 2, 4, 0, 1])
        for fn in (
            lambda s, x: s.index_reduce(0, index.to(s.device), x.repeat(1, 2)[:, :4], reduce, include_self=include_self),
            lambda s, x: s.clone().index_reduce_(0, index.to(s.device), x.repeat(1, 2)[:, :4], reduce,
                                                 include_self=include_self),
        ):
            got, expected = _run(fn, self, src, decompositions_allowed=True)
            torch.testing.assert_close(got, expected, equal_nan=True)


def test_scatter_reduce_index_out_of_range_writes_nothing():
    x = torch.zeros(4, device="hal")
    with pytest.raises(RuntimeError, match="index 4 is out of bounds for dimension 0 with size 4"):
        x.scatter_reduce_(0, torch.tensor([1, 4], device="hal"), torch.ones(2, device="hal"), "amax")
    assert torch.equal(x.cpu(), torch.zeros(4))


def test_scatter_reduce_of_0d_tensors():
    for include_self in (True, False):
        fn = lambda s, x: s.scatter_reduce(0, torch.tensor(0, device=s.device), x, "amax", include_self=include_self)
        got, expected = _run(fn, torch.tensor(1.5), torch.tensor(-2.0), decompositions_allowed=True)
        torch.testing.assert_close(got, expected)


POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", POLYNOMIALS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_orthogonal_polynomials_follow_pytorch_kernels(name, dtype):
    op = getattr(torch.special, name)
    g = torch.Generator().manual_seed(14)
    # Random x in [-2, 2] and n in [-2, 14] (trigonometric forms above 4..8), the kernels' special
    # points (±1, 0, 1/2), NaN and ±inf, and orders whose float32 values overflow (NaN as PyTorch).
    x = torch.cat([torch.rand(300, generator=g) * 4 - 2,
                   torch.tensor([1.0, -1.0, 0.0, 0.5, math.nan, math.inf, -math.inf, 2.0, -2.0, 0.25])]).to(dtype)
    n = torch.cat([torch.randint(-2, 15, (300,), generator=g).float(),
                   torch.tensor([3.0, 4.0, 9.0, 10.0, 2.0, 3.0, 4.0, 150.0, 151.0, 7.9])]).to(dtype)
    got, expected = _run(op, x, n, decompositions_allowed=True)
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=1e-4 if dtype == torch.float32 else 1e-10,
                               atol=1e-5)
    got, expected = _run(lambda t: op(t, 5), x, decompositions_allowed=True)  # a scalar order
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=1e-4, atol=1e-5)
    got, expected = _run(lambda t: op(0.3, t), n, decompositions_allowed=True)  # a scalar x
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=1e-4, atol=1e-5)


def test_a_decomposition_declining_some_arguments_still_serves_others():
    # searchsorted's decomposition declines NaN values (a binary search's answer for NaN is its
    # comparisons' business): that call takes the CPU fallback, and a later call without NaN is
    # still decomposed on the device.
    seq = torch.tensor([1.0, 2.0, 3.0]).to("hal")
    torch_hal.reset_fallback_stats()
    torch.searchsorted(seq, torch.tensor([math.nan, 2.0]).to("hal"))
    assert torch_hal.fallback_stats() == {"aten::searchsorted.Tensor": 1}
    torch_hal.reset_fallback_stats()
    got = torch.searchsorted(seq, torch.tensor([0.5, 2.0, 9.0]).to("hal"))
    assert torch_hal.fallback_stats() == {}
    assert got.cpu().tolist() == [0, 1, 3]


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda a: torch.cummax(a, 1), torch.tensor([[1.0, 3, 3, math.nan, 2, math.nan, 5], [2.0, 2, 1, 0, 7, 7, -1]])),
        (lambda a: torch.cummin(a, 1), torch.tensor([[1.0, 3, 3, math.nan, 2, math.nan, 5], [2.0, 2, 1, 0, 7, 7, -1]])),
        (lambda a: torch.cummax(a, 0), torch.randn(9, 4, generator=torch.Generator().manual_seed(16))),
        (lambda a: torch.cummin(a, 0), torch.randint(0, 3, (11,), generator=torch.Generator().manual_seed(17))),
        (lambda a: torch.cummax(a, 0), torch.tensor([True, False, True])),
        (torch.frexp, torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-40, 3.0, -0.75, 1.0, 0.5, 1e30])),
        (torch.frexp, torch.randn(100, dtype=torch.float64, generator=torch.Generator().manual_seed(19)) * 1e5),
    ],
)
def test_scans_and_frexp(fn, x):
    got, expected = _run(fn, x, decompositions_allowed=True)
    torch.testing.assert_close(got, list(expected) if isinstance(expected, tuple) else expected, equal_nan=True)


def _median_input():
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(20))
    x[1, 3] = x[0, 2] = x[0, 5] = math.nan
    return x


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: torch.median(a, 1),
        lambda a: torch.median(a, 0, keepdim=True),
        lambda a: torch.nanmedian(a, 1),
        torch.median,
        torch.nanmedian,
        lambda a: torch.kthvalue(a, 3, 1),
        lambda a: torch.kthvalue(a, 2, 0, True),
        lambda a: torch.median(a[0, 0], 0),
        lambda a: torch.median((a.nan_to_num() * 10).long(), 1),
    ],
)
def test_median_and_kthvalue(fn):
    got, expected = _run(fn, _median_input(), decompositions_allowed=True)
    torch.testing.assert_close(got, list(expected) if isinstance(expected, tuple) else expected, equal_nan=True)


def test_nanmedian_of_an_all_nan_slice_is_nan():
    # Which NaN's index comes back is unspecified (PyTorch's CPU and CUDA kernels differ): values only.
    x = torch.full((2, 5), math.nan)
    x[0] = torch.arange(5.0)
    got = torch.nanmedian(x.to("hal"), 1)
    assert got.values.cpu()[0] == 2.0 and math.isnan(got.values.cpu()[1])
    with pytest.raises((RuntimeError, IndexError), match="k out of range"):
        torch.kthvalue(x.to("hal"), 6, 1)


@pytest.mark.parametrize(
    "fn",
    [
        lambda s, x: torch.searchsorted(s, x),
        lambda s, x: torch.searchsorted(s, x, right=True),
        lambda s, x: torch.searchsorted(s, x, side="right", out_int32=True),
        lambda s, x: torch.searchsorted(s[0], x),
        lambda s, x: torch.searchsorted(s[0], 4.0),
        lambda s, x: torch.searchsorted(s.flip(-1), x, sorter=torch.arange(7, -1, -1, device=s.device).expand(3, 8)),
        lambda s, x: torch.isin(x, s[0]),
        lambda s, x: x[torch.tensor([0, 2]), torch.tensor([1, 1])],  # CPU index tensors for a device tensor
    ],
)
def test_searchsorted_isin_and_cpu_indices(fn):
    g = torch.Generator().manual_seed(21)
    seq = torch.sort(torch.randint(0, 10, (3, 8), generator=g).float(), -1).values  # ties included
    values = torch.randint(-1, 11, (3, 5), generator=g).float()
    got, expected = _run(fn, seq, values, decompositions_allowed=True)
    torch.testing.assert_close(got, expected)


def test_gather_backward_of_an_empty_index():
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(22))

    def grad(t):
        t = t.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(torch.gather(t, 0, torch.empty(0, 4, dtype=torch.int64, device=t.device)).sum(), t)
        return g

    got, expected = _run(grad, x, decompositions_allowed=True)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: F.adaptive_max_pool2d(a, (3, 4), return_indices=True),  # uneven windows
        lambda a: F.adaptive_max_pool2d(a, (9, 11), return_indices=True),  # more outputs than inputs
        lambda a: F.adaptive_max_pool1d(a[0], 4, return_indices=True),
        lambda a: F.adaptive_max_pool3d(a, (2, 3, 4), return_indices=True),
        lambda a: F.adaptive_max_pool2d(a[0], (5, 2), return_indices=True),
        lambda a: F.adaptive_max_pool2d((a * 2).round(), (3, 4), return_indices=True),  # ties: the first maximum
    ],
)
def test_adaptive_max_pooling_with_any_windows(fn):
    x = torch.randn(2, 3, 7, 9, generator=torch.Generator().manual_seed(23))
    got, expected = _run(fn, x, decompositions_allowed=True)
    torch.testing.assert_close(got, list(expected))


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda a: torch.unique(a, return_inverse=True, return_counts=True),
         torch.tensor([[3.0, 1.0, math.nan], [1.0, math.nan, 3.0]])),  # each NaN its own value, as PyTorch
        (torch.unique, torch.tensor([[3.0, 1.0], [1.0, 2.0]])),
        (lambda a: torch.unique(a, sorted=False, return_counts=True),
         torch.randint(0, 5, (4, 6), generator=torch.Generator().manual_seed(24))),
        (lambda a: torch.unique_consecutive(a, return_inverse=True, return_counts=True),
         torch.tensor([1, 1, 2, 2, 3, 1, 1, 2])),
        (torch.unique_consecutive, torch.tensor([1.0, 1.0, math.nan, math.nan, 2.0])),
        (lambda a: torch.unique(a, return_inverse=True, return_counts=True), torch.empty(0)),
    ],
)
def test_unique(fn, x):
    got, expected = _run(fn, x, decompositions_allowed=True)
    torch.testing.assert_close(got, list(expected) if isinstance(expected, tuple) else expected, equal_nan=True)


def _values_and_grads(fn, *tensors):
    """fn's output and the gradients of every input, on CPU and on hal (no CPU fallback)."""
    def run(*xs):
        xs = [x.detach().requires_grad_() for x in xs]
        out = fn(*xs)
        grads = torch.autograd.grad(out, xs, torch.ones_like(out))
        return [out.detach()] + list(grads)

    return _run(run, *tensors, decompositions_allowed=True)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.avg_pool3d(x, 3, stride=2, padding=1),
        lambda x: F.avg_pool3d(x, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), ceil_mode=True,
                               count_include_pad=False),
        lambda x: F.avg_pool3d(x, 2, divisor_override=3),
        lambda x: F.adaptive_avg_pool3d(x, (3, 2, 4)),
        lambda x: F.adaptive_avg_pool3d(x[0], 3),  # unbatched
        lambda x: F.avg_pool2d(x[:, :, 0], 3, stride=2, padding=1, ceil_mode=True, divisor_override=2),
        lambda x: F.interpolate(x, size=(2, 3, 3), mode="area"),
    ],
)
def test_3d_pooling_runs_on_the_device(fn):
    x = torch.randn(2, 3, 7, 6, 5, generator=torch.Generator().manual_seed(5))
    got, expected = _values_and_grads(fn, x)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, w: F.conv3d(x, w, stride=(2, 1, 1), padding=1, dilation=(1, 2, 1)),
        lambda x, w: F.conv3d(x, w.repeat(2, 1, 1, 1, 1)[:, :2], padding="same", groups=2),
        lambda x, w: F.conv_transpose1d(x[:, :, 0, 0], w[:, :, 0, 0].transpose(0, 1).contiguous(), stride=2,
                                        padding=1, output_padding=1),
        # grad only: the transposed 2-D backward, output_padding at or above the stride (below the dilation)
        lambda x, w: F.conv_transpose2d(x[:, :, 0], w[:, :, 0].transpose(0, 1).contiguous(), stride=(3, 2),
                                        padding=(1, 2), output_padding=(2, 3), dilation=(4, 4)),
    ],
)
def test_3d_and_transposed_convolutions_run_on_the_device(fn):
    g = torch.Generator().manual_seed(6)
    x, w = torch.randn(2, 4, 6, 7, 5, generator=g), torch.randn(4, 4, 3, 3, 3, generator=g)
    got, expected = _values_and_grads(fn, x, w)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_pooling_keeps_a_nan_inside_its_windows():
    x = torch.randn(1, 2, 6, 6, 6, generator=torch.Generator().manual_seed(8))
    x[0, 0, 1, 2, 3] = math.nan
    x[0, 1, 4, 4, 4] = math.inf
    for fn in (lambda t: F.avg_pool3d(t, 2), lambda t: F.adaptive_avg_pool3d(t, 4)):
        got, expected = _run(fn, x, decompositions_allowed=True)
        torch.testing.assert_close(got, expected, equal_nan=True)
        assert got.isnan().sum() == expected.isnan().sum() and got.isinf().sum() == expected.isinf().sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("concatenated", [False, True])
def test_ctc_loss_forward_and_backward_on_device(reduction, zero_infinity, concatenated):
    """CTC on the device: padded or concatenated targets, an empty target, a sequence shorter than
    its input, and one too short for its target (infinite loss; zero_infinity zeroes it and its
    gradient), with PyTorch's gradient convention (its fused log_softmax term included)."""
    g = torch.Generator().manual_seed(9)
    T, N, C = 7, 4, 5
    logits = torch.randn(T, N, C, generator=g)
    input_lengths = [7, 5, 7, 2]
    target_lengths = [3, 0, 2, 3]  # sequence 3: 3 labels (with a repeat) cannot fit in 2 steps
    padded = torch.tensor([[1, 2, 2], [0, 0, 0], [4, 1, 0], [3, 3, 1]])
    targets = torch.cat([padded[n, :k] for n, k in enumerate(target_lengths)]) if concatenated else padded

    def fn(x, tg):
        x = x.detach().requires_grad_()
        loss = F.ctc_loss(x.log_softmax(2), tg, input_lengths, target_lengths, reduction=reduction,
                          zero_infinity=zero_infinity)
        (grad,) = torch.autograd.grad(loss.sum(), x)
        return loss.detach(), grad

    got, expected = _run(fn, logits, targets, decompositions_allowed=True)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_ctc_loss_gradient_with_respect_to_log_probs_is_pytorchs():
    # Taken directly w.r.t. log_probs (a leaf): PyTorch's kernel adds exp(log_probs).
    g = torch.Generator().manual_seed(10)
    lp = torch.randn(6, 2, 4, generator=g).log_softmax(2)

    def fn(x):
        x = x.detach().requires_grad_()
        loss = F.ctc_loss(x, torch.tensor([[1, 2], [3, 0]]), [6, 4], [2, 1], reduction="sum")
        return torch.autograd.grad(loss, x)[0]

    got, expected = _run(fn, lp, decompositions_allowed=True)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
