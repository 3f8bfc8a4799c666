//===- MlirFuzzer.cpp - libFuzzer target: smp MLIR text input -------------===//
//
// bytes -> the MLIR parser with smp's dialects (as `smpc compile X.mlir`
// reads a module: our ops' parsers, attribute parsers and verifiers) and,
// for a module that parses and verifies, the artifact writer's lowering
// and memory plan (planArenaBytes).
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "smp/Dialect/Smp/IR/SizeLimits.h"
#include "smp/Target/Artifact/ArtifactWriter.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  smp::fuzz::FuzzContext fuzzContext;
  mlir::MLIRContext &ctx = fuzzContext.get();
  // NUL-terminated, as smpc reads a file (openInputFile): MLIR's lexer
  // reads the terminator to find the end of the buffer.
  std::string text(reinterpret_cast<const char *>(data), size);
  mlir::ParserConfig config(&ctx);
  auto module =
      mlir::parseSourceString<mlir::ModuleOp>(text, config, "input.mlir");
  if (!module)
    return 0;
  // As smpc: sizes are checked before anything computes with them.
  if (llvm::Error e = smp::checkSizeLimits(*module, "input.mlir")) {
    llvm::consumeError(std::move(e));
    return 0;
  }
  auto arenas = smp::planArenaBytes(*module);
  if (!arenas)
    llvm::consumeError(arenas.takeError());
  return 0;
}
