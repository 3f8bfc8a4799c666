#!/usr/bin/env python3
"""Writes test/fixtures/stored-precision/: Hugging Face models whose
parameters are stored in bf16 or fp16, exported as users export them, and
PyTorch's training references for them (test/smprun/stored-precision.test).

A user who loads a model with torch_dtype=torch.bfloat16, or calls
model.to(torch.bfloat16) / model.half(), and exports it gets a file whose
parameters and ops are 16-bit. PyTorch trains such a module as stored: its
gradients and the optimizer's states in that type, no fp32 master copy.

    llama_bf16.onnx      a 2-layer Llama (RMSNorm widened to f32 inside,
                         rotary, SiLU, 4 heads over 2 key/value heads),
                         .to(torch.bfloat16), the default dynamo export
                         (fixed batch 4)
    llama_bf16_dyn.onnx  the same with a symbolic batch (for dp and tp)
    gpt2_bf16.onnx       a 2-layer GPT-2 (LayerNorm, GELU), bf16, default
    llama_fp16.onnx      the Llama, .half(), default export
    mlp_bf16.onnx        the training fixtures' MLP (test/fixtures/train/
                         mlp.onnx's weights), .bfloat16(), f32 samples cast
                         in, a symbolic batch: DeepSpeed's bf16 engine
                         trains it (test/fixtures/deepspeed/
                         ref_zero2_bf16.json)
    input_ids.npy, labels.npy   16 samples of 8 tokens, vocab 64
    <model>/ref_<opt>.json      PyTorch's losses and gradient norms over 8
                                steps of batch 4 (torch_refs.train_steps:
                                SGD lr 0.1, AdamW lr 1e-2), the module in
                                its stored type, no autocast; and how far
                                the same module with eager attention
                                (other roundings) parts from it
                                (config.eager_attention_spread)
    resnet_bf16.onnx     test/fixtures/resnet's ResNet (BatchNorm) in
                         bf16, taking bf16 images (smprun rounds f32
                         samples); resnet_bf16/ref_*.json with its running
                         statistics (resnet_bf16 below);
                         resnet_bf16_train.onnx the TorchScript exporter's
                         training-mode export of it (running statistics as
                         graph parameters); resnet_bf16/logits.npy its
                         eval() logits of resnet/eval/x.npy, widened
    resnet_fp16.onnx     the ResNet in fp16, resnet_fp16/ref_sgd.json
    vit_bf16.onnx        a 2-layer Hugging Face ViT classifier in bf16
                         (default export), taking bf16 pixel_values;
                         vit_bf16/ref_sgd.json (vit_bf16 below)
    t5_fp16.onnx         a 2-layer T5 loaded with from_pretrained(dtype=
                         torch.float16), which keeps its `wo` projections in
                         float32 (a file of mixed types), optimize=False;
                         decoder_input_ids.npy, t5_fp16/ref_sgd.json,
                         ref_sgd_f64.json, ref_adamw_master.json (t5_fp16)
    <model>/ref_<opt>_master.json  the same with fp32 master copies of the
                                parameters (train_steps_master: DeepSpeed's
                                bf16/fp16 optimizers; smpc --master-weights
                                fp32)

Run with torch >= 2.9 and transformers 5 (the fixtures: torch 2.15,
transformers 5.24):

    python3 python/make_stored_precision_refs.py [--out DIR]
"""

import json
import warnings

import numpy as np
import torch
import transformers as T

import torch_refs

VOCAB, SEQ, SAMPLES, BATCH, STEPS = 64, 8, 16, 4, 8


class LogitsOnly(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False,
                          return_dict=False)[0]


def llama(attn="sdpa"):
    return T.LlamaForCausalLM(T.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
        max_position_embeddings=32, attn_implementation=attn))


def gpt2(attn="sdpa"):
    return T.GPT2LMHeadModel(T.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=32,
        resid_pdrop=0, embd_pdrop=0, attn_pdrop=0, attn_implementation=attn))


