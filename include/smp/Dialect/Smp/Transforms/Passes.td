//===- Passes.td - smp dialect passes ----------------------*- tablegen -*-===//

#ifndef SMP_DIALECT_SMP_TRANSFORMS_PASSES_TD
#define SMP_DIALECT_SMP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"
include "smp/Dialect/Smp/Transforms/FusionPasses.td"

def SmpRaiseNormsPass : Pass<"smp-raise-norms", "mlir::func::FuncOp"> {
  let summary = "Recognise decomposed layer-norm and RMS-norm chains";
  let description = [{
    Exporters write `nn.LayerNormalization` at opset < 17 (and every
    hand-written RMSNorm) as ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add chains. This
    pass rewrites them into `smp.layer_norm` / `smp.rms_norm`, so that kernel
    selection, gradients and tensor-parallel sharding see one op.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpRaiseActivationsPass
    : Pass<"smp-raise-activations", "mlir::func::FuncOp"> {
  let summary = "Recognise GELU (erf and tanh forms) and SiLU chains";
  let description = [{
    Rewrites `x * 0.5 * (1 + erf(x / sqrt(2)))` to `smp.gelu`,
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))` to
    `smp.gelu {approximate = tanh}` and `x * sigmoid(x)` to `smp.silu`.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpRaiseAttentionPass
    : Pass<"smp-raise-attention", "mlir::func::FuncOp"> {
  let summary = "Fuse scaled-dot-product attention chains into smp.attention";
  let description = [{
    Rewrites `matmul(softmax(scale * q k^T [+ mask]), v)` into
    `smp.attention`, which never materialises the [S, Sk] scores. Matches the
    forms exporters write: the scale on the scores or split over q and k
    (PyTorch's `scaled_dot_product_attention` export), k^T as a transpose
    (or reshape-transpose-reshape) of k, additive float masks and boolean
    masks applied with `where(cond, -inf, s)`, and the export's guard that
    turns a fully masked row's NaN into 0. A mask that is exactly causal
    becomes `causal = true`; grouped-query attention's repeated keys and
    values (Hugging Face's repeat_kv: reshape, expand, reshape) are read as
    the key/value heads themselves. A mask computed from trainable
    parameters (T5's relative position bias) fuses too: its gradient is
    `smp.attention_mask_grad`'s. A training dropout between the softmax and
    the product (`smp.dropout`) becomes the op's `ratio` and `stream`: its
    kernels draw the mask the dropout would have drawn. A chain whose
    scores, mask or probabilities are used elsewhere or whose shapes
    broadcast stays unfused, as imported.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

def SmpAttentionLayoutPass
    : Pass<"smp-attention-layout", "mlir::func::FuncOp"> {
  let summary = "Let smp.attention read and write [B, S, H, D] (no transposes)";
  let description = [{
    An `smp.attention` whose q, k and v are each a `transpose` swapping dims
    1 and 2 (the projections' [B, S, H, D] heads moved to [B, H, S, D])
    reads the untransposed values instead, with `bshd = true`, and the
    transposes of its output back to [B, S, H, Dv] become its output (any
    other use reads it transposed to [B, H, S, Dv] once). The gradient keeps
    the layout, so the training step loses the copies of q, k, v, the
    output and their gradients (eight a layer). The numbers do not change.
    Runs after `smp-raise-attention`.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
}

// The training step, built by the passes below in this order (see
// lib/Dialect/Smp/Transforms/TrainStepContract.h for the IR between them;
// smp::buildTrainingPipeline adds them from the typed plan).

def SmpCheckSampleSplitPass
    : Pass<"smp-check-sample-split", "mlir::ModuleOp"> {
  let summary = "Refuse a forward that mixes the samples of a split batch";
  let description = [{
    Under data parallelism and micro-batches each shard (a rank's
    micro-batch) runs `func @main` on its own samples. Follows the samples
    from the inputs (SampleDims.h) and fails, naming the op, when what the
    loss reads mixes them (a reduction, softmax, norm, contraction, slice or
    concat over the batch dim: a mean over the batch, a similarity matrix
    between samples) or cannot be followed, or (`cross_entropy:`/`mse:`
    losses, whose labels or targets are split along dim 0) holds its
    samples along another dim than 0. Changes nothing. Runs first in the
    training pipeline, on the model as imported.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "NAME (a scalar output), cross_entropy:LOGITS:LABELS or "
           "mse:OUTPUT:TARGET">,
    Option<"dp", "dp", "int", /*default=*/"1", "data-parallel ranks">,
    Option<"microbatches", "microbatches", "int", /*default=*/"1",
           "micro-batches per step">
  ];
}

def SmpMarkEvalPaddingPass
    : Pass<"smp-mark-eval-padding", "mlir::ModuleOp"> {
  let summary = "Say whether an evaluation can pad its short last batch";
  let description = [{
    An evaluation (smprun --eval-data) runs the training step's forward on
    whole global batches of held-out samples; the Hugging Face Trainer also
    evaluates a short last batch. smprun pads it to the global batch with
    copies of held-out samples whose labels are the ignore index -100,
    which leaves them out of a `cross_entropy:LOGITS:LABELS` loss (a mean
    over the counted labels) provided LOGITS is computed sample by sample
    (SampleDims.h: nothing mixes the samples, so the padding changes no
    other sample's logits; LABELS is an input the loss adds, which the
    model does not read). A model's own loss output (`loss=NAME`) leaves
    such samples out where its form does (OwnLossPadding.h: cross-entropies
    ignoring -100 whose labels are an input's values, sums of what vanishes
    where they are -100, terms without the batch, literal scalings) and the
    model reads that input only as labels (moved, compared, or with its
    -100s replaced: not as an embedding's indices, where -100 is out of
    range). Sets
    the module attribute `smp.eval_pad_labels` (the labels input) where
    that holds, else `smp.eval_no_pad` saying why (an `mse:` loss's mean
    over every sample, the op that mixes the samples, the part of an own
    loss that padding changes). For an own loss that pads, also
    `smp.eval_counted_labels`: the ranges of a sample's flattened labels
    its one cross-entropy mean reads (OwnLossCount.h: the loss an affine
    function of it, its labels the input moved by slices, reshapes, casts
    and concatenations with -100), by which smprun weighs the global
    batches of an evaluation batch of another size; for one that is a sum
    over the samples (cross-entropy sums and padding-free sums combined
    with constant coefficients) `smp.eval_loss_sums` (its global batches'
    losses add up); else `smp.eval_no_count` saying why. Changes nothing else. Runs first in the
    training pipeline, on the model as imported.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "NAME (a scalar output), cross_entropy:LOGITS:LABELS or "
           "mse:OUTPUT:TARGET">
  ];
}

def SmpMarkSampleOutputsPass
    : Pass<"smp-mark-sample-outputs", "mlir::ModuleOp"> {
  let summary = "Say which outputs of a forward are computed sample by sample";
  let description = [{
    For a forward-only artifact: follows the samples from the inputs
    through `func @main` (SampleDims.h) and gives each result the attribute
    `smp.samples`: "per-sample" where it holds the samples along dim 0,
    sample-major, each computed from its own sample only (so runs over
    consecutive batches of a dataset, concatenated, equal one run over all
    of it), else why not (the op that mixes the samples or that the
    analysis cannot follow, or that the output holds no samples). smprun
    runs a dataset of several batches only when every output is
    per-sample. Changes nothing else.
  }];
}

def SmpKeyDropoutPass : Pass<"smp-key-dropout", "mlir::ModuleOp"> {
  let summary = "Place each smp.dropout's tensor among the global batch's";
  let description = [{
    A dropout's mask is drawn per element of the global tensor (the whole
    batch), so that every split of the batch draws the one mask of one
    device. On `func @main` as imported (its inputs' leading dim the
    micro-batch), marks each smp.dropout whose input holds the samples along
    dim 0, sample-major (SampleDims.h), with `samples` (the micro-batch) and
    `shard_samples` (a rank's samples in a step: micro-batch x
    `microbatches`), and likewise each attention op with a dropout on its
    probabilities (ratio != 0), whose samples lead as its query's (the
    probabilities are [B, Hq, S, Sk]); a dropout of a value that holds no samples keeps
    `samples` = 0 (one mask for every sample). Under `dp` x `microbatches` > 1
    a dropout of a value that holds them otherwise (interleaved, along
    another dim, mixed) is refused, naming the op: its mask could not be
    placed. smp-build-gradients gives each micro-batch's copy its
    `sample_offset`; the artifact writer adds the rank's data shard.
  }];
  let options = [
    Option<"dp", "dp", "int", /*default=*/"1", "data-parallel ranks">,
    Option<"microbatches", "microbatches", "int", /*default=*/"1",
           "micro-batches per step">
  ];
}

def SmpBuildGradientsPass : Pass<"smp-build-gradients", "mlir::ModuleOp"> {
  let summary = "Build func @train_step: forward, loss and the gradients";
  let description = [{
    Clones `func @main` into `func @train_step`, puts its batch norms in
    train() mode, appends the loss and builds the gradient of every
    trainable parameter with reverse-mode autodiff (AutodiffOpInterface).
    With micro-batches (or pipeline stages) the step is unrolled: the
    forward, loss and backward once per micro-batch (ops marked `smp.mb`),
    the gradients summed. Backward ops are marked `smp.bwd`.

    New arguments: the loss's extra input (labels or targets) and, with
    loss scaling, the state `@loss_scale`. Results: each gradient
    (`smp.grad_of` = its parameter's argument number; parameters that no
    gradient reaches get none, as PyTorch's .grad stays None), the running
    statistics' updates (`smp.update`), `loss` (this rank's share before
    smp-gradient-all-reduce), with loss scaling `loss_scale`, and with
    eval-accuracy `eval_hits` and `eval_labels` (this rank's counts), with
    eval-metrics' `topK_accuracy` `eval_hits_topK`, with its other names
    `eval_confusion`.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"\"",
           "NAME (a scalar output), cross_entropy:LOGITS:LABELS or "
           "mse:OUTPUT:TARGET">,
    Option<"freeze", "freeze", "std::string", /*default=*/"\"\"",
           "parameters whose name matches this regex get no gradient">,
    Option<"dp", "dp", "int", /*default=*/"1",
           "data-parallel ranks (creates shard.grid @dp): the function is "
           "one rank's share of the global batch; losses are scaled so that "
           "the gradients, summed over the ranks, equal the one-device "
           "gradients">,
    Option<"dpShard", "dp-shard", "int", /*default=*/"0",
           "hybrid sharding: the ZeRO passes shard over groups of this many "
           "data-parallel ranks and replicate across the dp / dp-shard "
           "groups (shard.grid @dp becomes [dp / dp-shard, dp-shard]); 0 "
           "or dp: one group of all the ranks">,
    Option<"bnStats", "bn-stats", "std::string", /*default=*/"\"global\"",
           "batch norm in the step (always PyTorch's train() mode: batch "
           "statistics, running statistics updated with momentum and the "
           "unbiased variance): global sums the statistics over the dp "
           "ranks (SyncBatchNorm: every plan equals one device); replica "
           "keeps each rank's own (DDP's BatchNorm), the running statistics "
           "following dp rank 0's; running normalises with the running "
           "statistics and keeps them (PyTorch's eval() mode while training, "
           "torchvision's FrozenBatchNorm2d)">,
    Option<"pipelineRanks", "pp", "int", /*default=*/"1",
           "pipeline ranks: stage (chunk) c runs on rank c mod pp, and a "
           "parameter that several stages read gets one copy per rank "
           "that reads it (its gradient summed over the copies), so that "
           "a rank with several chunks updates it once; 1: every stage is "
           "its own rank">,
    Option<"microbatches", "microbatches", "int", /*default=*/"1",
           "micro-batches per step (gradient accumulation; pipelining). "
           "With more than one, or when @main's ops carry smp.stage, the "
           "step is unrolled per micro-batch: ops get smp.mb (and smp.bwd "
           "for the backward) for smp-pipeline-schedule, and @main must "
           "have been imported with the micro-batch size">,
    Option<"lossScaling", "loss-scaling", "bool", /*default=*/"false",
           "dynamic loss scaling (for fp16): differentiate the loss times "
           "the state @loss_scale (see smp-loss-scaling)">,
    Option<"initScale", "init-scale", "float", /*default=*/"65536.0f",
           "initial loss scale">,
    Option<"evalAccuracy", "eval-accuracy", "bool", /*default=*/"false",
           "also count, per step, the labels the cross-entropy reads and "
           "those whose logit is the row's first maximum (outputs "
           "eval_hits and eval_labels, for an evaluation's accuracy; "
           "EvalAccuracy.h)">,
    ListOption<"evalMetrics", "eval-metrics", "std::string",
               "an evaluation's metrics (smp/base/EvalMetrics.h): "
               "`accuracy` as eval-accuracy; `topK_accuracy` also counts "
               "the labels of rank below K (output eval_hits_topK); any "
               "other the confusion matrix of the labels the cross-entropy "
               "reads by their row's argmax class (output eval_confusion, "
               "[classes, classes] f32); `pearson` and `spearmanr` "
               "(an mse loss) the predictions">,
    Option<"evalPredictions", "eval-predictions", "bool",
           /*default=*/"false",
           "also return each sample's predictions, the argmax class of each "
           "of its rows of the cross-entropy's logits (an mse loss: its "
           "output's values), and the labels they are scored against "
           "(outputs eval_predictions and eval_label_ids, f32 [samples, "
           "values per sample], gathered over the dp ranks)">,
    Option<"evalLogits", "eval-logits", "bool", /*default=*/"false",
           "with eval-predictions: the predictions are the rows of the "
           "cross-entropy's logits themselves, f32 [samples, rows per "
           "sample, classes] (at most 1024 classes)">
  ];
}

def SmpRecomputePass : Pass<"smp-recompute", "mlir::ModuleOp"> {
  let summary = "Activation checkpointing: the backward recomputes the forward";
  let description = [{
    For each micro-batch of @train_step, gives the backward (`smp.bwd`)
    its own copies of forward values (marked `smp.recomputed` and
    `smp.bwd`): full recomputes the forward between cut points from their
    inputs, so only the residual stream between half-layers stays alive;
    selective recomputes only the attention cores (scores, mask, softmax);
    gathers repeats sequence parallelism's all_gathers over `@tp` (and the
    views of their results) in the backward, so only each rank's rows live
    from the forward to the backward.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"mode", "recompute", "std::string", /*default=*/"\"full\"",
           "full, selective or gathers (sequence parallelism's all_gathers "
           "over @tp repeated in the backward instead of keeping their "
           "output)">,
    ListOption<"stages", "recompute-stages", "int64_t",
               "only the ops of these pipeline stages (smp.stage) are "
               "recomputed (the planner's per-stage choice); empty: all">
  ];
}

def SmpOffloadActivationsPass
    : Pass<"smp-offload-activations", "mlir::ModuleOp"> {
  let summary = "Keep the activations the backward reads in host memory";
  let description = [{
    For each micro-batch of @train_step, the forward values that the
    backward (`smp.bwd`) reads are copied to host memory after their last
    forward use (`smp.offload`) and prefetched back for the backward
    (`smp.prefetch`, marked `smp.bwd`, `offload-horizon` reads ahead).
    After smp-recompute, only the checkpoints are read by the backward. The
    first `offload-horizon` values the backward reads stay in device memory:
    they would be fetched back as soon as the backward starts.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
  let options = [
    Option<"horizon", "offload-horizon", "int", /*default=*/"1",
           "prefetches ahead of the backward's reads">,
    Option<"minBytes", "offload-min-bytes", "int", /*default=*/"4096",
           "smaller activations stay in device memory">
  ];
}

def SmpShardOptimizerStatePass
    : Pass<"smp-shard-optimizer-state", "mlir::ModuleOp"> {
  let summary = "ZeRO-1: each data-parallel rank keeps a shard of the gradients";
  let description = [{
    Each gradient of @train_step is flattened, zero-padded to a multiple of
    the dp ranks and reduce-scattered over `@dp`: the rank keeps the sum of
    its chunk (the result gets `smp.layout = #smp.layout<dp = chunk(of =
    [the parameter's shape])>`). The gradients, summed over the
    micro-batches, are packed in the order the backward completes them into
    buckets of up to bucket-mb MiB, as smp-shard-gradients packs its parts
    (one reduce-scatter a bucket, each chunk a slice marked `smp.view`, the
    bucket's ops right after its last gradient with that gradient's marks):
    a backend with a communication stream runs each scatter beside the rest
    of the last micro-batch's backward. Unlike ZeRO-2 the gradients are
    held whole until then (one reduce-scatter a step, not one a
    micro-batch).
    smp-loss-scaling and smp-gradient-norm then sum over the ranks, and
    smp-optimizer keeps 1/dp of the optimizer state, updates that chunk of
    the parameter and all-gathers it.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"bucketMb", "bucket-mb", "float", /*default=*/"25.0f",
           "bucket size in MiB; 0: one reduce-scatter per gradient">
  ];
}

def SmpShardGradientsPass : Pass<"smp-shard-gradients", "mlir::ModuleOp"> {
  let summary = "ZeRO-2: gradients reduce-scattered in buckets as they are made";
  let description = [{
    Like smp-shard-optimizer-state, each gradient of @train_step becomes this
    data-parallel rank's chunk of it (flattened, zero-padded to a multiple of
    the dp ranks; `smp.layout = #smp.layout<dp = chunk(of = [shape])>`), but
    the reduce-scatter runs as the backward produces the gradient, so no
    rank keeps a whole gradient past its bucket. A gradient summed over
    micro-batches (and over a parameter's copies on several pipeline stages)
    is a tree of adds: each micro-batch's part on each stage is
    reduce-scattered on its own and the sums are taken on the chunks, in the
    same order (copies stay bit-identical). That costs one reduce-scatter per
    micro-batch instead of one per step, as DeepSpeed's ZeRO-2 with gradient
    accumulation does. Parts of one micro-batch, stage and element type are
    packed, in the order they are made, into buckets of up to bucket-mb MiB:
    each part flattened and padded, viewed as [dp, n / dp], the views
    concatenated along dim 1 and reduce-scattered at once, so that each rank
    receives its chunk of every part in turn; the bucket's ops follow its
    last part and carry its stage and micro-batch marks. Each part's chunk
    is a slice of the scatter's result marked `smp.view`: the artifact
    writer makes it a view of those bytes, so nothing reads the result
    until the chunks' first use and a backend runs the scatter beside the
    rest of the backward.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"bucketMb", "bucket-mb", "float", /*default=*/"25.0f",
           "bucket size in MiB; 0: one reduce-scatter per gradient part">
  ];
}

def SmpShardParametersPass : Pass<"smp-shard-parameters", "mlir::ModuleOp"> {
  let summary = "ZeRO-3: each data-parallel rank stores a chunk of each parameter";
  let description = [{
    Runs after smp-shard-gradients. Each trained parameter argument of
    @train_step becomes this data-parallel rank's chunk of it (flattened,
    zero-padded to a multiple of the dp ranks; `smp.layout` gains
    `dp = chunk(of = [shape])`). Its uses are grouped by where they run
    (forward or backward, micro-batch, pipeline stage): each group
    all-gathers the whole parameter right before its first use and the copy
    dies after the group's last, so a recomputed forward and the backward
    gather again. Ops on the parameter alone (a transpose, a reshape, the
    mixed-precision cast) are redone on each group's copy rather than kept
    alive between groups; a cast to a narrower float is applied to the chunk
    before the gather, so the gather moves the low type. `prefetch` moves
    each gather before the first use of the gather that many places earlier
    (0: right before its own first use). Each gather is numbered
    (`smp.copy`) so that CSE, once a step's backward marks are gone, cannot
    merge two copies into one that lives from the forward to the backward.
    smp-optimizer then updates the chunk in place: no all-gather after the
    update.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"prefetch", "prefetch", "int", /*default=*/"0",
           "gathers issued ahead of their first use (0: just before it)">
  ];
}

def SmpGradientAllReducePass
    : Pass<"smp-gradient-all-reduce", "mlir::ModuleOp"> {
  let summary = "Sum the gradients and the loss over the data-parallel ranks";
  let description = [{
    The gradients of @train_step that are not ZeRO-1 shards are all-reduced
    over `@dp` in buckets: gradients of one stage and element type, in the
    order the backward produces them, are flattened and concatenated up to
    bucket-mb MiB, all-reduced at once (in place) and split back; each
    bucket's concatenation and all-reduce follow its last gradient and its
    split (slices marked `smp.view`: views of the bucket in the artifact)
    comes at the end, where the optimizer reads the gradients, so
    that nothing between touches the bucket and a backend runs the
    all-reduce beside the rest of the backward. The bucket's concatenation
    and all-reduce carry its last gradient's stage, micro-batch and backward
    marks: under a pipeline they run in the last micro-batch's backward
    (smp-pipeline-schedule), not after the whole schedule. The loss is all-reduced too (the global
    loss, on every rank). Under hybrid sharding (a 2-D `@dp`, see
    smp-build-gradients' dp-shard) the ZeRO chunks, summed over their shard
    group by the ZeRO passes, are all-reduced over the replica groups (axis
    0) in the same buckets. Does nothing without a `shard.grid @dp`.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"bucketMb", "bucket-mb", "float", /*default=*/"25.0f",
           "bucket size in MiB; 0: one all-reduce per gradient">
  ];
}

def SmpLossScalingPass : Pass<"smp-loss-scaling", "mlir::ModuleOp"> {
  let summary = "Unscale the gradients; skip overflowing steps; update the scale";
  let description = [{
    For a step whose backward was seeded with the loss times the state
    `@loss_scale` (smp-build-gradients{loss-scaling=true}): divides the
    gradients by the scale, flags an inf or NaN in any of them (on any
    rank, under ZeRO-1) as the result `smp.found_inf` (smp-optimizer then
    skips the step), halves the scale after an overflow and doubles it
    after growth-interval good steps (state `@growth_tracker`), as
    torch.amp.GradScaler. Output `skipped` (1 when skipped). DeepSpeed's
    scaler (`deepspeed-window`) counts the window from the step after an
    overflow (or the first step): its first growth comes after
    growth-interval + 1 good steps, the next ones every growth-interval; it
    adds `hysteresis` (an overflow halves the scale only after that
    many, counted in state `@loss_scale_overflows` and reset when the scale
    grows, or at every good step with `consecutive-hysteresis`) and
    `min-scale` (the scale never halves below it).
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"growthInterval", "growth-interval", "int", /*default=*/"2000",
           "good steps before the scale doubles">,
    Option<"deepspeedWindow", "deepspeed-window", "bool", /*default=*/"false",
           "count the window as DeepSpeed's DynamicLossScaler does">,
    Option<"hysteresis", "hysteresis", "int", /*default=*/"1",
           "overflows (since the scale last grew) before one halves it">,
    Option<"consecutiveHysteresis", "consecutive-hysteresis", "bool",
           /*default=*/"false",
           "reset the hysteresis count at every good step, not only when "
           "the scale grows">,
    Option<"minScale", "min-scale", "double", /*default=*/"0.0",
           "the scale never halves below this (0: no floor)">
  ];
}

def SmpGradientNormPass : Pass<"smp-gradient-norm", "mlir::ModuleOp"> {
  let summary = "The global gradient norm (output grad_norm), and clipping";
  let description = [{
    The L2 norm of every gradient of @train_step together: squares summed
    per pipeline stage first (a tied weight's copies count once), then over
    the stages, so that only scalars cross between stages; sums over the
    tensor-parallel ranks for split parameters and over the dp ranks for
    ZeRO-1 shards. With clip-grad-norm, the gradients are scaled by
    min(1, max_norm / (norm + 1e-6)), as clip_grad_norm_.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"clipGradNorm", "clip-grad-norm", "float", /*default=*/"0.0f",
           "clip gradients to this global L2 norm (0: off)">
  ];
}

def SmpOptimizerPass : Pass<"smp-optimizer", "mlir::ModuleOp"> {
  let summary = "Update each parameter from its gradient (SGD, Adam, AdamW)";
  let description = [{
    Adds the inputs `@lr` and `@step` (rank-0 f32, fed by the runtime each
    step) and the optimizer state (`smp.state`), and replaces each gradient
    result of @train_step by the updated parameter and states (`smp.update`
    with the name they replace), with PyTorch's semantics. A step flagged
    `smp.found_inf` leaves everything as it was and does not count (state
    `@optimizer_step`). ZeRO-1 and 2 shards update this rank's chunk of the
    parameter, and the chunks are all-gathered in buckets of one stage and
    element type of up to bucket-mb MiB (gathered), in update order: the
    bucket's chunks concatenated, one all-gather, each parameter its
    columns of the [dp, W] result (a strided copy), unpadded and reshaped.
    Finishes the step: only updates and outputs remain.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd, adam or adamw">,
    Option<"momentum", "momentum", "float", /*default=*/"0.0f", "SGD momentum">,
    Option<"dampening", "dampening", "float", /*default=*/"0.0f",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "float", /*default=*/"-1.0f",
           "weight decay (negative: PyTorch's default, 0.01 for adamw, "
           "else 0)">,
    Option<"beta1", "beta1", "float", /*default=*/"0.9f", "Adam beta1">,
    Option<"beta2", "beta2", "float", /*default=*/"0.999f", "Adam beta2">,
    Option<"epsilon", "eps", "float", /*default=*/"1.0e-8f", "Adam epsilon">,
    Option<"noDecay", "no-decay", "std::string", /*default=*/"\"\"",
           "parameters whose name matches this regex get no weight decay "
           "(PyTorch parameter groups: biases and norm weights)">,
    Option<"bucketMb", "bucket-mb", "float", /*default=*/"25.0f",
           "ZeRO-1/2: the updated chunks' all-gathers in buckets of up to "
           "this many MiB gathered; 0: one per parameter">
  ];
}

def SmpTensorParallelPass : Pass<"smp-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron-style tensor parallelism of func @main over @tp";
  let description = [{
    Finds Megatron's regions on the imported forward: a region ends at a
    row-parallel matmul (weight split along its input dim) whose input,
    followed backwards through ops that keep a split dimension (elementwise
    ops, bias adds, reshapes into and out of heads, transposes, slices and
    concatenations along other dims, softmax, batched matmuls over the heads,
    an equal split of a fused QKV projection), starts at column-parallel
    matmuls (weight split along its output dim) of replicated inputs. This
    covers the MLP (column then row) and attention (Q, K, V column-parallel
    by heads, output row-parallel). Each rank then holds 1/tp of the
    region's weights (arguments get their local type and `smp.layout =
    #smp.layout<tp = split(dim = D, blocks = B)>`: the parameter's dim viewed
    as [B, n] and split along n) and computes 1/tp of the heads or hidden units. The region's
    inputs pass `smp.tp_copy` (its gradient is all-reduced over `@tp`) and
    its output is `shard.all_reduce`d on `@tp`; so does an operand an op in
    the region reads whole (broadcast over the split dimension: a per-token
    gate, a learnable scalar) when a gradient reaches it, since each rank's
    share of that gradient covers only its heads or hidden units. A region
    whose heads (or hidden units) tp does not divide is refused.

    Vocabulary: an embedding table read only by gathers of input-derived ids
    (and by the LM head, when that is split) is split by rows, each rank
    holding ceil(V / tp) rows (zero-padded; its layout records `full = V`
    where tp does not divide V): a rank looks up the ids in its
    range (`smp.tp_rank` gives its start), zeroes the others and the lookups
    are all-reduced. With `vocab-parallel=NAME`, the LM head producing output
    NAME is column-parallel over the vocabulary; the output keeps only this
    rank's ceil(V / tp) logits and gets a tp split layout of its last dim,
    for smp-build-gradients' parallel cross-entropy.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"tp", "tp", "int", /*default=*/"1", "tensor-parallel ranks">,
    Option<"vocabParallel", "vocab-parallel", "std::string",
           /*default=*/"\"\"",
           "the output (logits) a cross-entropy loss will read: when it is a "
           "matmul of a weight (the LM head), split it by vocabulary rows "
           "(padded to a multiple of tp) and give the output a tp split layout">
  ];
}

def SmpSequenceParallelPass : Pass<"smp-sequence-parallel", "mlir::ModuleOp"> {
  let summary = "Megatron sequence parallelism between the tensor-parallel regions";
  let description = [{
    Runs on func @main after smp-tensor-parallel. Between its regions the
    ops work token by token (bias and residual adds, layer and RMS norms
    over the last dim, elementwise ops), so each tp rank keeps only its
    share of the tokens there: a value [d0, ..., H] is viewed as [T, H] (T
    the micro-batch's tokens) and rank r holds rows [r T/tp, (r+1) T/tp).
    A region's exit (`shard.all_reduce` on `@tp`) whose result a token-wise
    op reads becomes a `shard.reduce_scatter` onto the rank's rows; every
    token-wise op reading rows is redone on rows; a replicated operand of
    the result's shape (or broadcasting to it over the tokens) is read as
    its rows (`shard.all_slice`, after `smp.expand` when it broadcasts), and
    one broadcast over the tokens (a norm's scale, a bias) through
    `smp.tp_copy`, whose gradient is summed over tp; where anything else
    reads a value (a region's `smp.tp_copy` entry, a reshape into heads,
    the loss) the rows are `shard.all_gather`ed back. The backward follows
    from the collectives' gradients: the entries' all_reduce + all_slice
    become reduce_scatters (smp-fuse-backward) and the exits' gradients
    all_gathers, so each layer moves the bytes of tensor parallelism's two
    all-reduces while the norms' and residuals' activations shrink by tp.
    A micro-batch whose tokens tp does not divide is refused.
  }];
  let dependentDialects = ["::smp::SmpDialect", "::mlir::shard::ShardDialect"];
}

def SmpPipelineSplitPass : Pass<"smp-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Assign the ops of func @main to pipeline stages";
  let description = [{
    Marks every op of `@main` that depends on a parameter with `smp.stage`:
    the ops, in program order, are cut into `stages` contiguous stages. Ops
    that depend only on inputs and constants (masks, position ids) stay
    unmarked: every stage that needs them recomputes them. A cut may only
    fall where the fewest tensors cross (between transformer blocks, one:
    the residual stream). Cuts are given by `cuts` (the ONNX node names the
    later stages start at) or chosen to balance the stages' predicted cost
    (FLOPs and bytes moved of their ops), by dynamic programming over the
    cut points. The predicted costs are recorded in `smp.stage_costs`.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
  let options = [
    Option<"stages", "stages", "int", /*default=*/"1",
           "number of stages (pipeline ranks x virtual stages)">,
    ListOption<"cuts", "cuts", "std::string",
               "node names at which stages 1, 2, ... start">
  ];
}

def SmpPipelineSchedulePass
    : Pass<"smp-pipeline-schedule", "mlir::ModuleOp"> {
  let summary = "Split @train_step into one function per pipeline rank";
  let description = [{
    Takes the micro-batched, staged `@train_step` (the train-step passes
    after smp-pipeline-split) and writes `@train_step_pp<R>` for each pipeline rank
    R (attribute `smp.pp_rank`); stage S runs on rank S % pp. Each function
    runs, in order: the ops that need no micro-batch (prologue), the
    forward/backward actions of the schedule (GPipe, 1F1B, interleaved 1F1B,
    ZB-H1 with each backward split into its input-gradient part, which the
    previous stage waits for, and its weight-gradient part), then the rest of
    the step (epilogue: gradient exchange of tied weights, norm, optimizer).
    A value used on another rank is sent right after it is computed
    (`smp.send`) and received right before its first use (`smp.recv`). Ops
    without a stage (constants, input-only computations) are recomputed on
    every rank that uses them. Such an op, or a prologue op, that only the
    rank's epilogue reads (ZeRO-1/2's chunk of a parameter for its update)
    runs with the epilogue, so that its result is not held through the
    micro-batches. Every rank returns the step's outputs; each returns the
    updates of its own parameters and states.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
  let options = [
    Option<"pp", "pp", "int", /*default=*/"1", "pipeline ranks">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved or zb-h1">
  ];
}

def SmpMasterWeightsPass : Pass<"smp-master-weights", "mlir::func::FuncOp"> {
  let summary = "Train fp32 master copies of parameters stored in bf16 or fp16";
  let description = [{
    Every trained parameter (`smp::isTrainedParam`: `smp.param`, not
    `smp.frozen`, not matched by the `freeze` regex, not a batch norm's
    running statistic) whose element type is bf16 or f16 becomes f32 and is cast
    to its stored type once at the top, so the function computes in the
    types it had while the parameter, its gradient (the cast's gradient
    widens it), the optimizer and its states are f32: DeepSpeed's bf16 and
    fp16 optimizers and Megatron's main parameters. The artifact writer reads
    such a parameter widened from its 16-bit initializer (exact); `smprun
    --save-onnx` rounds it back. Run before smp-build-gradients.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
  let options = [
    Option<"freeze", "freeze", "std::string", /*default=*/"\"\"",
           "regex of the parameters not trained (kept as stored)">
  ];
}

def SmpMixedPrecisionPass : Pass<"smp-mixed-precision", "mlir::func::FuncOp"> {
  let summary = "Compute in bf16 or fp16 with fp32 parameters and outputs";
  let description = [{
    Retypes every f32 value of the function to the low-precision type: f32
    arguments (parameters, the fp32 master weights, and inputs) are cast
    down once at the top, f32 constants are converted, and the function's
    f32 results are cast back up, so a loss built on them (and its
    reduction) is computed in f32. Kernels accumulate reductions, norm
    statistics and softmax sums in higher precision. Run before
    smp-build-gradients: gradients flow back through the casts, so the
    optimizer updates the fp32 master weights.
  }];
  let dependentDialects = ["::smp::SmpDialect"];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"bf16\"",
           "bf16 or fp16">
  ];
}

#endif // SMP_DIALECT_SMP_TRANSFORMS_PASSES_TD
