//===- Passes.td - smp dialect passes ----------------------*- tablegen -*-===//

#ifndef SMP_DIALECT_SMP_TRANSFORMS_PASSES_TD
#define SMP_DIALECT_SMP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

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

#endif // SMP_DIALECT_SMP_TRANSFORMS_PASSES_TD
