"""The aten -> catalog table: mapped ops on "hal" against the same ops on CPU,
on several shapes, dtypes and non-contiguous views, with no CPU fallback and
no decomposition (every op here has a table row)."""
import pytest
import torch
import torch.nn.functional as F

import torch_hal


def _args(shape, dtype=torch.float32, positive=False, gen=None):
    x = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    return x.abs() + 0.5 if positive else x


def _views(t):
    """T itself and a non-contiguous view with the same values."""
    yield t
    if t.dim() >= 2:
        yield t.transpose(-1, -2).contiguous().transpose(-1, -2)  # a transposed view
    big = torch.zeros((*t.shape[:-1], t.shape[-1] * 2) if t.dim() else (2,), dtype=t.dtype)
    if t.dim():
        big[..., ::2] = t
        yield big[..., ::2]  # strided last dim


UNARY = ["abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid", "erf",
         "floor", "ceil", "round", "sign", "relu", "log1p", "expm1"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_unary(name, shape):
    x = _args(shape, positive=name in ("log", "sqrt", "rsqrt", "reciprocal", "log1p"))
    _check(lambda a: getattr(torch, name)(a), x)
    _check(lambda a: getattr(a.clone(), name + "_")(), x)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a + b,
        lambda a, b: a - 2 * b,
        lambda a, b: torch.add(a, b, alpha=-0.5),
        lambda a, b: a * b,
        lambda a, b: a / b,
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        lambda a, b: a + 1.5,
        lambda a, b: a - 3,
        lambda a, b: 3 - a,
        lambda a, b: a * 0.25,
        lambda a, b: a / 4,
        lambda a, b: a ** 2,
        lambda a, b: b.abs() ** a,
        lambda a, b: 2 ** a,
        lambda a, b: torch.maximum(a, b),
        lambda a, b: torch.minimum(a, b),
        lambda a, b: torch.fmod(a, b),
        lambda a, b: torch.remainder(a, b),
        lambda a, b: a == b,
        lambda a, b: a < b,
        lambda a, b: a >= 0,
        lambda a, b: a != 0.5,
        lambda a, b: torch.logical_and(a > 0, b > 0),
        lambda a, b: torch.logical_or(a > 0, b > 0),
        lambda a, b: torch.logical_not(a > 0),
        lambda a, b: torch.where(a > 0, a, b),
        lambda a, b: torch.where(a > 0, a, 0.0),
        lambda a, b: torch.clamp(a, -0.5, 0.5),
        lambda a, b: torch.clamp(a, min=b),
        lambda a, b: a.clamp_min(0.1),
        lambda a, b: a.clamp_max(0.1),
        lambda a, b: torch.lerp(a, b, 0.3),
        lambda a, b: torch.lerp(a, b, b.sigmoid()),
        lambda a, b: torch.addcmul(a, a, b, value=0.5),
        lambda a, b: torch.addcdiv(a, a, b.abs() + 1, value=-2),
        lambda a, b: F.silu(a),
        lambda a, b: F.gelu(a),
        lambda a, b: F.gelu(a, approximate="tanh"),
        lambda a, b: a.masked_fill(b > 0, -1.0),
        lambda a, b: torch.tril(a),
        lambda a, b: torch.triu(a, 1),
    ],
)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((4, 1), (1, 5))])
def test_binary(fn, shapes):
    a, b = _args(shapes[0]), _args(shapes[1]) + 0.1
    _check(fn, a, b)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.int32])
