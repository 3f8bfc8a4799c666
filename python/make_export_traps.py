#!/usr/bin/env python3
"""Writes test/fixtures/traps/: a freshly initialised GPT exported the way
users export it, with the traps of real exports left in.

A new user's model has fresh LayerNorms (weights all 1, biases all 0) and a
tied LM head. `torch.onnx.export` with default flags then
  - merges the equal norm weights and biases into one initializer (the dynamo
    exporter reuses one name; the TorchScript exporter, dynamo=False, writes
    `b = Identity(a)`),
  - stores the tied head's transpose as a separate folded copy,
  - fixes the batch in the file (no dynamic axes).
smp must train it to PyTorch's numbers anyway (see
docs/bring-your-own-model.md). Files:

  mlpgpt_dynamo.onnx      torch.onnx.export(model, (idx,), path) (defaults;
                          external_data=False keeps it one file)
  mlpgpt_torchscript.onnx torch.onnx.export(model, (idx,), path, dynamo=False)
  mlpgpt_nometa.onnx      mlpgpt_dynamo.onnx without its metadata
  mlpgpt_batch.onnx       the dynamo export with a symbolic batch
                          (dynamic_shapes), for the parallel plans
  albert_batch.onnx       one block shared by 4 layers (a true tie),
                          symbolic batch; albert/ref_*.json its references
                          (data: gpt/)
  gpt_dynamo.onnx, gpt_torchscript.onnx  the same with attention
                          (nn.MultiheadAttention: zero biases the dynamo
                          exporter's optimiser removes); gpt_mha/ its
                          references
  tenc_dynamo.onnx, tenc_batch.onnx, tenc_torchscript.onnx
                          nn.TransformerEncoder (its layers copy.deepcopy'd:
                          equal weights at init, which the dynamo optimiser
                          merges into one initializer, transposed folds
                          included), exported plain, with a symbolic batch,
                          with dynamo=False and with optimize=False (equal
                          initializers, each its own parameter in the graph
                          signature); tenc/ its references
                          (data: gpt/)
  tseq_dynamo.onnx        nn.Transformer (deep-copied encoder and decoder
                          layers; the tokens as source and causal target),
                          plain export; tseq/ its references and logits
                          after the SGD steps
  merged_three.onnx, merged_both.onnx, merged_chain.onnx
                          calls the optimiser merged where smp cannot tell
                          which parameters each read (refused)
  fused_norms.onnx        Gemma-style norms fused into RMSNormalization at
                          opset 23 (refused for their folded `1 + w`, not
                          taken for merged calls)
  tied_head.onnx          a BERT-style LM head whose bias is its decoder's
                          (one tensor, two names), DeBERTa's folded
                          positions and all-ones mask; tied_head/ its
                          references (data: gpt/)
  own_bias.onnx           the same with the head's bias a zero-initialised
                          parameter of its own, folded (refused)
  layer_scale.onnx        LayerScale (ones) beside fresh LayerNorms: all
                          merged into one initializer; layer_scale/ its
                          references (data: gpt/)
  none_norms.onnx         norms without weight or bias (LayerNorm with
                          elementwise_affine=False, InstanceNorm1d) beside
                          a fresh LayerNorm: the exporter's ones and zeros
                          merged with its weight and bias; none_norms/ its
                          references (data: gpt/)
  group_norms.onnx        three fresh GroupNorms of one size (their
                          translation's per-group ones and zeros, and
                          their folded weights and biases, merged) and
                          F.interpolate(scale_factor=2) (a Resize reading
                          float scales), diffusers' resnet block over
                          the positions; group_norms/ its references and
                          logits after the SGD steps (data: gpt/)
  bare_merged.onnx, bare_inorm.onnx, bare_swap.onnx
                          a norm without weight or bias and a fresh
                          affine one of one input (GroupNorm;
                          InstanceNorm1d; the affine one first): the
                          optimiser merged the calls (refused)
  bare_exact.onnx         two GroupNorms and two InstanceNorm1ds without
                          weight or bias, each pair of one input: an exact
                          merge; bare_exact/ its references (data: gpt/)
  detach_ste.onnx, detach_stop.onnx, detach_frozen.onnx, detach_probe.onnx (and
  detach_ste_noopt.onnx, detach_frozen_noopt.onnx: optimize=False;
  detach_ste_batch.onnx: a symbolic batch; detach_nograd.onnx: a
  torch.no_grad() block, its stack traces kept; detach_scaled.onnx: a
  weight read scaled, folded)
                          `.detach()` in the forward: a straight-through
                          rounding, a stop-gradient gate, a Linear's
                          weight read detached, a linear probe;
                          detach_{ste,stop,frozen,probe}/
                          their references (data: gpt/)
  buffer_noopt.onnx       a float buffer fed to a Linear (Swin-v2's
                          relative_coords_table), optimize=False; buffer/
                          its references (data: gpt/)
  sinus_default.onnx, sinus_noopt.onnx, sinus_torchscript.onnx
                          Marian's frozen sinusoidal position embedding
                          (requires_grad=False), exported with the
                          defaults (its rows gathered at positions 0..7
                          and folded), optimize=False and dynamo=False;
                          sinus/ its references (data: gpt/)
  gpt/idx.npy, gpt/labels.npy   16 samples of 8 tokens (gpt/first8: the first 8)
  gpt/ref_sgd.json, gpt/ref_adamw.json  PyTorch's per-step losses and grad
      norms of mlpgpt (5 steps, batch 8, train() mode), for
      test/train/compare_losses.py
  gpt/logits_after_sgd.npy  mlpgpt's logits of the first batch after the
      5 SGD steps (checks --save-onnx)

Needs torch and onnx (PyPI); CI only reads the committed files.
"""


