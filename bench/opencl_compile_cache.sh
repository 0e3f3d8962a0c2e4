#!/usr/bin/env bash
# First run vs cached run of the OpenCL plugin's kernel compilation: runs
# hal_opencl_first_run (an MLP step's 9 op launches in a fresh process) with
# empty kernel caches, then again with the caches it filled.
# Usage: bench/opencl_compile_cache.sh <build dir>
set -euo pipefail
B=${1:?usage: $0 <build dir>}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HAL_OPENCL_CACHE_DIR=$work/hal POCL_CACHE_DIR=$work/pocl HAL_OPENCL_STATS=$work/stats
for run in cold warm warm; do
  printf '%-5s ' "$run"
  "$B/bin/hal_opencl_first_run" 2>/dev/null
  tail -1 "$HAL_OPENCL_STATS"
done
