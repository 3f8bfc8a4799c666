#!/usr/bin/env bash
# Installs the Debian packages smp needs to build and test. Idempotent: when
# everything is installed it only runs dpkg-query (well under a second).
# `--tests` adds what only the test suite needs: a one-node Slurm
# (scripts/slurm-local.sh starts it) for the srun launcher test.
set -euo pipefail

PACKAGES=(
  cmake ninja-build ccache g++ python3
  # scripts/device-kit.sh: strip and xz for the kit.
  binutils xz-utils
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  # The fuzzers (test/fuzz, scripts/run-fuzz.sh): clang-22 with its
  # sanitizer, libFuzzer and OpenMP runtimes.
  clang-22 libclang-rt-22-dev libfuzzer-22-dev libomp-22-dev
  # The Python package and its tests (python/, ctest's python-pytest):
  # Debian's torch 1.13 (TorchScript exporter), onnx, numpy, pytest; about a
  # minute to install (docs/python.md).
  python3-torch python3-onnx python3-numpy python3-pytest python3-pip
  python3-setuptools python3-wheel
)
if [[ ${1:-} == --tests ]]; then
  PACKAGES+=(slurmd slurmctld slurm-client munge
    # smp.Plan.to_pandas() (python/tests/test_plan.py).
    python3-pandas
    # smp.plot_metrics (python/tests/test_metrics.py).
    python3-matplotlib
    # cudaemu.memcheck: the CUDA kernels on the emulator under memcheck
    # (docs/cuda-emulator.md).
    valgrind)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null |
      grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

# The python3 the tests use (test/CMakeLists.txt, SMP_TEST_PYTHON): Debian's,
# where the packages above go; another python3 first on PATH (pyenv's) is
# left alone. SMP_TEST_PYTHON=/path/to/python3 picks another.
if [[ -n ${SMP_TEST_PYTHON:-} ]]; then
  PY=$SMP_TEST_PYTHON
elif [[ -x /usr/bin/python3 ]]; then
  PY=/usr/bin/python3
else
  PY=python3
fi

# The smp package, editable from this checkout, into that python3 (Debian
# 12's pip refuses system installs without the flag).
# PyPI packages the package uses where Debian has none: safetensors
# (smp.checkpoint.export_safetensors).
PIP_PACKAGES=(safetensors)
install_python_package() {
  if ! "$PY" -c "import smp" 2>/dev/null; then
    # An editable install without build isolation builds with the
    # interpreter's own setuptools and wheel (Debian's: python3-wheel).
    if ! "$PY" -c "import wheel" 2>/dev/null; then
      "$PY" -m pip install --quiet --break-system-packages wheel
    fi
    "$PY" -m pip install --quiet --no-deps --no-build-isolation \
      --break-system-packages -e "$(dirname "$0")/../python"
  fi
  for pkg in "${PIP_PACKAGES[@]}"; do
    if ! "$PY" -c "import $pkg" 2>/dev/null; then
      "$PY" -m pip install --quiet --break-system-packages "$pkg"
    fi
  done
}

# --tests: the tensorboard package, whose own event reader checks smprun's
# --tensorboard-dir files (test/smprun/tensorboard.test; lit feature
# `tensorboard`), and onnxruntime, which smp.export's check of an export
# runs first where it is installed (python/tests: the path that had broken
# every BatchNorm export, unseen where only smprun checked). Neither is in
# Debian 12; tensorboard 2.15 works with Debian's protobuf (3.21, which
# newer releases refuse). The numpy and protobuf already there are pinned
# so pip does not replace them (onnx and torch are built against them).
install_test_python_packages() {
  [[ ${1:-} == --tests ]] || return 0
  local want=()
  "$PY" -c "import tensorboard" 2>/dev/null || want+=("tensorboard<2.16")
  "$PY" -c "import onnxruntime" 2>/dev/null || want+=(onnxruntime)
  ((${#want[@]})) || return 0
  local pins
  pins=$("$PY" -c "import numpy, google.protobuf as p; \
print('numpy==' + numpy.__version__, 'protobuf==' + p.__version__)" \
    2>/dev/null || true)
  # shellcheck disable=SC2086
  "$PY" -m pip install --quiet --break-system-packages "${want[@]}" $pins
}

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  install_python_package
  install_test_python_packages "${1:-}"
  exit 0
fi

SUDO=""
if [[ $(id -u) != 0 ]]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
  --no-install-recommends "${missing[@]}"
install_python_package
install_test_python_packages "${1:-}"
