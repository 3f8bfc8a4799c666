"""smp.export's dropout: nn.Dropout modules written as training-mode ONNX
Dropout nodes, functional dropout (F.dropout, sdpa's dropout_p) held by a
training-mode export when the file's nodes match the forward's calls, and
the file's check run with every Dropout the identity. exporter.py's
docstring and docs/python.md say what is held and what is listed.
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
from pathlib import Path
from typing import List

import numpy as np


def _has_batchnorm(module) -> bool:
    import torch
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
               for m in module.modules())


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _random_in_train(module, target, example_inputs) -> bool:
    """Whether two train() forwards of the example inputs differ (a random
    op: dropout). The module's state, mode and the RNG are restored."""
    (a, b), _ = _forwards(module, target, example_inputs, [True, True])
    return _differ(a, b)


def _config_dropout(module) -> List[dict]:
    """A Hugging Face model's dropout probabilities > 0 from its config
    (Llama's `attention_dropout`), which its forward applies through
    torch.nn.functional.dropout: no module shows them (an eval() export
    drops them)."""
    found = []
    for key, value in sorted(module.config.to_dict().items()):
        if (any(k in key for k in ("dropout", "pdrop") + _LAYER_DROPS)) and \
                isinstance(value, (int, float)) and not isinstance(value, bool) \
                and value > 0:
            found.append({"module": f"config.{key}", "p": float(value)})
    return found


# Config keys of random ops that skip whole layers or residual branches in
# train() mode: LayerDrop (M2M100's and NLLB's encoder_layerdrop and
# decoder_layerdrop, 0.05 by default: one draw per layer and forward),
# stochastic depth (drop_path_rate, drop_connect_rate). No ONNX node holds
# them, and one draw per layer may not differ between the two forwards
# _random_in_train compares.
_LAYER_DROPS = ("layerdrop", "drop_path", "drop_connect")


def _config_layer_drops(module) -> List[dict]:
    """The entries of _config_dropout that skip layers (_LAYER_DROPS)."""
    return [d for d in _config_dropout(module)
            if any(k in d["module"] for k in _LAYER_DROPS)]


# The opset from which ONNX Dropout says training_mode (an input).
_DROPOUT_TRAINING_OPSET = 12
_dropout_node = None


def _dropout_node_fn():
    """The torch.autograd.Function an nn.Dropout module calls while
    smp.export exports it: the identity in PyTorch (the reference is the
    dropout-free forward), which the TorchScript exporter writes as
    Dropout(x, ratio=p, training_mode=true); each node it writes appends
    (module name, p) to the list it was given, in the file's order."""
    global _dropout_node
    if _dropout_node is None:
        import torch

        class DropoutNode(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, p, name, written):
                return x.clone()

            @staticmethod
            def backward(ctx, grad):
                return grad, None, None, None

            @staticmethod
            def symbolic(g, x, p, name, written):
                written.append((name, p))
                ratio = g.op("Constant", value_t=torch.tensor(p, dtype=torch.float32))
                training = g.op("Constant", value_t=torch.tensor(True))
                return g.op("Dropout", x, ratio, training, outputs=1)
        _dropout_node = DropoutNode
    return _dropout_node


def _writes_dropout_node(m) -> bool:
    """Whether a dropout module is ONNX Dropout: nn.Dropout's element-wise
    mask (not nn.Dropout1d/2d/3d's per-channel one nor the alpha dropouts)
    and forward."""
    import torch
    return isinstance(m, torch.nn.Dropout) and \
        type(m).forward is torch.nn.Dropout.forward


class _DropoutPatch:
    """The dropout modules while smp.export runs (see _dropout_as_nodes):
    `modules` ({"module", "p"}, module order, and whether each writes a
    Dropout node); `events`, when a list, records every call of a patched
    module ("module", name, p, writes a node) and, inside
    _functional_dropout, every functional dropout call ("call", function,
    p), in call order."""

    def __init__(self):
        self.patched = []  # (module, own forward, p, {"module", "p"}, node)
        self.events = None

    @property
    def modules(self):
        return [(d, node) for _, _, _, d, node in self.patched]

    def zero_p(self):
        """Sets every patched module's p to 0: a forward that reads
        module.p (sdpa's dropout_p) sees no dropout (the eval-mode and
        BatchNorm exports without functional dropout)."""
        for m, _, _, _, _ in self.patched:
            m.p = 0.0

    @contextlib.contextmanager
    def tagged_p(self):
        """Each patched module's p a value of its own (p (1 - k 2^-30)),
        restored after: a functional dropout call that receives it tells
        which module's p it read (Hugging Face GPT-2 passes
        attn_dropout.p to sdpa). Yields {value: module name}."""
        saved = [m.p for m, _, _, _, _ in self.patched]
        tags = {}
        try:
            for k, (m, _, p, d, _) in enumerate(self.patched):
                m.p = p * (1.0 - (k + 1) * 2.0 ** -30)
                tags[m.p] = d["module"]
            yield tags
        finally:
            for (m, _, _, _, _), p in zip(self.patched, saved):
                m.p = p


