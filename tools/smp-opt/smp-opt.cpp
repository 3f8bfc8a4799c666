//===- smp-opt.cpp - mlir-opt for the smp dialects and passes -------------===//

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "smp/InitAll.h"
#include "smp/Version.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  smp::registerAllDialects(registry);
  smp::registerAllPasses();
  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "smp " << SMP_VERSION << "\n"; });
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "smp optimizer driver: runs smp passes on MLIR text\n",
      registry));
}
