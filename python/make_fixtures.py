#!/usr/bin/env python3
"""Export small, deterministic ONNX test fixtures from real PyTorch modules.

For every fixture <name> and opset NN this writes, under --out (default
test/fixtures relative to the repo root):

    <name>_opNN.onnx                 the model (weights embedded, < 1 MB)
    <name>_opNN/<input>.npy          each input as fed to PyTorch
    <name>_opNN/<output>.npy         PyTorch's output (float32)

and finally README.md describing all fixtures (keeping its last section, the
training fixtures, which make_training_refs.py writes).  Every export is checked with
onnx.checker and with onnxruntime against PyTorch (relative error must be
<= 1e-4); models with dynamic axes are additionally checked at a second shape.

Regenerate with:  python3 python/make_fixtures.py
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import smp_models as M  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "test" / "fixtures"
OPSETS = (14, 17)
REL_TOL = 1e-4
MAX_BYTES = 1 << 20
OUTPUT = "logits"
BATCH_SEQ = {0: "batch", 1: "seq"}
# README.md ends with the training-fixture section, which python/make_training_refs.py writes from this
# line on; write_readme keeps it.
TRAINING_MARKER = "<!-- training fixtures: written by python/make_training_refs.py, kept by make_fixtures.py -->"


# --------------------------------------------------------------------------- #
# Inputs (seeded generators)
# --------------------------------------------------------------------------- #


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def x_input(shape):
    def make(seed: int = 1234, override=None):
        s = override or shape
        return OrderedDict(x=torch.randn(*s, generator=gen(seed)))

    return make


def idx_input(vocab: int, batch: int = 2, seq: int = 16):
    def make(seed: int = 1234, override=None):
        b, t = override or (batch, seq)
        return OrderedDict(idx=torch.randint(0, vocab, (b, t), generator=gen(seed), dtype=torch.int64))

    return make


def bert_inputs(vocab: int = 64, batch: int = 2, seq: int = 16):
    def make(seed: int = 1234, override=None):
        b, t = override or (batch, seq)
        ids = torch.randint(0, vocab, (b, t), generator=gen(seed), dtype=torch.int64)
        mask = torch.ones(b, t, dtype=torch.int64)
        # Padding at the end of row 1 (and of every odd row for other shapes).
        for r in range(1, b, 2):
            mask[r, t - max(1, t // 4) :] = 0
        return OrderedDict(input_ids=ids, attention_mask=mask)

    return make


# --------------------------------------------------------------------------- #
# Structural checks
# --------------------------------------------------------------------------- #

TIED_WEIGHT = "transformer.wte.weight"


def check_tied_embedding(proto: onnx.ModelProto) -> list[str]:
    """The tied GPT embedding / lm_head weight must be ONE initializer that feeds
    both the embedding Gather and (directly or through Transpose(perm=[1,0]))
    the MatMul producing the logits, with no second copy of its data."""
    g = proto.graph
    inits = {t.name: t for t in g.initializer}
    if TIED_WEIGHT not in inits:
        raise SystemExit(f"tied check: no initializer {TIED_WEIGHT!r}")
    w = onnx.numpy_helper.to_array(inits[TIED_WEIGHT])
    copies = [
        n for n, t in inits.items()
        if n != TIED_WEIGHT and sorted(t.dims) == sorted(w.shape)
        and np.array_equal(np.sort(onnx.numpy_helper.to_array(t), axis=None), np.sort(w, axis=None))
    ]
    if copies:
        raise SystemExit(f"tied check: {TIED_WEIGHT} has copies among the initializers: {copies}")
    users = [n for n in g.node if TIED_WEIGHT in n.input]
    producer = {o: n for n in g.node for o in n.output}
    gathers = [n for n in users if n.op_type == "Gather" and n.input[0] == TIED_WEIGHT]
    if len(gathers) != 1:
        raise SystemExit(f"tied check: expected one Gather reading {TIED_WEIGHT}, got {[n.name for n in gathers]}")
    head = producer.get(g.output[0].name)
    if head is None or head.op_type != "MatMul":
        raise SystemExit(f"tied check: graph output is not produced by a MatMul ({head and head.op_type})")
    rhs = head.input[1]
    if rhs == TIED_WEIGHT:
        via = []
    else:
        t = producer.get(rhs)
        perm = [list(a.ints) for a in t.attribute if a.name == "perm"] if t is not None else []
        if t is None or t.op_type != "Transpose" or t.input[0] != TIED_WEIGHT or perm != [[1, 0]]:
            raise SystemExit(f"tied check: lm_head MatMul {head.name} B operand {rhs!r} is not "
                             f"{TIED_WEIGHT} or Transpose(perm=[1,0]) of it")
        via = [t]
    expected = {n.name for n in gathers + via} | ({head.name} if not via else set())
    if {n.name for n in users} != expected:
        raise SystemExit(f"tied check: unexpected users of {TIED_WEIGHT}: {[n.name for n in users]}")
    dims = list(w.shape)
    path = (f"`{via[0].op_type}(perm=[1, 0])` `{via[0].name}` -> `MatMul` `{head.name}`" if via
            else f"`MatMul` `{head.name}` directly")
    return [
        f"- tied weight (checked): the single initializer `{TIED_WEIGHT}` {dims} is read by `Gather` "
        f"`{gathers[0].name}` (embedding) and by {path} (lm_head, producing `{g.output[0].name}`); "
        f"no other initializer holds a copy of it",
    ]


# --------------------------------------------------------------------------- #
# Fixture table
# --------------------------------------------------------------------------- #


@dataclass
class Fixture:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable
    description: str
    dynamic: bool = False
    opsets: tuple = OPSETS
    alt_shape: tuple | None = None  # extra ORT-vs-PyTorch check shape for dynamic models
    constant_folding: bool = True
    notes: list = field(default_factory=list)
    # Extra structural check on the exported onnx.ModelProto; raises SystemExit on failure and
    # returns lines (Markdown) describing what it verified, copied into README.md.
    check: Callable | None = None


FIXTURES = [
    Fixture(
        "mlp",
        M.build_mlp,
        x_input((4, 16)),
        "Linear(16,32)-ReLU-Linear(32,32)-GELU(erf)-Linear(32,10)",
    ),
    Fixture(
        "cnn",
        M.build_cnn,
        x_input((2, 1, 12, 12)),
        "Conv2d(1,4,3,p=1)-BatchNorm2d(4)-ReLU-MaxPool2d(2)-Conv2d(4,8,3)-ReLU-AvgPool2d(2)"
        "-AdaptiveAvgPool2d(1)-Flatten-Linear(8,10), eval mode, non-trivial BN stats",
    ),
    Fixture(
        "cnn_bn",
        M.build_cnn,
        x_input((2, 1, 12, 12)),
        "same weights as cnn, exported with do_constant_folding=False so that BatchNormalization "
        "stays in the graph (with folding on, the eval-mode exporter fuses it into the first Conv)",
        constant_folding=False,
    ),
    Fixture(
        "gpt",
        M.build_gpt,
        idx_input(64),
        "GPT-2 style decoder: vocab 64, n_embd 32, block 16, 2 pre-LN layers, 4 heads, "
        "causal mask buffer + masked_fill(-inf), GELU(tanh), lm_head tied to wte",
        dynamic=True,
        alt_shape=(3, 7),
    ),
    Fixture(
        "gpt_static",
        M.build_gpt,
        idx_input(64),
        "same weights as gpt, exported without dynamic axes",
        opsets=(17,),
    ),
    Fixture(
        "gpt_tied",
        M.build_gpt,
        idx_input(64),
        "same weights as gpt, exported without dynamic axes and with do_constant_folding=False so that "
        "the tied embedding / lm_head weight stays one initializer, `transformer.wte.weight`, feeding both "
        "the embedding `Gather` and (through a `Transpose`) the lm_head `MatMul`",
        opsets=(17,),
        constant_folding=False,
        check=check_tied_embedding,
    ),
    Fixture(
        "llama",
        M.build_llama,
        idx_input(64),
        "LLaMA style decoder: vocab 64, dim 32, 2 layers, 4 heads, RMSNorm, RoPE "
        "(rotate_half, cos/sin computed in forward), additive causal mask (triu), "
        "SwiGLU hidden 64, untied output head",
        dynamic=True,
        alt_shape=(3, 7),
    ),
    Fixture(
        "bert",
        M.build_bert,
        bert_inputs(),
        "BERT style encoder: vocab 64, hidden 32, max_pos 16, token types (zeros buffer), "
        "2 post-LN layers, 4 heads, additive padding mask (1-mask)*-10000, GELU(erf) FFN 64, "
        "per-token Linear(32,5) head",
        dynamic=True,
        alt_shape=(3, 9),
    ),
]


# --------------------------------------------------------------------------- #
# Export / verification
# --------------------------------------------------------------------------- #


def rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| / max |ref| (error relative to the output's scale)."""
    denom = max(float(np.max(np.abs(ref))), 1e-12)
    return float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) / denom