def train_steps_master(model, ids, labels, opt_name, steps, batch,
                       scale=None, classes=VOCAB):
    """torch_refs.train_steps with fp32 master copies of the 16-bit
    parameters, as DeepSpeed's bf16/fp16 optimizers keep them: the forward
    and backward run on the stored module, each gradient is widened onto
    its master, the optimizer updates the masters, and the module gets them
    rounded back before the next step. `scale`: dynamic loss scaling from
    that scale with torch.amp.GradScaler's rules (a step whose gradients
    are not finite is skipped and halves the scale; 2000 good steps double
    it), the gradients unscaled in f32 on the masters. `ids`: the input
    tensor, or a tuple of them (sliced alike)."""
    inputs = ids if isinstance(ids, tuple) else (ids,)
    params = list(model.parameters())
    masters = [p.detach().float().clone().requires_grad_(True)
               for p in params]
    lr = torch_refs.LRS[opt_name]
    opt = (torch.optim.SGD(masters, lr=lr) if opt_name == "sgd"
           else torch.optim.AdamW(masters, lr=lr))
    model.train()
    losses, norms, scales, skipped = [], [], [], []
    for k in range(steps):
        lo = (k * batch) % inputs[0].shape[0]
        for p in params:
            p.grad = None
        logits = model(*(t[lo:lo + batch] for t in inputs))
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, classes), labels[lo:lo + batch].reshape(-1))
        (loss if scale is None else loss * scale).backward()
        losses.append(loss.item())
        for p, m in zip(params, masters):
            m.grad = p.grad.float() / (1 if scale is None else scale)
        finite = all(torch.isfinite(m.grad).all() for m in masters)
        norms.append(torch.sqrt(sum((m.grad.double() ** 2).sum()
                                    for m in masters)).item()
                     if finite else None)
        if scale is not None:
            scales.append(scale)
            skipped.append(not finite)
            if not finite:
                scale /= 2
                continue
        opt.step()
        with torch.no_grad():
            for p, m in zip(params, masters):
                p.copy_(m)
    return losses, norms, scales, skipped


def spread(a, b):
    """The largest relative difference of two runs' values, step by step."""
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


# name, builder, dtype, optimizers PyTorch trains it with
MODELS = [("llama_bf16", llama, torch.bfloat16, ("sgd", "adamw")),
          ("gpt2_bf16", gpt2, torch.bfloat16, ("sgd", "adamw")),
          ("llama_fp16", llama, torch.float16, ("sgd",))]


class CastIn(torch.nn.Module):
    """The training fixtures' MLP stored in bf16, taking f32 samples (as
    make_deepspeed_refs.py feeds DeepSpeed's bf16 model x.bfloat16())."""

    def __init__(self, mlp):
        super().__init__()
        self.mlp = mlp

    def forward(self, x):
        return self.mlp(x.to(torch.bfloat16))


def export_mlp_bf16(out):
    """mlp_bf16.onnx: smp_models.MLP as make_training_refs.py builds it
    (test/fixtures/train/mlp.onnx's weights), .bfloat16(), a symbolic
    batch. DeepSpeed's bf16 engine trains the same module (its masters are
    the bf16 values widened): test/fixtures/deepspeed/ref_zero2_bf16.json
    is its reference."""
    import smp_models
    torch.manual_seed(0)
    model = CastIn(smp_models.MLP().bfloat16()).eval()
    x = torch.from_numpy(np.load(out.parent / "train" / "mlp" / "x.npy"))
    torch.onnx.export(model, (x[:4],), str(out / "mlp_bf16.onnx"),
                      input_names=["x"], output_names=["logits"],
                      dynamic_shapes={"x": {0: torch.export.Dim("batch")}},
                      external_data=False)
    torch_refs.strip_stack_traces(out / "mlp_bf16.onnx")