def test_other_dtypes(dtype):
    a = (torch.randn(3, 4) * 10).to(dtype)
    b = (torch.randn(3, 4) * 10).to(dtype)
    b[b == 0] = 1
    for fn in (lambda a, b: a + b, lambda a, b: a * 3, lambda a, b: a - b, lambda a, b: a < b, lambda a, b: -a,
               lambda a, b: torch.maximum(a, b), lambda a, b: a.sum(1), lambda a, b: a.abs()):
        _check(fn, a, b)


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a.sum(),
        lambda a: a.sum(0),
        lambda a: a.mean(),
        lambda a: a.mean((0, 1), keepdim=True),
        lambda a: a.amax(-1),
        lambda a: a.amin(0, keepdim=True),
        lambda a: a.max(),
        lambda a: torch.max(a, 1),
        lambda a: torch.min(a, 0, keepdim=True),
        lambda a: a.argmax(),
        lambda a: a.argmax(1),
        lambda a: a.var(1),
        lambda a: a.std(0, correction=0),
        lambda a: torch.logsumexp(a, 1),
        lambda a: torch.cumsum(a, 1),
        lambda a: torch.prod(a, 0),
        lambda a: torch.softmax(a, -1),
        lambda a: torch.log_softmax(a, 0),
        lambda a: torch.topk(a, 2, dim=-1),
        lambda a: torch.sort(a, dim=0, descending=True),
        lambda a: torch.cat([a, a * 2], 1),
        lambda a: torch.cat([a, torch.empty(0, device=a.device)]),
    ],
)
@pytest.mark.parametrize("shape", [(4, 5), (3, 4, 5)])
def test_reductions_and_data(fn, shape):
    _check(fn, _args(shape))


def test_linear_algebra():
    a, b, c = _args((4, 3)), _args((3, 5)), _args((4, 5))
    _check(lambda a, b: a @ b, a, b)
    _check(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2), c, a, b)
    _check(lambda x, y: torch.bmm(x, y), _args((2, 4, 3)), _args((2, 3, 5)))
    _check(lambda s, x, y: torch.baddbmm(s, x, y), _args((2, 4, 5)), _args((2, 4, 3)), _args((2, 3, 5)))


def test_indexing():
    w = _args((10, 4))
    idx = torch.tensor([[1, 3, 3], [0, 9, 2]])
    _check(lambda w: F.embedding(idx.to(w.device), w), w)
    _check(lambda w: torch.index_select(w, 0, idx[0].to(w.device)), w)
    g = torch.tensor([[0, 1, 1, 0], [2, 0, 3, 1]])
    _check(lambda w: torch.gather(w, 0, g.to(w.device)), w)
    src = _args((2, 4))
    _check(lambda w, s: w.clone().scatter_(0, g.to(w.device), s), w, src)
    _check(lambda w, s: torch.scatter_add(w, 0, g.to(w.device), s), w, src)


