//===- OnnxExport.h - Write the trained model as ONNX -----------*- C++ -*-===//

#ifndef SMPRT_TRAIN_ONNXEXPORT_H
#define SMPRT_TRAIN_ONNXEXPORT_H

#include "smprt/exec/Executor.h"

#include <map>
#include <string>
#include <vector>

namespace smprt {

/// Writes the ONNX model the artifact was compiled from, with every trained
/// parameter's initializer replaced by the executor's current values. Models
/// over 2 GB store their initializers as external data in `<path>.data`.
Status saveTrainedOnnx(const Executor &exec, const std::string &path);

/// A trained parameter's bytes (not owned).
struct TrainedTensor {
  uint32_t dtype = 0;
  std::vector<int64_t> shape;
  const char *data = nullptr;
  size_t bytes = 0;
};

/// The same with the parameters given by name (gathered whole from every
/// rank of a multi-rank run).
Status saveTrainedOnnx(const Artifact &artifact,
                       const std::map<std::string, TrainedTensor> &params,
                       const std::string &path);

} // namespace smprt

#endif // SMPRT_TRAIN_ONNXEXPORT_H
