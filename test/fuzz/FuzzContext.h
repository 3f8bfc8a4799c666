//===- FuzzContext.h - An MLIR context for the compiler's fuzz targets ----===//
//
// The ONNX and MLIR targets run each input in a fresh single-threaded
// MLIRContext with smp's dialects and passes registered (once per process)
// and every diagnostic swallowed: a rejected input is the expected outcome,
// not a finding. Header-only so that the runtime-only targets (npy,
// artifact) do not link MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_FUZZ_FUZZCONTEXT_H
#define SMP_TEST_FUZZ_FUZZCONTEXT_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "smp/InitAll.h"

namespace smp::fuzz {

class FuzzContext {
public:
  FuzzContext()
      : ctx_(registry(), mlir::MLIRContext::Threading::DISABLED),
        quiet_(&ctx_, [](mlir::Diagnostic &) { return mlir::success(); }) {
    ctx_.loadAllAvailableDialects();
  }
  mlir::MLIRContext &get() { return ctx_; }

private:
  static mlir::DialectRegistry &registry() {
    static mlir::DialectRegistry *r = [] {
      auto *reg = new mlir::DialectRegistry;
      smp::registerAllDialects(*reg);
      smp::registerAllPasses();
      return reg;
    }();
    return *r;
  }

  mlir::MLIRContext ctx_;
  mlir::ScopedDiagnosticHandler quiet_;
};

} // namespace smp::fuzz

#endif // SMP_TEST_FUZZ_FUZZCONTEXT_H
