//===- WeightSource.h - Where parameter bytes come from ---------*- C++ -*-===//

#ifndef SMP_TARGET_ARTIFACT_WEIGHTSOURCE_H
#define SMP_TARGET_ARTIFACT_WEIGHTSOURCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/Error.h"

#include <string>

namespace smp {

/// Gives the bytes of a parameter by its global name. The IR never holds
/// weights; the artifact writer asks a WeightSource (the ONNX model file, a
/// checkpoint, ...) for each parameter it places.
class WeightSource {
public:
  virtual ~WeightSource() = default;
  /// Little-endian bytes of parameter `name`, which must have `type`.
  virtual llvm::Expected<std::string> read(llvm::StringRef name,
                                           mlir::RankedTensorType type) = 0;
};

} // namespace smp

#endif // SMP_TARGET_ARTIFACT_WEIGHTSOURCE_H
