//===- ModelLoader.h - Safe loading and validation of ONNX models -*- C++ -*-===//
//
// Reads a model file without trusting it: sizes are checked before anything
// is allocated, the graph is checked for dangling inputs, duplicate
// producers and cycles, and a topological order is computed iteratively.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_FRONTEND_ONNX_MODELLOADER_H
#define SMP_LIB_FRONTEND_ONNX_MODELLOADER_H

#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace smp::onnx_frontend {

/// Parses `path` (binary protobuf, or ONNX text syntax for `.onnxtxt`).
llvm::Error loadModel(llvm::StringRef path, onnx::ModelProto &model);

/// The default-domain opset of `model`, or an error if it has none or it is
/// outside the supported range.
llvm::Expected<int64_t> defaultOpset(const onnx::ModelProto &model,
                                     llvm::StringRef path);

/// Checks the graph's structure and returns its nodes in a topological order.
llvm::Expected<std::vector<int>> checkGraph(const onnx::GraphProto &graph,
                                            llvm::StringRef path);

/// "node 'name' (OpType)" or "node #i (OpType)" for diagnostics.
std::string describeNode(const onnx::NodeProto &node, int index);

} // namespace smp::onnx_frontend

#endif // SMP_LIB_FRONTEND_ONNX_MODELLOADER_H