def export_resnet(path, dtype, x):
    """make_resnet.py's fresh ResNet in `dtype`, exported as
    bring-your-own-model.md says to export a model with BatchNorm (dynamo,
    optimize=False, symbolic batch)."""
    import make_resnet as R
    torch.onnx.export(R.fresh().to(dtype).eval(), (x[:R.BATCH].to(dtype),),
                      str(path), dynamo=True, optimize=False,
                      external_data=False, input_names=["x"],
                      output_names=["logits"],
                      dynamic_shapes={"x": {0: torch.export.Dim("batch")}})
    torch_refs.strip_stack_traces(path)


def resnet_run(dtype, opt, master, x, y):
    """PyTorch training the fresh ResNet stored in `dtype` (5 steps of 8,
    train() mode, the input x.to(dtype); `master`: with f32 master copies):
    its losses, gradient norms and module, and how far the same run
    channels-last parts from it (other convolution and batch-norm kernels,
    other roundings): PyTorch's own spread."""
    import make_resnet as R
    runs = []
    for layout in (torch.contiguous_format, torch.channels_last):
        model = R.fresh().to(dtype).to(memory_format=layout)
        xl = x.to(dtype).to(memory_format=layout)
        if master:
            losses, norms, _, _ = train_steps_master(
                model, xl, y, opt, R.STEPS, R.BATCH, classes=R.CLASSES)
        else:
            losses, norms = torch_refs.train_steps(
                model, [xl], y, R.CLASSES, opt, R.STEPS, R.BATCH)
        runs.append((losses, norms, model))
    (losses, norms, model), (o_losses, o_norms, other) = runs
    stats, o_stats = R.running_stats(model), R.running_stats(other)
    return losses, norms, model, {
        "loss": spread(o_losses, losses),
        "grad_norm": spread(o_norms, norms),
        "running_stats": max(
            float(np.max(np.abs(np.array(o_stats[k]) - np.array(v))) /
                  max(float(np.max(np.abs(v))), 1e-3))
            for k, v in stats.items())}


def resnet_bf16(out):
    """resnet_bf16.onnx and resnet_bf16/: test/fixtures/resnet's ResNet
    (make_resnet.py, fresh init), .to(torch.bfloat16), exported as
    bring-your-own-model.md says to export a model with BatchNorm (dynamo,
    optimize=False, symbolic batch): it takes bf16 images, which smprun
    rounds from resnet/x.npy's f32 samples as x.to(torch.bfloat16) does.
    Its running statistics are bf16 buffers, updated in bf16 by train()
    mode and never given master copies. References (5 steps of 8, train()
    mode, with the running statistics after them): SGD as stored, and SGD
    and AdamW with f32 master copies."""
    import make_resnet as R
    x = torch.from_numpy(np.load(out.parent / "resnet" / "x.npy"))
    y = torch.from_numpy(np.load(out.parent / "resnet" / "labels.npy"))
    xb = x.to(torch.bfloat16)
    export_resnet(out / "resnet_bf16.onnx", torch.bfloat16, x)
    # The TorchScript exporter in training mode: its running statistics are
    # parameters of the graph (no signature marks them as buffers), one
    # update past the fresh ones (the export runs the module once).
    exported = R.fresh().to(torch.bfloat16).train()
    torch.onnx.export(exported, (xb[:R.BATCH],),
                      str(out / "resnet_bf16_train.onnx"), dynamo=False,
                      training=torch.onnx.TrainingMode.TRAINING,
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    (out / "resnet_bf16").mkdir(exist_ok=True)
    with torch.no_grad():  # eval(): bf16 logits, widened for numpy
        np.save(out / "resnet_bf16" / "logits.npy",
                R.fresh().to(torch.bfloat16).eval()(xb[:R.BATCH]).float()
                .numpy())
    base = {"model": "resnet", "batch_size": R.BATCH, "steps": R.STEPS,
            "dtype": "torch.bfloat16", "input": "x.to(torch.bfloat16)",
            "torch": torch.__version__}
    for opt, master in (("sgd", False), ("sgd", True), ("adamw", True)):
        losses, norms, model, own = resnet_run(torch.bfloat16, opt, master,
                                               x, y)
        name = f"ref_{opt}" + ("_master" if master else "")
        config = dict(base, optimizer=opt, lr=torch_refs.LRS[opt])
        if master:
            config["master_weights"] = "fp32"
        config["channels_last_spread"] = own
        R.write(out / "resnet_bf16" / f"{name}.json", config, losses, norms,
                model)
    # The training-mode export with f32 masters goes on from its statistics.
    losses, norms, _, _ = train_steps_master(
        exported, xb, y, "sgd", R.STEPS, R.BATCH, classes=R.CLASSES)
    R.write(out / "resnet_bf16" / "ref_sgd_master_train_export.json",
            dict(base, optimizer="sgd", lr=torch_refs.LRS["sgd"],
                 master_weights="fp32", export="TorchScript, training mode"),
            losses, norms, exported)


class PixelLogits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).logits


