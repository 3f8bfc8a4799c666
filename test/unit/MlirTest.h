//===- MlirTest.h - A test fixture with the smp dialects loaded -*- C++ -*-===//
//
// The compiler's unit tests (test/unit/<lib dir>/...) share this fixture:
// a context with every dialect smpc registers, loaded.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_UNIT_MLIRTEST_H
#define SMP_TEST_UNIT_MLIRTEST_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "smp/InitAll.h"

#include <gtest/gtest.h>

#include <memory>

namespace smp::test {

class MlirTest : public ::testing::Test {
protected:
  MlirTest() {
    smp::registerAllDialects(registry);
    ctx = std::make_unique<mlir::MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
  }

  /// Parses `text` as a module; a parse error fails the test.
  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef text) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(text, ctx.get());
    EXPECT_TRUE(module) << text.str();
    return module;
  }

  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> ctx;
};

} // namespace smp::test

#endif // SMP_TEST_UNIT_MLIRTEST_H
