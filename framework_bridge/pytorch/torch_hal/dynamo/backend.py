"""The "hal" torch.compile backend: AOTAutograd with HAL's decomposition table, each forward and
backward graph run by a GraphRunner (graph_runner.py)."""
import functools
import os
import weakref

import torch
from torch._dynamo.backends.common import aot_autograd

from . import counters
from .foreach import foreach_decompositions
from .graph_runner import GraphRunner

# The GraphRunners of this process, oldest first, as (serial, weak reference): explain reads them,
# and a runner lives only as long as Dynamo keeps its compiled graph (no growth over recompiles).
_runners = []
_next_serial = 0


@functools.lru_cache(maxsize=1)
def decompositions():
    """PyTorch's core-aten decompositions of the ops "hal" has no eager kernel for; the ops it has
    (the mapping table's rows and torch_hal's own kernels) stay whole, so each lowers to one catalog
    op or runs as one eager kernel; and the _foreach_ ops of optimizers, one op per element
    (foreach.py)."""
    from torch._decomp import core_aten_decompositions

    # Decompositions whose results differ from the op's: the op stays one node (eager "hal", with
    # eager's CPU fallback). PyTorch 2.15's _scaled_dot_product_flash_attention_for_cpu gives the
    # attention weights [.., L, S] as its second result where the op gives logsumexp [.., L].
    wrong = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}
    table = {}
    for op, fn in core_aten_decompositions().items():
        if isinstance(op, torch._ops.OpOverload) and torch._C._dispatch_has_kernel_for_dispatch_key(
                op.name(), "PrivateUse1"):
            continue
        if op in wrong:
            continue
        table[op] = fn
    table.update(foreach_decompositions())
    return table


def _dump(gm, kind):
    d = os.environ.get("HAL_GRAPH_DUMP_DIR")
    if not d:
        return
    os.makedirs(d, exist_ok=True)
    k = next_serial()
    with open(os.path.join(d, f"fx_{k:03d}_{kind}.txt"), "w") as f:
        f.write(gm.print_readable(print_output=False))


def _compiler(kind, frozen=None):
    def compile_graph(gm, example_inputs):
        global _next_serial
        _dump(gm, kind)
        runner = GraphRunner(gm, example_inputs, kind, frozen)
        _runners[:] = [(k, r) for k, r in _runners if r() is not None]
        _runners.append((_next_serial, weakref.ref(runner)))
        _next_serial += 1

        def run(args):  # AOTAutograd's boxed convention: one list, cleared by the callee
            return runner(args)
        run._boxed_call = True
        return run
    return compile_graph


def compile_backend(gm, example_inputs, options=None):
    """torch.compile(model, backend="hal") (or backend=torch_hal.compile_backend).

    options={"freeze": True}: in inference graphs (torch.no_grad()), the module's parameters are
    HAL graph constants with their values at compile time, folded by the pipeline (weights must
    not change afterwards, as with inductor's freezing)."""
    options = dict(options or {})
    freeze = options.pop("freeze", False)
    if options:
        raise ValueError(f"torch_hal.compile_backend: unknown options {sorted(options)} (known: freeze)")
    frozen = {i: t for i, t in enumerate(example_inputs) if isinstance(t, torch.nn.Parameter)} if freeze else None
    # Input mutations AOTAutograd can keep in the graph (copy_ into the input: running stats, an
    # optimizer's updates) are done by the segment that computes the value (GraphRunner._write_back).
    aot = aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                       inference_compiler=_compiler("inference", frozen), decompositions=decompositions,
                       keep_inference_input_mutations=True)
    return aot(gm, example_inputs)


def runners(since=0):
    """The live GraphRunners whose serial number is at least SINCE, oldest first."""
    return [r for k, r in ((k, ref()) for k, ref in _runners) if r is not None and k >= since]


def next_serial():
    """The serial number the next GraphRunner will get."""
    return _next_serial


def reset():
    _runners.clear()
    counters.reset()
