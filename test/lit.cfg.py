# -*- Python -*-
# lit configuration for smp: FileCheck tests over smp-opt and smpc.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "smp"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "corpus", "unit", "fixtures", "CMakeLists.txt", "README.md",
                   "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.smp_obj_root, "test")

# SMP_CPU_SIMD=off and OPENBLAS_CORETYPE=Haswell run the suite on the paths
# a CPU without AVX2, or without AVX-512, takes (docs/architecture.md);
# SMP_CUDAEMU_SUM_ORDER=reverse its emulated GPU runs with the tensor
# cores' and cuBLASLt's sums in another order, SMP_CUDAEMU_DEFER=low|high
# with one side's streams held back (docs/cuda-emulator.md).
llvm_config.with_system_environment(
    ["HOME", "TMPDIR", "SMP_CPU_SIMD", "OPENBLAS_CORETYPE",
     "SMP_CUDAEMU_SUM_ORDER", "SMP_CUDAEMU_DEFER"])
# Open MPI's point-to-point layer named: ob1, the one it picks on one
# machine anyway. Choosing it by itself first opens the cm layer, whose
# PSM and PSM2 transports (Intel's InfiniPath and Omni-Path) take ~0.2 s
# to find no hardware, in every process of every launch.
config.environment["OMPI_MCA_pml"] = "ob1"
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    ["smp-opt", "smpc", "smprun", "smp-npy-diff", "smp-modelgen",
     "smp-artifact-text", "smp-onnx-conformance", "smp-checkpoint"],
    [config.smp_tools_dir])
# %python is the python3 the build chose (SMP_TEST_PYTHON in
# test/CMakeLists.txt), in place of lit's own default.
config.substitutions = [(k, v) for (k, v) in config.substitutions
                        if k != "%python"]
config.substitutions.append(("%python", '"' + config.smp_python + '"'))
config.substitutions.append(
    ("%bench", os.path.join(config.smp_src_root, "bench")))
config.substitutions.append(
    ("%smp_build", os.path.dirname(config.smp_tools_dir)))

config.substitutions.append(
    ("%fixtures", os.path.join(config.smp_src_root, "test", "fixtures")))
config.substitutions.append(
    ("%bad", os.path.join(config.smp_src_root, "test", "Frontend", "ONNX",
                          "Inputs", "bad")))
# PyTorch's torchrun (test/smprun/launchers-torchrun.test), when it starts
# a process: Debian 12's (torch 1.13) crashes under Python 3.11.
import shutil as _shutil
def _torchrun_works():
    import subprocess
    exe = _shutil.which("torchrun")
    if not exe:
        return False
    try:
        return subprocess.run(
            [exe, "--standalone", "--nproc_per_node", "1", "--no_python",
             "true"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
if _torchrun_works():
    config.available_features.add("torchrun")
# A Slurm that answers and offers PMIx (scripts/slurm-local.sh starts a
# one-node one): test/smprun/launchers-srun.test.
def _slurm_up():
    import subprocess
    if not (_shutil.which("srun") and _shutil.which("sinfo")):
        return False
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True,
                                text=True, timeout=20).stdout
        mpis = subprocess.run(["srun", "--mpi=list"], capture_output=True,
                              text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return (any(s in states for s in ("idle", "mix", "alloc")) and
            "pmix" in mpis.stdout + mpis.stderr)
if _slurm_up():
    config.available_features.add("slurm")
# What the python3 the tests run (%python) can import: tensorboard
# (test/smprun/tensorboard.test reads smprun's event files with its own
# reader), matplotlib (smp.plot_metrics), PyTorch
# (test/smprun/checkpoint-safetensors.test loads an exported checkpoint
# into it).
def _python_has(module):
    import subprocess
    exe = config.smp_python
    try:
        return subprocess.run([exe, "-c", "import " + module],
                              capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
for _module in ("tensorboard", "matplotlib", "torch", "onnx"):
    if _python_has(_module):
        config.available_features.add(_module)
# Debian's libonnx-testdata: the ONNX backend node tests (%onnx_node).
onnx_node = "/usr/share/libonnx-testdata/data/node"
if os.path.isdir(onnx_node):
    config.available_features.add("onnx-testdata")
    config.substitutions.append(("%onnx_node", onnx_node))
    # Its other suites (pytorch-converted, pytorch-operator, simple).
    config.substitutions.append(("%onnx_testdata", os.path.dirname(onnx_node)))
if config.smp_have_cuda:
    config.available_features.add("cuda")
    # The CUDA emulator (kernels/cudaemu): smprun-emu runs --device cuda on
    # the CPU (REQUIRES: cudaemu).
    if config.smp_cuda_emulator:
        config.available_features.add("cudaemu")
        llvm_config.add_tool_substitutions(["smprun-emu"],
                                           [config.smp_tools_dir])
    # A usable GPU: tests of the CUDA backend run (REQUIRES: gpu), the
    # others skip them.
    import shutil
    import subprocess
    smi = shutil.which("nvidia-smi")
    if smi and subprocess.run([smi, "-L"], capture_output=True,
                              timeout=60).returncode == 0:
        config.available_features.add("gpu")