def vit(attn="sdpa"):
    return T.ViTForImageClassification(T.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        num_labels=10, attn_implementation=attn))


def vit_bf16(out):
    """vit_bf16.onnx and vit_bf16/ref_sgd.json: a fresh 2-layer Hugging
    Face ViT image classifier, .to(torch.bfloat16), the default dynamo
    export (batch 8): bf16 pixel_values, which smprun rounds from
    resnet/x.npy's f32 images (the same [16, 3, 16, 16], 10 classes). SGD
    as stored, 5 steps of 8, with PyTorch's eager-attention spread."""
    x = torch.from_numpy(np.load(out.parent / "resnet" / "x.npy"))
    y = torch.from_numpy(np.load(out.parent / "resnet" / "labels.npy"))
    xb = x.to(torch.bfloat16)
    torch.manual_seed(0)
    model = PixelLogits(vit()).to(torch.bfloat16).eval()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, (xb[:8],), str(out / "vit_bf16.onnx"),
                      input_names=["pixel_values"], output_names=["logits"],
                      external_data=False)
    torch_refs.strip_stack_traces(out / "vit_bf16.onnx")
    losses, norms = torch_refs.train_steps(model, [xb], y, 10, "sgd", 5, 8)
    eager = PixelLogits(vit("eager")).to(torch.bfloat16)
    eager.load_state_dict(init)
    e_losses, e_norms = torch_refs.train_steps(eager, [xb], y, 10, "sgd", 5, 8)
    (out / "vit_bf16").mkdir(exist_ok=True)
    torch_refs.write_ref(
        out / "vit_bf16" / "ref_sgd.json",
        {"name": "sgd", "optimizer": "sgd", "lr": torch_refs.LRS["sgd"],
         "batch_size": 8, "steps": 5, "samples": 16,
         "dtype": "torch.bfloat16", "input": "x.to(torch.bfloat16)",
         "torch": torch.__version__, "transformers": T.__version__,
         "eager_attention_spread": {"loss": spread(e_losses, losses),
                                    "grad_norm": spread(e_norms, norms)}},
        losses, norms)


def resnet_fp16(out):
    """resnet_fp16.onnx and resnet_fp16/ref_sgd.json: the same ResNet,
    .half(), the same export; f32 samples rounded to fp16 as fed. SGD as
    stored (PyTorch trains an fp16 module without loss scaling unless told),
    5 steps of 8, with the channels-last spread."""
    import make_resnet as R
    x = torch.from_numpy(np.load(out.parent / "resnet" / "x.npy"))
    y = torch.from_numpy(np.load(out.parent / "resnet" / "labels.npy"))
    export_resnet(out / "resnet_fp16.onnx", torch.float16, x)
    losses, norms, model, own = resnet_run(torch.float16, "sgd", False, x, y)
    (out / "resnet_fp16").mkdir(exist_ok=True)
    R.write(out / "resnet_fp16" / "ref_sgd.json",
            {"model": "resnet", "batch_size": R.BATCH, "steps": R.STEPS,
             "dtype": "torch.float16", "input": "x.half()",
             "torch": torch.__version__, "optimizer": "sgd",
             "lr": torch_refs.LRS["sgd"],
             "channels_last_spread": own},
            losses, norms, model)