def run_both(model: nn.Module, sess: ort.InferenceSession, inputs: "OrderedDict[str, torch.Tensor]"):
    with torch.no_grad():
        ref = model(*inputs.values()).detach().numpy().astype(np.float32)
    got = sess.run([OUTPUT], {k: v.numpy() for k, v in inputs.items()})[0]
    if got.shape != ref.shape:
        raise SystemExit(f"shape mismatch: onnxruntime {got.shape} vs torch {ref.shape}")
    return ref, got


def value_info_str(vi: onnx.ValueInfoProto) -> tuple[str, str]:
    t = vi.type.tensor_type
    dims = [d.dim_param if d.HasField("dim_param") else str(d.dim_value) for d in t.shape.dim]
    return onnx.TensorProto.DataType.Name(t.elem_type).lower(), "[" + ", ".join(dims) + "]"


def export_onnx(model: nn.Module, inputs: "OrderedDict[str, torch.Tensor]", path: Path, opset: int,
                dynamic_axes: dict | None, constant_folding: bool) -> tuple[onnx.ModelProto, int]:
    """Exports `model` (fed `inputs`, output named OUTPUT) to `path` with the TorchScript-based
    exporter, checks it with onnx.checker (full check), its size (< 1 MB) and its opset; returns
    the loaded proto and the file size."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # legacy-exporter deprecation chatter
        torch.onnx.export(
            model,
            tuple(inputs.values()),
            str(path),
            dynamo=False,
            opset_version=opset,
            export_params=True,
            do_constant_folding=constant_folding,
            input_names=list(inputs),
            output_names=[OUTPUT],
            dynamic_axes=dynamic_axes,
        )

    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    size = path.stat().st_size
    if size >= MAX_BYTES:
        raise SystemExit(f"{path}: {size} bytes, fixtures must be < 1 MB")
    got_opset = {o.domain or "ai.onnx": o.version for o in proto.opset_import}
    if got_opset.get("ai.onnx") != opset:
        raise SystemExit(f"{path}: opset_import {got_opset}, expected {opset}")
    return proto, size


def ort_matches(got: np.ndarray, ref: np.ndarray) -> tuple[float, bool]:
    """The relative error of onnxruntime's output against PyTorch's and whether it is within REL_TOL."""
    err = rel_error(got, ref)
    return err, err <= REL_TOL and np.allclose(got, ref, rtol=REL_TOL, atol=1e-5)


def export_one(fx: Fixture, opset: int, out_dir: Path) -> dict:
    stem = f"{fx.name}_op{opset}"
    path = out_dir / f"{stem}.onnx"
    model = fx.build().eval()
    inputs = fx.inputs()
    input_names = list(inputs)
    dynamic_axes = None
    if fx.dynamic:
        dynamic_axes = {n: dict(BATCH_SEQ) for n in input_names + [OUTPUT]}

    proto, size = export_onnx(model, inputs, path, opset, dynamic_axes, fx.constant_folding)
    ops = sorted({n.op_type for n in proto.graph.node})
    check_notes = fx.check(proto) if fx.check is not None else []

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ref, got = run_both(model, sess, inputs)
    err, ok = ort_matches(got, ref)
    print(f"{stem:18s} {size:8d} B  max rel err {err:.3e}  ops: {' '.join(ops)}")
    if not ok:
        raise SystemExit(f"FAIL: {stem}: onnxruntime differs from PyTorch (max rel err {err:.3e} > {REL_TOL})")

    alt_err = None
    if fx.alt_shape is not None:
        alt_inputs = fx.inputs(seed=4321, override=fx.alt_shape)
        aref, agot = run_both(model, sess, alt_inputs)
        alt_err, alt_ok = ort_matches(agot, aref)
        print(f"{'':18s} dynamic check at {tuple(next(iter(alt_inputs.values())).shape)}: max rel err {alt_err:.3e}")
        if not alt_ok:
            raise SystemExit(f"FAIL: {stem}: dynamic-shape check max rel err {alt_err:.3e}")

    data_dir = out_dir / stem
    data_dir.mkdir(parents=True, exist_ok=True)
    for old in data_dir.glob("*.npy"):
        old.unlink()
    for k, v in inputs.items():
        np.save(data_dir / f"{k}.npy", v.numpy())
    np.save(data_dir / f"{OUTPUT}.npy", ref)

    return dict(
        stem=stem,
        fixture=fx,
        opset=opset,
        size=size,
        ops=ops,
        err=err,
        alt_err=alt_err,
        inputs=[(vi.name, *value_info_str(vi), tuple(inputs[vi.name].shape)) for vi in proto.graph.input],
        outputs=[(vi.name, *value_info_str(vi), tuple(ref.shape)) for vi in proto.graph.output],
        n_init=len(proto.graph.initializer),
        n_nodes=len(proto.graph.node),
        check_notes=check_notes,
    )


EXPORTER_NOTES = """## What the exporter emits (observed with the versions above)