import copy

import numpy as np
import onnx
import torch
import torch.nn as nn

import torch_refs

VOCAB, DIM, HEADS, SEQ, LAYERS = 32, 16, 2, 8, 2
BATCH, SAMPLES, STEPS = 8, 16, 5


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True, bias=True)
        self.ln2 = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.fc2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x, mask):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.fc2(torch.relu(self.fc1(self.ln2(x))))


class MlpBlock(nn.Module):
    """A residual block without attention (fresh LayerNorms, random biases)."""

    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.fc2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x, mask):
        return x + self.fc2(torch.relu(self.fc1(self.ln1(x))))


class SharedBlockLM(nn.Module):
    """ALBERT-style: one block (its LayerNorm too) applied at every layer, a
    true tie that every pipeline stage and virtual chunk reads."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.block = MlpBlock()
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.wte(idx)
        for _ in range(4):
            x = self.block(x, None)
        return self.head(self.ln_f(x))


class DeepCopiedEncoder(nn.Module):
    """PyTorch's own nn.TransformerEncoder: its layers are copy.deepcopy's
    of one layer (post-norm, PyTorch's default), so every layer starts with
    the same weights: separate parameters with equal values."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        layer = nn.TransformerEncoderLayer(DIM, HEADS, 4 * DIM, dropout=0.0,
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, LAYERS,
                                         enable_nested_tensor=False)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        return self.head(self.enc(self.wte(idx)))


