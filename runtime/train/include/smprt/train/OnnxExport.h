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

/// Finds the ONNX model --save-onnx writes back: `path` (a copy of it
/// elsewhere) or, when empty, the one the artifact recorded. Refuses a file
/// that cannot be read or whose checksum is not the one smpc recorded (a
/// different model), naming what to pass; on success the artifact names
/// the file found. Run before training, so that the export cannot fail
/// after it.
Status findSourceModel(Artifact &artifact, const std::string &path);

/// With several ranks: every rank writes its shards beside `path`
/// (`<path>.shards`, removed after), rank 0 gathers each parameter whole
/// and writes the model. `steps`: the step recorded with the shards.
Status saveTrainedOnnxGathered(Executor &exec, Communicator &comm,
                               const std::string &path, int64_t steps);

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