def test_nn_forward_ops():
    x = _args((2, 3, 8, 8))
    w = _args((4, 3, 3, 3))
    bias = _args((4,))
    _check(lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1), x, w, bias)
    _check(lambda x, w: F.conv2d(x, w, stride=2, dilation=1, padding=0), x, w)
    _check(lambda x, w: F.conv1d(x, w), _args((2, 3, 9)), _args((4, 3, 2)))
    _check(lambda x: F.max_pool2d(x, 2), x)
    _check(lambda x: F.max_pool2d(x, 3, stride=2, padding=1), x)
    _check(lambda x: F.avg_pool2d(x, 2), x)
    _check(lambda x: F.adaptive_avg_pool2d(x, (1, 1)), x)
    _check(lambda x: F.layer_norm(x, (8,)), x)
    _check(lambda x, w, b: F.layer_norm(x, (8,), w, b), x, _args((8,)), _args((8,)))
    _check(lambda x: F.batch_norm(x, None, None, training=True), x)
    rm, rv = torch.zeros(3), torch.ones(3)
    _check(lambda x, rm, rv: (F.batch_norm(x, rm, rv, training=True, momentum=0.2), rm, rv), x, rm, rv)
    _check(lambda x, rm, rv: F.batch_norm(x, rm, rv, training=False), x, rm, rv.abs() + 1)
    logits, target = _args((5, 7)), torch.tensor([1, 0, 6, 3, 3])
    _check(lambda l: F.cross_entropy(l, target.to(l.device)), logits)
    _check(lambda l, w: F.cross_entropy(l, target.to(l.device), weight=w, reduction="sum"), logits,
           _args((7,), positive=True))
    _check(lambda l: F.nll_loss(l.log_softmax(1), target.to(l.device), ignore_index=3), logits)
    _check(lambda a, b: F.mse_loss(a, b), logits, _args((5, 7)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduction", [0, 1, 2])  # none, mean, sum (at::Reduction)
@pytest.mark.parametrize("shape", [(9, 5), (5,)])
def test_nll_loss_forward_returns_the_loss_and_total_weight(dtype, reduction, shape):
    """aten::nll_loss_forward's second return, total_weight (the summed weight of the targets that are not
    ignore_index; 0 for reduction none), as on CPU, with and without weights, with ignored targets, on a
    dense and a transposed input."""
    gen = torch.Generator().manual_seed(5)
    x = _args(shape, gen=gen).log_softmax(-1).to(dtype)
    target = torch.randint(0, 5, shape[:-1], generator=gen)
    if target.dim():
        target[::3] = 2  # the ignore_index below, at several positions
    weight = _args((5,), positive=True, gen=gen).to(dtype)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype in (torch.float16, torch.bfloat16) else dict(rtol=1e-5, atol=1e-6)
    inputs = [x] + ([x.t().contiguous().t()] if x.dim() == 2 else [])
    for a in inputs:
        h = _to_hal_view(a)
        for w in (None, weight):
            for ignore in (2, -100):
                want = torch.ops.aten.nll_loss_forward(a, target, w, reduction, ignore)
                torch_hal.reset_fallback_stats()
                got = torch.ops.aten.nll_loss_forward(h, target.to("hal"), None if w is None else w.to("hal"),
                                                      reduction, ignore)
                assert torch_hal.fallback_stats() == {}
                for g, e in zip(got, want):
                    assert g.device.type == "hal" and g.dtype == e.dtype and g.shape == e.shape
                    torch.testing.assert_close(g.cpu(), e, **tol)


@pytest.mark.parametrize(
    "make",
    [
        lambda: (torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)), (4, 6)),
        lambda: (torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.LayerNorm(8),
                                     torch.nn.Sigmoid(), torch.nn.Linear(8, 3), torch.nn.Tanh()), (4, 6)),
        lambda: (torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.SiLU(),
                                     torch.nn.MaxPool2d(2), torch.nn.AvgPool2d(2), torch.nn.AdaptiveAvgPool2d(1),
                                     torch.nn.Flatten(), torch.nn.Linear(4, 2)), (2, 3, 8, 8)),
    ],
)
def test_backward_matches_cpu_without_fallback(make):
    torch.manual_seed(0)
    ref, shape = make()
    dev, _ = make()
    dev.load_state_dict(ref.state_dict())
    dev.hal()
    x = torch.randn(shape)
    torch_hal.reset_fallback_stats()
    loss_dev = dev(x.to("hal")).square().mean() + dev(x.to("hal")).softmax(-1).sum()
    loss_dev.backward()
    stats = torch_hal.fallback_stats()
    assert stats == {} and stats.decompositions == {}, stats
    loss_ref = ref(x).square().mean() + ref(x).softmax(-1).sum()
    loss_ref.backward()
    torch.testing.assert_close(loss_dev.cpu(), loss_ref, rtol=1e-4, atol=1e-5)
    for p_ref, p_dev in zip(ref.parameters(), dev.parameters()):
        torch.testing.assert_close(p_dev.grad.cpu(), p_ref.grad, rtol=1e-3, atol=1e-5)


def test_cross_entropy_backward_without_fallback():
    logits, target = _args((5, 7)), torch.tensor([1, 0, 6, 3, 3])
    ref = logits.clone().requires_grad_()
    dev = logits.to("hal").requires_grad_()
    torch_hal.reset_fallback_stats()
    F.cross_entropy(dev, target.to("hal"), ignore_index=0).backward()
    assert torch_hal.fallback_stats() == {}
    F.cross_entropy(ref, target, ignore_index=0).backward()
    torch.testing.assert_close(dev.grad.cpu(), ref.grad)


def test_every_table_row_is_registered():
    # Rows naming an overload that does not exist, or a CompositeImplicit op
    # (a kernel would bypass its autograd), are skipped at registration.
    skipped = torch_hal._C._unregistered_mappings()
    assert all("CompositeImplicitAutograd" in s for s in skipped), skipped


