"""smp.checkpoint: what a checkpoint holds, one unsharded copy of it, and
its parameters as safetensors or ONNX (smp-checkpoint driven from Python).

    info = smp.checkpoint.list("ckpt")          # step, plan, tensors
    smp.checkpoint.gather("ckpt", "ckpt1")      # resumes on one rank
    smp.checkpoint.export_safetensors("ckpt", "model.safetensors")

docs/checkpoints.md describes the format.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Union

import numpy as np

from . import _tools

PathLike = Union[str, os.PathLike]


def list(directory: PathLike) -> Dict[str, Any]:  # noqa: A001 (the verb)
    """The newest checkpoint in `directory` (`smp-checkpoint list --json`):
    {"checkpoint", "step", "total_steps", "num_ranks", "plan", "optimizer",
    "global_batch", "microbatches", "model_fingerprint", "artifact",
    "tensors": [{"name", "role", "kind", "dtype", "shape", "bytes",
    "ranks"}]}; "role" is "param" or "state", "kind" of a parameter the step
    does not train "buffer" (running statistics, what PyTorch keeps as
    buffers) or "frozen" (smpc --freeze), else ""."""
    out = _tools.run("smp-checkpoint", ["list", str(directory), "--json"])
    return json.loads(out)


def gather(directory: PathLike, output: PathLike) -> Path:
    """Writes the newest checkpoint in `directory`, every tensor gathered
    whole from every rank's shards, as one single-rank checkpoint in
    `output` (it resumes under a one-rank artifact of the same model).
    Returns `output`."""
    _tools.run("smp-checkpoint", ["gather", str(directory), "-o", str(output)])
    return Path(output)


def arrays(directory: PathLike, state: bool = False) -> Dict[str, np.ndarray]:
    """The newest checkpoint's parameters (with state=True also the
    optimizer state, under its own names) as {name: np.ndarray}, gathered
    whole (`smp-checkpoint export --format npy`)."""
    with tempfile.TemporaryDirectory(prefix="smp-ckpt-") as tmp:
        args = ["export", str(directory), "--format", "npy", "-o", tmp]
        text = _tools.run("smp-checkpoint",
                          args + (["--state"] if state else []))
        # Parameters the ONNX exporter folded (no PyTorch name): said, not
        # swallowed with the tool's output.
        for line in text.splitlines():
            if ": warning: " in line:
                warnings.warn(line, stacklevel=2)
        index = json.loads((Path(tmp) / "index.json").read_text())
        return {name[len("state:"):] if name.startswith("state:") else name:
                np.load(Path(tmp) / f) for name, f in index.items()}


def export_safetensors(directory: PathLike, path: PathLike,
                       state: bool = False,
                       metadata: Optional[Dict[str, str]] = None) -> Path:
    """Writes the newest checkpoint's parameters (with state=True also the
    optimizer state) to `path` with the `safetensors` library
    (safetensors.numpy.save_file; metadata: the step, plan and optimizer,
    plus `metadata`). Returns `path`. (`smp-checkpoint export --format
    safetensors` writes the same format without Python.)"""
    try:
        from safetensors.numpy import save_file
    except ImportError as e:
        raise _tools.SmpError(
            "export_safetensors needs the safetensors package (pip install "
            "safetensors; scripts/install-deps.sh installs it)",
            tool="smp") from e
    info = list(directory)
    meta = {"format": "pt", "smp.checkpoint": info["checkpoint"],
            "smp.step": str(info["step"])}
    if info.get("optimizer"):
        meta["smp.optimizer"] = info["optimizer"]
    if info.get("plan"):
        meta["smp.plan"] = info["plan"]
    meta.update(metadata or {})
    tensors = {k: np.ascontiguousarray(v)
               for k, v in arrays(directory, state=state).items()}
    save_file(tensors, str(path), metadata=meta)
    return Path(path)


def export_onnx(directory: PathLike, path: PathLike,
                model: Optional[PathLike] = None,
                onnx: Optional[PathLike] = None) -> Path:
    """Writes the ONNX model the artifact `model` (default: the one the
    checkpoint records) was compiled from, with the checkpoint's trained
    parameters (`smp-checkpoint export --format onnx`). Returns `path`."""
    args = ["export", str(directory), "--format", "onnx", "-o", str(path)]
    if model is not None:
        args += ["--model", str(getattr(model, "path", model))]
    if onnx is not None:
        args += ["--onnx", str(onnx)]
    _tools.run("smp-checkpoint", args)
    return Path(path)
