"""`pip install ./framework_bridge/pytorch` (scikit-build-core) gives a torch_hal
that `import torch` alone loads (the torch.backends entry point), with its own
libhal and plugins; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns the autoload off."""
import os
import pathlib
import subprocess
import sys

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    # The CMake build dir sits next to the test build, at the same depth
    # (build/test -> build/test-pip, git-ignored), so ccache (CCACHE_BASEDIR =
    # the checkout) reuses the test build's objects.
    pip_build = pathlib.Path(os.environ["HAL_BUILD_DIR"] + "-pip")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
           "--target", str(target), "-C", f"build-dir={pip_build}",
           "-C", "cmake.build-type=RelWithDebInfo", str(SRC)]
    # CMake's usual compilers (scikit-build-core would take Python's sysconfig
    # x86_64-linux-gnu-g++, a different ccache key).
    env = dict(os.environ, CC=os.environ.get("CC", "cc"), CXX=os.environ.get("CXX", "c++"))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return target


def _run(site, code, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HAL_CONFIG", "HAL_PLUGIN_PATH")}
    e.update(PYTHONPATH=str(site), HAL_FALLBACK_WARN="0", **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, cwd=site)


def test_installed_package_holds_libhal_and_the_cpu_plugin(installed):
    pkg = installed / "torch_hal"
    assert list(pkg.glob("_C*.so"))
    assert (pkg / "lib" / "hal" / "plugins" / "libhal_plugin_cpu.so").exists()
    assert list((pkg / "lib").glob("libhal.so*"))


def test_import_torch_alone_gives_the_hal_device(installed):
    done = _run(installed, "import torch, sys\n"
                "assert 'torch_hal' in sys.modules\n"
                "x = torch.arange(3.0, device='hal') + 1\n"
                "print(x.device, x.cpu().tolist(), torch.hal.get_device_properties(0).plugin,"
                " sys.modules['torch_hal'].__file__)")
    assert done.returncode == 0, done.stderr
    device, rest = done.stdout.split(" ", 1)
    assert device == "hal:0"
    assert "[1.0, 2.0, 3.0]" in rest
    # The wheel's own package, not the build tree's.
    assert str(installed) in rest


def test_autoload_off(installed):
    done = _run(installed, "import torch, sys\nprint('torch_hal' in sys.modules, hasattr(torch, 'hal'))",
                TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False False"
