//===- SmpBase.td - smp dialect definition -----------------*- tablegen -*-===//
//
// The smp dialect: a compact, high-level tensor op set for training graphs.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SMPBASE_TD
#define SMP_DIALECT_SMP_IR_SMPBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Smp_Dialect : Dialect {
  let name = "smp";
  let cppNamespace = "::smp";
  let summary = "High-level tensor ops for auto-partitioned training";
  let description = [{
    The smp dialect models one model (forward graph) or one training step as a
    `func.func` over ranked, statically shaped tensors. Parameters are function
    arguments carrying an `smp.param` attribute (their global name); graph
    inputs carry `smp.input`; results carry `smp.output`. Weight bytes never
    live in the IR: the module's `smp.source` attribute names the model file
    that holds them.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Registers the attributes of SmpAttrs.td (SmpAttrs.cpp).
    void registerAttributes();

    /// Argument attribute naming a parameter (its global name).
    static constexpr llvm::StringLiteral kParamAttr = "smp.param";
    /// Argument attribute of a parameter whose initial value is another
    /// initializer's (one the exporter had merged by value: every use gets
    /// its own parameter again).
    static constexpr llvm::StringLiteral kInitFromAttr = "smp.init_from";
    /// Unit argument attribute: a parameter that starts at zero (a bias
    /// the exporter removed; the model file has no bytes for it).
    static constexpr llvm::StringLiteral kInitZeroAttr = "smp.init_zero";
    /// Argument attribute: a parameter's initial value (dense elements of
    /// its type) where the model file has no initializer holding it (the
    /// distinct rows of a folded embedding).
    static constexpr llvm::StringLiteral kInitValueAttr = "smp.init_value";
    /// Module attribute: how the importer untied or tied the file's
    /// initializers (an array of dictionaries, see SharedInitializers.cpp);
    /// the artifact carries it so --save-onnx writes the model back.
    static constexpr llvm::StringLiteral kParamOriginsAttr =
        "smp.param_origins";
    /// Unit argument attribute: a parameter that gets no gradient.
    static constexpr llvm::StringLiteral kFrozenAttr = "smp.frozen";
    /// Argument attribute of a frozen parameter, array<f64: below, above>:
    /// every trailing [S, S] slice of its value holds `below` where key
    /// j <= query i and `above` where j > i (above <= -1e30 is written
    /// -inf). The importer sets it from the initializer's bytes (a causal
    /// mask); smp-raise-attention reads it.
    static constexpr llvm::StringLiteral kCausalValuesAttr =
        "smp.causal_values";
    /// Argument attribute naming an optimizer state tensor.
    static constexpr llvm::StringLiteral kStateAttr = "smp.state";
    /// Result attribute: this result replaces the parameter or state of
    /// that name after the step.
    static constexpr llvm::StringLiteral kUpdateAttr = "smp.update";
    /// Argument and result attribute: how the value is split over the
    /// grid's tp and dp axes (a #smp.layout). Read and written only through
    /// the accessors of SmpLayout.h.
    static constexpr llvm::StringLiteral kLayoutAttr = "smp.layout";
    /// Argument attribute naming a graph input.
    static constexpr llvm::StringLiteral kInputAttr = "smp.input";
    /// Result attribute naming a graph output.
    static constexpr llvm::StringLiteral kOutputAttr = "smp.output";
    /// Result attribute of a forward's @main (smp-mark-sample-outputs):
    /// "per-sample", or why batches of the output are not its values over
    /// their concatenation.
    static constexpr llvm::StringLiteral kSamplesAttr = "smp.samples";
    /// Module attribute: path of the file holding the weight bytes.
    static constexpr llvm::StringLiteral kSourceAttr = "smp.source";
    /// Module attribute: the ONNX default-domain opset the model came from.
    static constexpr llvm::StringLiteral kOpsetAttr = "smp.opset";
    /// Pipeline stage (model chunk) of an op or a parameter argument (i64).
    static constexpr llvm::StringLiteral kStageAttr = "smp.stage";
    /// Micro-batch of an op of the forward/backward part of a step (i64).
    static constexpr llvm::StringLiteral kMicrobatchAttr = "smp.mb";
    /// On the op of a training step that reads a batch norm's running
    /// statistic (string: its parameter) to update it; a micro-batch's copy
    /// chains from the previous micro-batch's update.
    static constexpr llvm::StringLiteral kRunningStatAttr = "smp.running_stat";
    /// On a training step's smp.batch_norm (normalising with its batch's
    /// statistics): the parameters (strings) of its running mean and
    /// variance, which an evaluation normalises with instead.
    static constexpr llvm::StringLiteral kRunningMeanAttr = "smp.running_mean";
    static constexpr llvm::StringLiteral kRunningVarAttr = "smp.running_var";
    /// Unit, on an smp.slice: its result may be a view of its input's
    /// storage (the artifact writer makes a contiguous one without a copy):
    /// the parts of a gradient bucket after its collective.
    static constexpr llvm::StringLiteral kViewAttr = "smp.view";
    /// Unit: the op belongs to the backward of its micro-batch.
    static constexpr llvm::StringLiteral kBackwardAttr = "smp.bwd";
    /// Module attribute: predicted cost of each pipeline stage (f64 array).
    static constexpr llvm::StringLiteral kStageCostsAttr = "smp.stage_costs";
    /// Function attribute: the pipeline rank a function runs on (i64).
    static constexpr llvm::StringLiteral kPipelineRankAttr = "smp.pp_rank";
    /// Module attribute: grid placement order, e.g. "DPT" (see docs).
    static constexpr llvm::StringLiteral kPlacementAttr = "smp.placement";
    /// On a mul/div of a model's own loss (smpc, LossShare.h): its constant
    /// operand was folded from the batch's shape, proportional to the batch
    /// size to this power (i64: 1 or -1).
    static constexpr llvm::StringLiteral kBatchScaledAttr = "smp.batch_scaled";
    /// Unit: no gradient flows through this op (autodiff treats its results
    /// as constants): the class weights a split cross-entropy mean counts.
    static constexpr llvm::StringLiteral kNoGradAttr = "smp.no_grad";
    /// Module unit attribute (smpc, LossShare.h): whether the loss's
    /// constants came from the batch's shape could not be told.
    static constexpr llvm::StringLiteral kBatchScalingUnknownAttr =
        "smp.batch_scaling_unknown";
    /// Module attributes (smp-mark-eval-padding): the labels input whose
    /// rows an evaluation's padding samples get -100 in (non-empty
    /// string), or why the loss cannot leave padding samples out.
    static constexpr llvm::StringLiteral kEvalPadLabelsAttr =
        "smp.eval_pad_labels";
    static constexpr llvm::StringLiteral kEvalNoPadAttr = "smp.eval_no_pad";
    /// Module attributes: for a model's own loss, the ranges [begin, end)
    /// of a sample's flattened labels (smp.eval_pad_labels) its
    /// cross-entropy reads, as pairs (smp-mark-eval-padding); or why smp
    /// cannot say (evaluation batches other than the global one then run as
    /// global ones).
    static constexpr llvm::StringLiteral kEvalCountedLabelsAttr =
        "smp.eval_counted_labels";
    static constexpr llvm::StringLiteral kEvalNoCountAttr = "smp.eval_no_count";
    /// Module unit attribute: a model's own loss is a sum over the samples
    /// (an evaluation batch's loss is the sum of its global batches').
    static constexpr llvm::StringLiteral kEvalLossSumsAttr =
        "smp.eval_loss_sums";
    /// Module attribute: the pipeline schedule's description.
    static constexpr llvm::StringLiteral kScheduleAttr = "smp.schedule";
    /// Module attribute: the module was generated by smp-modelgen from a
    /// config rather than imported; the model kind ("gpt" or "llama",
    /// non-empty string). Such modules hold shapes only (no smp.source).
    static constexpr llvm::StringLiteral kModelAttr = "smp.model";
    /// Module attribute: the generated model's sizes, a dictionary of
    /// integers (layers, hidden, heads, ffn, seq, vocab, batch; kv_heads
    /// for llama).
    static constexpr llvm::StringLiteral kModelConfigAttr = "smp.model_config";
  }];
}

/// A binary (or ternary) elementwise op whose operands broadcast
/// numpy-style to the result's shape (upstream `Elementwise` requires equal
/// shapes). An operand of lower rank aligns with the result's trailing
/// dims; a dim of size 1 repeats.
def Smp_BroadcastingElementwise : NativeOpTrait<"BroadcastingElementwise"> {
  let cppNamespace = "::mlir::OpTrait::smp";
}

class Smp_Op<string mnemonic, list<Trait> traits = []>
    : Op<Smp_Dialect, mnemonic, traits>;

#endif // SMP_DIALECT_SMP_IR_SMPBASE_TD
