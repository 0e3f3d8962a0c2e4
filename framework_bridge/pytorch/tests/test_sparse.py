"""Sparse COO tensors on "hal" (the SparsePrivateUse1 key): construction, moves, to_dense,
sparse_mask, and a clear error for sparse ops the bridge has no kernel for."""
import pytest
import torch

import torch_hal


def _coo(dense_dims=()):
    indices = torch.tensor([[0, 1, 1, 0], [2, 0, 2, 2]])  # (0, 2) twice: uncoalesced
    values = torch.arange(1.0, 5.0).reshape(4, *([1] * len(dense_dims))).expand(4, *dense_dims).contiguous()
    return torch.sparse_coo_tensor(indices, values, (2, 3, *dense_dims))


@pytest.mark.parametrize("dense_dims", [(), (2,)])
def test_round_trip_and_to_dense(dense_dims):
    s = _coo(dense_dims)
    h = s.to("hal")
    assert h.is_sparse and h.device.type == "hal" and h._nnz() == 4
    assert h._values().device.type == "hal" and h._indices().device.type == "hal"
    back = h.cpu()
    assert back.is_sparse and torch.equal(back._indices(), s._indices()) and torch.equal(back._values(), s._values())
    torch_hal.reset_fallback_stats()
    dense = h.to_dense()
    assert dense.device.type == "hal" and not dense.is_sparse
    torch.testing.assert_close(dense.cpu(), s.to_dense())  # the duplicate index sums
    assert not torch_hal.fallback_stats(), "to_dense stays on the device"


def test_to_sparse_and_back_matches_cpu():
    x = torch.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])
    h = x.to("hal").to_sparse()
    assert h.is_sparse and h.device.type == "hal"
    want = x.to_sparse()
    got = h.cpu()
    assert torch.equal(got._indices(), want._indices()) and torch.equal(got._values(), want._values())
    torch.testing.assert_close(h.to_dense().cpu(), x)


def test_to_sparse_backward():
    x = torch.tensor([[0.0, 1.5], [-2.0, 0.0]], requires_grad=True)
    xh = x.detach().to("hal").requires_grad_()
    for t in (x, xh):
        (t.to_sparse().to_dense() * torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=t.device)).sum().backward()
    torch.testing.assert_close(xh.grad.cpu(), x.grad)


def test_sparse_mask_matches_cpu():
    dense = torch.randn(2, 3)
    mask = _coo().coalesce()
    got = dense.to("hal").sparse_mask(mask.to("hal"))
    want = dense.sparse_mask(mask)
    assert got.is_sparse and got.device.type == "hal"
    torch.testing.assert_close(got.cpu().to_dense(), want.to_dense())


def test_bad_input():
    h = _coo().to("hal")
    with pytest.raises(NotImplementedError, match=r"aten::add.*sparse hal tensors.*to_dense"):
        h + h
    with pytest.raises(NotImplementedError, match="uncoalesced mask"):
        torch.randn(2, 3, device="hal").sparse_mask(h)
    with pytest.raises(RuntimeError, match="differ in shape"):
        torch.randn(3, 3, device="hal").sparse_mask(_coo().coalesce().to("hal"))