class DeepCopiedSeq2Seq(nn.Module):
    """PyTorch's nn.Transformer (deep-copied encoder and decoder layers),
    the tokens as source and as causally masked target. Its cross-attention
    splits the packed bias with a node the dynamo optimiser keeps and
    merges across the decoder layers."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.tr = nn.Transformer(DIM, HEADS, LAYERS, LAYERS, 4 * DIM,
                                 dropout=0.0, batch_first=True)
        self.head = nn.Linear(DIM, VOCAB)
        self.register_buffer(
            "mask", nn.Transformer.generate_square_subsequent_mask(SEQ),
            persistent=False)

    def forward(self, idx):
        x = self.wte(idx)
        return self.head(self.tr(x, x, tgt_mask=self.mask, tgt_is_causal=True))


class TinyGPT(nn.Module):
    def __init__(self, block=Block):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList([block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.wte.weight  # tied
        self.register_buffer(
            "mask", torch.triu(torch.full((SEQ, SEQ), float("-inf")), 1),
            persistent=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x, self.mask)
        return self.head(self.ln_f(x))


def write_refs(model, init, where, idx, labels, logits_after_sgd=False):
    """PyTorch's references of `model` from `init` into `where`: SGD and
    AdamW (torch_refs.LRS), and optionally the first batch's logits after
    the SGD steps."""
    where.mkdir(exist_ok=True)
    for opt_name, lr in torch_refs.LRS.items():
        model.load_state_dict(init)
        losses, norms = torch_refs.train_steps(model, (idx,), labels, VOCAB,
                                               opt_name, STEPS, BATCH)
        config = {"name": opt_name, "optimizer": opt_name, "lr": lr,
                  "batch_size": BATCH, "steps": STEPS, "samples": SAMPLES,
                  "smpc_flags": (f"--train --loss cross_entropy:logits:labels "
                                 f"--optimizer {opt_name} --lr {lr} "
                                 f"--batch-size {BATCH}")}
        torch_refs.write_ref(where / f"ref_{opt_name}.json", config, losses,
                             norms)
        if opt_name == "sgd" and logits_after_sgd:
            model.eval()
            with torch.no_grad():
                np.save(where / "logits_after_sgd.npy",
                        model(idx[:BATCH]).numpy().astype(np.float32))


class MergedCalls(nn.Module):
    """Calls the dynamo optimiser merges (equal fresh parameters, one
    input) where smp cannot tell which parameters the merged call read.
    kind "three": three LayerNorms of one input, their Linears side by
    side (two norms gone, both as near the readers); "both": one node reads
    the two merged values; "chain": two Linear + ReLU branches of one
    input, the second a deep copy of the first: the optimiser merges the
    Linears, then the ReLUs, and no node names the second Linear."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        if kind == "chain":
            self.fc_a = nn.Linear(DIM, DIM)
            self.fc_b = copy.deepcopy(self.fc_a)
        else:
            self.ln_a, self.ln_b, self.ln_c = (nn.LayerNorm(DIM)
                                               for _ in range(3))
            self.fc_a, self.fc_c = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
            self.fc_b = nn.Linear(DIM, DIM)
        self.wte = nn.Embedding(VOCAB, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.wte(idx)
        if self.kind == "chain":
            h = torch.relu(self.fc_a(x)) - 0.5 * torch.relu(self.fc_b(x))
        elif self.kind == "three":
            h = (self.fc_a(self.ln_a(x)) + self.fc_b(self.ln_b(x)) +
                 self.fc_c(self.ln_c(x)))
        else:
            h = self.ln_a(x) * self.ln_b(x)
        return self.head(h)


class ZeroCentredNorm(nn.Module):
    """Gemma's RMSNorm, `x * rsqrt(mean(x^2) + eps) * (1 + w)`, w zero."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(DIM))

    def forward(self, x):
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) *
                (1.0 + self.weight))


class FusedNorms(nn.Module):
    """Two zero-centred norms around a bias-free Linear, which the dynamo
    optimiser at opset 23 fuses into RMSNormalization nodes whose metadata
    is the last call's (`aten.mul(%mul_2, %add_4)`), reading the folded
    `1 + w` of every norm (`add_1`)."""

    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.n1, self.n2 = ZeroCentredNorm(), ZeroCentredNorm()
        self.fc = nn.Linear(DIM, DIM, bias=False)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.wte(idx)
        return self.head(self.n2(x + self.fc(self.n1(x))))


def write_merged_calls(out, idx):
    """merged_{three,both,chain}.onnx: MergedCalls exported plainly;
    fused_norms.onnx: FusedNorms at opset 23."""
    for kind in ("three", "both", "chain"):
        torch.manual_seed(0)
        model = MergedCalls(kind).eval()
        path = out / f"merged_{kind}.onnx"
        torch.onnx.export(model, (idx[:BATCH],), str(path),
                          input_names=["idx"], output_names=["logits"],
                          external_data=False)
        torch_refs.strip_stack_traces(path)
    torch.manual_seed(0)
    path = out / "fused_norms.onnx"
    torch.onnx.export(FusedNorms().eval(), (idx[:BATCH],), str(path),
                      input_names=["idx"], output_names=["logits"],
                      opset_version=23, external_data=False)
    torch_refs.strip_stack_traces(path)


class SinusoidalLM(nn.Module):
    """Marian's position embedding: an nn.Embedding holding the sinusoidal
    table (sin in the first half of the columns, cos in the second),
    requires_grad=False, which an ONNX file cannot say."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        p = torch.arange(SEQ, dtype=torch.float64)[:, None]
        w = 10000.0 ** (-torch.arange(0, DIM, 2, dtype=torch.float64) / DIM)
        with torch.no_grad():
            self.pos.weight.copy_(torch.cat([torch.sin(p * w),
                                             torch.cos(p * w)], 1))
        self.pos.weight.requires_grad = False
        self.ln = nn.LayerNorm(DIM)
        self.fc = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(h + torch.relu(self.fc(self.ln(h))))


def fresh(cls):
    """A freshly initialised `cls` (seed 0, eval mode), its initial state,
    and the export arguments every trap shares."""
    torch.manual_seed(0)
    model = cls().eval()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    return model, init, dict(input_names=["idx"], output_names=["logits"])


def write_sinusoid(out, idx, labels):
    """sinus_*.onnx and sinus/: SinusoidalLM exported with the defaults
    (the optimiser folds the position lookup: the table's rows 0..7 in an
    initializer of their own), optimize=False and dynamo=False."""
    model, init, common = fresh(SinusoidalLM)
    example = (idx[:BATCH],)
    torch.onnx.export(model, example, str(out / "sinus_default.onnx"),
                      external_data=False, **common)
    torch_refs.strip_stack_traces(out / "sinus_default.onnx")
    torch.onnx.export(model, example, str(out / "sinus_noopt.onnx"),
                      optimize=False, external_data=False, **common)
    torch_refs.strip_stack_traces(out / "sinus_noopt.onnx")
    torch.onnx.export(model, example, str(out / "sinus_torchscript.onnx"),
                      dynamo=False, **common)
    write_refs(model, init, out / "sinus", idx, labels)


class TiedBiasHead(nn.Module):
    """A BERT-style LM head (Hugging Face's BertLMPredictionHead, DeBERTa's,
    RoBERTa's): its `bias` is its decoder's (`self.decoder.bias =
    self.bias`), one tensor under two names; torch.export keeps the
    decoder's. own_bias: the head's `bias` is a parameter of its own,
    zero-initialised and added unsqueezed (a fold of it, read in the head),
    beside the decoder's."""

    def __init__(self, own_bias=False):
        super().__init__()
        self.transform = nn.Linear(DIM, DIM)
        self.decoder = nn.Linear(DIM, VOCAB)
        self.bias = nn.Parameter(torch.zeros(VOCAB))
        self.own_bias = own_bias
        if not own_bias:
            self.decoder.bias = self.bias

    def forward(self, h):
        y = self.decoder(torch.relu(self.transform(h)))
        return y + self.bias.unsqueeze(0) if self.own_bias else y


class Embeddings(nn.Module):
    """DeBERTa's embeddings: tokens plus positions (arange: gathered at
    constant positions, folded), times an all-ones mask made in the graph
    (folded, unsqueezed)."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.ln = nn.LayerNorm(DIM)

    def forward(self, idx):
        mask = torch.ones(idx.shape, dtype=torch.float32).unsqueeze(2)
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.ln(h) * mask


class TiedHeadLM(nn.Module):
    """Embeddings, a residual MLP, a TiedBiasHead."""

    def __init__(self, own_bias=False):
        super().__init__()
        self.emb = Embeddings()
        self.fc = nn.Linear(DIM, DIM)
        self.head = TiedBiasHead(own_bias)

    def forward(self, idx):
        h = self.emb(idx)
        return self.head(h + torch.relu(self.fc(h)))


class LayerScaleLM(nn.Module):
    """Pre-norm residual MLPs with LayerScale (DINOv2, CaiT: `x *
    self.lambda1`, ones at layerscale 1.0): the optimiser merges every
    norm's weight and every scale, all ones, into one initializer, read by
    LayerNormalization and Mul nodes."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.ln = nn.ModuleList(nn.LayerNorm(DIM) for _ in range(LAYERS))
        self.fc = nn.ModuleList(nn.Linear(DIM, DIM) for _ in range(LAYERS))
        self.scale = nn.ParameterList(nn.Parameter(torch.ones(DIM))
                                      for _ in range(LAYERS))
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx)
        for ln, fc, scale in zip(self.ln, self.fc, self.scale):
            x = x + torch.relu(fc(ln(x))) * scale
        return self.head(x)