@contextlib.contextmanager
def _dropout_as_nodes(module, opset, written):
    """While exporting (and probing the train() forward for randomness),
    every dropout module with p > 0 is the identity in PyTorch (the
    reference is the dropout-free forward); an nn.Dropout writes a
    training-mode Dropout node (from opset 12) and records (name, p) in
    `written`, in the file's order. The modules keep their p (a forward
    that reads module.p, as GPT-2's sdpa dropout_p, sees it) unless
    zero_p() is called. Yields a _DropoutPatch; forward and p are restored
    after, also on error."""
    import torch
    fn = _dropout_node_fn()
    patch = _DropoutPatch()

    def marker(name, p, node):
        def forward(x):
            if patch.events is not None:
                patch.events.append(("module", name, p, node))
            return fn.apply(x, p, name, written) if node else x
        return forward
    try:
        for name, m in module.named_modules():
            if not (isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0):
                continue
            node = _writes_dropout_node(m) and opset >= _DROPOUT_TRAINING_OPSET
            own = m.__dict__.get("forward")
            patch.patched.append((m, own, m.p, {"module": name, "p": float(m.p)}, node))
            m.forward = marker(name, float(m.p), node)
        yield patch
    finally:
        for m, own, p, _, _ in patch.patched:
            m.p = p
            if own is None:
                del m.forward
            else:
                m.forward = own


_F_DROPOUT = "torch.nn.functional.dropout"
_F_SDPA = "torch.nn.functional.scaled_dot_product_attention"


@contextlib.contextmanager
def _functional_dropout(patch, off):
    """While inside, torch.nn.functional.dropout and (torch 2)
    scaled_dot_product_attention are wrapped: each call that drops
    (F.dropout with training and p > 0, sdpa with dropout_p > 0) appends
    ("call", function, p) to patch.events when that is a list; with `off`
    it drops nothing (F.dropout with training=False, sdpa with
    dropout_p=0). They call the originals, restored after."""
    import torch
    F = torch.nn.functional
    real_dropout = F.dropout
    real_sdpa = getattr(F, "scaled_dot_product_attention", None)

    def record(what, p):
        if patch.events is not None:
            patch.events.append(("call", what, p))

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and p > 0:
            record(_F_DROPOUT, p)
            if off:
                training = False
        return real_dropout(input, p, training, inplace)

    def sdpa(*args, **kwargs):
        args = list(args)
        p = args[4] if len(args) > 4 else kwargs.get("dropout_p", 0.0)
        if p > 0:
            record(_F_SDPA, p)
            if off:
                if len(args) > 4:
                    args[4] = 0.0
                else:
                    kwargs["dropout_p"] = 0.0
        return real_sdpa(*args, **kwargs)
    F.dropout = dropout
    if real_sdpa is not None:
        F.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.dropout = real_dropout
        if real_sdpa is not None:
            F.scaled_dot_product_attention = real_sdpa


def _forwards(module, target, example_inputs, modes, patch=None, off=False,
              record=False):
    """The outputs of one forward per entry of `modes` (True: train(),
    False: eval()) on the example inputs, without gradients, the RNG forked
    and the module's state (BatchNorm's statistics) and mode restored.
    With `patch`: the functional dropout wrapped (_functional_dropout,
    `off`), and with `record` the first forward's dropout calls recorded.
    Returns (outputs, the recorded calls or None)."""
    import torch
    saved = copy.deepcopy(module.state_dict())
    was_training = module.training
    outs, events = [], None
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]), \
                (_functional_dropout(patch, off) if patch is not None
                 else contextlib.nullcontext()):
            for k, mode in enumerate(modes):
                target.train(mode)
                if record and k == 0:
                    patch.events = []
                try:
                    outs.append(_outputs(target(*example_inputs)))
                finally:
                    if record and k == 0:
                        events, patch.events = patch.events, None
    finally:
        module.load_state_dict(saved)
        module.train(was_training)
    return outs, events


def _differ(a, b) -> bool:
    import torch
    return len(a) != len(b) or any(
        torch.is_tensor(x) and x.is_floating_point() and
        not torch.allclose(x, y, rtol=1e-4, atol=1e-6) for x, y in zip(a, b))


