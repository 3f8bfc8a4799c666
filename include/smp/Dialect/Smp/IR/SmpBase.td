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
    /// Argument attribute naming a parameter (its global name).
    static constexpr llvm::StringLiteral kParamAttr = "smp.param";
    /// Unit argument attribute: a parameter that gets no gradient.
    static constexpr llvm::StringLiteral kFrozenAttr = "smp.frozen";
    /// Argument attribute naming an optimizer state tensor.
    static constexpr llvm::StringLiteral kStateAttr = "smp.state";
    /// Result attribute: this result replaces the parameter or state of
    /// that name after the step.
    static constexpr llvm::StringLiteral kUpdateAttr = "smp.update";
    /// Argument attribute naming a graph input.
    static constexpr llvm::StringLiteral kInputAttr = "smp.input";
    /// Result attribute naming a graph output.
    static constexpr llvm::StringLiteral kOutputAttr = "smp.output";
    /// Module attribute: path of the file holding the weight bytes.
    static constexpr llvm::StringLiteral kSourceAttr = "smp.source";
    /// Module attribute: the ONNX default-domain opset the model came from.
    static constexpr llvm::StringLiteral kOpsetAttr = "smp.opset";
    /// Pipeline stage (model chunk) of an op or a parameter argument (i64).
    static constexpr llvm::StringLiteral kStageAttr = "smp.stage";
    /// Micro-batch of an op of the forward/backward part of a step (i64).
    static constexpr llvm::StringLiteral kMicrobatchAttr = "smp.mb";
    /// Unit: the op belongs to the backward of its micro-batch.
    static constexpr llvm::StringLiteral kBackwardAttr = "smp.bwd";
    /// Module attribute: predicted cost of each pipeline stage (f64 array).
    static constexpr llvm::StringLiteral kStageCostsAttr = "smp.stage_costs";
    /// Function attribute: the pipeline rank a function runs on (i64).
    static constexpr llvm::StringLiteral kPipelineRankAttr = "smp.pp_rank";
    /// Module attribute: grid placement order, e.g. "DPT" (see docs).
    static constexpr llvm::StringLiteral kPlacementAttr = "smp.placement";
    /// Module attribute: the pipeline schedule's description.
    static constexpr llvm::StringLiteral kScheduleAttr = "smp.schedule";
  }];
}

class Smp_Op<string mnemonic, list<Trait> traits = []>
    : Op<Smp_Dialect, mnemonic, traits>;

#endif // SMP_DIALECT_SMP_IR_SMPBASE_TD
