#!/usr/bin/env bash
# The whole test suite: every ctest test of the normal build (C++ unit tests,
# the plain-C ABI check, hal-conformance on the CPU plugin, the out-of-tree
# template build), the C++ core's tests again under AddressSanitizer +
# UndefinedBehaviorSanitizer, then the Python tests (the hal package, and
# the CPU plugin's ops cross-checked against PyTorch CPU, the torch_hal "hal"
# device against PyTorch CPU, ONNX models through hal.onnx against onnxruntime).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
hal_install_packages
hal_python_env
unset HAL_CONFIG HAL_PLUGIN_PATH
mapfile -t HAL_PY_ARGS < <(hal_python_cmake_args)
hal_build test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAL_BUILD_TESTS=ON -DHAL_BUILD_BENCH=ON "${HAL_PY_ARGS[@]}"
hal_build asan -DCMAKE_BUILD_TYPE=Debug -DHAL_SANITIZE=ON -DHAL_BUILD_TESTS=ON -DHAL_BUILD_BENCH=OFF

hal_log "ctest (ASan+UBSan): core"
# use_tls=0: LeakSanitizer crashes walking the dynamic TLS that libdnnl (loaded
# with the dlopen'ed CPU plugin) gives OpenMP's threads; heap leaks are still
# detected (.ci/lsan.supp: what only TLS references).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 LSAN_OPTIONS=use_tls=0:suppressions="$HAL_SRC/.ci/lsan.supp" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$HAL_BUILD_ROOT/asan" -L core --output-on-failure -j "$(nproc)"
hal_log "ctest: everything"
ctest --test-dir "$HAL_BUILD_ROOT/test" --output-on-failure -j "$(nproc)"
hal_log "fuzz: the ONNX loader (libFuzzer + ASan, 60 s from the kept corpus)"
# A clang build of just the fuzz target; new inputs go to a scratch dir, the
# kept corpus (framework_bridge/onnx/fuzz/corpus) is only read.
cmake -S "$HAL_SRC" -B "$HAL_BUILD_ROOT/fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DHAL_BUILD_ONNX_FUZZ=ON -DHAL_BUILD_TESTS=OFF -DHAL_BUILD_BENCH=OFF \
  -DHAL_BUILD_CONFORMANCE=OFF -DHAL_BUILD_TOOLS=OFF >"$HAL_BUILD_ROOT/fuzz.configure.log" 2>&1 ||
  { cat "$HAL_BUILD_ROOT/fuzz.configure.log"; exit 1; }
ninja -C "$HAL_BUILD_ROOT/fuzz" -j "$(nproc)" hal_onnx_load_fuzzer | { grep -Ev '^\[[0-9]+/[0-9]+\] ' || true; }
fuzz_scratch=$(mktemp -d)
ASAN_OPTIONS=detect_leaks=1 "$HAL_BUILD_ROOT/fuzz/bin/hal_onnx_load_fuzzer" -max_total_time=60 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 "$fuzz_scratch" "$HAL_SRC/framework_bridge/onnx/fuzz/corpus"
rm -rf "$fuzz_scratch"
hal_log "pytest"
cd "$HAL_SRC"
HAL_BUILD_DIR="$HAL_BUILD_ROOT/test" PYTHONPATH="$HAL_BUILD_ROOT/test/python" \
  "$HAL_PYTHON" -m pytest -q -p no:cacheprovider framework_bridge/python/tests framework_bridge/pytorch/tests \
  framework_bridge/onnx/tests
