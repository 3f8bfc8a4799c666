//===- AutodiffInterface.td - Vector-Jacobian products -----*- tablegen -*-===//

#ifndef SMP_INTERFACES_AUTODIFFINTERFACE_TD
#define SMP_INTERFACES_AUTODIFFINTERFACE_TD

include "mlir/IR/OpBase.td"

def Smp_AutodiffOpInterface : OpInterface<"AutodiffOpInterface"> {
  let cppNamespace = "::smp";
  let description = [{
    An op that reverse-mode autodiff can differentiate: given the gradients
    of its results, it builds the gradients of its operands (the
    vector-Jacobian product) with new ops at the builder's insertion point.
    Ops without this interface stop gradients (integer and boolean values
    never carry one).
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the gradient of every operand for which `needsGrad` is set.
        `resultGrads` has one entry per result, null where a result gets no
        gradient. Fills `operandGrads` with one entry per operand (null where
        none is built). Fails, with a diagnostic, if the gradient cannot be
        built.
      }],
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$needsGrad,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // SMP_INTERFACES_AUTODIFFINTERFACE_TD