class Seq2SeqLogits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, decoder_input_ids):
        return self.model(input_ids=input_ids,
                          decoder_input_ids=decoder_input_ids,
                          use_cache=False, return_dict=False)[0]


def t5_config():
    return T.T5Config(
        vocab_size=VOCAB, d_model=16, d_kv=8, d_ff=32, num_layers=2,
        num_decoder_layers=2, num_heads=2, relative_attention_num_buckets=8,
        relative_attention_max_distance=16, dropout_rate=0,
        feed_forward_proj="relu", decoder_start_token_id=0, pad_token_id=0,
        eos_token_id=1)


def t5_fp16(out, ids, labels):
    """t5_fp16.onnx and t5_fp16/ref_sgd.json, ref_sgd_f64.json: a file of
    mixed types, as users get one: a fresh 2-layer T5 saved and loaded back
    with from_pretrained(dtype=torch.float16), which keeps the feed-forward
    output projections (`wo`, T5's _keep_in_fp32_modules) in float32 and
    casts their inputs up; exported with optimize=False (what smpc's refusal
    of the default export names: T5's relative position bias folded),
    eager attention (torch 2.15 cannot export its sdpa one), batch 8.
    decoder_input_ids.npy: labels shifted right. SGD as stored, 5 steps of
    8; ref_sgd_f64.json the same weights trained in float64, and how far
    PyTorch's own fp16 run is from it (f64_distance); ref_adamw_master.json
    AdamW over fp32 master copies (train_steps_master: DeepSpeed's fp16
    optimizer; smpc --master-weights fp32)."""
    import tempfile
    dec = torch.cat([torch.zeros_like(labels[:, :1]), labels[:, :-1]], 1)
    np.save(out / "decoder_input_ids.npy", dec.numpy())
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as d:
        T.T5ForConditionalGeneration(t5_config()).save_pretrained(d)
        model = Seq2SeqLogits(T.T5ForConditionalGeneration.from_pretrained(
            d, dtype=torch.float16, attn_implementation="eager")).eval()
    kept = [n for n, p in model.named_parameters() if p.dtype == torch.float32]
    assert kept and all(".wo." in n for n in kept), kept
    init = {k: v.clone() for k, v in model.state_dict().items()}
    wide = Seq2SeqLogits(T.T5ForConditionalGeneration(t5_config()))
    wide.model.config._attn_implementation = "eager"
    wide.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    wide = wide.double()
    torch.onnx.export(model, (ids[:8], dec[:8]), str(out / "t5_fp16.onnx"),
                      input_names=["input_ids", "decoder_input_ids"],
                      output_names=["logits"], optimize=False,
                      external_data=False)
    torch_refs.strip_stack_traces(out / "t5_fp16.onnx")
    losses, norms = torch_refs.train_steps(model, (ids, dec), labels, VOCAB,
                                           "sgd", 5, 8)
    w_losses, w_norms = torch_refs.train_steps(wide, (ids, dec), labels,
                                               VOCAB, "sgd", 5, 8)
    (out / "t5_fp16").mkdir(exist_ok=True)
    config = {"name": "sgd", "optimizer": "sgd", "lr": torch_refs.LRS["sgd"],
              "batch_size": 8, "steps": 5, "samples": SAMPLES,
              "dtype": "torch.float16, wo in torch.float32 (%d tensors)"
                       % len(kept),
              "torch": torch.__version__, "transformers": T.__version__,
              "f64_distance": {"loss": spread(losses, w_losses),
                               "grad_norm": spread(norms, w_norms)}}
    torch_refs.write_ref(out / "t5_fp16" / "ref_sgd.json", config, losses,
                         norms)
    torch_refs.write_ref(out / "t5_fp16" / "ref_sgd_f64.json",
                         dict(config, dtype="torch.float64"), w_losses,
                         w_norms)
    model.load_state_dict(init)
    m_losses, m_norms, _, _ = train_steps_master(model, (ids, dec), labels,
                                                 "adamw", 5, 8)
    torch_refs.write_ref(
        out / "t5_fp16" / "ref_adamw_master.json",
        {"name": "adamw", "optimizer": "adamw", "lr": torch_refs.LRS["adamw"],
         "batch_size": 8, "steps": 5, "samples": SAMPLES,
         "dtype": config["dtype"], "masters": "float32",
         "torch": torch.__version__}, m_losses, m_norms)