- `Linear` on 2-D input becomes `Gemm` (transB=1) with the original parameter names; on 3-D input it
  becomes `MatMul` (+ `Add` for the bias) with the weight pre-transposed by constant folding into a new
  initializer named `onnx::MatMul_<N>` (the PyTorch parameter name is lost).
- With constant folding (all GPT fixtures but `gpt_tied`) the tied `lm_head` is not shared in ONNX:
  `transformer.wte.weight` [V, C] feeds the embedding `Gather`, and a separate transposed copy
  `onnx::MatMul_<N>` [C, V] feeds the final `MatMul`.
- Without constant folding (`gpt_tied`) every parameter keeps its PyTorch name and layout:
  `transformer.wte.weight` [V, C] feeds both the `Gather` and `Transpose(perm=[1,0])` -> final `MatMul`;
  every 3-D `Linear` is `Transpose(perm=[1,0])` of the [out, in] weight -> `MatMul` -> `Add(bias)`.
  Static `view`/`masked_fill` shapes are not folded either: `Reshape` targets are built from `Constant`
  -> `Unsqueeze` -> `Concat`, and the causal mask is `Slice` x2 (constant starts/ends) of the float buffer
  -> `Equal(.., 0)` -> `Cast(bool)` -> `Where`.
- Initializers with identical contents are deduplicated: the first is kept and later ones are produced
  by `Identity` nodes (e.g. `transformer.h.1.attn.bias = Identity(transformer.h.0.attn.bias)`, the
  causal-mask buffer, which is the same in every layer).
