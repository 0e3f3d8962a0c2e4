"""The hal Python package: tensors in device memory, op launch, errors."""
import pytest
import torch

import hal
from hal import torch_util as tu


def test_tensor_round_trip_all_dtypes(cpu):
    for dtype in tu.DTYPES:
        t = (torch.randn(3, 5) * 10).to(dtype)
        back = tu.to_torch(tu.to_hal(cpu, t))
        assert back.dtype == dtype and back.shape == t.shape
        assert torch.equal(back, t)


def test_zero_size_and_0d(cpu):
    assert tu.to_torch(tu.to_hal(cpu, torch.empty(0, 4))).shape == (0, 4)
    assert tu.to_torch(tu.to_hal(cpu, torch.tensor(2.5))).item() == 2.5


def test_op_runs_on_a_strided_view(cpu):
    a = tu.to_hal(cpu, torch.arange(6, dtype=torch.float32).reshape(2, 3))
    at = a.as_strided([3, 2], [1, 3])  # the transpose, no copy
    out = hal.Tensor.empty(cpu, [3, 2], "float32")
    hal.Op(cpu, "neg")([at], [out])
    assert torch.equal(tu.to_torch(out), -torch.arange(6, dtype=torch.float32).reshape(2, 3).t())


def test_errors_name_the_op_argument_and_values(cpu):
    with pytest.raises(hal.Error, match=r"UNIMPLEMENTED: .*op 'no_such_op' is not in the op catalog"):
        hal.Op(cpu, "no_such_op")
    with pytest.raises(hal.Error, match=r"INVALID_ARGUMENT: .*add: input 'other' of shape \[5\] does not broadcast"):
        tu.run(cpu, "add", [torch.ones(3, 4), torch.ones(5)], [torch.empty(3, 4)])
    with pytest.raises(hal.Error, match=r"add: unknown attribute 'beta'"):
        tu.run(cpu, "add", [torch.ones(2), torch.ones(2)], [torch.empty(2)], {"beta": 1.0})
    with pytest.raises(ValueError, match="unknown dtype 'float8'"):
        hal.Tensor.empty(cpu, [2], "float8")
    t = hal.Tensor.empty(cpu, [4], "float32")
    with pytest.raises(ValueError, match="got 8 bytes for a tensor of 16"):
        t.copy_from(bytes(8))
    with pytest.raises(TypeError, match="attribute 'alpha': unsupported Python type dict"):
        tu.run(cpu, "add", [torch.ones(2), torch.ones(2)], [torch.empty(2)], {"alpha": {}})


def test_output_untouched_on_error(cpu):
    out = tu.to_hal(cpu, torch.full((2, 3), 7.0))
    a = tu.to_hal(cpu, torch.ones(2, 3))
    b = tu.to_hal(cpu, torch.ones(4))
    with pytest.raises(hal.Error):
        hal.Op(cpu, "add")([a, b], [out])
    assert torch.equal(tu.to_torch(out), torch.full((2, 3), 7.0))
