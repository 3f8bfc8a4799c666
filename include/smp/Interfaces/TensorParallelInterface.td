//===- TensorParallelInterface.td - Sharding rules ---------*- tablegen -*-===//

#ifndef SMP_INTERFACES_TENSORPARALLELINTERFACE_TD
#define SMP_INTERFACES_TENSORPARALLELINTERFACE_TD

include "mlir/IR/OpBase.td"

def Smp_TensorParallelOpInterface : OpInterface<"TensorParallelOpInterface"> {
  let cppNamespace = "::smp";
  let description = [{
    An op that smp-tensor-parallel can split Megatron-style: given how one
    of its results is split over the `tp` ranks (each rank holds 1/tp of
    one dimension), the rule says how each operand must be laid out for
    every rank to compute its share of the result alone. The pass walks a
    region backwards from a row-parallel matmul with these rules (as
    upstream's ShardingInterface lets sharding propagation walk any op);
    an op without the interface ends the region (it stays replicated).
  }];
  let methods = [
    InterfaceMethod<[{
        With `result` split as `shard` over `tp` ranks, fills `layouts` with
        one entry per operand (whole, split as an activation, split as a
        weight, or the region's entry). `isWeight` says whether a value is
        computed from parameters only. Fails when the op cannot compute its
        share so.
      }],
      "::llvm::LogicalResult", "getTpOperandLayouts",
      (ins "::mlir::OpResult":$result, "::smp::TpShard":$shard,
           "int64_t":$tp,
           "::llvm::function_ref<bool(::mlir::Value)>":$isWeight,
           "::llvm::SmallVectorImpl<::smp::TpOperandLayout> &":$layouts)>,
    InterfaceMethod<[{
        Whether the rule also holds where the op computes a value from
        parameters only (a transposed weight): such a chain is computed by
        each rank from its slice of the parameter.
      }],
      "bool", "splitsTpWeightChains", (ins), [{}],
      /*defaultImplementation=*/[{ return false; }]>,
    InterfaceMethod<[{
        Rewrites the attributes that hold sizes along the split dimension
        (a slice's limits, a split's sizes) to one rank's share, for
        `result` split as `shard` over `tp` ranks. Called once per op,
        before the result types change.
      }],
      "void", "shrinkForTp",
      (ins "::mlir::OpResult":$result, "::smp::TpShard":$shard,
           "int64_t":$tp), [{}],
      /*defaultImplementation=*/[{ return; }]>,
    InterfaceMethod<[{
        Called once per op after the region is rewritten (local types, the
        entries' `smp.tp_copy`): inserts what each rank computes from an
        operand it read whole (its key/value head).
      }],
      "void", "finishTp", (ins "int64_t":$tp), [{}],
      /*defaultImplementation=*/[{ return; }]>
  ];
}

#endif // SMP_INTERFACES_TENSORPARALLELINTERFACE_TD