class NoneArgNormsLM(nn.Module):
    """Norms whose call passes no weight or bias (Data2VecAudio's
    positional convolutions: nn.LayerNorm(elementwise_affine=False);
    nn.InstanceNorm1d, affine=False by default) beside a fresh affine
    LayerNorm of the same size: the ONNX translation gives them a constant
    of ones and one of zeros, which the optimiser merges with the affine
    norm's equal weight and bias. Those constants are no parameter."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.plain = nn.LayerNorm(DIM, elementwise_affine=False)
        self.fc = nn.Linear(DIM, DIM)
        self.inorm = nn.InstanceNorm1d(DIM)  # over the positions
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx)
        h = self.fc(self.plain(x))
        h = h + self.inorm(h.transpose(1, 2)).transpose(1, 2)
        return self.head(self.ln(x + torch.relu(h)))


class GroupNormUpsampleLM(nn.Module):
    """A diffusers UNet's resnet block, over the positions (channels first,
    as Conv1d reads them): three fresh GroupNorms of one size, whose ONNX
    translation normalises each group with an InstanceNormalization of the
    exporter's own ones and zeros (merged across the norms, and with
    nothing the call passes), then applies the norm's weight and bias,
    which the optimiser folds unsqueezed and merges too; and an upsampling
    by F.interpolate(scale_factor=2), whose Resize reads its scales from a
    float initializer."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.gn1 = nn.GroupNorm(2, DIM)
        self.conv = nn.Conv1d(DIM, DIM, 3, padding=1)
        self.gn2 = nn.GroupNorm(2, DIM)
        self.down = nn.Conv1d(DIM, DIM, 2, stride=2)
        self.gn3 = nn.GroupNorm(2, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx).transpose(1, 2)  # [B, DIM, SEQ]
        h = self.conv(nn.functional.silu(self.gn1(x)))
        h = nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
        h = self.down(nn.functional.silu(self.gn2(h)))  # back to SEQ
        return self.head(self.gn3(x + h).transpose(1, 2))


