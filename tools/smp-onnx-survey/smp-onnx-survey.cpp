//===- smp-onnx-survey.cpp - Import every model under a directory ---------===//
//
// smp-onnx-survey DIR... : imports each `model.onnx` found under DIR (the
// layout of Debian's libonnx-testdata) and reports how many import cleanly,
// which failed for unsupported ops (with the op list) and which failed for
// other reasons. Exits non-zero only if the importer itself crashes, which
// would end the process anyway; it exists to count coverage and to show
// that no model in the corpus crashes the importer.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/MLIRContext.h"
#include "smp/Frontend/ONNX/Importer.h"
#include "smp/InitAll.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  if (argc < 2 || llvm::StringRef(argv[1]) == "--help") {
    llvm::outs() << "usage: smp-onnx-survey [--verbose] DIR...\n"
                    "Imports every model.onnx under each DIR and prints "
                    "'N passed, M failed' plus the unsupported ops.\n";
    return argc < 2 ? 1 : 0;
  }
  bool verbose = false;
  std::vector<std::string> models;
  for (int i = 1; i < argc; ++i) {
    if (llvm::StringRef(argv[i]) == "--verbose") {
      verbose = true;
      continue;
    }
    std::error_code ec;
    for (llvm::sys::fs::recursive_directory_iterator it(argv[i], ec), end;
         it != end && !ec; it.increment(ec))
      if (llvm::sys::path::filename(it->path()) == "model.onnx")
        models.push_back(it->path());
  }
  std::sort(models.begin(), models.end());
  mlir::DialectRegistry registry;
  smp::registerAllDialects(registry);
  int ok = 0, unsupported = 0, other = 0;
  std::map<std::string, int> missingOps;
  std::vector<std::string> otherErrors;
  for (const auto &path : models) {
    mlir::MLIRContext ctx(registry);
    smp::onnx_frontend::ImportOptions opts;
    auto module = smp::onnx_frontend::importONNXFile(ctx, path, opts);
    if (module) {
      ++ok;
      continue;
    }
    std::string msg = llvm::toString(module.takeError());
    auto ops = smp::onnx_frontend::unsupportedOpsIn(path);
    if (ops && !ops->empty()) {
      ++unsupported;
      for (const auto &op : *ops)
        ++missingOps[op];
    } else {
      if (!ops)
        llvm::consumeError(ops.takeError());
      ++other;
      otherErrors.push_back(msg);
    }
    if (verbose)
      llvm::outs() << "FAIL " << msg << "\n";
  }
  llvm::outs() << "models: " << models.size() << "\n";
  llvm::outs() << "imported cleanly: " << ok << "\n";
  llvm::outs() << "refused for unsupported ops: " << unsupported << "\n";
  llvm::outs() << "refused for other reasons (supported ops): " << other
               << "\n";
  for (const auto &e : otherErrors)
    llvm::outs() << "  " << e << "\n";
  llvm::outs() << "unsupported ops (models using them):\n";
  for (const auto &[op, n] : missingOps)
    llvm::outs() << "  " << op << " " << n << "\n";
  return 0;
}
