# Shared by .ci/main.sh and .ci/test.sh: installs what the build needs (only
# what is missing, so a second run is quick) and builds into caches outside
# the checkout (~/.cache/hal), reused by every clone on this machine.
set -euo pipefail

HAL_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HAL_CACHE=${HAL_CACHE:-$HOME/.cache/hal}
# Build trees live inside the checkout (build/, git-ignored) so that every
# path ccache sees is relative to CCACHE_BASEDIR: a fresh clone at a new path
# (CI) then hits the shared cache in ~/.cache/hal/ccache. A tree outside the
# checkout would put the clone's absolute path into every command and miss.
HAL_BUILD_ROOT=$HAL_SRC/build
export CCACHE_DIR=$HAL_CACHE/ccache CCACHE_BASEDIR=$HAL_SRC CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=5G

HAL_APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libboost-dev libboost-filesystem-dev libboost-program-options-dev
  libtomlplusplus-dev nlohmann-json3-dev doctest-dev libbenchmark-dev libssl-dev
  libdnnl-dev libopenblas-dev libonnx-dev libprotobuf-dev protobuf-compiler clang libclang-rt-14-dev ocl-icd-opencl-dev opencl-headers pocl-opencl-icd python3 python3-venv python3-dev
  libgloo-dev iproute2
)
HAL_VENV=$HAL_CACHE/venv
HAL_PYTHON=$HAL_VENV/bin/python

hal_log() { printf '\n=== %s\n' "$*"; }

hal_install_packages() {
  local missing=()
  for p in "${HAL_APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    hal_log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# The virtual environment (Debian's python3) with .ci/requirements.txt,
# reinstalled only when that file changes.
hal_python_env() {
  local req=$HAL_SRC/.ci/requirements.txt stamp=$HAL_VENV/.requirements.sha1
  local want lock
  want=$(sha1sum "$req" | cut -c1-40)
  # One installer at a time: two checkouts set up at once (the main job and the tests) would run
  # pip into the same environment together and leave torch half-installed for one of them.
  mkdir -p "$(dirname "$HAL_VENV")"
  exec {lock}>"$HAL_VENV.lock"
  flock "$lock"
  if [ ! -x "$HAL_PYTHON" ]; then
    hal_log "creating the virtual environment $HAL_VENV"
    /usr/bin/python3 -m venv "$HAL_VENV"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    hal_log "installing Python packages (.ci/requirements.txt; torch is large, once per machine)"
    "$HAL_PYTHON" -m pip install -q --upgrade pip
    "$HAL_PYTHON" -m pip install -q -r "$req"
    echo "$want" >"$stamp"
  fi
  exec {lock}>&-
}

# CMake arguments that build the hal Python package against the venv.
hal_python_cmake_args() {
  printf '%s\n' -DHAL_BUILD_PYTHON=ON "-DPython3_EXECUTABLE=$HAL_PYTHON" \
    "-Dpybind11_DIR=$("$HAL_PYTHON" -m pybind11 --cmakedir)"
}

# hal_build NAME [cmake args...]: configure (once) and build $HAL_BUILD_ROOT/NAME.
hal_build() {
  local name=$1
  shift
  local dir=$HAL_BUILD_ROOT/$name
  hal_log "building $name in $dir"
  mkdir -p "$HAL_BUILD_ROOT"
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S "$HAL_SRC" -B "$dir" -G Ninja "$@" >"$dir.configure.log" 2>&1 || {
      cat "$dir.configure.log"
      return 1
    }
  else
    cmake "$dir" "$@" >/dev/null
  fi
  touch "$dir"
  # Progress lines hidden; warnings and errors shown.
  ninja -C "$dir" -j "$(nproc)" | { grep -Ev '^\[[0-9]+/[0-9]+\] ' || true; }
  return "${PIPESTATUS[0]}"
}