class BareNorms(nn.Module):
    """A norm without weight or bias beside another norm of one input. Its
    call gets the exporter's ones and zeros, equal to a fresh affine norm's
    weight and bias, so the optimiser merges the two calls: kind "merged",
    GroupNorm(affine=False) and a fresh GroupNorm summed (the affine
    module's parameters gone from the file); "inorm", InstanceNorm1d and a
    fresh affine one read by different nodes (its parameters left in the
    file, read only as the bare norm's ones and zeros); "swap", the affine
    GroupNorm called first (its parameters read through both calls);
    "exact", two bare GroupNorms and two bare InstanceNorm1ds, each pair of
    one input (the merge is exact)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.tok = nn.Embedding(VOCAB, DIM)
        if kind == "inorm":
            self.a = nn.InstanceNorm1d(DIM)
            self.b = nn.InstanceNorm1d(DIM, affine=True)
        else:
            self.a = nn.GroupNorm(2, DIM, affine=False)
            self.b = nn.GroupNorm(2, DIM, affine=kind != "exact")
        if kind == "exact":
            self.c, self.d = nn.InstanceNorm1d(DIM), nn.InstanceNorm1d(DIM)
            self.fc = nn.Conv1d(DIM, DIM, 1)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx).transpose(1, 2)  # [B, DIM, SEQ]
        if self.kind == "swap":
            h = self.b(x) + self.a(x)
        elif self.kind == "inorm":
            h = self.a(x) * 2.0 + torch.tanh(self.b(x))
        else:
            h = self.a(x) + self.b(x)
        if self.kind == "exact":
            h = self.fc(h)
            h = self.c(h) - 0.5 * torch.tanh(self.d(h))
        return self.head(h.transpose(1, 2))


class BufferMlpLM(nn.Module):
    """Swin-v2's continuous position bias: a float buffer (a table of
    coordinates, register_buffer) fed to an MLP, so gradients reach it.
    PyTorch never trains a buffer."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.register_buffer("table", torch.randn(SEQ, 2))
        self.cpb = nn.Linear(2, DIM)
        self.fc = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.cpb(self.table)
        return self.head(x + torch.relu(self.fc(x)))


