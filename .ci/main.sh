#!/usr/bin/env bash
# The main job: install what is missing, build HAL, show hal-info with the
# default configuration, then train a real model through the HAL on the
# default device: an MLP on scikit-learn's digits, every forward, loss,
# backward and SGD step a catalog op, checked against PyTorch; then plain
# PyTorch on device="hal", and an exported ONNX model against onnxruntime.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
hal_install_packages
hal_python_env
mapfile -t HAL_PY_ARGS < <(hal_python_cmake_args)
hal_build release -DCMAKE_BUILD_TYPE=Release -DHAL_BUILD_TESTS=OFF -DHAL_BUILD_BENCH=OFF "${HAL_PY_ARGS[@]}"
B=$HAL_BUILD_ROOT/release
unset HAL_PLUGIN_PATH
hal_log "hal-info --config hal/config/hal.toml"
"$B/bin/hal-info" --config "$HAL_SRC/hal/config/hal.toml" -v
hal_log "MLP on digits through the HAL (framework_bridge/python/examples/mlp_digits.py)"
PYTHONPATH="$B/python" "$HAL_PYTHON" "$HAL_SRC/framework_bridge/python/examples/mlp_digits.py" \
  --config "$HAL_SRC/hal/config/hal.toml"
hal_log "plain PyTorch on device=\"hal\" (hal/config/hal.toml) vs PyTorch CPU (framework_bridge/pytorch/examples/train_compare.py)"
# The MLP and the Llama-style decoder block, SGD and AdamW, 20 steps each;
# prints the device, its plugin, the CPU-fallback counts and both loss curves;
# exits non-zero when any step's loss or any final parameter disagrees.
# (HAL_FALLBACK_WARN=0: the counts are printed, the per-op warnings would repeat them.)
HAL_FALLBACK_WARN=0 HAL_CONFIG="$HAL_SRC/hal/config/hal.toml" PYTHONPATH="$B/python" "$HAL_PYTHON" \
  "$HAL_SRC/framework_bridge/pytorch/examples/train_compare.py" --models mlp,cnn,decoder
hal_log "an ONNX model through the HAL vs onnxruntime (framework_bridge/onnx/examples/run_exported.py)"
# A GPT-style decoder exported by torch.onnx.export (dynamic sequence length),
# run by hal.onnx.InferenceSession on hal/config/hal.toml's default device and
# by onnxruntime at three lengths; prints the partition and compile counts and
# exits non-zero when an output disagrees.
PYTHONPATH="$B/python" "$HAL_PYTHON" "$HAL_SRC/framework_bridge/onnx/examples/run_exported.py" \
  --config "$HAL_SRC/hal/config/hal.toml"
hal_log "LLM generation with a paged KV cache through torch.ops.hal vs a PyTorch reference (framework_bridge/python/examples/llm_generate.py)"
HAL_FALLBACK_WARN=0 HAL_CONFIG="$HAL_SRC/hal/config/hal.toml" PYTHONPATH="$B/python" "$HAL_PYTHON" \
  "$HAL_SRC/framework_bridge/python/examples/llm_generate.py" --model moe
