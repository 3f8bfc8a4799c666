"""pytest set-up: the package from this checkout, the tools from
$SMP_BIN_DIR (ctest sets it to the build's bin) or the checkout's build/bin,
and python/ (the fixture helpers: torch_refs, smp_models) on the path."""

import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PYTHON_DIR))

import smp  # noqa: E402


@pytest.fixture(scope="session")
def tools():
    if smp.bin_dir() is None:
        pytest.skip("smp's tools are not built (set SMP_BIN_DIR)")
    return smp.bin_dir()
