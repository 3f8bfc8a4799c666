//===- OnnxExport.h - Write the trained model as ONNX -----------*- C++ -*-===//

#ifndef SMPRT_ONNXEXPORT_H
#define SMPRT_ONNXEXPORT_H

#include "smprt/Executor.h"

#include <string>

namespace smprt {

/// Writes the ONNX model the artifact was compiled from, with every trained
/// parameter's initializer replaced by the executor's current values. Models
/// over 2 GB store their initializers as external data in `<path>.data`.
Status saveTrainedOnnx(const Executor &exec, const std::string &path);

} // namespace smprt

#endif // SMPRT_ONNXEXPORT_H