def _check(fn, *cpu_args):
    """fn on hal (with each input also as non-contiguous views) against CPU,
    with no CPU fallback and no decomposition."""
    variants = [list(cpu_args)]
    for i, a in enumerate(cpu_args):
        for v in list(_views(a))[1:]:
            variants.append([*cpu_args[:i], v, *cpu_args[i + 1 :]])
    for args in variants[:3]:
        hal_args = [a.to("hal") if a.is_contiguous() else _to_hal_view(a) for a in args]
        cpu_clones = [a.clone() for a in args]
        expected = fn(*cpu_clones)
        torch_hal.reset_fallback_stats()
        got = fn(*hal_args)
        stats = torch_hal.fallback_stats()
        assert stats == {} and stats.decompositions == {}, stats
        _compare(got, expected)
        for h, c in zip(hal_args, cpu_clones):  # in-place effects on the inputs (running stats)
            _compare(h, c)


def _to_hal_view(a):
    """A hal tensor with A's strides (not densified on the way)."""
    base = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype)
    base.copy_(a)
    h = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device="hal")
    h.copy_(base)
    assert h.stride() == a.stride()
    return h


def _compare(got, expected):
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _compare(g, e)
        return
    assert got.device.type == "hal"
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize(
    "kwargs",
    [dict(), dict(is_causal=True), dict(scale=0.3), dict(attn_mask=torch.randn(5, 5)),
     dict(attn_mask=torch.rand(2, 1, 5, 5) > 0.3)],
)
def test_sdpa_runs_the_catalog_attention(kwargs):
    q, k, v = (_args((2, 3, 5, 8)) for _ in range(3))
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    dev = [t.to("hal").requires_grad_() for t in (q, k, v)]
    dev_kwargs = {n: a.to("hal") if isinstance(a, torch.Tensor) else a for n, a in kwargs.items()}
    torch_hal.reset_fallback_stats()
    out = []
    entries = torch_hal.explain(
        lambda: out.append(F.scaled_dot_product_attention(*dev, **dev_kwargs)) or out[0].square().sum().backward(),
        print_result=False)
    ran = {e.op: e.ran for e in entries}
    assert ran["_scaled_dot_product_fused_attention_overrideable"].startswith(
        "catalog op scaled_dot_product_attention on plugin cpu")
    assert ran["_scaled_dot_product_fused_attention_overrideable_backward"].startswith(
        "catalog op scaled_dot_product_attention_backward on plugin cpu")
    assert torch_hal.fallback_stats() == {}
    expected = F.scaled_dot_product_attention(*ref, **kwargs)
    expected.square().sum().backward()
    torch.testing.assert_close(out[0].detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-5)
    for d, r in zip(dev, ref):
        torch.testing.assert_close(d.grad.cpu(), r.grad, rtol=1e-4, atol=1e-4)


def test_sdpa_with_grouped_heads_takes_the_math_path_on_device():
    q, k = _args((1, 4, 5, 8)), _args((1, 2, 5, 8))
    torch_hal.reset_fallback_stats()
    entries = torch_hal.explain(
        lambda: F.scaled_dot_product_attention(q.to("hal"), k.to("hal"), k.to("hal"), enable_gqa=True),
        print_result=False)
    assert not any("scaled_dot_product" in e.op for e in entries)
    assert torch_hal.fallback_stats() == {}
    got = F.scaled_dot_product_attention(q.to("hal"), k.to("hal"), k.to("hal"), enable_gqa=True)
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, k, enable_gqa=True), rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_eval_backward_uses_running_stats(affine):
    # Eval: the forward saves empty [0] statistics; the backward must read
    # running_mean / running_var, on the device.
    x, rm, rv = _args((3, 2, 4)), _args((2,)), _args((2,), positive=True)
    w, b = _args((2,)), _args((2,))
    ref = [t.clone().requires_grad_() for t in (x, w, b)]
    dev = [t.to("hal").requires_grad_() for t in (x, w, b)]
    torch_hal.reset_fallback_stats()
    F.batch_norm(dev[0], rm.to("hal"), rv.to("hal"), *(dev[1:] if affine else ()), training=False).square().sum() \
        .backward()
    stats = torch_hal.fallback_stats()
    assert stats == {} and stats.decompositions == {}, stats
    F.batch_norm(ref[0], rm, rv, *(ref[1:] if affine else ()), training=False).square().sum().backward()
    for d, r in zip(dev, ref):
        if r.grad is not None:
            torch.testing.assert_close(d.grad.cpu(), r.grad, rtol=1e-4, atol=1e-5)