- GPT causal mask: dynamic export keeps the float buffer `transformer.h.0.attn.bias` [1,1,16,16] and
  computes `Slice` (x2, ends from `Shape`) -> `Equal(.., 0)` -> `Cast(bool)` -> `Where(mask, -inf, scores)`;
  the static export folds it into a bool initializer `onnx::Where_<N>` [1,1,16,16] used directly by `Where`.
- LLaMA causal mask: `ConstantOfShape(-inf)` [T,T] -> `Trilu(upper=1, k=1)` added to the scores.
  RoPE: `Range` (float) -> `Mul` by the `inv_freq` constant -> `Concat` -> `Cos`/`Sin`; `rotate_half` is
  `Slice`/`Neg`/`Concat`; `x.shape[-1] // 2` shows up as an int64 `Div` followed by `Cast` nodes.
  `torch.rsqrt` is `Sqrt` + `Div`; SiLU is `Sigmoid` + `Mul`.
- BERT padding mask: `Unsqueeze` -> `Cast(float)` -> `Sub(1, m)` -> `Mul(-10000)` added to the scores.
- `nn.LayerNorm` is `LayerNormalization` at opset 17 and `ReduceMean`/`Sub`/`Pow`/`Add`/`Sqrt`/`Div`
  (+ `Mul`/`Add` for the affine part) at opset 14.
- GELU has no ONNX op before opset 20: erf GELU is `Div`/`Erf`/`Add`/`Mul`; tanh GELU is
  `Mul`/`Add`/`Tanh` (x^3 as `Mul`s).
