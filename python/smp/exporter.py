"""smp.export: a torch.nn.Module to the ONNX file smp trains as PyTorch does.

The TorchScript exporter (torch.onnx.export with dynamo=False where torch has
both; torch 1.13's only one) is used: it keeps every parameter as its own
initializer named by its state_dict key, stores a tied weight once (the
module identity of the parameter), and with do_constant_folding=False folds
no parameter into a constant. The batch dim (dim 0 of every input and
output) is symbolic ("batch"). A module with BatchNorm is exported in
training mode (TrainingMode.TRAINING: batch statistics, kept trainable);
others in eval mode, unless they have functional dropout (below). Every
nn.Dropout module with p > 0 is written, in either mode, as Dropout(x,
ratio=p, training_mode=true) (opset 12's form, a node named after the
module: "/drop/Dropout"), the random dropout smpc compile --train draws
masks for from --seed (--no-dropout makes it the identity).

Functional dropout, which no module shows (F.dropout(x, p, self.training):
Llama's attention_dropout; F.scaled_dot_product_attention(dropout_p=p):
Hugging Face's default sdpa attention, GPT-2's p being attn_dropout.p), is
found by its randomness: two train() forwards of the example inputs that
differ with the dropout modules as the identity (their p kept). It is
written by a training-mode export (also without BatchNorm; the modules keep
their p while it runs, as a forward may read it): F.dropout with training
and p > 0 as Dropout(x, ratio=p, training_mode=true), sdpa's dropout_p > 0
as Dropout(x, ratio=p) (no training_mode: smpc --train trains it as dropout,
with a warning). The file holds it when (1) with torch.nn.functional.dropout
and scaled_dot_product_attention wrapped to drop nothing, the train()
forward is no longer random (no other random op) and, without BatchNorm,
equals the eval() forward (train() changes nothing else), and (2) the
file's random Dropout nodes are, in order, the dropout calls of one train()
forward: each module's node and each functional call (F.dropout's tagged,
sdpa's untagged) with its p (opset >= 12). Then the functional dropout is
listed under "dropout_nodes" ({"module", "p", "node", "call"}: "module" the
nn.Dropout module whose p the call read, GPT-2's attn_dropout, which its
forward does not call, else "functional"). Otherwise the module is exported
as without functional dropout (eval mode unless BatchNorm, the modules'
p 0) and the dropout is listed under "dropout" (below); with BatchNorm that
is an error.

What ONNX cannot say goes in MODEL.smp-export.json, which smpc compile
reads (tools/smpc/ExportSidecar.h): tensors that get no gradient
(requires_grad=False parameters, buffers, constants the trace stored as
initializers), nn.Embedding padding_idx rows, the random Dropout nodes'
sources ("dropout_nodes", for reference) and the dropout the file does not
hold ("dropout"; smpc --train refuses the model unless --no-dropout accepts
training without it): the other dropout modules (nn.Dropout1d/2d/3d, whose
masks are per channel, nn.AlphaDropout, nn.FeatureAlphaDropout, an
nn.Dropout subclass with its own forward; every dropout module below opset
12), which are the identity in the file; an nn.Dropout the traced forward
does not call (unless a held functional call read its p); and functional
dropout or another random op the file does not hold: a Hugging Face
model's config dropout probabilities > 0, else {"module": "forward",
"p": null}. Without functional dropout the dropout modules' p is 0 while
exporting (restored after). The export is checked by running the file
(onnxruntime when installed, else smpc + smprun) against the module's
dropout-free forward (eval(), or train() with BatchNorm, the modules as
the identity and the functional dropout off) on the example inputs, with
every Dropout node the identity (a copy: ratio and training_mode dropped).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import tempfile
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import _tools
from ._export_dropout import (_DROPOUT_TRAINING_OPSET, _F_DROPOUT,
                              _config_dropout, _config_layer_drops,
                              _dropout_as_nodes,
                              _functional_dropout, _has_batchnorm,
                              _inference_copy, _outputs, _probe_functional,
                              _random_dropouts, _random_in_train)

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
    # Dropout the file does not hold: {"module", "p"} (p None: unknown).
    dropout: List[dict] = field(default_factory=list)
    # The file's random Dropout nodes, one entry a node: {"module", "p",
    # "node"} (node: the ONNX node's name) for an nn.Dropout module's, with
    # "call" (the torch.nn.functional function) for functional dropout's.
    dropout_nodes: List[dict] = field(default_factory=list)
    checked_with: str = ""
    max_abs_diff: float = 0.0

    def __fspath__(self) -> str:
        return str(self.path)


def sidecar_path(model_path) -> Path:
    p = Path(model_path)
    stem = p.name[:-5] if p.name.endswith(".onnx") else p.name
    return p.with_name(stem + ".smp-export.json")



def _raised(e) -> str:
    """An exception as its type and first line (onnxruntime's and torch's
    run to many lines)."""
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


# What smp.export's errors say when the TorchScript exporter cannot serve.
_USE_DYNAMO = ("export it with torch.onnx.export(module, args, path) (the "
               "dynamo exporter), which smpc reads as users export it "
               "(docs/bring-your-own-model.md)")


def _hf_input(module) -> str:
    """A Hugging Face model's one input: its main_input_name (input_ids for
    text, pixel_values for images, input_values for raw audio)."""
    return getattr(module, "main_input_name", None) or "input_ids"


def _hf_input_names(module, count, names=None) -> List[str]:
    """The keyword arguments of a Hugging Face model's forward that the
    example inputs are: `names` if given, else its main input alone, or
    input_ids and decoder_input_ids for an encoder-decoder (T5) given two."""
    if names is None:
        main = _hf_input(module)
        if count == 1:
            names = [main]
        elif count == 2 and main == "input_ids" and getattr(
                module.config, "is_encoder_decoder", False):
            names = ["input_ids", "decoder_input_ids"]
        else:
            raise _tools.SmpError(
                f"smp.export: {count} example inputs for a Hugging Face "
                f"model ({type(module).__name__}), which smp.export feeds by "
                f"keyword: name them, input_names=[...] (its forward's "
                f"arguments, e.g. ['input_ids', 'attention_mask'])")
    params = [n for n, p in inspect.signature(module.forward).parameters.items()
              if p.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                inspect.Parameter.VAR_KEYWORD)]
    if len(names) != count or any(n not in params for n in names):
        raise _tools.SmpError(
            f"smp.export: input_names {list(names)} for {count} example "
            f"input(s) of {type(module).__name__}, whose forward takes "
            f"{params}")
    return list(names)


def _wrap_hf(module, names):
    """The model fed `names` by keyword (an all-ones attention mask beside
    input_ids when none is given: the same math as none), its first output
    returned."""
    import torch

    class HFLogits(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *xs):
            kw = dict(zip(names, xs))
            params = inspect.signature(self.m.forward).parameters
            if "input_ids" in kw and "attention_mask" in params and \
                    "attention_mask" not in kw:
                kw["attention_mask"] = torch.ones_like(kw["input_ids"])
            if "use_cache" in params:
                kw["use_cache"] = False
            return self.m(return_dict=False, **kw)[0]
    return HFLogits(module)


def _try_hf_forward(module, target, example_inputs, names):
    """Runs the model once (eval(), no gradient) as smp.export will feed
    it: a forward that fails (T5 given no decoder_input_ids) is an SmpError
    saying what was fed and how to feed more."""
    import torch

    was = module.training
    try:
        module.eval()
        with torch.no_grad():
            target(*example_inputs)
    except Exception as e:
        raise _tools.SmpError(
            f"smp.export: {type(module).__name__}'s forward fails on the "
            f"example inputs fed as {list(names)} ({_raised(e)}): pass the "
            f"inputs it needs and name them, "
            f"input_names=[...] (T5: input_ids and decoder_input_ids)") from e
    finally:
        module.train(was)


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
        # The file as written: onnxruntime's graph optimisations fold a
        # BatchNormalization into the Conv before it with its running
        # statistics even in training mode (onnxruntime 1.32: HF's ResNet
        # 0.1 off PyTorch's train() forward, which the file computes).
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(path), options,
                                    providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(names, inputs))), "onnxruntime"
    from .compiler import compile as smp_compile
    from .runner import run
    batch = next(iter(inputs.values())).shape[0]
    with tempfile.TemporaryDirectory(prefix="smp-check-") as d:
        art = smp_compile(path, output=Path(d) / "check.smpx",
                          batch_size=batch)
        return run(art, inputs), "smprun"


def _refuse_16_bit(module):
    """smp.export's TorchScript exporter does not write 16-bit modules
    right (torch 2.15: a bf16 Llama's or GPT-2's scalar casts become
    complex128, an fp16 GPT-2's LayerNormalization mixes float and float16;
    an fp16 Llama exports, but differs from the module by fp16's rounding,
    over the check's rtol). torch.onnx.export's dynamo exporter writes
    them, and smpc trains their parameters as stored."""
    import torch

    params = [(n, p.dtype) for n, p in module.named_parameters()
              if p.dtype in (torch.bfloat16, torch.float16)]
    if not params:
        return
    name, dtype = params[0]
    total = sum(1 for _ in module.parameters())
    raise _tools.SmpError(
        "smp.export: %d of the module's %d parameters are %s ('%s'%s): "
        "smp.export's TorchScript exporter does not write 16-bit modules "
        "right (their casts, norms and rounding); export it with "
        "torch.onnx.export(module, args, path) (dynamo), whose file smpc "
        "trains as stored, in %s as PyTorch does "
        "(docs/bring-your-own-model.md), or export module.float() for fp32 "
        "parameters (mixed precision: compile with precision='bf16' or "
        "'fp16')" % (len(params), total, str(dtype).replace("torch.", ""),
                      name, ", ..." if len(params) > 1 else "",
                      str(dtype).replace("torch.", "")))


def export(module, example_inputs, path, *, input_names: Optional[Sequence[str]] = None,
           output_names: Optional[Sequence[str]] = None, check: bool = True,
           rtol: float = 1e-4, atol: float = 1e-5, opset: int = 17) -> ExportedModel:
    """Exports `module` to `path` for smp (see the module docstring) and
    returns an ExportedModel (its .path goes to smp.compile). Hugging Face
    models are fed by keyword: their main input alone (input_ids,
    pixel_values, input_values: `main_input_name`; T5's two: input_ids and
    decoder_input_ids) or `input_names`, and give their first output. Raises SmpError when the
    file does not compute what the module computes."""
    import torch

    _refuse_16_bit(module)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    hf = _is_hf(module)
    if hf:
        input_names = _hf_input_names(module, len(example_inputs), input_names)
    elif input_names is None:
        params = [p for p in inspect.signature(module.forward).parameters]
        input_names = params[:len(example_inputs)]
    target = _wrap_hf(module, input_names) if hf else module
    if hf:
        _try_hf_forward(module, target, example_inputs, input_names)
    # Dropout: every nn.Dropout a training-mode Dropout node, the identity
    # in PyTorch while exporting and checking (the reference is the module's
    # dropout-free forward); what the file cannot hold listed in "dropout".
    written: List[tuple] = []
    args = (module, target, example_inputs, path, list(input_names),
            output_names, "m." if hf else "", opset)
    with _dropout_as_nodes(module, opset, written) as patch:
        batchnorm = _has_batchnorm(module)
        result = reference = None
        # Randomness left with the modules as the identity (their p kept: a
        # forward may read it, as GPT-2's sdpa dropout_p): functional
        # dropout (Llama's attention_dropout, F.dropout(x, p,
        # self.training), sdpa's dropout_p). A training-mode export writes
        # it; kept when the file's random Dropout nodes are the forward's
        # dropout calls, one for one.
        functional = []
        # LayerDrop and stochastic depth (a Hugging Face config's
        # encoder_layerdrop, drop_path_rate > 0): random, never held.
        layer_drops = _config_layer_drops(module) if hf else []
        if layer_drops or _random_in_train(module, target, example_inputs):
            probe = None
            if opset >= _DROPOUT_TRAINING_OPSET and not layer_drops:
                probe = _probe_functional(module, target, example_inputs,
                                          patch, batchnorm)
            if probe is not None:
                result, reference = _export(*args, patch, written, [], probe)
            if result is None:
                if batchnorm:
                    raise _tools.SmpError(
                        f"{path}: the module's train() forward is random "
                        f"apart from its dropout modules and a model with "
                        f"BatchNorm is exported in training mode, which "
                        f"would write random nodes smp.export cannot match "
                        f"to the forward's torch.nn.functional.dropout and "
                        f"scaled_dot_product_attention calls (another random "
                        f"op, or a dropout call the file does not hold as "
                        f"one Dropout node): use nn.Dropout modules or "
                        f"functional dropout (smp.export writes them as "
                        f"Dropout nodes smpc --train draws masks for) or "
                        f"p = 0", tool="smp.export")
                functional = (_config_dropout(module) if hf else []) or [
                    {"module": "forward", "p": None}]
                written.clear()
        if result is None:
            patch.zero_p()
            result, reference = _export(*args, patch, written, functional, None)
    if check:
        _check(result, example_inputs, reference, rtol, atol)
    return result


def _export(module, target, example_inputs, path, input_names, output_names,
            prefix, opset, patch, written, functional, probe):
    """Writes the file and its sidecar; returns the ExportedModel and the
    module's outputs on the example inputs (what the file must give).
    `patch`: the dropout modules (_dropout_as_nodes; their nodes fill
    `written`); `functional`: the dropout no module shows, listed; `probe`:
    None, or the train() forward's dropout calls (_probe_functional) for a
    training-mode export that writes the functional dropout, whose file is
    kept only when its random Dropout nodes are those calls ((None, None)
    otherwise, no sidecar written)."""
    import torch
    import onnx

    batchnorm = _has_batchnorm(module)
    was_training = module.training
    saved = copy.deepcopy(module.state_dict())
    train = batchnorm or probe is not None
    mode = torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL
    with torch.random.fork_rng(devices=[]):
        target.train(batchnorm)
        # The reference: the dropout-free forward (eval(), BatchNorm's
        # train()), the functional dropout off.
        with torch.no_grad(), (_functional_dropout(patch, off=True)
                               if probe is not None else contextlib.nullcontext()):
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
        target.train(train)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(target, example_inputs, str(path), **kwargs)
        except Exception as e:
            # The exporter's frames hold pybind wrappers of graphs C++ has
            # freed; kept alive by this exception (a caller's traceback), a
            # later export's graph allocated at the same address fails to
            # cast (Debian's torch 1.13: "Unable to cast from non-held to
            # held instance"). Their locals dropped.
            traceback.clear_frames(e.__traceback__)
            if probe is None or batchnorm:
                raise _tools.SmpError(
                    f"{path}: the TorchScript exporter cannot export "
                    f"{type(module).__name__} ({_raised(e)}); {_USE_DYNAMO}",
                    tool="smp.export") from e
            # The training-mode export of the functional dropout failed
            # where the eval() export may not: that one, listing it.
            warnings.warn(f"smp.export: {path}: the training-mode export "
                          f"that would hold the functional dropout failed "
                          f"({type(e).__name__}: {e}); exporting in eval "
                          f"mode, the dropout listed")
            return None, None
        finally:
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
    if train and _restore_buffers(model, saved, prefix):
        onnx.save(model, str(path))
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
    dropouts = patch.modules
    if probe is None:
        # The Dropout nodes, matched to the modules that wrote them by order
        # (the exporter converts the traced calls in order, and node names
        # follow its scopes: "/drop/Dropout", "/drop_1/Dropout" for a second
        # call); an nn.Dropout the trace never called wrote none.
        nodes = [(n, r) for n, r, tagged in _random_dropouts(model) if tagged]
        if len(nodes) == len(written) and all(
                np.float32(p) == np.float32(r) for (_, p), (_, r) in zip(written, nodes)):
            names = [n.name for n, _ in nodes]
        else:  # not expected: the file and the calls disagree
            names = [None] * len(written)
        dropout_nodes = [{"module": m, "p": p, "node": n}
                         for (m, p), n in zip(written, names)]
        held = {m for m, _ in written}
    else:
        # The file's random Dropout nodes must be the train() forward's
        # dropout calls in call order: the modules' training-mode nodes,
        # F.dropout's (training_mode true) and sdpa's (a ratio, no
        # training_mode), each with its p.
        events, read = probe
        calls = [e for e in events if e[0] == "call" or e[3]]
        nodes = _random_dropouts(model)
        if len(nodes) != len(calls) or \
                [(e[1], e[2]) for e in calls if e[0] == "module"] != list(written) or \
                not all(np.float32(e[2]) == np.float32(r) and
                        tagged == (e[0] == "module" or e[1] == _F_DROPOUT)
                        for e, (_, r, tagged) in zip(calls, nodes)):
            if not batchnorm:  # which raises instead
                warnings.warn(f"smp.export: {path}: the training-mode "
                              f"export's {len(nodes)} random Dropout nodes "
                              f"are not the train() forward's {len(calls)} "
                              f"dropout calls; exporting in eval mode, the "
                              f"functional dropout listed")
            return None, None
        dropout_nodes = []
        for e, (n, _, _) in zip(calls, nodes):
            if e[0] == "module":
                dropout_nodes.append({"module": e[1], "p": e[2], "node": n.name})
            else:  # a module whose p the call read, else "functional"
                dropout_nodes.append({"module": e[3] or "functional", "p": e[2],
                                      "node": n.name, "call": e[1]})
        # A module the forward does not call whose p a held call read (GPT-2's
        # attn_dropout, whose p is sdpa's dropout_p) is held by that call.
        called = {e[1] for e in events if e[0] == "module"}
        held = {m for m, _ in written} | {m for m in read if m not in called}
    dropout = [d for d, _ in dropouts if d["module"] not in held] + functional
    sidecar = sidecar_path(path)
    sidecar.write_text(json.dumps({
        "format": SIDECAR_FORMAT, "torch": torch.__version__,
        "inputs": input_names, "outputs": output_names,
        "frozen": frozen, "padding_rows": padding_rows, "dropout": dropout,
        "dropout_nodes": dropout_nodes, "parameters": parameters},
        indent=1) + "\n")
    result = ExportedModel(path=path, sidecar=sidecar, input_names=input_names,
                           output_names=output_names, parameters=parameters,
                           frozen=frozen, padding_rows=padding_rows,
                           dropout=dropout, dropout_nodes=dropout_nodes)
    return result, ref_outputs


def _restore_buffers(model, saved, prefix) -> bool:
    """A training-mode export traces the module by running it once, so the
    file's BatchNorm running statistics (and num_batches_tracked) come out
    one update past the module's (torch 1.13 to 2.15's TorchScript
    exporter): training the file would start from statistics the module
    never had, and its model.eval() numbers would differ (a ResNet's eval
    loss by 2e-4 after 5 steps). Writes the module's values, `saved` (its
    state_dict before the export), into those initializers; returns whether
    any changed."""
    import onnx
    from onnx import numpy_helper
    changed = False
    for i, init in enumerate(model.graph.initializer):
        key = init.name[len(prefix):] if init.name.startswith(prefix) else None
        if key not in saved or not key.endswith(
                ("running_mean", "running_var", "num_batches_tracked")):
            continue
        want = saved[key].detach().cpu().numpy()
        if init.data_location == onnx.TensorProto.EXTERNAL:
            raise _tools.SmpError(f"smp.export: {init.name}: a running "
                                  f"statistic stored outside the file; "
                                  f"export a model under 2 GB or report this")
        have = numpy_helper.to_array(init)
        if have.shape != want.shape or not np.array_equal(have, want.astype(have.dtype)):
            model.graph.initializer[i].CopyFrom(
                numpy_helper.from_array(want.astype(have.dtype), init.name))
            changed = True
    return changed


def _check(result, example_inputs, ref_outputs, rtol, atol):
    """Runs the file on the example inputs against the module's outputs,
    its Dropout nodes in inference mode (a temporary copy): the reference
    is the module's dropout-free forward, onnxruntime would draw masks, and
    smpc refuses a forward-only compile of training-mode Dropout."""
    path = result.path
    feeds = {n: _to_numpy(t) for n, t in zip(result.input_names, example_inputs)}
    with _inference_copy(path) as run_path:
        try:
            got, result.checked_with = run_onnx(run_path, feeds)
        except _tools.SmpError:
            raise
        except Exception as e:  # onnxruntime's own exceptions
            raise _tools.SmpError(
                f"{path}: the export does not run in onnxruntime "
                f"({_raised(e)}): the TorchScript exporter wrote a file that "
                f"does not compute the module; {_USE_DYNAMO}",
                tool="smp.export") from e
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