def _probe_functional(module, target, example_inputs, patch, batchnorm):
    """The functional dropout of a train() forward that a training-mode
    export would write: the forward's dropout calls in call order (the
    patched modules' and the functional ones, with each module's p tagged
    to tell which module's p a call read), or None when that would not be
    all of it: the train() forward is still random with the functional
    dropout off (another random op), or (without BatchNorm, whose
    reference is the train() forward) it differs from the eval() forward
    with the dropout off (train() changes more than dropout). Returns
    (events, {module name: p} of the modules whose p a call read): events
    ("module", name, p, writes a node) and ("call", function, p, the name
    of the module whose p it read or None), p the real one."""
    with patch.tagged_p() as tags:
        modes = [True, True] if batchnorm else [True, True, False]
        outs, events = _forwards(module, target, example_inputs, modes,
                                 patch=patch, off=True, record=True)
    if _differ(outs[0], outs[1]) or (not batchnorm and _differ(outs[0], outs[2])):
        return None
    real = {d["module"]: d["p"] for d, _ in patch.modules}
    read = {}
    for k, e in enumerate(events):
        if e[0] == "call" and e[2] in tags:
            name = tags[e[2]]
            read[name] = real[name]
            events[k] = ("call", e[1], real[name], name)
        elif e[0] == "call":
            events[k] = ("call", e[1], float(e[2]), None)
    if not any(e[0] == "call" for e in events):
        return None
    return events, read


def _constant(model, name):
    """The value of a Constant node's output or an initializer, else None."""
    from onnx import numpy_helper
    for n in model.graph.node:
        if n.op_type == "Constant" and name in n.output:
            for a in n.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
            return None
    for i in model.graph.initializer:
        if i.name == name:
            return numpy_helper.to_array(i)
    return None


def _random_dropouts(model) -> List:
    """Every random Dropout node of the file in file order, as (node,
    ratio, tagged): tagged, training_mode true and ratio > 0 (ratio absent:
    0.5); untagged, no training_mode but a ratio > 0 (what the TorchScript
    exporter writes for sdpa's dropout_p, which smpc --train trains as
    dropout)."""
    found = []
    for n in model.graph.node:
        if n.op_type != "Dropout":
            continue
        tagged = len(n.input) > 2 and bool(n.input[2])
        if tagged:
            t = _constant(model, n.input[2])
            if t is None or not bool(np.asarray(t).reshape(-1)[0]):
                continue
            r = _constant(model, n.input[1]) if n.input[1] else 0.5
        elif len(n.input) > 1 and n.input[1]:
            r = _constant(model, n.input[1])
        else:
            continue
        if r is not None and float(np.asarray(r).reshape(-1)[0]) > 0:
            found.append((n, float(np.asarray(r).reshape(-1)[0]), tagged))
    return found


@contextlib.contextmanager
def _inference_copy(path):
    """`path` with every Dropout node the identity, Dropout(x) (ratio and
    training_mode dropped, and an unused mask output: the tagged ones
    would be random, an untagged one with a ratio is inference for ONNX
    but dropout for smpc --train), as a temporary file (beside it when it
    keeps tensors in external files, whose paths are relative), or `path`
    itself when it has none."""
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    changed = False
    used = {i for n in model.graph.node for i in n.input}
    used |= {o.name for o in model.graph.output}
    for n in model.graph.node:
        if n.op_type == "Dropout" and len(n.input) > 1:
            del n.input[1:]
            changed = True
        if n.op_type == "Dropout" and len(n.output) > 1 and \
                not any(o in used for o in n.output[1:]):
            del n.output[1:]
            changed = True
    if not changed:
        yield path
        return
    used = {i for n in model.graph.node for i in n.input}
    used |= {o.name for o in model.graph.output}
    keep = [n for n in model.graph.node
            if n.op_type != "Constant" or any(o in used for o in n.output)]
    del model.graph.node[:]
    model.graph.node.extend(keep)
    external = any(i.data_location == onnx.TensorProto.EXTERNAL
                   for i in model.graph.initializer)
    if external:  # beside it: the external files' paths are relative
        fd, name = tempfile.mkstemp(prefix="." + path.stem + ".smp-check-",
                                    suffix=".onnx", dir=str(path.parent))
        os.close(fd)
        copy_path = Path(name)
        try:
            onnx.save(model, str(copy_path))
            yield copy_path
        finally:
            copy_path.unlink()
        return
    with tempfile.TemporaryDirectory(prefix="smp-check-") as d:
        copy_path = Path(d) / path.name
        onnx.save(model, str(copy_path))
        yield copy_path
