"""smp.export: a torch.nn.Module to the ONNX file smp trains as PyTorch does.

The TorchScript exporter (torch.onnx.export with dynamo=False where torch has
both; torch 1.13's only one) is used: it keeps every parameter as its own
initializer named by its state_dict key, stores a tied weight once (the
module identity of the parameter), and with do_constant_folding=False folds
no parameter into a constant. The batch dim (dim 0 of every input and
output) is symbolic ("batch"). A module with BatchNorm is exported in
training mode (TrainingMode.TRAINING: batch statistics, kept trainable);
others in eval mode. What ONNX cannot say goes in MODEL.smp-export.json,
which smpc compile reads (tools/smpc/ExportSidecar.h): tensors that get no
gradient (requires_grad=False parameters, buffers, constants the trace
stored as initializers), nn.Embedding padding_idx rows and the model's
dropout modules (smp has no random dropout yet: the file holds none, with
their p set to 0 for the export, and smpc --train refuses the model unless
--no-dropout accepts training without them). Randomness left in a train()
forward with those at p = 0 (functional dropout: Llama's attention_dropout,
F.dropout(x, p, self.training)) is listed too: a Hugging Face model's config
dropout probabilities > 0, else {"module": "forward", "p": null}; with
BatchNorm (a training-mode export, which would write it as random nodes) it
is an error. The export is
checked by running the file (onnxruntime when installed, else smpc +
smprun) against the module on the example inputs.
"""

from __future__ import annotations

import copy
import inspect
import json
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import _tools

SIDECAR_FORMAT = "smp-export/1"


@dataclass
class ExportedModel:
    path: Path
    sidecar: Path
    input_names: List[str]
    output_names: List[str]
    parameters: Dict[str, List[str]]  # initializer -> state_dict keys
    frozen: List[str]
    padding_rows: List[dict]
    dropout: List[dict] = field(default_factory=list)  # {"module", "p"}
    checked_with: str = ""
    max_abs_diff: float = 0.0

    def __fspath__(self) -> str:
        return str(self.path)


def sidecar_path(model_path) -> Path:
    p = Path(model_path)
    stem = p.name[:-5] if p.name.endswith(".onnx") else p.name
    return p.with_name(stem + ".smp-export.json")



def _wrap_hf(module):
    import torch

    class HFLogits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            kw = {}
            params = inspect.signature(self.m.forward).parameters
            if "attention_mask" in params:
                kw["attention_mask"] = torch.ones_like(input_ids)
            if "use_cache" in params:
                kw["use_cache"] = False
            return self.m(input_ids=input_ids, return_dict=False, **kw)[0]
    return HFLogits(module)


def _has_batchnorm(module) -> bool:
    import torch
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
               for m in module.modules())


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _random_in_train(module, target, example_inputs) -> bool:
    """Whether two train() forwards of the example inputs differ (a random
    op: dropout). The module's state, mode and the RNG are restored."""
    import torch
    saved = copy.deepcopy(module.state_dict())  # BatchNorm's statistics
    was_training = module.training
    try:
        target.train(True)
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            a = _outputs(target(*example_inputs))
            b = _outputs(target(*example_inputs))
    finally:
        module.load_state_dict(saved)
        module.train(was_training)
    return len(a) != len(b) or any(
        torch.is_tensor(x) and x.is_floating_point() and
        not torch.allclose(x, y, rtol=1e-4, atol=1e-6) for x, y in zip(a, b))


def _config_dropout(module) -> List[dict]:
    """A Hugging Face model's dropout probabilities > 0 from its config
    (Llama's `attention_dropout`), which its forward applies through
    torch.nn.functional.dropout: no module shows them (an eval() export
    drops them)."""
    found = []
    for key, value in sorted(module.config.to_dict().items()):
        if ("dropout" in key or "pdrop" in key) and \
                isinstance(value, (int, float)) and not isinstance(value, bool) \
                and value > 0:
            found.append({"module": f"config.{key}", "p": float(value)})
    return found


def _is_hf(module) -> bool:
    return hasattr(module, "config") and any(
        c.__module__.startswith("transformers.") for c in type(module).__mro__)


