//===- FusionPasses.td - The clean-up phase's fusions ------*- tablegen -*-===//
//
// The passes of the clean-up phase (kPhaseCleanup) that fuse ops of the
// built step into fewer kernels: included by Passes.td, one generated
// Passes.h.inc.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_TRANSFORMS_FUSIONPASSES_TD
#define SMP_DIALECT_SMP_TRANSFORMS_FUSIONPASSES_TD

include "mlir/Pass/PassBase.td"

def SmpFuseBackwardPass : Pass<"smp-fuse-backward", "mlir::func::FuncOp"> {
  let summary = "Fold the backward's elementwise tails into the gradient ops";
  let description = [{
    Two passes over memory the training step does not need, each folded into
    the kernel that makes the value:
    - `reduce_sum(gelu_grad(x, dy))` over every dim but the last (the
      gradient of the bias added before the GELU) becomes
      `smp.bias_gelu_grad`, which sums the columns as it writes them;
    - `add(r, layer_norm_grad(...)#0)` (and rms_norm_grad: the residual
      branch's gradient added to the norm's input gradient) becomes the norm
      gradient with `residual r`, when that input gradient has no other use.
    Both kernels round as the unfused ops do: the bits do not change. And
    `shard.all_slice(shard.all_reduce(x))` (a sum of which each rank keeps
    its part: the gradient of a sequence-parallel region's entry) becomes
    `shard.reduce_scatter(x)`, when the all_reduce has no other use, and
    `shard.all_gather(shard.all_slice(x))` is `x` (an all_slice's input is
    the same on every rank of its group). Runs
    after the training step is built and split (any plan), before the
    final canonicalization.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
}

def SmpFuseMatMulBiasPass : Pass<"smp-fuse-matmul-bias", "mlir::func::FuncOp"> {
  let summary = "Fold a bias added to a product's rows into the product";
  let description = [{
    `add(bias, matmul(x, w))` (either operand order), where the product has
    no other use, `bias` is `[N]` or `[1, ..., 1, N]` (N the product's last
    dim) of the product's float element type and `w` has rank 2 or more,
    becomes `smp.matmul_bias(x, w, bias)`: on CUDA cuBLASLt adds the bias in
    the product's epilogue, so the product is not read and written a second
    time (nn.Linear's forward; four per transformer layer). Both backends
    add the bias before the product's one rounding (an f16/bf16 product was
    rounded twice by the pair; f32 and f64 bits do not change). With
    `addend` (the pipeline's default; smpc `--no-residual-epilogue` leaves
    it out), `add(r, matmul_bias(x, w, b))`, where the product has no other
    use, r has its type and is defined before the product (the fused op
    takes the product's place: its operands live no longer), and both ops
    are in one block with the same annotations, becomes `smp.matmul_bias_add(x, w, b, r)`, and `add(r,
    matmul(x, w))` (a float product, w of rank 2 or more: a Linear without
    a bias, LLaMA's) `smp.matmul_add(x, w, r)`: cuBLASLt reads r as C (beta
    = 1), so the residual connection after a transformer's
    attention and MLP output projections runs no add kernel (which read the
    product and r and wrote their sum: 75 MB a layer for GPT-2 124M at batch
    16 x 1024 in bf16, twice); f16/bf16 round the sum once. Runs in the
    clean-up phase (after every plan's split, so a row-parallel layer's
    bias, added after the all_reduce, stays an add, and so does its
    residual).
  }];
  let options = [
    Option<"addend", "addend", "bool", /*default=*/"false",
           "also add(r, matmul_bias(x, w, b)) -> matmul_bias_add(x, w, b, r)">
  ];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpFuseGeluEpiloguePass : Pass<"smp-fuse-gelu-epilogue",
                                   "mlir::func::FuncOp"> {
  let summary = "Move a product's GELU (and its gradient) into the product";
  let description = [{
    `gelu(matmul_bias(x, w, b)) {approximate = tanh}` becomes
    `smp.matmul_bias_gelu(x, w, b)` (its `preactivation` result replaces
    the product for every other reader: the backward's gradient, a
    recomputation): on CUDA cuBLASLt's GELU_AUX_BIAS epilogue, so GPT-2's
    MLP runs no GELU kernel (the product's 100 MB a layer at batch 16 x
    1024 not read and written again). With `backward`,
    `bias_gelu_grad(p, matmul(g, v)) {approximate = tanh}`, where the
    product has no other reader, becomes `smp.matmul_gelu_grad(g, v, p)`
    as well: cuBLASLt's DGELU_BGRAD epilogue. Not by default: on an H200
    that epilogue ran GPT-2's products at 166 TFLOP/s where plain ones ran
    at 552-645, and the product then `bias_gelu_grad`'s one pass over
    16-byte vectors are predicted faster (docs/benchmarks.md). f16/bf16
    only (the epilogue's GELU is the tanh form, computed on the f32 product
    before the one rounding); the ops fused must carry the same
    annotations. Runs in the clean-up phase after `smp-fuse-matmul-bias`
    and `smp-fuse-backward`, which form the ops it reads.
  }];
  let options = [
    Option<"backward", "backward", "bool", /*default=*/"false",
           "also bias_gelu_grad(p, matmul(g, v)) -> matmul_gelu_grad">
  ];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpFuseBiasGradPass : Pass<"smp-fuse-bias-grad", "mlir::func::FuncOp"> {
  let summary = "Sum a bias gradient in its layer's weight-gradient product";
  let description = [{
    `reduce_sum(g)` over every dim but the last (a linear layer's bias
    gradient) and `matmul(reshape(g) [M, N], x [M, K]) {transpose_lhs}`
    (its weight gradient), in one block with the same annotations, become
    one `smp.matmul_bias_grad(reshape(g), x)` at the earlier of the two:
    on CUDA cuBLASLt's BGRADB epilogue sums the bias gradient while the
    product reads g, so no separate sum reads it again (GPT-2: three a
    layer; the fourth, c_fc's, is in `smp.matmul_gelu_grad`). f16/bf16
    only, as `smp-fuse-gelu-epilogue`; the layer's input must be defined
    before the earlier op. Runs in the clean-up phase after
    `smp-fuse-gelu-epilogue`, so a GELU layer's bias sum goes there first.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpFuseLossCastsPass : Pass<"smp-fuse-loss-casts", "mlir::func::FuncOp"> {
  let summary = "Compute a bf16/f16 model's cross-entropy on its own logits";
  let description = [{
    `smp.cross_entropy(cast(x))` where the cast widens f16/bf16 logits to
    f32 (smp-mixed-precision casts the function's results up, so the loss
    is f32) reads `x` instead, its loss staying f32; and
    `cast(smp.cross_entropy_grad(cast(x), ...))` back to x's type, when the
    f32 gradient has no other use, becomes the gradient of `x` written in
    x's type. The kernels widen each row to f32 and compute as on the f32
    copy, rounding the gradient to x's type as the cast did: the bits do not
    change, and the step loses its two largest tensors for a language model
    (the f32 logits and their f32 gradient, [tokens, vocab] each) and four
    passes over them. Losses with class weights keep their casts. Runs in
    the clean-up phase.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpFuseLossGradPass : Pass<"smp-fuse-loss-grad", "mlir::func::FuncOp"> {
  let summary = "Compute a training step's cross-entropy and its gradient in one op";
  let description = [{
    `smp.cross_entropy(x, y)` and `smp.cross_entropy_grad(x, y, s)` of the
    same logits, labels, class weights, attributes and annotations, in one
    block, become one `smp.cross_entropy_with_grad(x, y, s)` (results: the
    loss, the gradient) at the loss's place when the incoming gradient `s`
    is defined before the loss (a pure op defining `s` from values defined
    before the loss is moved up: the seed over the micro-batch count), else
    at the gradient's, where the ops between the two that read the loss
    are pure and the gradient reads none of them (they move after it:
    data parallelism's division of the loss by the all-reduced count). One
    kernel reads each row of logits for its statistics and again for the
    gradient, where the pair read it three times (a language model's
    logits: the step's largest tensor). The same numbers: both backends
    compute the fused op's loss and gradient as the two ops did. Runs in
    the clean-up phase after `smp-fuse-loss-casts` and `smp-pad-classes`.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpPadClassesPass : Pass<"smp-pad-classes", "mlir::func::FuncOp"> {
  let summary = "Pad an LM head's vocabulary so its products are aligned";
  let description = [{
    A cross-entropy's logits computed by `smp.matmul` / `smp.matmul_bias`
    from a rank-2 weight, with a class count V of at least `min-classes` not
    a multiple of 8 (GPT-2: 50257), become Vp columns (the next multiple of 64; of 8 below 4096
    classes): the weight (and bias) is concatenated with zeros before the
    product, the loss and its gradient read the first V columns
    (`classes = V`, zero gradient past them), the gradient's products
    contract the padded weight, and a product or sum whose result has a
    class axis is sliced back to V. Rows of V f16/bf16 values are not
    16-byte aligned, which restricts cuBLASLt to its slow unaligned kernels
    for the step's three largest products (nanoGPT's vocabulary padding).
    Left alone: logits with any other reader (an output, a softmax), or a
    gradient read by an op other than a reshape keeping its last dim, a
    product, `smp.matmul_bias_grad` or a sum over other dims. Runs in the
    clean-up phase after `smp-fuse-loss-casts` (the loss reads the 16-bit
    logits themselves). Class counts below `min-classes` (a classifier's
    few classes: small products either way) stay as they are.
  }];
  let options = [
    Option<"minClasses", "min-classes", "int64_t", /*default=*/"1024",
           "pad only class counts of at least this many">,
  ];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpFuseSumSquaresPass : Pass<"smp-fuse-sum-squares", "mlir::func::FuncOp"> {
  let summary = "Sum the gradient norm's squares in one op";
  let description = [{
    `add(a, b)` where each of a and b is an f32 scalar used once, either
    `reduce_sum(mul(x, x))` over every dim of an f32 x (the mul used once)
    or an `smp.sum_squares`, becomes `smp.sum_squares` of their inputs (a's
    first), so the gradient norm's chain of one mul, one reduce_sum and one
    add per parameter becomes one op (on a GPU a few launches instead of
    three per parameter). The kernels round as the chain did: the bits do
    not change. Runs in the clean-up phase, after every plan's split (a
    stage's or a tensor-parallel group's partial sums stay separate: their
    adds meet collectives, not terms).
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpFuseGradCastsPass : Pass<"smp-fuse-grad-casts", "mlir::func::FuncOp"> {
  let summary = "Let the optimizer and the gradient norm read 16-bit gradients";
  let description = [{
    Under bf16/f16 mixed precision each parameter's gradient is computed in
    16 bits and cast up to f32 for the gradient norm and the optimizer. A
    `cast` of an f16/bf16 x to f32 whose every use is an `smp.sum_squares`
    input or the gradient of an `smp.adam_update` or `smp.sgd_update` of an
    f32 parameter goes:
    those uses read x, which their kernels widen to f32 as the cast did (the
    bits do not change). The step loses an f32 copy of every gradient (4
    bytes a parameter of arena, 10 bytes a parameter of traffic) and a
    launch per parameter. Runs in the clean-up phase, after
    `smp-fuse-sum-squares`.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpPackAttentionPass : Pass<"smp-pack-attention", "mlir::func::FuncOp"> {
  let summary = "Let attention read a fused QKV projection in place";
  let description = [{
    A `split` of a [B, S, (Hq + 2 Hkv) D] projection along its last axis
    into q, k and v, each only `reshape`d to [B, S, H, D] heads for
    `smp.attention` and `smp.attention_grad` (bshd, reading them as query,
    key and value), becomes a reshape of the projection to [B, S, Hq + 2 Hkv,
    D] that `smp.packed_attention` and `smp.packed_attention_grad` read in
    place; when each backward's dq, dk and dv are only reshaped and
    concatenated (axis 2, in that order) into the projection's gradient,
    the packed backward writes that gradient. Otherwise (another reader, a
    trainable mask, other head dims) nothing changes. GPT-2: the split and
    concat copies of every layer go (2 x 3 launches), and the forward keeps
    the projection for the backward instead of q, k and v. The numbers do
    not change. Runs in the clean-up phase.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpMultiTensorPass : Pass<"smp-multi-tensor", "mlir::func::FuncOp"> {
  let summary = "One op for the per-parameter updates, casts, sums and slices";
  let description = [{
    As PyTorch's fused and foreach optimizers: `smp.adam_update`s (and
    `smp.sgd_update`s) with the same lr, step, skip, hyper-parameters and
    annotations become one `smp.adam_update_multi` (`smp.sgd_update_multi`)
    where the last of them was (an op that reads an
    update's result before then ends the group: the updates so far become
    one op before it); the f32 adds of one shape that read a 16-bit tensor
    through a cast to f32 only they read (the micro-batches' accumulation
    of the gradients under mixed precision) become one `smp.add_multi` of
    the 16-bit sources where the last of them was, in groups of up to 64
    MiB of sums, the casts gone; the `smp.cast`s of the function's
    arguments between float types (mixed precision's 16-bit copies of the
    f32 parameters) become one `smp.cast_multi` where the first of them
    was; ZeRO-1/2's `shard.all_slice`s along dim 0 one
    `smp.all_slice_multi`; the float casts that only a concat reads (data
    parallelism's 16-bit gradients cast to their f32 bucket) one
    `smp.cast_multi` before it. On a GPU one launch each instead of one a
    parameter (a GPT-2 124M bf16 step: 296 fewer). The bits do not change.
    Runs after the clean-up phase, in the compile's last phase (the
    planner's profile of the step does not run it; the arena it checks
    does).
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

#endif // SMP_DIALECT_SMP_TRANSFORMS_FUSIONPASSES_TD
