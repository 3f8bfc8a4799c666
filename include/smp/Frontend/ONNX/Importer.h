//===- Importer.h - ONNX ModelProto -> smp dialect --------------*- C++ -*-===//
//
// Public entry points of the ONNX frontend. The header is free of ONNX and
// protobuf types so that tools and tests include it cheaply.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_FRONTEND_ONNX_IMPORTER_H
#define SMP_FRONTEND_ONNX_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "smp/Target/Artifact/WeightSource.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace smp::onnx_frontend {

struct ImportOptions {
  /// Values for symbolic dims (`dim_param`), from `--dim name=value`.
  llvm::StringMap<int64_t> dims;
  /// Run the raising passes (layer norm, GELU, ...) after import.
  bool raise = true;
  /// With `raise`: fuse attention chains into smp.attention
  /// (`--no-fuse-attention` keeps them as imported).
  bool fuseAttention = true;
  /// If positive, the value of the batch dims: every symbolic dim that is
  /// the leading dim of some graph input (and wherever else that name
  /// appears). This is one rank's micro-batch: `globalBatch / batchSplit`.
  int64_t batchSize = 0;
  /// The batch one training step takes, as the user stated it (--batch-size;
  /// 0: not stated). A `dims` binding of a batch dim, or a static batch dim
  /// in the file, must agree with it: the import is refused otherwise.
  int64_t globalBatch = 0;
  /// How many ways the global batch is split (data-parallel ranks x micro-
  /// batches); a batch fixed in the file cannot be split.
  int64_t batchSplit = 1;
  /// The model will be trained: parameters the exporter removed (harmless
  /// for inference) are refused.
  bool training = false;
  /// Warn how the parameters train (tied, untied, folded) without
  /// `training` too: `smpc summary` describes what training would do.
  bool parameterWarnings = false;
  /// Train a dynamo export whose metadata a tool removed
  /// (--without-export-metadata): smp guesses which initializers PyTorch
  /// merged, tied or folded, with a warning for each guess; without it such
  /// a file is refused under `training`.
  bool withoutExportMetadata = false;
  /// Train training-mode Dropout nodes as identities (--no-dropout), as an
  /// eval() export would have them; without it such a node is refused.
  bool noDropout = false;
  /// smp.export's sidecar lists dropout it wrote as the identity (so a
  /// --no-dropout that finds no Dropout node in the file still applies).
  bool dropoutListed = false;
  /// Initializers to keep as the file shares them (--tie) although the
  /// importer would untie them, and tied copies to train apart (--untie).
  std::vector<std::string> tie, untie;
  /// Graph inputs to fold in as constants: name -> a serialized ONNX
  /// TensorProto with the value (e.g. shapes and axes that ONNX test data
  /// feeds as inputs; smp compiles static shapes).
  llvm::StringMap<std::string> constantInputs;
  /// Embedding tables whose row gets no gradient from the lookup
  /// (nn.Embedding padding_idx): initializer name -> row, from the
  /// smp.export sidecar. Each must be read by a Gather on axis 0, or the
  /// import is refused.
  llvm::StringMap<int64_t> paddingRows;
  /// One-element float initializers trained as parameters (other
  /// one-element initializers are constants): filled by the importer under
  /// training from the file's names (SharedInitializers.cpp).
  llvm::StringSet<> scalarParameters;
  /// Identity nodes whose output PyTorch detaches (`x.detach()`): filled
  /// by the importer under training from the dynamo export's metadata
  /// (DetachedValues.cpp); each becomes an smp.cast marked smp.no_grad.
  llvm::StringSet<> stopGradientNodes;
  /// With an smp.export sidecar: the initializers it maps to state_dict
  /// keys (parameters and buffers; the buffers are frozen by name). A
  /// one-element initializer is a parameter exactly when listed here.
  std::optional<llvm::StringSet<>> exportedStateKeys;
  /// Embedding tables whose one all-zero row is an ordinary row, not the
  /// padding row the importer would take it for (--no-padding-row;
  /// PaddingRows.cpp).
  std::vector<std::string> noPaddingRows;
  /// Initializers to train although their value is a sinusoidal position
  /// table, which the importer freezes as PyTorch models keep them
  /// (--trainable; SinusoidTables.cpp), or a TorchScript constant fold
  /// the importer warns of (a parameter only moved).
  std::vector<std::string> trainable;
  /// --freeze's regex (the step freezes what it matches): a TorchScript
  /// constant fold it matches is not warned of.
  std::string freeze;
};

/// A tensor read from an ONNX TensorProto file (`input_0.pb`).
struct HostTensor {
  std::string name;
  int32_t onnxType = 0;
  std::vector<int64_t> dims;
  std::string bytes; // little endian, row major
  std::string serialized; // the TensorProto as read
};

/// Names of the graph inputs of the model at `path` that are not
/// initializers, in order.
llvm::Expected<std::vector<std::string>> graphInputNames(llvm::StringRef path);

/// Reads and checks a serialized TensorProto file.
llvm::Expected<HostTensor> readTensorProtoFile(llvm::StringRef path);

/// Imports an ONNX model (binary `.onnx`, or ONNX text syntax when the file
/// name ends in `.onnxtxt`) into a module holding one `func.func @main`.
/// Errors are one line and name the file, node and tensor involved.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importONNXFile(mlir::MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options);

/// Opens the initializers of the ONNX model at `path` as a weight source.
llvm::Expected<std::unique_ptr<WeightSource>>
openONNXWeights(llvm::StringRef path);

/// ONNX op types (default domain) the importer converts, sorted.
std::vector<std::string> supportedOps();

/// Lists the op types of the model at `path` that the importer does not
/// support (empty when all are supported). Fails if the file does not parse.
llvm::Expected<std::vector<std::string>>
unsupportedOpsIn(llvm::StringRef path);

} // namespace smp::onnx_frontend

#endif // SMP_FRONTEND_ONNX_IMPORTER_H
