//===- smp-opt.cpp - mlir-opt for the smp dialects and passes -------------===//
//
// smp-opt --help lists MLIR's driver options and the smp passes only: the
// LLVM back-end options linked in with LLVM (--aarch64-*, --amdgpu-*, ...;
// all registered before main, unlike MLIR's, which MlirOptMain registers)
// are hidden. They still parse, and --help-hidden lists them.
//
//===----------------------------------------------------------------------===//

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "smp/InitAll.h"
#include "smp/Version.h"

#include <set>
#include <string>

namespace {

/// Hides every option registered so far (LLVM's) but the generic ones.
void hideLlvmOptions() {
  static const std::set<std::string> kKeep = {
      "help",          "help-list",         "help-hidden",
      "help-list-hidden", "version",        "print-options",
      "print-all-options", "color"};
  for (auto &entry : llvm::cl::getRegisteredOptions())
    if (!kKeep.count(entry.first.str()))
      entry.second->setHiddenFlag(llvm::cl::Hidden);
}

} // namespace

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  smp::registerAllDialects(registry);
  smp::registerAllPasses();
  hideLlvmOptions();
  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << "smp " << SMP_VERSION << "\n"; });
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "smp optimizer driver: runs smp passes on MLIR text\n",
      registry));
}
