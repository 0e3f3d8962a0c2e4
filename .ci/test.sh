#!/usr/bin/env bash
# The whole test suite: every ctest test of the normal build (C++ unit tests,
# the plain-C ABI check, the out-of-tree template build), then the C++ core's
# tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
hal_install_packages
unset HAL_CONFIG HAL_PLUGIN_PATH
hal_build test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAL_BUILD_TESTS=ON -DHAL_BUILD_BENCH=ON
hal_build asan -DCMAKE_BUILD_TYPE=Debug -DHAL_SANITIZE=ON -DHAL_BUILD_TESTS=ON -DHAL_BUILD_BENCH=OFF

hal_log "ctest (ASan+UBSan): core"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$HAL_BUILD_ROOT/asan" -L core --output-on-failure -j "$(nproc)"
hal_log "ctest: everything"
ctest --test-dir "$HAL_BUILD_ROOT/test" --output-on-failure -j "$(nproc)"