def test_avg_pool2d_negative_divisor_is_declined_and_decomposed():
    # PyTorch takes any non-zero divisor_override; the catalog's must be >= 0: the row declines and
    # torch_hal's own avg_pool decomposition runs it on the device (no CPU fallback).
    x = _args((1, 2, 4, 4))
    ref, dev = x.clone().requires_grad_(), x.to("hal").requires_grad_()
    torch_hal.reset_fallback_stats()
    out = F.avg_pool2d(dev, 2, divisor_override=-3)
    out.square().sum().backward()
    stats = torch_hal.fallback_stats()
    assert dict(stats) == {} and stats.decompositions.get("aten::avg_pool2d") == 1, stats
    expected = F.avg_pool2d(ref, 2, divisor_override=-3)
    expected.square().sum().backward()
    torch.testing.assert_close(out.detach().cpu(), expected.detach())
    torch.testing.assert_close(dev.grad.cpu(), ref.grad)
    _check(lambda x: F.avg_pool2d(x, 2, divisor_override=3), x)  # a positive one stays on the device


def _written(t, region, value):
    """T with REGION (an index) set to VALUE: what an aliased out= leaves in T."""
    t = t.clone()
    t[region] = value
    return t


# (the aliased call, the written tensor S afterwards computed without aliasing)
ALIASED_OUT = [
    # out is exactly self; addmm allows no aliasing
    (lambda s, a, b: torch.addmm(s, a, b, out=s), lambda s, a, b: torch.addmm(s, a, b)),
    (lambda s, a, b: s.addmm_(a, b, beta=0.5), lambda s, a, b: torch.addmm(s, a, b, beta=0.5)),
    # out is an input other than the first (PyTorch's CPU mm leaves zeros here)
    (lambda s, a, b: torch.mm(a[:, :4], s, out=s), lambda s, a, b: a[:, :4] @ s),
    # out overlaps self partially
    (lambda s, a, b: torch.addmm(s[:2, :2], a[:2], b[:, :2], out=s[1:3, 1:3]),
     lambda s, a, b: _written(s, (slice(1, 3), slice(1, 3)), torch.addmm(s[:2, :2], a[:2], b[:, :2]))),
    # add allows the exact alias: in place as before
    (lambda s, a, b: s.add_(b[:4]), lambda s, a, b: s + b[:4]),
]


@pytest.mark.parametrize("case", range(len(ALIASED_OUT)))
def test_output_aliasing_an_input(case):
    # A catalog op whose `alias` forbids the overlap runs into a fresh tensor
    # that is then copied into the real output, on the device.
    fn, expected_fn = ALIASED_OUT[case]
    s, a, b = _args((4, 4)), _args((4, 5)), _args((5, 4))
    dev = [t.to("hal") for t in (s, a, b)]
    storage = dev[0].untyped_storage().data_ptr()
    torch_hal.reset_fallback_stats()
    fn(*dev)
    stats = torch_hal.fallback_stats()
    assert stats == {} and stats.decompositions == {}, stats
    assert dev[0].untyped_storage().data_ptr() == storage
    torch.testing.assert_close(dev[0].cpu(), expected_fn(s, a, b), rtol=1e-4, atol=1e-5)


def _no_fallback_since_reset():
    stats = torch_hal.fallback_stats()
    assert dict(stats) == {} and stats.decompositions == {}, stats


