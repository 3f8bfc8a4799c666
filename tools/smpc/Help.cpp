//===- Help.cpp - smpc's help: the usage and each command's -------------===//
//
// The one usage text (smpc --help) and, per command (smpc plan --help), its
// synopsis and the sections of the usage that apply to it. The flags the
// usage explains are also what an unknown flag is compared with ("did you
// mean").
//
//===----------------------------------------------------------------------===//

#include "Help.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <set>

namespace {

const char *kUsage =
    R"(smpc - the smp compiler: imports a model, builds its training step and
splits it over devices.

USAGE
  smpc compile MODEL -o OUT.smpx [--target cpu|cuda] [--batch-size B]
               [--dim NAME=VALUE]... [--train --loss LOSS [OPTIMIZER...]]
  smpc import  MODEL [-o OUT.mlir] [--dim NAME=VALUE]... [--no-raise]
  smpc summary MODEL [--dim NAME=VALUE]... [--train]
  smpc plan    MODEL --devices N --cluster NAME|FILE.json [--global-batch B]
               [--dp D] [--tp T] [--pp P] [--microbatch-size M] [--json FILE]
               [--report FILE.svg]
  smpc ops
  smpc --help | --version

COMMANDS
  compile   Build the artifact smprun runs: a directory OUT.smpx holding the
            manifest, per-rank programs and weights, the final IR
            (model.mlir) and the plan report (plan.txt). Forward only
            unless --train is given.
  import    Convert MODEL into smp dialect MLIR (to stdout, or to -o FILE).
  summary   Print inputs, outputs, parameter and buffer counts and an op
            histogram (--train: the parameters as training imports them).
  plan      Choose how to train MODEL on N devices of a cluster: dp x tp x
            pp, micro-batches, schedule, ZeRO stage and recomputation, by the
            cost and memory models; print the plan, its predicted step
            time, throughput and memory per device, and the runners-up.
            Pinned flags (--tp 8, --schedule 1f1b, --zero-stage 2)
            fix a dimension; the rest is searched. --cluster is a preset
            (h100-sxm-80g, a100-sxm-80g, a100-sxm-40g, v100-32g, cpu) or a
            JSON file (docs/architecture.md). The model is read at one sample
            per batch (its batch dim is bound to 1).
  ops       List the ONNX ops the importer supports.

MODEL
  An ONNX model (.onnx; external data is read from the model's directory),
  ONNX text syntax (.onnxtxt), or smp dialect MLIR text (.mlir).

OPTIONS
  -o FILE              Output file (default: stdout); for compile, the
                       artifact directory (required).
  --target cpu|cuda    Backend the artifact is built for (default: cpu).
  --batch-size B       Bind the leading symbolic dim of every input to B
                       (explicit --dim bindings win).
  --dim NAME=VALUE     Bind the symbolic dim NAME (ONNX dim_param) to VALUE.
                       smp compiles static shapes: every symbolic dim of the
                       model's inputs must be bound. Repeatable.
  --no-raise           Keep decomposed layer-norm/GELU chains as imported
                       (attention too).
  --no-fuse-attention  Keep attention chains (matmul, scale, mask, softmax,
                       matmul) as imported instead of one smp.attention op
                       that never holds the [seq, seq] scores. ONNX's own
                       Attention node (opset 23) stays one op (a warning
                       says so).
  --no-dropout         Apply no dropout where the file has training-mode
                       Dropout nodes (a TorchScript export with
                       training=TrainingMode.TRAINING, or smp.export's):
                       train as model.eval() would drop nothing. Without
                       it a --train compile draws their random masks
                       (any plan draws the masks one device draws; see
                       --seed). Given where the file has no such node (nor
                       smp.export's sidecar a dropout), a warning says it
                       changes nothing.
  --seed N             What the dropout masks are drawn from (default 0):
                       a mask is a function of the seed, the step, the
                       dropout and the element's place in the global batch
                       (Philox4x32-10), so a resumed run draws the masks
                       the uninterrupted one would.
  --tie NAME           Keep initializer NAME shared by every node that reads
                       it (smp gives each reader of a constant-valued
                       initializer its own parameter: exporters merge equal
                       fresh tensors such as LayerNorm weights). Repeatable.
  --untie NAME         Train initializer NAME as its own parameter although
                       it holds a copy (or the transpose) of another one
                       (smp ties such copies: constant folding stores a tied
                       weight twice). Repeatable.
  --no-padding-row NAME
                       Train every row of embedding NAME. With --train, an
                       embedding whose one all-zero row is what
                       nn.Embedding(padding_idx=...) leaves, in a file that
                       does not name it (torch.onnx.export drops it), gets
                       that row no gradient, as PyTorch does (a warning
                       says so). Repeatable.
  --without-export-metadata
                       With --train, accept a torch.onnx.export (dynamo)
                       file whose metadata a tool removed (onnx's version
                       converter, which torch uses for opset_version 26 and
                       above): smp then guesses which initializers PyTorch
                       merged, tied or folded (a warning for each guess)
                       and cannot see folded parameters; a Linear's removed
                       zero bias is refused still. Without it such a file
                       is refused: export at opset_version 25 or lower.
  --trainable NAME     Train initializer NAME although it holds a
                       sinusoidal position table, which smp freezes with a
                       warning as PyTorch models keep it (requires_grad=
                       False: Marian, Pegasus, Whisper), or says a
                       TorchScript constant fold smp warns of is a
                       parameter only moved. Repeatable.
  --emit=mlir          compile: print the final IR (after the training and
                       parallelization passes) instead of writing an artifact.
  --mlir-print-ir-after-all
                       compile: print the IR after every pass (to stderr).

TRAINING (compile --train)
  --train              Build the training step (forward, --loss, backward,
                       optimizer update): smprun trains the artifact with
                       --steps N. Needs --loss.
  --loss LOSS          NAME (a scalar output of the model),
                       cross_entropy:LOGITS:LABELS (mean cross-entropy of
                       output LOGITS [..., V] against a new int64 input
                       LABELS; label -100 is ignored, as in PyTorch) or
                       mse:OUTPUT:TARGET (a new input TARGET). Under
                       --dp or micro-batches a NAME loss must be a sum or
                       mean over the samples (a cross-entropy, a masked
                       mean, plus terms without the batch): each shard
                       trains its exact share; other forms, and a forward
                       that mixes the samples, are refused.
  --optimizer sgd|adam|adamw   (default sgd; PyTorch semantics and defaults)
  --lr X               Peak learning rate (default 0.001).
  --lr-schedule constant|cosine|warmup-lr|warmup-decay-lr|warmup-cosine-lr|
                hf-linear|hf-cosine|hf-constant
                       Cosine decays to 0 after the warmup, at step
                       --decay-steps. warmup-lr, warmup-decay-lr and
                       warmup-cosine-lr are DeepSpeed's WarmupLR,
                       WarmupDecayLR and WarmupCosineLR; hf-linear, hf-cosine
                       and hf-constant the Hugging Face Trainer's "linear"
                       (its default), "cosine" and "constant_with_warmup",
                       by their formulas (docs/training-runs.md).
  --warmup-steps K     Linear warmup from 0 over the first K steps: step k
                       (from 0) runs at lr*(k+1)/K (DeepSpeed's schedules:
                       their warmup_num_steps; Hugging Face's: lr*k/K, as
                       the Trainer's first step runs at 0).
  --decay-steps N      cosine: the schedule's length in steps, warmup
                       included; the rate is 0 from step N on (default: the
                       --steps of the run that starts it, recorded in its
                       checkpoints, so resumed or extended runs continue it).
                       warmup-decay-lr, warmup-cosine-lr: total_num_steps;
                       hf-linear, hf-cosine: num_training_steps (max_steps).
  --eval-every K|epoch  With --train: smprun --eval-data evaluates the
                       held-out samples every K steps, or every epoch of
                       its --data (samples / global batch steps: a whole
                       number of batches needed), and after the last step,
                       without its own --eval-every, and refuses another
                       (docs/training-runs.md); the Hugging Face training
                       arguments' eval_strategy "steps" (eval_steps) or
                       "epoch" sets it.
  --eval-delay N       With --train: no evaluation before step N (before
                       epoch N with --eval-every epoch), the one after the
                       last step included (the Trainer's eval_delay).
  --eval-batch-size N  With --train: smprun --eval-data evaluates the
                       held-out samples in batches of N (default: the
                       global batch), each batch's loss the mean over its
                       counted labels (the Trainer's
                       per_device_eval_batch_size); a
                       cross_entropy:LOGITS:LABELS loss, or a model's own
                       loss that is a cross-entropy mean (its labels
                       shifted or not) or a sum over the samples; another
                       is evaluated in global batches, and plan.txt says
                       why.
  --eval-accuracy      With --train and a cross-entropy loss (a
                       cross_entropy:LOGITS:LABELS loss, or a model's own
                       loss computed from one cross-entropy): smprun
                       --eval-data also reports eval_accuracy, the share
                       of the labels the cross-entropy reads (not -100)
                       whose logit is the row's first maximum
                       (logits.argmax(-1) == labels), over every batch.
  --eval-metrics LIST  With --train: smprun --eval-data also reports
                       these, as eval_NAME, over every batch; with a
                       cross-entropy loss, scikit-learn's definitions (a
                       Trainer user's compute_metrics; the GLUE metrics):
                       accuracy (as --eval-accuracy); f1, precision,
                       recall (average='binary': 2 classes, class 1
                       positive); f1_macro, f1_micro, f1_weighted and the
                       same for precision and recall; matthews_correlation;
                       topK_accuracy (K from 2 to 1000: top5_accuracy, the
                       labels among their row's K first classes). All but
                       the accuracies count a confusion matrix of at most
                       1024 classes (a classifier's) and need each row's
                       whole logits (no vocabulary-parallel --tp). With an
                       mse:OUTPUT:TARGET loss, or a model's own loss of
                       one MSELoss (a regression, GLUE's STS-B):
                       pearson and spearmanr, scipy's correlations of the
                       output's values with the targets' (from the
                       predictions, as --eval-predictions gathers them).
  --eval-predictions   With --train and a cross-entropy or mse loss: each
                       evaluation step also returns every sample's
                       predictions, the argmax class of each of its rows
                       of the loss's logits (an mse loss: its output's
                       values), and the labels they are scored against;
                       smprun --eval-predictions DIR writes the
                       predictions and the labels input as .npy files
                       for a compute_metrics of your own (seqeval's
                       entity F1, say).
  --eval-logits        --eval-predictions with the logits' rows
                       themselves, [samples, rows, classes], instead of
                       their argmax: the Trainer's EvalPrediction without
                       preprocess_logits_for_metrics, which run_glue's
                       and run_ner's compute_metrics take (they argmax
                       them); at most 1024 classes (a classifier's).
  --shift-labels       With a cross_entropy:LOGITS:LABELS loss: LABELS holds
                       each position's own token, as a Hugging Face causal
                       LM takes them (its collator's labels = input_ids,
                       -100 where padded); smprun feeds position t the
                       label of t + 1 and -100 at the last, as the
                       transformers model shifts them inside its loss.
                       Without it smprun refuses labels equal to an input.
  --eval-on-start      With --train: smprun --eval-data also evaluates
                       before the first step of a run from step 0 (the
                       Trainer's eval_on_start; not again on --resume).
  --warmup-type log|linear
                       DeepSpeed's schedules: the warmup's shape (default
                       log, as DeepSpeed's).
  --warmup-min-lr X    warmup-lr, warmup-decay-lr: the rate the warmup starts
                       from and the decay ends at (default 0).
  --warmup-min-ratio X warmup-cosine-lr: the warmup starts at X*lr (default 0).
  --cos-min-ratio X    warmup-cosine-lr: the decay ends at X*lr (default
                       0.0001); hf-cosine: its min_lr_rate (default 0).
  --momentum X --dampening X --nesterov      SGD options.
  --weight-decay X     Default 0 (sgd, adam) or 0.01 (adamw).
  --beta1 X --beta2 X --eps X                Adam/AdamW options.
  --clip-grad-norm X   Clip gradients to global L2 norm X.
  --freeze REGEX       Parameters whose name matches get no gradient.
  --no-decay REGEX     Parameters whose name matches get no weight decay:
                       PyTorch's parameter groups (Hugging Face's Trainer
                       leaves out biases and LayerNorm weights, nanoGPT every
                       parameter of fewer than 2 dims: --no-decay
                       'bias|norm'). A regex that matches no trained
                       parameter is refused.
  --hf-no-decay        The Hugging Face Trainer's groups instead: no weight
                       decay for the parameters a LayerNormalization reads
                       (nn.LayerNorm's) and those whose lower-cased name
                       matches bias, layernorm, rmsnorm, norm or _norm as
                       transformers 5's get_decay_parameter_names does.
  --bn-stats global|replica|running
                       BatchNorm trains as in PyTorch's train() mode (batch
                       statistics; running statistics updated once per
                       micro-batch). global (default): the statistics of
                       each micro-batch over every data-parallel replica
                       (SyncBatchNorm; any --dp equals one device); replica:
                       each replica's own (DDP's BatchNorm), the running
                       statistics following replica 0's; running: the
                       running statistics, never updated (PyTorch's eval()
                       mode while training: frozen BatchNorm).
  --precision fp32|bf16|fp16
                       Compute in bfloat16 or float16 with fp32 master
                       weights, optimizer state, loss and reductions
                       (default fp32). fp16 adds dynamic loss scaling
                       (torch.amp.GradScaler's defaults): steps whose
                       gradients overflow are skipped and the scale halves.
                       A model whose parameters the file stores in bf16 or
                       fp16 (model.to(torch.bfloat16) before the export)
                       trains as stored, as PyTorch trains it: no fp32
                       master copy, states in that type, computed in the
                       file's types (a warning says so); --precision
                       fp16 on bf16, bf16 on fp16, fp16 on fp16 (the
                       GradScaler refuses fp16 gradients) and Adam/AdamW on
                       fp16 parameters are refused.
  --master-weights fp32
                       Train fp32 master copies of the parameters the file
                       stores in bf16 or fp16 (read exactly from it), cast
                       to that type where the file computes; gradients,
                       optimizer and states in f32 (DeepSpeed's bf16 and
                       fp16 optimizers; a --deepspeed config with bf16 or
                       fp16 enabled sets it). Allows fp16 parameters with
                       Adam/AdamW and --precision fp16 (loss scaling).
                       --save-onnx rounds them back. An fp32 export has
                       fp32 parameters already: nothing changes.
  --loss-scale X       fp16: the initial loss scale (default 65536).
  --loss-scale-window N
                       fp16: good steps in a row before the scale doubles
                       (GradScaler's growth_interval, DeepSpeed's
                       loss_scale_window; default 2000).
  --loss-scaler torch|deepspeed
                       fp16: torch.amp.GradScaler's rules (default), or
                       DeepSpeed's DynamicLossScaler's: the first growth after
                       an overflow (or the start) waits one good step more,
                       and the three flags below apply.
  --loss-scale-hysteresis N
                       deepspeed: an overflow halves the scale only once N
                       overflows were seen since the scale last grew (the
                       others only skip their step; default 1).
  --consecutive-hysteresis
                       deepspeed: reset that count at every good step.
  --min-loss-scale X   deepspeed: the scale never halves below X (default:
                       no floor).
  --no-pad-vocab       Keep an LM head's vocabulary as it is. By default a
                       cross-entropy's logits with 1024 or more classes,
                       not a multiple of 8 (GPT-2's 50257), are computed
                       padded with zero weights to the next multiple of 64
                       (of 8 below 4096), which the loss ignores, so the
                       GPU's matrix products read aligned rows; the
                       numbers trained are the same up to rounding.
  --no-gelu-epilogue   Keep a bf16/fp16 model's GELUs as kernels of their
                       own. By default a GELU (tanh form) moves into the
                       product before it, where cuBLASLt computes it in
                       the epilogue (GELU_AUX_BIAS); the GPU benchmark's
                       ablation times the step both ways.
  --dgelu-epilogue     Also move the GELUs' gradients into the products
                       that make them (cuBLASLt's DGELU_BGRAD). Not by
                       default: on an H200 cuBLASLt ran those products at
                       a third of the plain products' rate, so the plain
                       product then one kernel for the GELU's gradient and
                       the bias gradient is the default; the GPU
                       benchmark's ablation times the step both ways.
                       Refused with --no-gelu-epilogue.
  --no-bias-grad-epilogue
                       Sum a bf16/fp16 linear layer's bias gradient in a
                       kernel of its own (over 16-byte vectors) after its
                       weight-gradient product. By default cuBLASLt sums
                       it in that product's epilogue (BGRADB); the GPU
                       benchmark's ablation times the step both ways.
  --no-residual-epilogue
                       Add a residual connection after a linear layer
                       (x + Linear(h): GPT-2's attention and MLP outputs)
                       as a kernel of its own. By default the product
                       adds it in cuBLASLt's epilogue (read as C), so no
                       add kernel reads the product again; bf16/fp16 round
                       the sum once where the add rounded twice. The GPU
                       benchmark's ablation times the step both ways.
  --no-fuse-loss-grad  Compute a cross-entropy loss and its gradient as two
                       ops. By default a training step computes them in
                       one (cross_entropy_with_grad), which reads the
                       logits twice where the two ops read them three
                       times; the numbers are the same. The GPU
                       benchmark's ablation times the step both ways.

PARALLELISM (compile --train)
  --devices N          Number of ranks (default dp x tp x pp; without --dp,
                       dp = N / (tp x pp)).
  --dp D               Data parallel over D ranks: each rank trains on
                       --batch-size / D samples of every global batch and
                       the gradients are summed across ranks, so the step
                       equals the one-device step. Run with smprun -n D.
  --checkpoint-activations none|full|selective|auto
                       Recompute activations in the backward instead of
                       keeping them: full keeps only the residual stream
                       between half-layers, selective recomputes the
                       attention cores (scores, mask, softmax), auto lets
                       the planner recompute the stages that need it
                       (--devices N; pinned degrees stay pinned).
  --profile-db F,...   smprun --profile files: the compiled plan's step time is
                       predicted from these measured op times (the roofline
                       of --cluster where they have none) and printed.
  --offload-activations
                       Copy the activations the backward needs (after
                       recomputation, its checkpoints) to host memory after
                       their forward use and back before the backward.
  --activation-loading-horizon K
                       Prefetch offloaded activations K ahead (default 1).
                       On a GPU the copies run on a stream of their own
                       beside compute: a larger K hides more of each copy
                       back, for more device memory.
  --bucket-mb X        Data parallel: all-reduce (ZeRO: reduce-scatter)
                       gradients in buckets of up to X MiB (default 25),
                       each right after the backward computes its last
                       gradient (on a GPU the collective runs beside the
                       rest of the backward); ZeRO-1/2 all-gather the updated
                       parameters in such buckets too; 0: one per gradient
                       (parameter). The planner (smpc plan, --devices)
                       prices these buckets.
  --zero-stage Z       ZeRO over the --dp ranks (default: the planner's
                       choice with --devices, else 0). 1: the gradients,
                       summed over the micro-batches, are reduce-scattered
                       in --bucket-mb buckets as the last micro-batch's
                       backward completes them, each rank keeps and updates
                       1/D of the optimizer state and parameters, and
                       parameters are all-gathered. 2: as 1, but each
                       micro-batch's gradients are reduce-scattered as the
                       backward makes them, so a rank keeps 1/D of the
                       gradients (one reduce-scatter per micro-batch). 3: as 2, and each rank stores 1/D
                       of every trained parameter: the forward and the
                       backward (and a recomputed forward) all-gather each
                       parameter right before its uses and free the copy
                       after them (bf16/fp16: gathered in the low type).
                       0: none.
  --sharded-dp S       Hybrid sharding (MiCS; SageMaker's
                       sharded_data_parallel_degree): the ZeRO stage shards
                       over groups of S adjacent data-parallel ranks and
                       replicates across the D / S groups, so gathers and
                       reduce-scatters stay within a group (a node) and
                       the chunks' gradients are all-reduced across groups
                       once per step. S divides --dp; without --zero-stage
                       it means --zero-stage 3.
  --gather-prefetch N  ZeRO-3: issue each parameter gather N gathers ahead
                       of its first use (default: 4 with --target cuda, so
                       that they run beside the compute before it; 0 on
                       the CPU, whose collectives block; smpc plan: 4 on a
                       cluster whose devices overlap communication; costs
                       up to N copies).
  --shard-optimizer-state
                       --zero-stage 1 (SageMaker's name).
  --no-shard-optimizer-state
                       --zero-stage 0.
  --pp P               Pipeline parallel over P ranks: the model is cut into
                       P stages (balanced by predicted cost, or at
                       --pp-cuts), each step runs --microbatches micro-
                       batches through them in --schedule's order.
  --pp-cuts A,B,...    The ONNX node names at which stages 1, 2, ... start.
  --microbatches M     Micro-batches per step (default: pp; with pp 1,
                       gradient accumulation). --batch-size / dp must be
                       divisible by M. A model with BatchNorm (batch
                       statistics) needs it pinned to use micro-batches:
                       each normalises over its micro-batch's samples.
  --schedule S         gpipe, 1f1b (default), interleaved or zb-h1.
  --virtual-stages V   Model chunks per pipeline rank (interleaved only).
  --placement X        How the dp x pp x tp grid maps to ranks: cluster (DPT,
                       the default: a rank's pipeline and tensor peers are
                       adjacent), spread (TPD) or any order of D, P, T (the
                       right-most axis gets adjacent ranks).
  --tp T               Tensor parallel over T ranks: Megatron-style, the MLP
                       (column- then row-parallel) and attention (heads)
                       layers are split (T must divide the heads and the
                       hidden units), and the embedding, the LM head and
                       a cross-entropy loss by vocabulary (any T).
  --sequence-parallel  With --tp: Megatron's sequence parallelism. Between
                       the split layers (norms, residual and bias adds)
                       each tp rank keeps 1/T of the micro-batch's tokens:
                       the layers' all-reduces become reduce-scatters and
                       all-gathers (the same bytes) and those activations
                       shrink by T. T must divide the tokens of a micro-
                       batch (batch x sequence). The planner (--devices N)
                       chooses it unless pinned on or off.
  --no-sequence-parallel
                       Keep the tokens whole between the tp layers (the
                       planner's choice pinned off).
  --optimize speed|memory
                       Planner (plan, compile --devices N): choose the
                       fastest plan that fits (speed, the default) or the
                       one that needs the least memory per device (memory).

PLANNER (plan; compile --train --devices N without --dp/--tp/--pp)
  --cluster NAME|FILE.json
                       The devices to plan for: a preset (h100-sxm-80g,
                       a100-sxm-80g, a100-sxm-40g, v100-32g, cpu) or a JSON
                       file of device and link speeds (docs/architecture.md).
                       compile defaults to the --target's (cpu, or
                       h100-sxm-80g for cuda). The GPU presets' collectives
                       run beside compute (the CUDA backend), so only what
                       outlasts it is counted; the cpu preset's block (a
                       file's "overlaps_communication" says which).
  --global-batch B     plan: samples per step over every replica (default:
                       --batch-size, else 1). compile plans for --batch-size.
  --microbatch-size M  Pin the samples per micro-batch (the planner searches
                       it otherwise).
  --json FILE          plan: write the chosen plan and the runners-up as JSON
                       (compile writes OUT.smpx/plan.json).
  --report FILE.svg    plan: draw the chosen plan (pipeline timeline, memory
                       per device) as SVG (compile writes OUT.smpx/plan.svg).
  --max-plans N        compile: how many plans to try (default 3). Each
                       chosen plan's compiled arena is checked against the
                       planner's limit (90% of the device) before anything
                       is written; one over it (the estimate was low) is
                       planned again within less of the device. After N
                       plans over it, the compile is refused.
  --no-memory-plan     plan: report the cost model's estimates only (do not
                       build the chosen plan's training step to measure
                       its memory plan and step; slow for large models).

CONFIG FILE
  --config FILE.json   Read flags from a JSON object: SageMaker
                       model-parallel v1 keys (pipeline_parallel_degree,
                       microbatches, ddp, ...) or smpc flags by name
                       ("batch_size": 8, "dim": {"seq": 16}). Flags also
                       given on the command line must agree with it; unknown
                       keys are refused. docs/python.md has the table.
  --deepspeed FILE.json
                       Read a DeepSpeed config (ds_config.json; the Hugging
                       Face Trainer's --deepspeed file too, whose "auto"
                       values take the flags that play the Trainer's
                       arguments, else its defaults): batch sizes, optimizer,
                       scheduler, fp16/bf16, gradient_clipping and
                       zero_optimization become the flags above, by
                       DeepSpeed's rules and defaults. What would train
                       other numbers than DeepSpeed and that smp cannot
                       follow is refused; keys that only tune DeepSpeed's
                       execution are listed in a warning. docs/python.md has
                       the table.
  --training-args FILE.json
                       Read the Hugging Face Trainer's TrainingArguments
                       (training_args.to_json_string(), transformers 4 or
                       5): the batch, optim, weight decay with the Trainer's
                       groups (--hf-no-decay), clipping, lr_scheduler_type
                       (--lr-schedule hf-*), warmup, max_steps and
                       fp16/bf16 become the flags above, as the Trainer
                       trains them. What smp cannot follow (other optimizers
                       and schedules, label smoothing, NEFTune) and keys
                       that are not TrainingArguments' are refused. With
                       --deepspeed (or the file's "deepspeed") they fill and
                       check that config as the Trainer does.
  -h, --help           Show this help.
  --version            Show the version.

EXAMPLES
  smpc compile gpt.onnx --batch-size 8 --dim seq=1024 -o gpt.smpx
  smpc compile mlp.onnx --train --loss cross_entropy:logits:labels \
       --optimizer adamw --lr 1e-3 --batch-size 8 -o mlp.smpx
  smpc import gpt.onnx --dim batch=8 --dim seq=1024 -o gpt.mlir
  smpc summary gpt.mlir
)";

/// A section of the usage: from its heading line to the next heading.
std::string section(llvm::StringRef heading) {
  llvm::StringRef usage(kUsage);
  size_t at = usage.find("\n" + heading.str());
  if (at == llvm::StringRef::npos)
    return "";
  llvm::StringRef rest = usage.drop_front(at + 1);
  size_t end = 0;
  // The next line that starts with a capital letter (a heading).
  while ((end = rest.find('\n', end)) != llvm::StringRef::npos) {
    ++end;
    if (end < rest.size() && rest[end] >= 'A' && rest[end] <= 'Z')
      break;
  }
  return rest.take_front(end == llvm::StringRef::npos ? rest.size() : end)
      .str();
}

struct CommandHelp {
  const char *name;
  const char *synopsis;
  const char *sections[6];
};

const CommandHelp kCommands[] = {
    {"compile",
     R"(usage: smpc compile MODEL -o OUT.smpx [--target cpu|cuda] [--batch-size B]
                    [--dim NAME=VALUE]... [--train --loss LOSS [OPTIMIZER...]]
                    [--dp D] [--tp T] [--pp P] [--devices N] [--config FILE.json]

Builds the artifact smprun runs: a directory OUT.smpx holding the manifest,
per-rank programs and weights, the final IR (model.mlir) and the plan report
(plan.txt, plan.json). Forward only unless --train is given; --devices N
without --dp/--tp/--pp lets the planner choose the plan (PLANNER below).
)",
     {"MODEL", "OPTIONS", "TRAINING", "PARALLELISM", "PLANNER", "CONFIG FILE"}},
    {"plan",
     R"(usage: smpc plan MODEL --devices N --cluster NAME|FILE.json [--global-batch B]
                 [--dp D] [--tp T] [--pp P] [--microbatch-size M]
                 [--json FILE] [--report FILE.svg] [TRAINING OPTIONS...]

Chooses how to train MODEL on N devices of a cluster: dp x tp x pp,
micro-batches, schedule, ZeRO stage and recomputation, by the cost and memory
models; prints the plan, its predicted step time, throughput and memory per
device, and the runners-up; for a model small enough to build, the chosen
plan's compiled arenas and its compiled step's time (its ranks' programs
side by side) against those estimates. Pinned flags (--tp 8, --schedule 1f1b,
--zero-stage 2) fix a dimension; the rest is searched. The model is
read at one sample per batch (its batch dim is bound to 1).
)",
     {"MODEL", "PLANNER", "PARALLELISM", "TRAINING", "CONFIG FILE", nullptr}},
    {"import",
     R"(usage: smpc import MODEL [-o OUT.mlir] [--dim NAME=VALUE]... [--no-raise]

Converts MODEL into smp dialect MLIR (to stdout, or to -o FILE).
)",
     {"MODEL", "OPTIONS", nullptr}},
    {"summary",
     R"(usage: smpc summary MODEL [--dim NAME=VALUE]... [--batch-size B] [--train]

Prints the model's inputs, outputs, parameter count (the trained tensors:
PyTorch's model.parameters()), buffer count (float initializers smp does not
train, with why above) and an op histogram. With --train, as compile --train
imports it: what only training restores (a tied weight folded with other
rows, an embedding's folded rows, biases the exporter removed) is listed too,
and what training refuses is refused.
)",
     {"MODEL", "OPTIONS", nullptr}},
    {"ops",
     R"(usage: smpc ops

Lists the ONNX ops the importer supports, one per line.
)",
     {nullptr}},
};

} // namespace

const char *smpcUsage() { return kUsage; }

std::vector<std::string> smpcCommands() {
  std::vector<std::string> out;
  for (const CommandHelp &c : kCommands)
    out.push_back(c.name);
  return out;
}

std::optional<std::string> commandHelp(llvm::StringRef command) {
  for (const CommandHelp &c : kCommands) {
    if (command != c.name)
      continue;
    std::string text = std::string(c.synopsis) + "\n";
    for (const char *s : c.sections)
      if (s)
        text += section(s);
    return text + "\nsmpc --help shows every command.\n";
  }
  return std::nullopt;
}

std::vector<std::string> smpcFlags() {
  std::set<std::string> flags = {"-o", "-h"};
  llvm::StringRef usage(kUsage);
  for (size_t i = 0; i + 2 < usage.size(); ++i) {
    if (usage.substr(i, 2) != "--" || (i > 0 && usage[i - 1] != ' ' &&
                                       usage[i - 1] != '[' && usage[i - 1] != '\n'))
      continue;
    size_t end = i + 2;
    while (end < usage.size() &&
           (llvm::isAlnum(usage[end]) || usage[end] == '-'))
      ++end;
    if (end > i + 2)
      flags.insert(usage.substr(i, end - i).str());
  }
  return {flags.begin(), flags.end()};
}