def write_tied_heads(out, idx, labels):
    """tied_head.onnx and tied_head/: TiedHeadLM (plain export);
    own_bias.onnx: its head's bias a parameter of its own; layer_scale.onnx
    and layer_scale/: LayerScaleLM; none_norms.onnx and none_norms/:
    NoneArgNormsLM; buffer_noopt.onnx and buffer/:
    BufferMlpLM exported with optimize=False."""
    model, init, common = fresh(TiedHeadLM)
    torch.onnx.export(model, (idx[:BATCH],), str(out / "tied_head.onnx"),
                      external_data=False, **common)
    torch_refs.strip_stack_traces(out / "tied_head.onnx")
    write_refs(model, init, out / "tied_head", idx, labels)
    model, init, common = fresh(lambda: TiedHeadLM(own_bias=True))
    torch.onnx.export(model, (idx[:BATCH],), str(out / "own_bias.onnx"),
                      external_data=False, **common)
    torch_refs.strip_stack_traces(out / "own_bias.onnx")
    model, init, common = fresh(LayerScaleLM)
    torch.onnx.export(model, (idx[:BATCH],), str(out / "layer_scale.onnx"),
                      external_data=False, **common)
    torch_refs.strip_stack_traces(out / "layer_scale.onnx")
    write_refs(model, init, out / "layer_scale", idx, labels)
    model, init, common = fresh(NoneArgNormsLM)
    torch.onnx.export(model, (idx[:BATCH],), str(out / "none_norms.onnx"),
                      external_data=False, **common)
    torch_refs.strip_stack_traces(out / "none_norms.onnx")
    write_refs(model, init, out / "none_norms", idx, labels, True)
    model, init, common = fresh(BufferMlpLM)
    torch.onnx.export(model, (idx[:BATCH],), str(out / "buffer_noopt.onnx"),
                      optimize=False, external_data=False, **common)
    torch_refs.strip_stack_traces(out / "buffer_noopt.onnx")
    write_refs(model, init, out / "buffer", idx, labels)


def write_group_norms(out, idx, labels):
    """group_norms.onnx and group_norms/: GroupNormUpsampleLM (plain
    export), with its logits after the SGD steps."""
    model, init, common = fresh(GroupNormUpsampleLM)
    torch.onnx.export(model, (idx[:BATCH],), str(out / "group_norms.onnx"),
                      external_data=False, **common)
    torch_refs.strip_stack_traces(out / "group_norms.onnx")
    write_refs(model, init, out / "group_norms", idx, labels, True)


def write_bare_norms(out, idx, labels):
    """bare_{merged,inorm,swap,exact}.onnx (plain export) and bare_exact/,
    the references of the one smp trains."""
    for kind in ("merged", "inorm", "swap", "exact"):
        torch.manual_seed(0)
        model = BareNorms(kind).eval()
        init = {k: v.clone() for k, v in model.state_dict().items()}
        path = out / f"bare_{kind}.onnx"
        torch.onnx.export(model, (idx[:BATCH],), str(path),
                          input_names=["idx"], output_names=["logits"],
                          external_data=False)
        torch_refs.strip_stack_traces(path)
    write_refs(model, init, out / "bare_exact", idx, labels)


def write_deep_copied(out, idx, labels):
    """tenc_*.onnx and tenc/: nn.TransformerEncoder exported four ways;
    tseq_dynamo.onnx and tseq/: nn.Transformer."""
    model, init, common = fresh(DeepCopiedEncoder)
    example = (idx[:BATCH],)
    torch.onnx.export(model, example, str(out / "tenc_dynamo.onnx"),
                      external_data=False, **common)
    torch.onnx.export(model, example, str(out / "tenc_batch.onnx"),
                      dynamic_shapes={"idx": {0: torch.export.Dim("batch")}},
                      external_data=False, **common)
    torch.onnx.export(model, example, str(out / "tenc_torchscript.onnx"),
                      dynamo=False, **common)
    torch.onnx.export(model, example, str(out / "tenc_noopt.onnx"),
                      optimize=False, external_data=False, **common)
    for f in ("tenc_dynamo.onnx", "tenc_batch.onnx", "tenc_noopt.onnx"):
        torch_refs.strip_stack_traces(out / f)
    write_refs(model, init, out / "tenc", idx, labels, True)
    model, init, common = fresh(DeepCopiedSeq2Seq)
    torch.onnx.export(model, example, str(out / "tseq_dynamo.onnx"),
                      external_data=False, **common)
    torch_refs.strip_stack_traces(out / "tseq_dynamo.onnx")
    write_refs(model, init, out / "tseq", idx, labels, True)


