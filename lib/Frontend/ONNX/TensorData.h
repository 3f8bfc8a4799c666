//===- TensorData.h - ONNX tensors: types, sizes, bytes ---------*- C++ -*-===//

#ifndef SMP_LIB_FRONTEND_ONNX_TENSORDATA_H
#define SMP_LIB_FRONTEND_ONNX_TENSORDATA_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "onnx/onnx_pb.h"
#include "llvm/Support/Error.h"

#include <string>

namespace smp::onnx_frontend {

/// MLIR element type of an ONNX TensorProto data type, or null.
mlir::Type elementType(mlir::MLIRContext *ctx, int32_t onnxType);

/// An ONNX data type by name for messages: "complex64 (ONNX data type 14)",
/// "unknown ONNX data type 99".
std::string onnxTypeName(int32_t onnxType);

/// Bytes per element, 0 for unsupported types.
int64_t elementSize(int32_t onnxType);

/// Checks dims (non-negative, no overflow), the data type, and that the data
/// (raw, typed or external) holds exactly the right number of bytes. For
/// external data, the file is resolved under `modelDir` through the safe path
/// check. Returns the tensor type.
llvm::Expected<mlir::RankedTensorType>
checkTensor(mlir::MLIRContext *ctx, const onnx::TensorProto &tensor,
            llvm::StringRef modelDir);

/// The little-endian bytes of a checked tensor of `type`, whatever its
/// storage (raw, typed fields or external data).
llvm::Expected<std::string> readTensorBytes(const onnx::TensorProto &tensor,
                                            mlir::RankedTensorType type,
                                            llvm::StringRef modelDir);

/// Reads a checked tensor's values into an attribute (copies the bytes, so
/// only for small tensors).
llvm::Expected<mlir::DenseElementsAttr>
readTensor(mlir::MLIRContext *ctx, const onnx::TensorProto &tensor,
           llvm::StringRef modelDir);

/// Resolves an external-data location under `modelDir`, refusing absolute
/// paths, `..`, symlinks and hardlinks, and checks [offset, offset+length)
/// lies within the file. Returns the resolved path.
llvm::Expected<std::string> resolveExternalData(llvm::StringRef modelDir,
                                                llvm::StringRef location,
                                                int64_t offset, int64_t length,
                                                llvm::StringRef tensorName);

} // namespace smp::onnx_frontend

#endif // SMP_LIB_FRONTEND_ONNX_TENSORDATA_H
