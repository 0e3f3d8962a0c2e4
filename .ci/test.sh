#!/usr/bin/env bash
# The whole test suite: every ctest test of the normal build (C++ unit tests,
# the plain-C ABI check, hal-conformance on the CPU plugin, the out-of-tree
# template build), the C++ core's tests again under AddressSanitizer +
# UndefinedBehaviorSanitizer and the core's and CPU plugin's under
# ThreadSanitizer, the fuzz targets (bounded), then the Python tests (the hal
# package, and the CPU plugin's ops cross-checked against PyTorch CPU, the
# torch_hal "hal" device against PyTorch CPU, ONNX models through hal.onnx
# against onnxruntime), and the model and training tests again behind the
# validation layer.
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
hal_log "ctest (ThreadSanitizer): the core's and the CPU plugin's tests"
# A tree of just those tests. OMP_NUM_THREADS=1: libgomp is not instrumented,
# so its barriers look like races to TSan; the threads under test are ours.
cmake -S "$HAL_SRC" -B "$HAL_BUILD_ROOT/tsan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHAL_TSAN=ON \
  -DHAL_BUILD_TESTS=ON -DHAL_BUILD_BENCH=OFF -DHAL_BUILD_ONNX=OFF \
  >"$HAL_BUILD_ROOT/tsan.configure.log" 2>&1 || { cat "$HAL_BUILD_ROOT/tsan.configure.log"; exit 1; }
ninja -C "$HAL_BUILD_ROOT/tsan" -j "$(nproc)" hal_core_test hal_cpu_plugin_test | { grep -Ev '^\[[0-9]+/[0-9]+\] ' || true; }
OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions="$HAL_SRC/.ci/tsan.supp" \
  ctest --test-dir "$HAL_BUILD_ROOT/tsan" -R '^(core|cpu)\.' --output-on-failure -j "$(nproc)"
hal_log "ctest: everything"
ctest --test-dir "$HAL_BUILD_ROOT/test" --output-on-failure -j "$(nproc)"
hal_log "fuzz: the ONNX loader (60 s), hal.toml, compile cache entries, the C ABI through validation (20 s each)"
# A clang build of just the fuzz targets (libFuzzer + ASan); each runs from
# its kept corpus (only read) with new inputs going to a scratch dir.
cmake -S "$HAL_SRC" -B "$HAL_BUILD_ROOT/fuzz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DHAL_BUILD_FUZZ=ON -DHAL_BUILD_TESTS=OFF -DHAL_BUILD_BENCH=OFF \
  -DHAL_BUILD_CONFORMANCE=OFF -DHAL_BUILD_TOOLS=OFF >"$HAL_BUILD_ROOT/fuzz.configure.log" 2>&1 ||
  { cat "$HAL_BUILD_ROOT/fuzz.configure.log"; exit 1; }
ninja -C "$HAL_BUILD_ROOT/fuzz" -j "$(nproc)" hal_onnx_load_fuzzer hal_config_fuzzer hal_compile_cache_fuzzer \
  hal_abi_fuzzer | { grep -Ev '^\[[0-9]+/[0-9]+\] ' || true; }
# fuzz NAME SECONDS CORPUS: a bounded run of fuzz target NAME.
fuzz() {
  local scratch
  scratch=$(mktemp -d)
  HAL_FUZZ_CPU_PLUGIN="$HAL_BUILD_ROOT/test/lib/hal/plugins/libhal_plugin_cpu.so" \
    ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=use_tls=0:suppressions="$HAL_SRC/.ci/lsan.supp" \
    "$HAL_BUILD_ROOT/fuzz/bin/$1" -max_total_time="$2" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    "$scratch" "$HAL_SRC/$3"
  rm -rf "$scratch"
}
fuzz hal_onnx_load_fuzzer 60 framework_bridge/onnx/fuzz/corpus
fuzz hal_config_fuzzer 20 hal/config/fuzz/corpus
fuzz hal_compile_cache_fuzzer 20 hal/graph/fuzz/corpus
fuzz hal_abi_fuzzer 20 hal/layers/fuzz/corpus
hal_log "pytest"
cd "$HAL_SRC"
HAL_BUILD_DIR="$HAL_BUILD_ROOT/test" PYTHONPATH="$HAL_BUILD_ROOT/test/python" \
  "$HAL_PYTHON" -m pytest -q -p no:cacheprovider framework_bridge/python/tests framework_bridge/pytorch/tests \
  framework_bridge/onnx/tests bench/tests
hal_log "pytest behind the validation layer: the ONNX model tests and the training tests"
# Every call these make goes through the validation layer (docs/layers.md),
# which fails any that breaks the ABI's rules.
HAL_LAYERS=validation HAL_BUILD_DIR="$HAL_BUILD_ROOT/test" PYTHONPATH="$HAL_BUILD_ROOT/test/python" \
  "$HAL_PYTHON" -m pytest -q -p no:cacheprovider framework_bridge/onnx/tests/test_models.py \
  framework_bridge/onnx/tests/test_exported_bert.py framework_bridge/onnx/tests/test_recurrent_quantized.py \
  framework_bridge/onnx/tests/test_control_flow.py framework_bridge/pytorch/tests/test_training.py
hal_log "bench/report.py --quick: the performance report end to end at small sizes (so that it cannot rot)"
# Figures of a loaded CI machine mean nothing: only that every benchmark runs and the report is written.
HAL_BUILD_DIR="$HAL_BUILD_ROOT/test" "$HAL_PYTHON" bench/report.py --quick --out "$(mktemp -d)"