- With `do_constant_folding=True` in eval mode `BatchNorm2d` is fused into the preceding `Conv`
  (`cnn_*.onnx` has no `BatchNormalization`; its first conv's weights are `onnx::Conv_<N>`);
  `cnn_bn_*.onnx` keeps it.
- Scalars are emitted as `Constant` nodes, not initializers. The mlp/cnn/cnn_bn/llama graphs are identical at
  opsets 14 and 17 (only `opset_import` and `ir_version` — 7 vs 8 — differ).
""".splitlines()


def write_readme(out_dir: Path, results: list[dict]) -> None:
    L = []
    L.append("# ONNX test fixtures")
    L.append("")
    L.append("Generated by `python/make_fixtures.py` from the PyTorch modules in `python/smp_models.py`")
    L.append("(TorchScript-based exporter, `torch.onnx.export(..., dynamo=False)`, `export_params=True`,")
    L.append("`do_constant_folding=True` except for `cnn_bn` and `gpt_tied`, eval mode, `torch.manual_seed(0)` before building each model).")
    L.append("Do not edit by hand; regenerate with:")
    L.append("")
    L.append("```sh")
    L.append("python3 python/make_fixtures.py            # writes test/fixtures/")
    L.append("python3 python/make_fixtures.py --out DIR  # elsewhere")
    L.append("```")
    L.append("")
    L.append(f"Generated with torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}.")
    L.append("")
    L.append("## Layout")
    L.append("")
    L.append("For each `<name>_op<NN>.onnx` there is a directory `<name>_op<NN>/` holding one `.npy` file per")
    L.append("graph input (`<input_name>.npy`, exactly what PyTorch was fed) and `logits.npy`, the PyTorch output")
    L.append("(float32). Every model was checked with `onnx.checker` and with onnxruntime (CPU) against PyTorch;")
    L.append(f"\"rel err\" is `max|ort - torch| / max|torch|` (must be <= {REL_TOL:g}; `np.allclose(rtol={REL_TOL:g}, atol=1e-5)`")
    L.append("must hold too). Models with dynamic axes were also checked at a second shape (not stored).")
    L.append("")
    L.append("## Summary")
    L.append("")
    L.append("| file | opset | bytes | nodes | initializers | inputs | output | rel err (stored shape) | rel err (alt shape) |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        ins = "<br>".join(f"`{n}` {dt} {s}" for n, dt, s, _ in r["inputs"])
        outs = "<br>".join(f"`{n}` {dt} {s}" for n, dt, s, _ in r["outputs"])
        alt = "-" if r["alt_err"] is None else f"{r['alt_err']:.2e} @ {r['fixture'].alt_shape}"
        L.append(
            f"| `{r['stem']}.onnx` | {r['opset']} | {r['size']} | {r['n_nodes']} | {r['n_init']} | {ins} | {outs} | "
            f"{r['err']:.2e} | {alt} |"
        )
    L.append("")
    L.append("## Fixtures")
    seen = set()
    for r in results:
        fx = r["fixture"]
        if fx.name not in seen:
            seen.add(fx.name)
            L.append("")
            L.append(f"### `{fx.name}`")
            L.append("")
            L.append(fx.description + ".")
            L.append("")
            concrete_in = ", ".join(f"`{n}` {dt} {list(c)}" for n, dt, _, c in r["inputs"])
            concrete_out = ", ".join(f"`{n}` float32 {list(c)}" for n, _, _, c in r["outputs"])
            L.append(f"- stored data: inputs {concrete_in}; output {concrete_out}")
            L.append(f"- dynamic axes: {'`batch` (dim 0) and `seq` (dim 1) on every input and the output' if fx.dynamic else 'none'}")
        L.append(f"- opset {r['opset']} (`{r['stem']}.onnx`) ops: " + ", ".join(f"`{o}`" for o in r["ops"]))
        L.extend(r["check_notes"])
    L.append("")
    L.extend(EXPORTER_NOTES)
    L.extend(training_section(out_dir / "README.md"))
    (out_dir / "README.md").write_text("\n".join(L))


def training_section(readme: Path) -> list[str]:
    """The lines of `readme` from TRAINING_MARKER on (preceded by a blank line), or none."""
    if not readme.exists():
        return []
    text = readme.read_text()
    at = text.find(TRAINING_MARKER)
    return [] if at < 0 else [""] + text[at:].split("\n")


def replace_training_section(readme: Path, lines: list[str]) -> None:
    """Writes `lines` (starting with TRAINING_MARKER) as the last section of `readme`, replacing the
    previous one."""
    assert lines and lines[0] == TRAINING_MARKER
    text = readme.read_text() if readme.exists() else ""
    at = text.find(TRAINING_MARKER)
    head = (text if at < 0 else text[:at]).rstrip("\n")
    readme.write_text((head + "\n\n" if head else "") + "\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    ap.add_argument("--only", nargs="*", help="only these fixture names (for debugging; README.md is then not rewritten)")
    args = ap.parse_args()

    torch.set_num_threads(1)  # deterministic and cheap; the models are tiny
    out_dir = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}  onnx {onnx.__version__}  onnxruntime {ort.__version__}  -> {out_dir}")

    results = []
    for fx in FIXTURES:
        if args.only and fx.name not in args.only:
            continue
        for opset in fx.opsets:
            results.append(export_one(fx, opset, out_dir))
    if args.only:
        print(f"wrote {len(results)} models (README.md not rewritten because of --only)")
        return
    write_readme(out_dir, results)
    print(f"wrote {len(results)} models and {out_dir / 'README.md'}")


if __name__ == "__main__":
    main()
