"""The core's promotion through the hal package: on the vendor guide's worked example (uniform
float32 add, mul, relu, mm), mixed-dtype calls give the CPU plugin's values and are counted."""
import pytest
import torch

import hal
from hal import torch_util as tu

CASES = [
    # (op, inputs, attrs): each computes in float32 on a device whose kernels take float32 only.
    ("add", [torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int32), torch.tensor([0.5, 0.25, -1.5])],
     {"alpha": 2.0}),
    ("add", [torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor(0.125, dtype=torch.float64)], {}),
    ("mul", [torch.tensor([[1.5, -2.0], [3.0, 0.5]], dtype=torch.float16),
             torch.tensor([[2.0, 4.0], [-1.0, 8.0]], dtype=torch.bfloat16)], {}),
]


@pytest.fixture(scope="module")
def acme_and_cpu(acme_plugin_path, cpu_plugin_path):
    rt = hal.Runtime(plugins=[acme_plugin_path, cpu_plugin_path])
    assert not rt.skipped(), rt.skipped()
    return rt.device("acme"), rt.device("cpu")


def run(device, op, inputs, attrs):
    out = hal.Tensor.empty(device, [*torch.broadcast_shapes(*(t.shape for t in inputs))], "float32")
    hal.Op(device, op)([tu.to_hal(device, t) for t in inputs], [out], attrs)
    return tu.to_torch(out)


@pytest.mark.parametrize("op,inputs,attrs", CASES, ids=["int32+float32", "float32+0d_float64", "float16*bfloat16"])
def test_mixed_calls_match_the_cpu_plugin_and_are_counted(acme_and_cpu, op, inputs, attrs):
    acme, cpu = acme_and_cpu
    assert hal.Op(acme, op).input_mode == "uniform"
    assert hal.Op(cpu, op).input_mode == "mixed"
    hal.reset_op_stats()
    got = run(acme, op, inputs, attrs)
    want = run(cpu, op, inputs, attrs)
    assert torch.equal(got, want)
    promoted = torch.result_type(*inputs)
    assert promoted == torch.float32
    expect = inputs[0].to(promoted) + attrs.get("alpha", 1) * inputs[1].to(promoted) if op == "add" else \
        inputs[0].to(promoted) * inputs[1].to(promoted)
    assert torch.equal(got, expect)
    stats = {(s["device"], s["op"]): s for s in hal.op_stats()}
    mixed = sum(t.dtype != torch.float32 for t in inputs)
    assert stats[("acme:0", op)]["fallback_casts"] == mixed  # acme has no copy op: cast on cpu:0
    assert stats[("acme:0", op)]["casts"] == 0
    assert ("cpu:0", op) not in stats  # the CPU plugin's own mixed kernels cast nothing


def test_promote_false_hands_the_call_to_the_plugin(acme_and_cpu):
    acme, _ = acme_and_cpu
    a = tu.to_hal(acme, torch.tensor([1, 2], dtype=torch.int32))
    b = tu.to_hal(acme, torch.tensor([1.0, 2.0]))
    out = tu.to_hal(acme, torch.full((2,), 7.0))
    with pytest.raises(hal.Error, match=r"MIXED_DTYPES: .*add: input 'self' is int32 but the call computes in float32"):
        hal.Op(acme, "add", promote=False)([a, b], [out])
    assert torch.equal(tu.to_torch(out), torch.full((2,), 7.0))


def test_no_fallback_device_is_a_clear_error(acme_plugin_path):
    acme = hal.Runtime(plugins=[acme_plugin_path]).device("acme")
    a = tu.to_hal(acme, torch.tensor([1, 2], dtype=torch.int32))
    b = tu.to_hal(acme, torch.tensor([1.0, 2.0]))
    out = tu.to_hal(acme, torch.full((2,), 7.0))
    with pytest.raises(hal.Error, match=r"UNSUPPORTED_DTYPE: acme: add: .*input 'self' \(int32.*float32.*"
                                        r"no fallback device"):
        hal.Op(acme, "add")([a, b], [out])
    assert torch.equal(tu.to_torch(out), torch.full((2,), 7.0))