def _to_numpy(t):
    return t.detach().cpu().numpy()


def run_onnx(path, inputs: Dict[str, np.ndarray]) -> (Dict[str, np.ndarray], str):
    """Runs an ONNX file once: onnxruntime when installed, else smpc compile
    + smprun (forward). Returns the outputs by name and what ran them."""
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(names, inputs))), "onnxruntime"
    from .compiler import compile as smp_compile
    from .runner import file_name_for, write_data_dir
    batch = next(iter(inputs.values())).shape[0]
    with tempfile.TemporaryDirectory(prefix="smp-check-") as d:
        d = Path(d)
        art = smp_compile(path, output=d / "check.smpx", batch_size=batch)
        data = write_data_dir(inputs, d / "in")
        _tools.run("smprun", [str(art.path), "--data", str(data),
                              "--output-dir", str(d / "out")])
        outs = {}
        for f in (d / "out").glob("*.npy"):
            outs[f.stem] = np.load(f)
        return outs, "smprun"


def export(module, example_inputs, path, *, input_names: Optional[Sequence[str]] = None,
           output_names: Optional[Sequence[str]] = None, check: bool = True,
           rtol: float = 1e-4, atol: float = 1e-5, opset: int = 17) -> ExportedModel:
    """Exports `module` to `path` for smp (see the module docstring) and
    returns an ExportedModel (its .path goes to smp.compile). Hugging Face
    models take input_ids alone and give logits. Raises SmpError when the
    file does not compute what the module computes."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    hf = _is_hf(module)
    target = _wrap_hf(module) if hf else module
    if input_names is None:
        if hf:
            input_names = ["input_ids"]
        else:
            params = [p for p in inspect.signature(module.forward).parameters]
            input_names = params[:len(example_inputs)]
    # Dropout: none in the file (a training-mode export would hold random
    # masks smp cannot train yet; an eval() one drops them silently): p = 0
    # while exporting and checking, the modules listed in the sidecar.
    dropouts = [(name, m) for name, m in module.named_modules()
                if isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0]
    dropout = [{"module": name, "p": float(m.p)} for name, m in dropouts]
    for _, m in dropouts:
        m.p = 0.0
    try:
        # Randomness left with the modules' p at 0: functional dropout
        # (Llama's attention_dropout, F.dropout(x, p, self.training)).
        if _random_in_train(module, target, example_inputs):
            if _has_batchnorm(module):
                raise _tools.SmpError(
                    f"{path}: the module's train() forward is random apart "
                    f"from its dropout modules (torch.nn.functional.dropout "
                    f"or another random op), and a model with BatchNorm is "
                    f"exported in training mode, which would write it as "
                    f"random nodes smp cannot train yet: use nn.Dropout "
                    f"modules (smp.export sets their p to 0 and lists them) "
                    f"or p = 0", tool="smp.export")
            dropout += (_config_dropout(module) if hf else []) or [
                {"module": "forward", "p": None}]
        result, reference = _export(module, target, example_inputs, path,
                                    list(input_names), output_names,
                                    "m." if hf else "", opset, dropout)
    finally:
        for (_, m), d in zip(dropouts, dropout):
            m.p = d["p"]
    if check:
        _check(result, example_inputs, reference, rtol, atol)
    return result


def _export(module, target, example_inputs, path, input_names, output_names,
            prefix, opset, dropout):
    """Writes the file and its sidecar; returns the ExportedModel and the
    module's outputs on the example inputs (what the file must give)."""
    import torch
    import onnx

    batchnorm = _has_batchnorm(module)
    was_training = module.training
    saved = copy.deepcopy(module.state_dict())
    mode = torch.onnx.TrainingMode.TRAINING if batchnorm else torch.onnx.TrainingMode.EVAL
    target.train(batchnorm)
    with torch.no_grad():
        reference = target(*example_inputs)
    module.load_state_dict(saved)  # BatchNorm's running statistics
    ref_outputs = _outputs(reference)
    if output_names is None:
        output_names = (["logits"] if len(ref_outputs) == 1
                        else [f"output{i}" for i in range(len(ref_outputs))])
    output_names = list(output_names)
    kwargs = dict(export_params=True, do_constant_folding=False,
                  keep_initializers_as_inputs=False, opset_version=opset,
                  input_names=input_names, output_names=output_names,
                  dynamic_axes={n: {0: "batch"} for n in input_names + output_names},
                  training=mode)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(target, example_inputs, str(path), **kwargs)
    module.load_state_dict(saved)
    module.train(was_training)

    # What ONNX cannot say.
    groups: Dict[int, List[str]] = {}
    for key, t in module.state_dict(keep_vars=True).items():
        groups.setdefault(id(t), []).append(key)
    key_group = {k: g for g in groups.values() for k in g}
    # Every key of a tied parameter (state_dict keeps them all).
    trainable = {k for k, t in module.state_dict(keep_vars=True).items()
                 if isinstance(t, torch.nn.Parameter) and t.requires_grad}
    model = onnx.load(str(path), load_external_data=False)
    float_types = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                   onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    # The initializers, and the names the exporter gave merged equal ones
    # (`b = Identity(a)`): smpc makes each its own parameter again.
    inits = {i.name: i for i in model.graph.initializer}
    named = [(name, init) for name, init in inits.items()]
    named += [(n.output[0], inits[n.input[0]]) for n in model.graph.node
              if n.op_type == "Identity" and n.input and n.input[0] in inits]
    parameters, frozen = {}, []
    for name, init in named:
        key = name[len(prefix):] if name.startswith(prefix) else None
        if key in key_group:
            parameters[name] = key_group[key]
        # smpc trains every float initializer it maps to a state_dict key
        # (one-element ones too: nn.PReLU's slope) and those of more than
        # one element it does not; the rest are constants.
        is_param = init.data_type in float_types and (
            int(np.prod(init.dims)) > 1 or key in key_group)
        if is_param and not (key in key_group and
                             any(k in trainable for k in key_group[key])):
            frozen.append(name)
    padding_rows = []
    for mname, m in module.named_modules():
        if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None \
                and m.weight.requires_grad:
            key = (mname + "." if mname else "") + "weight"
            init = next((i for i, ks in parameters.items() if key in ks), None)
            if init is not None:
                padding_rows.append({"initializer": init,
                                     "rows": [m.padding_idx % m.num_embeddings]})
    sidecar = sidecar_path(path)
    sidecar.write_text(json.dumps({
        "format": SIDECAR_FORMAT, "torch": torch.__version__,
        "inputs": input_names, "outputs": output_names,
        "frozen": frozen, "padding_rows": padding_rows, "dropout": dropout,
        "parameters": parameters}, indent=1) + "\n")
    result = ExportedModel(path=path, sidecar=sidecar, input_names=input_names,
                           output_names=output_names, parameters=parameters,
                           frozen=frozen, padding_rows=padding_rows,
                           dropout=dropout)
    return result, ref_outputs


def _check(result, example_inputs, ref_outputs, rtol, atol):
    """Runs the file on the example inputs against the module's outputs."""
    path = result.path
    feeds = {n: _to_numpy(t) for n, t in zip(result.input_names, example_inputs)}
    got, result.checked_with = run_onnx(path, feeds)
    for name, want in zip(result.output_names, ref_outputs):
        want = _to_numpy(want)
        have = got.get(name)
        if have is None or have.shape != want.shape:
            raise _tools.SmpError(
                f"{path}: the export's output '{name}' is "
                f"{None if have is None else have.shape}, the module's "
                f"{want.shape}", tool="smp.export")
        diff = float(np.max(np.abs(have.astype(np.float64) - want)))
        bound = atol + rtol * float(np.max(np.abs(want)))
        result.max_abs_diff = max(result.max_abs_diff, diff)
        if not diff <= bound:
            raise _tools.SmpError(
                f"{path}: output '{name}' of the export differs from the "
                f"module's by {diff:.3g} (allowed {bound:.3g}; run by "
                f"{result.checked_with}): the exporter changed the "
                f"model", tool="smp.export")
