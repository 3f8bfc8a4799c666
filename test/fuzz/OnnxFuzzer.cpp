//===- OnnxFuzzer.cpp - libFuzzer target: the ONNX importer ---------------===//
//
// bytes -> DIR/model.onnx -> importONNXFile (ModelProto parse, graph checks,
// shared initializers, every op converter, the raising passes) and, for a
// model that imports, the lowering and memory plan of the artifact writer
// (planArenaBytes: every buffer's size and offset, without weights).
//
// Every symbolic dim of the graph inputs is bound to 2 (as `--dim N=2`).
// DIR also holds `data.bin` (256 bytes) so that external data can resolve
// inside the model directory, and `link.bin`, a symbolic link to it, which
// the importer must refuse.
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"
#include "FuzzSupport.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "onnx/onnx_pb.h"
#include "smp/Frontend/ONNX/Importer.h"
#include "smp/Target/Artifact/ArtifactWriter.h"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace {

const std::string &modelPath() {
  static const std::string path = [] {
    const std::string &dir = smp::fuzz::scratchDir();
    char data[256];
    for (int i = 0; i < 256; ++i)
      data[i] = static_cast<char>(i);
    smp::fuzz::writeFile(dir + "/data.bin", data, sizeof(data));
    (void)::symlink("data.bin", (dir + "/link.bin").c_str());
    return dir + "/model.onnx";
  }();
  return path;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = modelPath();
  smp::fuzz::writeFile(path, data, size);

  smp::onnx_frontend::ImportOptions options;
  onnx::ModelProto model;
  if (size < (size_t(1) << 30) &&
      model.ParseFromArray(data, static_cast<int>(size)))
    for (const auto &input : model.graph().input())
      for (const auto &d : input.type().tensor_type().shape().dim())
        if (d.has_dim_param() && !d.dim_param().empty())
          options.dims[d.dim_param()] = 2;

  smp::fuzz::FuzzContext fuzzContext;
  mlir::MLIRContext &ctx = fuzzContext.get();

  auto module = smp::onnx_frontend::importONNXFile(ctx, path, options);
  if (!module) {
    std::string err = llvm::toString(module.takeError());
    if (smp::fuzz::verbose())
      std::fprintf(stderr, "smp-fuzz-onnx: %s\n", err.c_str());
    return 0;
  }
  if (mlir::failed(mlir::verify(**module))) {
    std::fprintf(stderr, "smp-fuzz-onnx: the importer made invalid IR\n");
    std::abort();
  }
  auto arenas = smp::planArenaBytes(**module);
  std::string err = arenas ? "imported and planned"
                           : llvm::toString(arenas.takeError());
  if (smp::fuzz::verbose())
    std::fprintf(stderr, "smp-fuzz-onnx: %s\n", err.c_str());
  return 0;
}