def test_arange_runs_on_the_device_for_every_dtype():
    torch_hal.reset_fallback_stats()
    for args in [(0, 5.0, 0.5), (10, 0, -3), (0, 1, 0.1), (-5, 5), (7,), (1.5, 9, 2)]:
        for dtype in [None, torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int8]:
            if dtype is not None and not dtype.is_floating_point and any(isinstance(a, float) for a in args):
                continue  # PyTorch's truncating integral arange: declined to the CPU (below)
            want = torch.arange(*args, dtype=dtype)
            got = torch.arange(*args, dtype=dtype, device="hal")
            assert got.device.type == "hal" and got.dtype == want.dtype
            assert torch.equal(got.cpu(), want), (args, dtype)
    _no_fallback_since_reset()
    # arange(0, 5., 0.5, dtype=int32) is ten 0s in PyTorch (sized by the real step, stepped by the
    # truncated one): the bridge declines it and the CPU fallback gives PyTorch's answer.
    assert torch.equal(torch.arange(0, 5.0, 0.5, dtype=torch.int32, device="hal").cpu(),
                       torch.arange(0, 5.0, 0.5, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        torch.arange(0, 5, 0, device="hal")


@pytest.mark.parametrize("key", [
    (torch.tensor([0, -1, 2]),), (slice(None), torch.tensor([[0, 4], [-5, 1]])),
    (slice(None), slice(1, 3), torch.tensor([2])), (torch.tensor(2),), (Ellipsis, torch.tensor([1, 0]))])
def test_one_index_tensor_gathers_and_scatters_on_the_device(key):
    torch.manual_seed(0)
    x = torch.randn(4, 5, 3)
    hkey = tuple(k.to("hal") if isinstance(k, torch.Tensor) else k for k in key)
    torch_hal.reset_fallback_stats()
    h = x.to("hal").requires_grad_()
    got = h[hkey]
    got.square().sum().backward()  # index_put(accumulate) in the backward
    xg = x.clone().requires_grad_()
    want = xg[key]
    want.square().sum().backward()
    assert got.shape == want.shape and torch.equal(got.detach().cpu(), want.detach())
    torch.testing.assert_close(h.grad.cpu(), xg.grad)
    v = torch.randn(want.shape)
    hs, xs = x.to("hal"), x.clone()
    hs[hkey] = v.to("hal")
    xs[key] = v
    assert torch.equal(hs.cpu(), xs)
    _no_fallback_since_reset()


def test_index_put_with_several_indices_and_accumulate():
    torch_hal.reset_fallback_stats()
    x = torch.randn(4, 5, 3)
    i0, i1 = torch.tensor([[1], [3]]), torch.tensor([0, 1, 1])
    h = x.to("hal")
    h.index_put_((i0.to("hal"), i1.to("hal")), torch.ones(3, device="hal"), accumulate=True)
    x.index_put_((i0, i1), torch.ones(3), accumulate=True)
    assert torch.equal(h.cpu(), x)
    _no_fallback_since_reset()


def test_an_index_out_of_range_is_an_index_error_naming_it():
    h = torch.zeros(4, 3, device="hal")
    for bad in (4, -5):
        with pytest.raises(IndexError, match=f"index {bad} in 'index'.*out of range"):
            h[torch.tensor([1, bad], device="hal")]
    before = h.cpu()
    with pytest.raises(IndexError):
        h[torch.tensor([7], device="hal")] = torch.ones(1, 3, device="hal")
    assert torch.equal(h.cpu(), before)


def test_equal_runs_on_the_device():
    torch_hal.reset_fallback_stats()
    a = torch.randn(3, 4)
    h = a.to("hal")
    assert torch.equal(h, a.clone().to("hal")) and not torch.equal(h, (a + 1).to("hal"))
    assert not torch.equal(h, h[:2]) and torch.equal(h[:0], a[:0].to("hal"))
    nan = torch.tensor([float("nan")], device="hal")
    assert not torch.equal(nan, nan)  # as PyTorch's CPU kernel
    _no_fallback_since_reset()
    with pytest.raises(RuntimeError, match="different devices"):
        torch.equal(h, a)


def test_scatter_value_and_bitwise_not_run_on_the_device():
    torch_hal.reset_fallback_stats()
    x = torch.randn(3, 5)
    index = torch.tensor([[0, 4], [2, 2], [1, 3]])
    got = x.to("hal").scatter(1, index.to("hal"), 2.5)
    assert torch.equal(got.cpu(), x.scatter(1, index, 2.5))
    h = x.to("hal")
    h.scatter_(0, torch.tensor([[2, 0, 1, 2, 0]], device="hal"), -1.0)
    assert torch.equal(h.cpu(), x.clone().scatter_(0, torch.tensor([[2, 0, 1, 2, 0]]), -1.0))
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.int8, torch.bool):
        v = torch.randint(-100, 100, (4, 3)).to(dtype)
        assert torch.equal(torch.bitwise_not(v.to("hal")).cpu(), torch.bitwise_not(v)), dtype
        assert torch.equal((~v.t().to("hal")).cpu(), ~v.t()), dtype
    _no_fallback_since_reset()


def test_flip_and_roll_run_on_the_device():
    torch_hal.reset_fallback_stats()
    x = torch.randn(3, 4, 5)
    for v in _views(x):
        h = v.to("hal") if v.is_contiguous() else x.to("hal").transpose(-1, -2).contiguous().transpose(-1, -2)
        ref = h.cpu()
        for dims in [(0,), (-1,), (0, 2), ()]:
            assert torch.equal(torch.flip(h, dims).cpu(), torch.flip(ref, dims)), dims
        for shifts, dims in [((1,), (0,)), ((-2, 7), (1, -1)), ((3,), ())]:
            assert torch.equal(torch.roll(h, shifts, dims).cpu(), torch.roll(ref, shifts, dims)), (shifts, dims)
    _no_fallback_since_reset()


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_fill_and_index_copy_run_on_the_device(dim):
    torch.manual_seed(0)
    x = torch.randn(4, 5, 3)
    index = torch.tensor([0, 2, -1])
    torch_hal.reset_fallback_stats()
    for value in (2.5, torch.tensor(-1.0)):
        hv = value.to("hal") if isinstance(value, torch.Tensor) else value
        assert torch.equal(x.to("hal").index_fill(dim, index.to("hal"), hv).cpu(), x.index_fill(dim, index, value))
    h = x.to("hal")
    h.index_fill_(dim, index.to("hal"), 7.0)
    assert torch.equal(h.cpu(), x.clone().index_fill_(dim, index, 7.0))
    shape = list(x.shape)
    shape[dim] = 2
    source = torch.randn(shape)
    into = torch.tensor([2, 0])
    assert torch.equal(x.to("hal").index_copy(dim, into.to("hal"), source.to("hal")).cpu(),
                       x.index_copy(dim, into, source))
    h = x.to("hal")
    h[(slice(None),) * (dim % 3) + (into.to("hal"),)] = 0.5  # x[..., i] = scalar: index_fill_ / index_put_
    want = x.clone()
    want[(slice(None),) * (dim % 3) + (into,)] = 0.5
    assert torch.equal(h.cpu(), want)
    _no_fallback_since_reset()
    # A source PyTorch refuses gets PyTorch's error (the bridge declines; nothing is written).
    h = x.to("hal")
    with pytest.raises(RuntimeError, match="same slice shapes"):
        h.index_copy_(0, torch.tensor([0], device="hal"), torch.randn(1, 5, 1, device="hal"))
    assert torch.equal(h.cpu(), x)


def test_masked_fill_and_fill_with_a_tensor_value_run_on_the_device():
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    mask = x > 0.3
    torch_hal.reset_fallback_stats()
    for value in (torch.tensor(2.5), torch.tensor(3), torch.tensor(-1.5, dtype=torch.float64)):
        for hv in (value, value.to("hal")):  # a CPU 0-d value is allowed, as on CUDA
            assert torch.equal(x.to("hal").masked_fill(mask.to("hal"), hv).cpu(), x.masked_fill(mask, value))
            h = x.to("hal")
            h.masked_fill_(mask[0].to("hal"), hv)  # a mask broadcasting over rows
            assert torch.equal(h.cpu(), x.clone().masked_fill_(mask[0], value))
            for dtype in (torch.float32, torch.int32):
                got = torch.empty(3, 2, device="hal", dtype=dtype).fill_(hv)
                assert torch.equal(got.cpu(), torch.empty(3, 2, dtype=dtype).fill_(value))
    _no_fallback_since_reset()
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        torch.empty(3, device="hal").fill_(torch.ones(2, device="hal"))


def test_nonzero_masked_select_and_printing_run_on_the_device():
    torch.manual_seed(0)
    x = torch.randn(4, 5)
    torch_hal.reset_fallback_stats()
    for t in (x, x > 0, torch.zeros(3), torch.tensor(2.0), torch.tensor(0), torch.randint(0, 2, (2, 3, 4)),
              torch.tensor([float("nan"), 0.0, 1.0])):
        want, got = torch.nonzero(t), torch.nonzero(t.to("hal"))
        assert got.device.type == "hal" and got.shape == want.shape and torch.equal(got.cpu(), want), t
    mask = x > 0.2
    assert torch.equal(torch.masked_select(x.to("hal"), mask.to("hal")).cpu(), torch.masked_select(x, mask))
    assert torch.equal(torch.masked_select(x.to("hal"), mask[0].to("hal")).cpu(), torch.masked_select(x, mask[0]))
    assert repr(x.to("hal")) == repr(x).replace(")", ", device='hal:0')")  # str() of a float tensor: masked_select
    _no_fallback_since_reset()
    with pytest.raises(RuntimeError, match="expected BoolTensor for mask"):
        torch.masked_select(x.to("hal"), torch.ones(4, 5, dtype=torch.int32, device="hal"))


def test_matrix_vector_products_run_on_the_device():
    torch.manual_seed(0)
    a, v, s = torch.randn(4, 5), torch.randn(5), torch.randn(4)
    torch_hal.reset_fallback_stats()
    cases = [lambda a, v, s: torch.mv(a, v), lambda a, v, s: a @ v, lambda a, v, s: a.t() @ s,
             lambda a, v, s: torch.addmv(s, a, v), lambda a, v, s: torch.addmv(s, a, v, beta=0.5, alpha=2),
             lambda a, v, s: torch.addmv(s[:1], a, v), lambda a, v, s: torch.addmv(s.sum(), a, v),
             lambda a, v, s: torch.addmv(s * float("nan"), a, v, beta=0),  # beta = 0 ignores NaN
             lambda a, v, s: s.clone().addmv_(a, v, alpha=3)]
    for f in cases:
        torch.testing.assert_close(f(a.to("hal"), v.to("hal"), s.to("hal")).cpu(), f(a, v, s))
    out = torch.empty(0, device="hal")
    torch.mv(a.to("hal"), v.to("hal"), out=out)
    torch.testing.assert_close(out.cpu(), torch.mv(a, v))
    ag, hg = a.clone().requires_grad_(), a.to("hal").requires_grad_()
    (ag @ v).sum().backward()
    (hg @ v.to("hal")).sum().backward()
    torch.testing.assert_close(hg.grad.cpu(), ag.grad)
    _no_fallback_since_reset()
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(4\), mat \(4x5\), vec \(3\)"):
        torch.mv(a.to("hal"), torch.randn(3, device="hal"))


def test_linspace_runs_on_the_device():
    torch_hal.reset_fallback_stats()
    cases = [(0, 1, 5), (-3.5, 7.25, 11), (1, 0, 7), (0, 10, 1), (2, 2, 3), (0, 1, 0), (0.1, 0.7, 1000),
             (-1e3, 1e3, 77), (3, -8, 6)]
    for args in cases:
        for dtype in (torch.float32, torch.int64, torch.int32, torch.uint8, torch.float64):
            if dtype == torch.uint8 and min(args[:2]) < 0:
                continue
            want = torch.linspace(*args, dtype=dtype)
            got = torch.linspace(*args, dtype=dtype, device="hal")
            assert got.device.type == "hal" and got.dtype == want.dtype and got.shape == want.shape
            if dtype in (torch.float32, torch.int64, torch.int32, torch.uint8):
                assert torch.equal(got.cpu(), want), (args, dtype)  # bit for bit
            else:  # float64: one rounding of start + step·i apart from PyTorch CPU's fused multiply-add
                ulp = torch.finfo(dtype).eps * max(abs(args[0]), abs(args[1]), 1)
                assert ((got.cpu() - want).abs() <= ulp).all(), (args, dtype)
    _no_fallback_since_reset()
    # float16/bfloat16: PyTorch's Half arithmetic rounds every step; the CPU fallback gives its answer.
    for dtype in (torch.float16, torch.bfloat16):
        assert torch.equal(torch.linspace(-3.5, 7.25, 11, dtype=dtype, device="hal").cpu(),
                           torch.linspace(-3.5, 7.25, 11, dtype=dtype))
    with pytest.raises(RuntimeError, match="number of steps must be non-negative"):
        torch.linspace(0, 1, -1, device="hal")
