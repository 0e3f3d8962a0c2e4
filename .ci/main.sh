#!/usr/bin/env bash
# The main job: install what is missing, build HAL, show hal-info with the
# default configuration (the CPU plugin and its devices).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
hal_install_packages
hal_build release -DCMAKE_BUILD_TYPE=Release -DHAL_BUILD_TESTS=OFF -DHAL_BUILD_BENCH=OFF
B=$HAL_BUILD_ROOT/release
hal_log "hal-info --config hal/config/hal.toml"
env -u HAL_PLUGIN_PATH "$B/bin/hal-info" --config "$HAL_SRC/hal/config/hal.toml" -v
