//===- WeightStore.cpp - Parameter bytes from an ONNX model ---------------===//

#include "ModelLoader.h"
#include "TensorData.h"
#include "mlir/IR/MLIRContext.h"
#include "smp/Frontend/ONNX/Importer.h"
#include "smp/base/DType.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

class ONNXWeightStore final : public WeightSource {
public:
  llvm::Error open(llvm::StringRef path) {
    path_ = path.str();
    modelDir_ = llvm::sys::path::parent_path(path).str();
    if (auto err = loadModel(path, model_))
      return err;
    for (const auto &init : model_.graph().initializer())
      index_[init.name()] = &init;
    return llvm::Error::success();
  }

  llvm::Expected<std::string> read(llvm::StringRef name,
                                   RankedTensorType type) override {
    auto it = index_.find(name);
    if (it == index_.end())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path_ + ": no initializer named '" +
                                         name + "'");
    const onnx::TensorProto &tensor = *it->second;
    auto actual = checkTensor(type.getContext(), tensor, modelDir_);
    if (!actual)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path_ + ": " +
                                         llvm::toString(actual.takeError()));
    // A master copy (smp-master-weights): an f32 parameter read from its
    // bf16/f16 initializer, widened exactly.
    if (*actual != type && type.getElementType().isF32() &&
        actual->getShape() == type.getShape() &&
        (actual->getElementType().isBF16() ||
         actual->getElementType().isF16())) {
      auto narrow = readTensorBytes(tensor, *actual, modelDir_);
      if (!narrow)
        return narrow.takeError();
      return widen(*narrow, actual->getElementType().isBF16());
    }
    if (*actual != type) {
      std::string want, got;
      llvm::raw_string_ostream(want) << type;
      llvm::raw_string_ostream(got) << *actual;
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path_ + ": initializer '" + name + "' is " + got +
              " but the model expects " + want);
    }
    return readTensorBytes(tensor, type, modelDir_);
  }

private:
  static std::string widen(const std::string &bytes, bool bf16) {
    std::string out(bytes.size() * 2, '\0');
    for (size_t i = 0; i < bytes.size() / 2; ++i) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      float f = bf16 ? smp::base::bf16ToFloat(h) : smp::base::halfToFloat(h);
      std::memcpy(out.data() + 4 * i, &f, 4);
    }
    return out;
  }

  std::string path_, modelDir_;
  onnx::ModelProto model_;
  llvm::StringMap<const onnx::TensorProto *> index_;
};

} // namespace

llvm::Expected<std::unique_ptr<WeightSource>>
openONNXWeights(llvm::StringRef path) {
  auto store = std::make_unique<ONNXWeightStore>();
  if (auto err = store->open(path))
    return std::move(err);
  return std::unique_ptr<WeightSource>(std::move(store));
}

llvm::Expected<std::vector<std::string>>
graphInputNames(llvm::StringRef path) {
  onnx::ModelProto model;
  if (auto err = loadModel(path, model))
    return std::move(err);
  llvm::StringMap<bool> initializers;
  for (const auto &init : model.graph().initializer())
    initializers[init.name()] = true;
  std::vector<std::string> names;
  for (const auto &input : model.graph().input())
    if (!initializers.count(input.name()))
      names.push_back(input.name());
  return names;
}

llvm::Expected<HostTensor> readTensorProtoFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " + buffer.getError().message());
  HostTensor out;
  out.serialized = (*buffer)->getBuffer().str();
  onnx::TensorProto tensor;
  if (!tensor.ParseFromString(out.serialized))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": not a TensorProto");
  mlir::MLIRContext ctx;
  auto type = checkTensor(&ctx, tensor, llvm::sys::path::parent_path(path));
  if (!type)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " +
                                       llvm::toString(type.takeError()));
  auto bytes = readTensorBytes(tensor, *type, llvm::sys::path::parent_path(path));
  if (!bytes)
    return bytes.takeError();
  out.name = tensor.name();
  out.onnxType = tensor.data_type();
  out.dims.assign(tensor.dims().begin(), tensor.dims().end());
  out.bytes = std::move(*bytes);
  return out;
}

} // namespace smp::onnx_frontend
