"""torch.linalg on "hal": the catalog's factorizations (linalg_cholesky,
linalg_lu_factor, linalg_solve_triangular, linalg_eigh, linalg_svd, linalg_qr)
and what torch_hal composes from them (solve, inv, det, slogdet, lu_solve,
lu_unpack, cholesky_solve, ...) run on the device with PyTorch CPU's answers,
gradients and errors, and no CPU fallback."""
import pytest
import torch

import torch_hal
from test_special_math import run_on_both

G = torch.Generator().manual_seed(7)


def rand(*shape, dtype=torch.float64):
    return torch.randn(*shape, generator=G, dtype=dtype)


def spd(*shape, dtype=torch.float64):
    a = rand(*shape, dtype=dtype)
    return a @ a.mT + shape[-1] * torch.eye(shape[-1], dtype=dtype)


def close(fn, *args, decompositions=False, **tol):
    got, expected = run_on_both(fn, *args, decompositions_allowed=decompositions)
    torch.testing.assert_close(got, expected, equal_nan=True, **tol)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cholesky_reads_one_triangle(upper, dtype):
    a = spd(3, 5, 5, dtype=dtype)
    junk = a.triu(1) * 100 if not upper else a.tril(-1) * 100  # the triangle not read
    close(lambda x: torch.linalg.cholesky_ex(x + junk.to(x.device), upper=upper), a)


def test_lu_factor_and_unpack_match_cpu():
    for shape in [(4, 4), (2, 3, 5), (6, 2)]:
        a = rand(*shape)
        close(lambda x: torch.linalg.lu_factor_ex(x), a)
        close(lambda x: torch.lu_unpack(*torch.linalg.lu_factor(x)), a, decompositions=True)
        close(lambda x: torch.linalg.lu(x), a, decompositions=True)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular_broadcasts(left, upper, unit):
    a = rand(2, 1, 4, 4) + 4 * torch.eye(4, dtype=torch.float64)
    b = rand(3, 4, 2) if left else rand(3, 2, 4)
    close(lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit), a, b)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_values_and_vectors_up_to_sign(uplo):
    a = rand(2, 6, 6)
    a = a + a.mT
    got, expected = run_on_both(lambda x: torch.linalg.eigh(x, UPLO=uplo), a)
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1].abs(), expected[1].abs())
    close(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_reconstructs_and_matches_singular_values(shape, full):
    a = rand(*shape)
    got, expected = run_on_both(lambda x: torch.linalg.svd(x, full_matrices=full), a)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
    u, s, vh = got
    k = s.shape[-1]
    torch.testing.assert_close(s, expected[1])
    torch.testing.assert_close(u[..., :k] * s.unsqueeze(-2) @ vh[..., :k, :], a)
    close(torch.linalg.svdvals, a)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_modes(mode):
    for shape in [(5, 3), (3, 5)]:
        close(lambda x: torch.linalg.qr(x, mode=mode), rand(*shape))


@pytest.mark.parametrize(
    "fn",
    [
        torch.linalg.inv,
        torch.linalg.det,
        torch.linalg.slogdet,
        torch.logdet,
        lambda x: torch.linalg.matrix_power(x, -2),
        lambda x: torch.linalg.solve(x, x[..., 0]),  # a vector right-hand side
        lambda x: torch.linalg.solve(x, x.mT, left=False),
        lambda x: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), x, adjoint=True),
        lambda x: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), x, left=False),
        lambda x: torch.cholesky_solve(x, torch.linalg.cholesky(x @ x.mT)),
        lambda x: torch.cholesky_inverse(torch.linalg.cholesky(x @ x.mT), upper=False),
        lambda x: torch.triangular_solve(x, x.triu() + 3 * torch.eye(4, dtype=x.dtype, device=x.device)),
        lambda x: torch.linalg.pinv(x),
        lambda x: torch.linalg.matrix_norm(x, ord=2),
        lambda x: torch.linalg.matrix_rank(x),
        lambda x: torch.linalg.cond(x),
    ],
)
def test_composed_ops_forward_and_backward(fn):
    a = rand(3, 4, 4) + 2 * torch.eye(4, dtype=torch.float64)

    def with_grad(x):
        x = x.detach().requires_grad_()
        out = fn(x)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        diffable = [o for o in outs if o.requires_grad]
        if not diffable:  # matrix_rank: an integer
            return outs
        (grad,) = torch.autograd.grad(sum(o.sum() for o in diffable), x)
        return [o.detach() for o in outs] + [grad]

    close(with_grad, a, decompositions=True)


def test_singular_and_indefinite_inputs_raise_as_on_cpu():
    singular = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64)
    indefinite = -spd(2, 3, 3)
    cases = [
        (torch.linalg.inv, singular),
        (lambda x: torch.linalg.solve(x, x), singular),
        (torch.linalg.cholesky, indefinite),
        (lambda x: torch.linalg.cholesky_ex(x, check_errors=True), indefinite),
        (lambda x: torch.linalg.lu_factor_ex(x, check_errors=True), torch.zeros(3, 3, dtype=torch.float64)),
    ]
    for fn, a in cases:
        with pytest.raises(Exception) as cpu:
            fn(a)
        with pytest.raises(type(cpu.value)) as hal:
            fn(a.to("hal"))
        assert str(hal.value) == str(cpu.value)
    # The _ex forms report, not raise: info as on CPU.
    close(lambda x: torch.linalg.cholesky_ex(x).info, indefinite)
    close(lambda x: torch.linalg.inv_ex(x).info, singular, decompositions=True)


def test_bad_shapes_give_pytorch_errors_and_leave_out_untouched():
    a = rand(3, 4)
    for fn in (torch.linalg.cholesky, torch.linalg.eigh, torch.linalg.inv):
        with pytest.raises(Exception) as cpu:
            fn(a)
        with pytest.raises(type(cpu.value), match="square"):
            fn(a.to("hal"))
    out = torch.full((3, 3), 7.0, dtype=torch.float64).to("hal")
    with pytest.raises(RuntimeError):
        torch.linalg.solve_triangular(rand(3, 3).to("hal"), rand(4, 2).to("hal"), upper=True, out=out)
    assert (out.cpu() == 7).all()


def test_unsupported_dtypes_keep_pytorch_behaviour():
    # Half has no catalog kernel here: PyTorch CPU's refusal comes back unchanged.
    a = spd(3, 3).half()
    with pytest.raises(RuntimeError) as cpu:
        torch.linalg.cholesky(a)
    with pytest.raises(RuntimeError) as hal:
        torch.linalg.cholesky(a.to("hal"))
    assert str(cpu.value).split("\n")[0] in str(hal.value)
