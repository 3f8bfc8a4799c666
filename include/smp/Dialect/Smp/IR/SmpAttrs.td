//===- SmpAttrs.td - smp dialect attributes ----------------*- tablegen -*-===//

#ifndef SMP_DIALECT_SMP_IR_SMPATTRS_TD
#define SMP_DIALECT_SMP_IR_SMPATTRS_TD

include "smp/Dialect/Smp/IR/SmpBase.td"
include "mlir/IR/EnumAttr.td"

def Smp_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "GELU approximation", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"tanh", 1>
    ]> {
  let cppNamespace = "::smp";
  let genSpecializedAttr = 0;
}
def Smp_GeluApproximationAttr
    : EnumAttr<Smp_Dialect, Smp_GeluApproximation, "gelu_approximation">;

def Smp_Reduction : I32EnumAttr<"Reduction", "loss reduction", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>
    ]> {
  let cppNamespace = "::smp";
  let genSpecializedAttr = 0;
}
def Smp_ReductionAttr : EnumAttr<Smp_Dialect, Smp_Reduction, "reduction">;

#endif // SMP_DIALECT_SMP_IR_SMPATTRS_TD
