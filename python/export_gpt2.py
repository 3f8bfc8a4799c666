#!/usr/bin/env python3
"""Export a GPT-2 (124M-shaped by default) decoder with random weights to ONNX.

Uses the same GPT module as the test fixtures (python/smp_models.py): learned
position embeddings, pre-LN blocks, hand-written causal self-attention with a
tril mask buffer, GELU(tanh) MLP, lm_head tied to wte.  Nothing is downloaded:
weights are random (GPT-2 initialisation, seeded, then LayerNorm params and
biases randomised so the graph has one initializer per parameter like a real
checkpoint).

Example:
    python3 python/export_gpt2.py --out /tmp/gpt2/gpt2.onnx            # 124M, B=1, T=1024
    python3 python/export_gpt2.py --out /tmp/g.onnx --layers 2 --seq 64 --check

The output is large (~650 MB for 124M: the tied lm_head weight is stored a
second time, pre-transposed, by the exporter's constant folding); never commit it.
Weights are stored inside the .onnx file when the model is under 2 GB, else as
external data next to it.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import smp_models as M  # noqa: E402

TWO_GB = 2 * 1024**3


def main() -> None:
    d = M.GPT2_124M
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="output .onnx path")
    ap.add_argument("--seq", type=int, default=1024, help="sequence length T of the example input (default 1024)")
    ap.add_argument("--batch", type=int, default=1, help="batch size B of the example input (default 1)")
    ap.add_argument("--layers", type=int, default=d.n_layer)
    ap.add_argument("--heads", type=int, default=d.n_head)
    ap.add_argument("--embd", type=int, default=d.n_embd, help="hidden size")
    ap.add_argument("--vocab", type=int, default=d.vocab_size)
    ap.add_argument("--block", type=int, default=d.block_size, help="max sequence length (position table, mask)")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--dynamic", action="store_true", help="make batch and seq dynamic axes named 'batch' and 'seq'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--plain-init",
        action="store_true",
        help="keep LayerNorm weights 1 / biases 0 (default: randomise them so that, as in a trained "
        "checkpoint, no two initializers are equal and the exporter does not deduplicate them)",
    )
    ap.add_argument("--check", action="store_true", help="run onnxruntime on the result and compare with PyTorch")
    ap.add_argument("--save-io", type=Path, help="directory to write idx.npy / logits.npy (PyTorch reference)")
    args = ap.parse_args()

    if args.seq > args.block:
        ap.error(f"--seq {args.seq} exceeds --block {args.block}")

    cfg = M.GPTConfig(
        vocab_size=args.vocab, block_size=args.block, n_layer=args.layers, n_head=args.heads, n_embd=args.embd
    )
    torch.manual_seed(args.seed)
    t0 = time.time()
    model = M.GPT(cfg)
    if not args.plain_init:
        M.perturb_norms(model)
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())  # tied weight counted once
    print(f"config {cfg}")
    print(f"parameters: {n_params / 1e6:.2f} M ({n_params * 4 / 2**20:.1f} MiB fp32), built in {time.time() - t0:.1f}s")

    idx = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), generator=torch.Generator().manual_seed(1234))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # Estimate: params + the exporter's transposed copy of the tied lm_head + mask buffer.
    est = (n_params + cfg.vocab_size * cfg.n_embd + cfg.block_size**2) * 4
    external = est >= TWO_GB - 64 * 2**20
    if external:
        print(f"estimated size {est / 2**30:.2f} GiB >= 2 GiB: weights go to external data next to {args.out}")

    dynamic_axes = None
    if args.dynamic:
        dynamic_axes = {"idx": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}

    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (idx,),
            str(args.out),
            dynamo=False,
            opset_version=args.opset,
            export_params=True,
            do_constant_folding=True,
            input_names=["idx"],
            output_names=["logits"],
            dynamic_axes=dynamic_axes,
        )
    t_export = time.time() - t0

    import onnx

    proto = onnx.load(str(args.out), load_external_data=False)
    size = args.out.stat().st_size
    print(f"exported {args.out} in {t_export:.1f}s: {size} bytes ({size / 2**20:.1f} MiB)")
    if external:
        ext = {e.value for i in proto.graph.initializer for e in i.external_data if e.key == "location"}
        print(f"external data files: {sorted(ext)}")
    print(f"opset {[(o.domain or 'ai.onnx', o.version) for o in proto.opset_import]}, ir_version {proto.ir_version}")
    for vi in list(proto.graph.input) + list(proto.graph.output):
        dims = [x.dim_param or x.dim_value for x in vi.type.tensor_type.shape.dim]
        print(f"  {vi.name}: {onnx.TensorProto.DataType.Name(vi.type.tensor_type.elem_type)} {dims}")
    counts = collections.Counter(n.op_type for n in proto.graph.node)
    print(f"{len(proto.graph.node)} nodes, {len(proto.graph.initializer)} initializers")
    print("ops: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
    del proto

    if args.check or args.save_io:
        import numpy as np

        t0 = time.time()
        with torch.no_grad():
            ref = model(idx).numpy()
        print(f"pytorch forward {time.time() - t0:.1f}s")
        if args.save_io:
            args.save_io.mkdir(parents=True, exist_ok=True)
            np.save(args.save_io / "idx.npy", idx.numpy())
            np.save(args.save_io / "logits.npy", ref.astype(np.float32))
        if args.check:
            import onnxruntime as ort

            t0 = time.time()
            sess = ort.InferenceSession(str(args.out), providers=["CPUExecutionProvider"])
            got = sess.run(["logits"], {"idx": idx.numpy()})[0]
            err = float(np.max(np.abs(got - ref))) / max(float(np.max(np.abs(ref))), 1e-12)
            print(f"onnxruntime load+run {time.time() - t0:.1f}s, max rel err {err:.3e}")
            if err > 1e-4:
                raise SystemExit("FAIL: onnxruntime output differs from PyTorch")


if __name__ == "__main__":
    main()
