"""Where a hal backward runs: on the thread that calls it (TORCH_HAL_AUTOGRAD_THREADS=calling, the
default), or on autograd's per-device thread as for CUDA (=device). Either way the gradients are
the CPU's."""
import os
import subprocess
import sys
import textwrap
import threading

import torch
import torch_hal  # noqa: F401

from subprocess_util import run_python


def _backward_thread(device):
    """The thread a tensor hook of a backward on DEVICE runs on, and the gradient it computed."""
    w = torch.tensor([1.0, -2.0, 3.0], device=device, requires_grad=True)
    seen = []
    y = w * w
    y.register_hook(lambda g: seen.append(threading.get_ident()))
    (y * 3).sum().backward()
    return seen[0], w.grad.cpu()


def test_a_hal_backward_runs_on_the_calling_thread_with_cpu_gradients():
    thread, grad = _backward_thread("hal")
    assert thread == threading.get_ident()
    assert torch.equal(grad, _backward_thread("cpu")[1])
    assert torch.equal(grad, torch.tensor([6.0, -12.0, 18.0]))


def test_a_new_thread_that_makes_hal_tensors_runs_its_backward_itself():
    out = {}

    def work():
        out["ran_on"], out["grad"] = _backward_thread("hal")
        out["me"] = threading.get_ident()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert out["ran_on"] == out["me"]
    assert torch.equal(out["grad"], torch.tensor([6.0, -12.0, 18.0]))


def test_an_explicit_choice_after_first_use_stands():
    code = """
        import threading, torch, torch_hal
        torch.ones(1, device="hal")  # first hal tensor of this thread: calling-thread backward
        torch.autograd.set_multithreading_enabled(True)  # the user's own choice, afterwards
        w = torch.ones(2, device="hal", requires_grad=True)
        seen = []
        y = w * 2
        y.register_hook(lambda g: seen.append(threading.get_ident()))
        y.sum().backward()
        print(seen[0] != threading.get_ident(), w.grad.cpu().tolist())
    """
    assert run_python(code).split() == ["True", "[2.0,", "2.0]"]


def test_device_threads_on_request_give_the_same_gradients():
    code = """
        import threading, torch, torch_hal
        w = torch.tensor([1.0, -2.0, 3.0], device="hal", requires_grad=True)
        seen = []
        y = w * w
        y.register_hook(lambda g: seen.append(threading.get_ident()))
        (y * 3).sum().backward()
        print(seen[0] != threading.get_ident(), w.grad.cpu().tolist())
    """
    out = run_python(code, TORCH_HAL_AUTOGRAD_THREADS="device")
    assert out.split() == ["True", "[6.0,", "-12.0,", "18.0]"]


def test_a_bad_setting_is_named_at_first_use():
    code = textwrap.dedent("""
        import torch, torch_hal
        try:
            torch.ones(2, device="hal")
        except RuntimeError as e:
            print("ERROR", e)
        try:  # reported again, not skipped the second time
            torch.ones(2, device="hal")
        except RuntimeError as e:
            print("AGAIN", "TORCH_HAL_AUTOGRAD_THREADS" in str(e))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TORCH_HAL_AUTOGRAD_THREADS="gpu-threads"))
    assert done.returncode == 0, done.stderr
    assert "TORCH_HAL_AUTOGRAD_THREADS is 'gpu-threads'" in done.stdout
    assert "'calling'" in done.stdout and "'device'" in done.stdout
    assert "AGAIN True" in done.stdout