def main():
    ap = torch_refs.fixture_arguments("traps")
    ap.add_argument("--only",
                    choices=["tenc", "merged", "sinus", "ties", "groupnorm",
                             "bare", "detach", "folds", "torchscript"],
                    help="write only these fixtures (the others keep the "
                         "files their torch version wrote)")
    args = ap.parse_args()
    out = args.out
    (out / "gpt").mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    labels = torch.randint(0, VOCAB, (SAMPLES, SEQ), generator=g)
    np.save(out / "gpt" / "idx.npy", idx.numpy())
    np.save(out / "gpt" / "labels.npy", labels.numpy())
    (out / "gpt" / "first8").mkdir(exist_ok=True)
    np.save(out / "gpt" / "first8" / "idx.npy", idx[:BATCH].numpy())
    if args.only in (None, "tenc"):
        write_deep_copied(out, idx, labels)
    if args.only in (None, "merged"):
        write_merged_calls(out, idx)
    if args.only in (None, "sinus"):
        write_sinusoid(out, idx, labels)
    if args.only in (None, "ties"):
        write_tied_heads(out, idx, labels)
    if args.only in (None, "groupnorm"):
        write_group_norms(out, idx, labels)
    if args.only in (None, "bare"):
        write_bare_norms(out, idx, labels)
    if args.only in (None, "detach"):
        from export_traps_detach import write_detached
        write_detached(out, idx, labels)
    if args.only in (None, "folds"):
        from export_traps_folds import write_merged_folds
        write_merged_folds(out, idx, labels)
    if args.only in (None, "torchscript"):
        from export_traps_folds import write_torchscript
        write_torchscript(out, idx, labels)
    if args.only:
        print("wrote", out)
        return

    # gpt: attention (nn.MultiheadAttention, zero-initialised biases), for
    # what smp must refuse; mlpgpt: no attention, for what it must train.
    for name, block in (("gpt", Block), ("mlpgpt", MlpBlock)):
        torch.manual_seed(0)
        model = TinyGPT(block).eval()
        init = {k: v.clone() for k, v in model.state_dict().items()}
        example = idx[:BATCH]
        torch.onnx.export(model, (example,), str(out / f"{name}_dynamo.onnx"),
                          input_names=["idx"], output_names=["logits"],
                          external_data=False)
        torch.onnx.export(model, (example,), str(out / f"{name}_torchscript.onnx"),
                          input_names=["idx"], output_names=["logits"],
                          dynamo=False)
        if name == "gpt":
            # The attention model's references (its zero out-projection bias
            # is the one the dynamo exporter's optimiser removes).
            write_refs(model, init, out / "gpt_mha", idx, labels, True)
        if name != "mlpgpt":
            continue
        # The dynamo export without its metadata (as tools that rewrite ONNX
        # files with an older onnx library leave it): smp must guess.
        stripped = onnx.load(str(out / f"{name}_dynamo.onnx"))
        del stripped.graph.metadata_props[:]
        for node in stripped.graph.node:
            del node.metadata_props[:]
        onnx.save(stripped, str(out / f"{name}_nometa.onnx"))
        # The same model with a symbolic batch, for the parallel plans.
        torch.onnx.export(model, (example,), str(out / f"{name}_batch.onnx"),
                          input_names=["idx"], output_names=["logits"],
                          dynamic_shapes={"idx": {0: torch.export.Dim("batch")}},
                          external_data=False)
        write_refs(model, init, out / "gpt", idx, labels, True)
    # albert: a block shared by 4 layers (symbolic batch).
    torch.manual_seed(0)
    model = SharedBlockLM().eval()
    init = {k: v.clone() for k, v in model.state_dict().items()}
    torch.onnx.export(model, (idx[:BATCH],), str(out / "albert_batch.onnx"),
                      input_names=["idx"], output_names=["logits"],
                      dynamic_shapes={"idx": {0: torch.export.Dim("batch")}},
                      external_data=False)
    write_refs(model, init, out / "albert", idx, labels)
    print("wrote", out)


if __name__ == "__main__":
    main()