def main():
    ap = torch_refs.fixture_arguments("stored-precision")
    out = ap.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    export_mlp_bf16(out)
    resnet_bf16(out)
    resnet_fp16(out)
    vit_bf16(out)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    np.save(out / "input_ids.npy", ids.numpy())
    np.save(out / "labels.npy", labels.numpy())
    t5_fp16(out, ids, labels)
    for name, build, dtype, optimizers in MODELS:
        torch.manual_seed(0)
        model = LogitsOnly(build()).to(dtype).eval()
        init = {k: v.clone() for k, v in model.state_dict().items()}
        example = (ids[:BATCH],)
        files = [(f"{name}.onnx", None)]
        if name == "llama_bf16":
            files.append((f"{name}_dyn.onnx",
                          {"input_ids": {0: torch.export.Dim("batch")}}))
        for f, dyn in files:
            torch.onnx.export(model, example, str(out / f),
                              input_names=["input_ids"],
                              output_names=["logits"], dynamic_shapes=dyn,
                              external_data=False)
            torch_refs.strip_stack_traces(out / f)
        (out / name).mkdir(exist_ok=True)
        for opt in optimizers:
            model.load_state_dict(init)
            losses, norms = torch_refs.train_steps(
                model, (ids,), labels, VOCAB, opt, STEPS, BATCH)
            # How far PyTorch parts from itself in this type: the same
            # module with eager attention instead of sdpa (other roundings
            # of the same math).
            torch.manual_seed(0)
            eager = LogitsOnly(build("eager")).to(dtype)
            eager.load_state_dict(init)
            e_losses, e_norms = torch_refs.train_steps(
                eager, (ids,), labels, VOCAB, opt, STEPS, BATCH)
            torch_refs.write_ref(
                out / name / f"ref_{opt}.json",
                {"name": opt, "optimizer": opt, "lr": torch_refs.LRS[opt],
                 "batch_size": BATCH, "steps": STEPS, "samples": SAMPLES,
                 "dtype": str(dtype), "torch": torch.__version__,
                 "transformers": T.__version__,
                 "eager_attention_spread": {
                     "loss": spread(e_losses, losses),
                     "grad_norm": spread(e_norms, norms)}},
                losses, norms)
        # smpc --master-weights fp32 (DeepSpeed's bf16/fp16 optimizers).
        # fp16: also with loss scaling (smpc --precision fp16).
        scaled = [None, 65536.0] if dtype == torch.float16 else [None]
        for opt in ("sgd", "adamw"):
            for scale in scaled:
                model.load_state_dict(init)
                losses, norms, scales, skipped = train_steps_master(
                    model, ids, labels, opt, STEPS, BATCH, scale)
                suffix = "_master" + ("_scaled" if scale else "")
                path = out / name / f"ref_{opt}{suffix}.json"
                torch_refs.write_ref(
                    path,
                    {"name": opt + suffix, "optimizer": opt,
                     "lr": torch_refs.LRS[opt], "batch_size": BATCH,
                     "steps": STEPS, "samples": SAMPLES, "dtype": str(dtype),
                     "master_weights": "fp32", "torch": torch.__version__,
                     "transformers": T.__version__},
                    losses, norms)
                if scale:
                    ref = json.loads(path.read_text())
                    ref["loss_scales"], ref["skipped"] = scales, skipped
                    path.write_text(json.dumps(ref, indent=2) + "\n")
        print("wrote", name)


if __name__ == "__main__":
    main()
