"""smp.train, smp.run, smp.load_checkpoint, smp.load_state_dict: smprun
and smp-checkpoint driven from Python."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _tools
from ._tools import SmpError
from .metrics import by_step


def file_name_for(name: str) -> str:
    """The file name smprun reads input `name` from (runtime/base/lib/Files.cpp:
    '/', '\\', '%' and control bytes percent-encoded)."""
    raw = bytearray()
    for b in name.encode():
        if b in (0x2F, 0x5C, 0x25) or b < 0x20 or b == 0x7F:
            raw += b"%%%02X" % b
        else:
            raw.append(b)
    return raw.decode("utf-8", errors="surrogateescape")


def _to_numpy(value):
    """A tensor or array as numpy. numpy has no bf16: a bf16 tensor (the
    input of a model exported after .to(torch.bfloat16)) is written widened
    to float32, exactly, and smprun rounds it back as it feeds it."""
    if not hasattr(value, "detach"):
        return value
    t = value.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        t = t.float()
    return t.numpy()


def write_data_dir(data, directory: Path) -> Path:
    """A --data directory from `data`: a directory path (used as is), or a
    dict of input name -> numpy array or torch tensor (bf16 ones widened to
    float32; np.memmap too: written with np.save) or .npy path (linked, not
    copied, when it can be)."""
    if isinstance(data, (str, os.PathLike)):
        return Path(data)
    if not isinstance(data, Mapping):
        raise TypeError("data= takes a directory or a dict of input name -> "
                        "numpy array or .npy path")
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in data.items():
        target = directory / (file_name_for(name) + ".npy")
        if isinstance(value, (str, os.PathLike)):
            src = Path(value).resolve()
            try:
                os.link(src, target)
            except OSError:
                shutil.copyfile(src, target)
        else:
            np.save(target, np.ascontiguousarray(_to_numpy(value)))
    return directory


class EvalPrediction(tuple):
    """An evaluation's predictions and the labels they are scored against,
    as the Hugging Face Trainer passes them to compute_metrics
    (transformers.EvalPrediction; `preds, labels = p` works too): float32
    numpy arrays, one row per held-out sample: the predictions the argmax
    class of the loss's logits at each position its cross-entropy reads
    (as the Trainer's with preprocess_logits_for_metrics=argmax; an mse
    loss: its output's values), or with eval_logits=True the logits
    themselves (the Trainer's default: [samples, classes] for a sequence
    classifier, [samples, positions, classes] for a token classifier);
    the label_ids the labels input as fed (a causal LM's unshifted, as the
    Trainer's); a dim 1 of 1 is squeezed (a sequence classifier's or a
    regression's [samples])."""

    def __new__(cls, predictions, label_ids):
        return super().__new__(cls, (predictions, label_ids))

    @property
    def predictions(self):
        return self[0]

    @property
    def label_ids(self):
        return self[1]


def _squeezed(a):
    """Dim 1 left out where it is 1: a sequence classifier's [samples, 1]
    argmax or [samples, 1, classes] logits are the Trainer's [samples] and
    [samples, classes]."""
    return a[:, 0] if a.ndim >= 2 and a.shape[1] == 1 else a


def _apply_compute_metrics(compute_metrics, directory: Path,
                           evals: List[Dict[str, Any]]) -> None:
    """Adds compute_metrics' results (keys prefixed eval_, as the Trainer
    prefixes them) to each evaluation's row, from the predictions smprun
    --eval-predictions wrote into `directory`."""
    labels_path = directory / "label_ids.npy"
    for row in evals:
        path = directory / f"predictions-step-{row['step']}.npy"
        if not path.exists() or not labels_path.exists():
            raise SmpError(f"smprun wrote no predictions for the evaluation "
                           f"after step {row['step']} ({path})")
        got = compute_metrics(EvalPrediction(_squeezed(np.load(path)),
                                             _squeezed(np.load(labels_path))))
        if not isinstance(got, Mapping):
            raise SmpError("compute_metrics must return a dict of metric name "
                           f"-> value, got {type(got).__name__}")
        for key, value in got.items():
            name = key if key.startswith("eval_") else "eval_" + key
            if name in row:
                raise SmpError(f"compute_metrics returned '{key}', which smprun "
                               f"reports itself ({name}); rename it")
            row[name] = float(value) if np.isscalar(value) else value


@dataclass
class TrainResult:
    """What a training run printed and wrote."""
    losses: List[float]
    metrics: List[Dict[str, Any]]
    output: str
    checkpoint_dir: Optional[Path] = None
    save_onnx: Optional[Path] = None
    # With eval_data: (step, eval loss) of each evaluation, and its rows;
    # (step, accuracy) where it was compiled with eval_accuracy=True.
    eval_losses: List[Tuple[int, float]] = field(default_factory=list)
    eval_metrics: List[Dict[str, Any]] = field(default_factory=list)
    eval_accuracies: List[Tuple[int, float]] = field(default_factory=list)


_STEP = re.compile(r"^step (\d+) loss (\S+)")


def train(artifact, data, steps: int, ranks: Optional[int] = None,
          checkpoint_dir: Union[str, os.PathLike, None] = None,
          checkpoint_every: Optional[int] = None,
          save_onnx: Union[str, os.PathLike, None] = None,
          source_model: Union[str, os.PathLike, None] = None,
          resume: bool = False, reset_optimizer: bool = False,
          reset_data: bool = False, threads: Optional[int] = None,
          timeout: Optional[float] = None, device: Optional[str] = None,
          check_finite: bool = False, overlap: bool = True,
          cuda_graph: bool = False, eval_data=None,
          eval_every: Optional[int] = None,
          allow_copied_labels: bool = False,
          ignore_unread_data: bool = False,
          compute_metrics: Optional[Callable[[EvalPrediction], Mapping[str, Any]]] = None,
          progress: Union[bool, Callable[[str], None]] = True) -> TrainResult:
    """Trains `artifact` (smp.compile's result or an .smpx path) for `steps`
    steps with smprun on `ranks` ranks on this machine (default: the ranks it
    was compiled for; smprun -n N, through mpirun). `data` is a dict of
    input name -> numpy array / memmap / .npy path (the leading dim holds the
    samples), or a directory of .npy files. resume continues from the newest
    checkpoint in checkpoint_dir, which must agree with the artifact (model,
    optimizer, global batch); reset_optimizer / reset_data accept another
    optimizer (fresh state) / global batch (data from sample 0), as smprun's
    --reset-optimizer / --reset-data. save_onnx writes the trained model
    back into the ONNX file compiled, read where smpc found it or at
    source_model (a copy of that file, as smprun --source-model).
    check_finite (smprun --check-finite, as torch.autograd.detect_anomaly)
    scans every op's output and stops at the first NaN, naming the op and
    its ONNX node: slow, for finding where a NaN loss starts. overlap=False
    (smprun --no-overlap) waits on a GPU for each collective, pipeline
    message and offload copy before the next op, where by default they run
    on their own streams beside the compute that does not need them (as
    DDP overlaps its all-reduces): the same numbers. cuda_graph=True
    (smprun --cuda-graph, as torch.cuda.graphs) runs each step from the
    second on a GPU as one CUDA graph: the same numbers, one launch a step
    (collectives and pipeline messages included); refused with what to do
    on the CPU. eval_data
    (as data: held-out samples) is evaluated after the last step and every
    eval_every steps (smprun --eval-data/--eval-every: the step's forward
    with dropout off, as model.eval(); the mean of the global batches'
    losses). compute_metrics (the Trainer's: called with an EvalPrediction
    of each evaluation, returning a dict) needs an artifact compiled with
    eval_predictions=True; its results join each evaluation's row in
    eval_metrics as eval_NAME. Labels of a cross_entropy loss equal to a
    data input (a causal LM's unshifted labels: the model would learn to
    repeat its input) are refused unless allow_copied_labels=True
    (smprun --allow-copied-labels); so is a mask the model does not read
    (an attention_mask marking padding of a model exported without it)
    or token types not all 0, unless ignore_unread_data=True (smprun
    --ignore-unread-data). Each step's line is shown as
    smprun prints it (progress=False: quiet; a callable: called per line).
    Returns the losses and the per-step metrics; raises SmpError with
    smprun's message."""
    path = Path(getattr(artifact, "path", artifact))
    if ranks is None:
        ranks = getattr(artifact, "ranks", 1)
    with tempfile.TemporaryDirectory(prefix="smp-train-") as tmp:
        tmp = Path(tmp)
        data_dir = write_data_dir(data, tmp / "data")
        metrics_path = tmp / "metrics.jsonl"
        args = [] if ranks == 1 else ["-n", str(ranks)]
        args += [str(path), "--data", str(data_dir), "--steps", str(steps),
                 "--metrics", str(metrics_path)]
        if checkpoint_dir is not None:
            args += ["--checkpoint-dir", str(checkpoint_dir)]
        if checkpoint_every is not None:
            args += ["--checkpoint-every", str(checkpoint_every)]
        if resume:
            args.append("--resume")
        if reset_optimizer:
            args.append("--reset-optimizer")
        if reset_data:
            args.append("--reset-data")
        if allow_copied_labels:
            args.append("--allow-copied-labels")
        if ignore_unread_data:
            args.append("--ignore-unread-data")
        if save_onnx is not None:
            args += ["--save-onnx", str(save_onnx)]
        if source_model is not None:
            args += ["--source-model", str(source_model)]
        if threads is not None:
            args += ["--threads", str(threads)]
        if timeout is not None:
            args += ["--timeout", str(timeout)]
        if device is not None:
            args += ["--device", device]
        if check_finite:
            args.append("--check-finite")
        if not overlap:
            args.append("--no-overlap")
        if cuda_graph:
            args.append("--cuda-graph")
        if eval_data is not None:
            args += ["--eval-data", str(write_data_dir(eval_data, tmp / "eval"))]
        if eval_every is not None:
            args += ["--eval-every", str(eval_every)]
        if compute_metrics is not None:
            if eval_data is None:
                raise SmpError("compute_metrics scores evaluations; give the "
                               "held-out samples as eval_data")
            args += ["--eval-predictions", str(tmp / "predictions")]
        on_line = (progress if callable(progress)
                   else _tools.progress_printer() if progress else None)
        output = _tools.run("smprun", args, on_line=on_line)
        metrics = [json.loads(l) for l in metrics_path.read_text().splitlines()
                   if l.strip()] if metrics_path.exists() else []
        evals = [m for m in metrics if "eval_loss" in m]
        if compute_metrics is not None:
            _apply_compute_metrics(compute_metrics, tmp / "predictions", evals)
    metrics = by_step(metrics)  # an evaluation's row joins its step's
    losses = [m["loss"] for m in metrics if "loss" in m] or [
        float(m.group(2)) for m in map(_STEP.match, output.splitlines()) if m]
    return TrainResult(losses=losses, metrics=metrics, output=output,
                       checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else None,
                       save_onnx=Path(save_onnx) if save_onnx else None,
                       eval_losses=[(m["step"], m["eval_loss"]) for m in evals],
                       eval_metrics=evals,
                       eval_accuracies=[(m["step"], m["eval_accuracy"])
                                        for m in evals if "eval_accuracy" in m])


def _name_from_file(stem: str) -> str:
    """The output name smprun wrote as `stem` (file_name_for's inverse)."""
    raw = stem.encode("utf-8", errors="surrogateescape")
    return re.sub(rb"%([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]),
                  raw).decode("utf-8", errors="surrogateescape")


def run(artifact, data, threads: Optional[int] = None,
        device: Optional[str] = None,
        ignore_unread_data: bool = False) -> Dict[str, np.ndarray]:
    """Runs a forward artifact (smp.compile without loss=) with smprun
    --output-dir and returns its outputs by name. `data` is as smp.train's:
    a dict of input name -> numpy array / tensor / .npy path, or a
    directory. Data of exactly the compiled batch runs once; K times as
    many samples (every input alike) run as K batches, each output
    concatenated along dim 0, when smpc found every output computed sample
    by sample (otherwise SmpError names the output, the op that mixes the
    samples and the batch_size= to compile with). A mask in `data` that the
    model does not read (an attention_mask marking padding of a model
    exported without it), or token types not all 0, is refused unless
    ignore_unread_data=True. A bf16 output comes back widened to
    float32."""
    path = Path(getattr(artifact, "path", artifact))
    with tempfile.TemporaryDirectory(prefix="smp-run-") as tmp:
        tmp = Path(tmp)
        data_dir = write_data_dir(data, tmp / "data")
        args = [str(path), "--data", str(data_dir), "--output-dir",
                str(tmp / "out")]
        if threads is not None:
            args += ["--threads", str(threads)]
        if device is not None:
            args += ["--device", device]
        if ignore_unread_data:
            args.append("--ignore-unread-data")
        _tools.run("smprun", args)
        return {_name_from_file(f.stem): np.load(f)
                for f in sorted((tmp / "out").glob("*.npy"))}


def load_checkpoint(directory: Union[str, os.PathLike],
                    state: bool = False) -> Dict[str, np.ndarray]:
    """The newest checkpoint in `directory` as {parameter name: array}, each
    gathered whole from every rank's shards (smp-checkpoint). Names are the
    ONNX initializer names; with state=True the optimizer state follows as
    "state:NAME" entries."""
    with tempfile.TemporaryDirectory(prefix="smp-ckpt-") as tmp:
        args = ["export", str(directory), "--format", "npy", "-o", tmp] + (
            ["--state"] if state else [])
        _tools.run("smp-checkpoint", args)
        index = json.loads((Path(tmp) / "index.json").read_text())
        return {name: np.load(Path(tmp) / f) for name, f in index.items()}


def load_state_dict(module, weights: Mapping[str, np.ndarray], exported=None,
                    strict: bool = True):
    """Loads `weights` (smp.load_checkpoint's dict) into `module`'s
    parameters and buffers. `exported` (smp.export's result, or its sidecar
    path) maps ONNX initializer names to state_dict keys (a tied weight
    fills every key that shares it); without it the names are taken as
    state_dict keys. strict: every trainable parameter must get a value and
    every weight must find a home, else SmpError names them."""
    import torch

    mapping: Dict[str, List[str]] = {}
    if exported is not None:
        sidecar = getattr(exported, "sidecar", exported)
        mapping = json.loads(Path(sidecar).read_text())["parameters"]
    state = module.state_dict()
    new = {}
    unplaced = []
    for name, value in weights.items():
        if name.startswith("state:"):
            continue
        keys = mapping.get(name, [name] if name in state else [])
        if not keys:
            unplaced.append(name)
            continue
        for key in keys:
            new[key] = torch.from_numpy(np.array(value)).to(state[key].dtype) \
                .reshape(state[key].shape)
    missing = [k for k, p in module.named_parameters() if p.requires_grad
               and k not in new]
    if strict and (unplaced or missing):
        raise _tools.SmpError(
            "load_state_dict: " +
            (f"no module key for {sorted(unplaced)}" if unplaced else "") +
            ("; " if unplaced and missing else "") +
            (f"no value for {sorted(missing)}" if missing else "") +
            " (pass exported=smp.export(...)'s result)")
    module.load_state_dict(new, strict=False)
    return module
