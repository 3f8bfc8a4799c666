//===- MasterWeights.cpp - fp32 master copies of 16-bit parameters --------===//
//
// Implements `smp-master-weights` (Passes.td): a trained parameter stored in
// bf16 or f16 becomes an f32 argument cast to its stored type at the top.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/IR/TrainedParams.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/Support/Regex.h"

namespace smp {
#define GEN_PASS_DEF_SMPMASTERWEIGHTSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpMasterWeightsPass
    : public smp::impl::SmpMasterWeightsPassBase<SmpMasterWeightsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (f.isExternal())
      return;
    llvm::Regex frozen(freeze);
    llvm::DenseSet<Value> running = runningStatArgs(f);
    Block &body = f.getBody().front();
    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&body);
    Type f32 = Float32Type::get(&getContext());
    bool changed = false;
    for (BlockArgument arg : body.getArguments()) {
      // A batch norm's running statistics stay in their type, updated there
      // as PyTorch updates a bf16 module's buffers (DeepSpeed keeps no
      // master copy of a buffer).
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!isTrainedParam(f, arg.getArgNumber(),
                          freeze.empty() ? nullptr : &frozen, running) ||
          !(type.getElementType().isBF16() || type.getElementType().isF16()))
        continue;
      arg.setType(type.clone(f32));
      changed = true;
      if (arg.use_empty())
        continue;
      auto cast = CastOp::create(b, arg.getLoc(), type, arg);
      arg.replaceAllUsesExcept(cast.getResult(), cast);
    }
    if (changed)
      f.setFunctionType(FunctionType::get(
          &getContext(), body.getArgumentTypes(), f.getResultTypes()));
  }
};

} // namespace
