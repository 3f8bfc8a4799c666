//===- TensorData.cpp - ONNX tensors: types, sizes, bytes -----------------===//

#include "TensorData.h"

#include <cctype>

#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>
#include <sys/stat.h>

using namespace mlir;
using llvm::createStringError;
using llvm::inconvertibleErrorCode;

namespace smp::onnx_frontend {

static llvm::Error tensorError(const onnx::TensorProto &t,
                               const llvm::Twine &msg) {
  return createStringError(inconvertibleErrorCode(),
                           "tensor '" + t.name() + "': " + msg);
}

std::string onnxTypeName(int32_t onnxType) {
  if (!onnx::TensorProto_DataType_IsValid(onnxType))
    return "unknown ONNX data type " + std::to_string(onnxType);
  std::string name = onnx::TensorProto_DataType_Name(
      static_cast<onnx::TensorProto_DataType>(onnxType));
  for (char &c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name + " (ONNX data type " + std::to_string(onnxType) + ")";
}

namespace {
template <typename FloatT> Type floatType(MLIRContext *ctx) {
  return FloatT::get(ctx);
}
template <unsigned Width, IntegerType::SignednessSemantics Signedness =
                              IntegerType::Signless>
Type intType(MLIRContext *ctx) {
  return IntegerType::get(ctx, Width, Signedness);
}

/// The ONNX data types smp reads: bytes per element and the MLIR type.
struct OnnxElementType {
  int32_t onnxType;
  int64_t bytes;
  Type (*get)(MLIRContext *);
};
using TP = onnx::TensorProto;
constexpr OnnxElementType kElementTypes[] = {
    {TP::FLOAT, 4, floatType<Float32Type>},
    {TP::DOUBLE, 8, floatType<Float64Type>},
    {TP::FLOAT16, 2, floatType<Float16Type>},
    {TP::BFLOAT16, 2, floatType<BFloat16Type>},
    {TP::BOOL, 1, intType<1>},
    {TP::INT8, 1, intType<8>},
    {TP::INT16, 2, intType<16>},
    {TP::INT32, 4, intType<32>},
    {TP::INT64, 8, intType<64>},
    {TP::UINT8, 1, intType<8, IntegerType::Unsigned>},
    {TP::UINT16, 2, intType<16, IntegerType::Unsigned>},
    {TP::UINT32, 4, intType<32, IntegerType::Unsigned>},
    {TP::UINT64, 8, intType<64, IntegerType::Unsigned>},
};

const OnnxElementType *lookupElementType(int32_t onnxType) {
  for (const OnnxElementType &e : kElementTypes)
    if (e.onnxType == onnxType)
      return &e;
  return nullptr;
}
} // namespace

Type elementType(MLIRContext *ctx, int32_t onnxType) {
  const OnnxElementType *e = lookupElementType(onnxType);
  return e ? e->get(ctx) : Type();
}

int64_t elementSize(int32_t onnxType) {
  const OnnxElementType *e = lookupElementType(onnxType);
  return e ? e->bytes : 0;
}

/// Number of values stored in the typed field matching the data type.
static int64_t typedFieldCount(const onnx::TensorProto &t) {
  switch (t.data_type()) {
  case TP::FLOAT:
    return t.float_data_size();
  case TP::DOUBLE:
    return t.double_data_size();
  case TP::INT64:
    return t.int64_data_size();
  case TP::UINT32:
  case TP::UINT64:
    return t.uint64_data_size();
  default:
    return t.int32_data_size();
  }
}

struct ExternalInfo {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
};

static llvm::Expected<ExternalInfo>
externalInfo(const onnx::TensorProto &t) {
  ExternalInfo info;
  llvm::StringSet<> seen;
  for (const auto &kv : t.external_data()) {
    // The keys ONNX defines; anything else (a "basepath", say) would be
    // ignored, so the tensor might not mean what its writer meant.
    if (kv.key() != "location" && kv.key() != "offset" &&
        kv.key() != "length" && kv.key() != "checksum")
      return tensorError(t, "external data has unknown key '" + kv.key() +
                                "' (allowed: location, offset, length, "
                                "checksum)");
    if (!seen.insert(kv.key()).second)
      return tensorError(t, "external data key '" + kv.key() +
                                "' is given twice");
    auto parseInt = [&](llvm::StringRef s, int64_t &out) -> llvm::Error {
      if (s.getAsInteger(10, out) || out < 0)
        return tensorError(t, "external data " + kv.key() + " '" + s +
                                  "' is not a non-negative integer");
      return llvm::Error::success();
    };
    if (kv.key() == "location")
      info.location = kv.value();
    else if (kv.key() == "offset") {
      if (auto err = parseInt(kv.value(), info.offset))
        return std::move(err);
    } else if (kv.key() == "length") {
      if (auto err = parseInt(kv.value(), info.length))
        return std::move(err);
    }
  }
  if (info.location.empty())
    return tensorError(t, "external data has no location");
  return info;
}

llvm::Expected<std::string> resolveExternalData(llvm::StringRef modelDir,
                                                llvm::StringRef location,
                                                int64_t offset, int64_t length,
                                                llvm::StringRef tensorName) {
  auto refuse = [&](const llvm::Twine &why) {
    return createStringError(inconvertibleErrorCode(),
                             "tensor '" + tensorName + "': external data '" +
                                 location + "' refused: " + why);
  };
  if (location.empty())
    return refuse("empty location");
  if (llvm::sys::path::is_absolute(location) || location.starts_with("/") ||
      location.starts_with("\\"))
    return refuse("absolute paths are not allowed");
  if (location.contains('\0'))
    return refuse("NUL in path");
  llvm::SmallString<256> path(modelDir.empty() ? "." : modelDir);
  for (auto it = llvm::sys::path::begin(location),
            end = llvm::sys::path::end(location);
       it != end; ++it) {
    if (*it == "..")
      return refuse("'..' would leave the model directory");
    if (*it == ".")
      continue;
    llvm::sys::path::append(path, *it);
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0)
      return refuse("file not found");
    if (S_ISLNK(st.st_mode))
      return refuse("symbolic links are not allowed");
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return refuse("not a regular file");
  if (st.st_nlink > 1)
    return refuse("the file has other hard links (possibly outside the "
                  "model directory)");
  llvm::SmallString<256> realDir, realFile;
  if (llvm::sys::fs::real_path(modelDir.empty() ? "." : modelDir, realDir) ||
      llvm::sys::fs::real_path(path, realFile))
    return refuse("cannot resolve path");
  if (!llvm::StringRef(realFile).starts_with((realDir + "/").str()))
    return refuse("resolves outside the model directory");
  int64_t size = st.st_size;
  if (offset < 0 || offset > size)
    return refuse("offset " + llvm::Twine(offset) + " is past the end of the " +
                  llvm::Twine(size) + "-byte file");
  if (length >= 0 && length > size - offset)
    return refuse("offset " + llvm::Twine(offset) + " + length " +
                  llvm::Twine(length) + " is past the end of the " +
                  llvm::Twine(size) + "-byte file");
  return std::string(path.str());
}

llvm::Expected<RankedTensorType> checkTensor(MLIRContext *ctx,
                                             const onnx::TensorProto &t,
                                             llvm::StringRef modelDir) {
  Type elt = elementType(ctx, t.data_type());
  if (!elt)
    return tensorError(t, "element type " + onnxTypeName(t.data_type()) +
                              " is not supported");
  llvm::SmallVector<int64_t> dims(t.dims().begin(), t.dims().end());
  for (int64_t d : dims)
    if (d < 0)
      return tensorError(t, "negative dim " + llvm::Twine(d));
  auto numel = checkedNumElements(dims);
  if (!numel)
    return tensorError(t, "shape " + shapeToString(dims) +
                              " has too many elements");
  auto checkedBytes =
      llvm::checkedMul<int64_t>(*numel, elementSize(t.data_type()));
  if (!checkedBytes)
    return tensorError(t, "byte size overflows");
  int64_t bytes = *checkedBytes;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto info = externalInfo(t);
    if (!info)
      return info.takeError();
    int64_t length = info->length >= 0 ? info->length : -1;
    auto resolved = resolveExternalData(modelDir, info->location, info->offset,
                                        length, t.name());
    if (!resolved)
      return resolved.takeError();
    if (length < 0) {
      uint64_t fileSize = 0;
      llvm::sys::fs::file_size(*resolved, fileSize);
      length = static_cast<int64_t>(fileSize) - info->offset;
    }
    if (length != bytes)
      return tensorError(t, "external data holds " + llvm::Twine(length) +
                                " bytes but shape " + shapeToString(dims) +
                                " needs " + llvm::Twine(bytes));
  } else if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != bytes)
      return tensorError(t, "raw_data holds " +
                                llvm::Twine(t.raw_data().size()) +
                                " bytes but shape " + shapeToString(dims) +
                                " needs " + llvm::Twine(bytes));
  } else if (typedFieldCount(t) != *numel) {
    return tensorError(t, "holds " + llvm::Twine(typedFieldCount(t)) +
                              " values but shape " + shapeToString(dims) +
                              " needs " + llvm::Twine(*numel));
  }
  return RankedTensorType::get(dims, elt);
}

/// Appends `v` as `size` little-endian bytes.
static void appendLE(std::string &out, uint64_t v, int64_t size) {
  for (int64_t b = 0; b < size; ++b)
    out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

/// Appends the bit pattern of floating-point `v` (little-endian).
template <typename Bits, typename Float>
static void appendBitsLE(std::string &out, Float v) {
  static_assert(sizeof(Bits) == sizeof(Float));
  Bits bits;
  std::memcpy(&bits, &v, sizeof(v));
  appendLE(out, bits, sizeof(bits));
}

llvm::Expected<std::string> readTensorBytes(const onnx::TensorProto &t,
                                            RankedTensorType type,
                                            llvm::StringRef modelDir) {
  int64_t n = type.getNumElements();
  int64_t esize = elementSize(t.data_type());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto info = externalInfo(t);
    if (!info)
      return info.takeError();
    auto resolved = resolveExternalData(modelDir, info->location, info->offset,
                                        n * esize, t.name());
    if (!resolved)
      return resolved.takeError();
    auto buf = llvm::MemoryBuffer::getFileSlice(*resolved, n * esize,
                                                info->offset);
    if (!buf)
      return tensorError(t, "cannot read external data: " +
                                buf.getError().message());
    return (*buf)->getBuffer().str();
  }
  if (t.has_raw_data() || n == 0)
    return t.raw_data();
  // Typed fields: widen/narrow each value to the element size.
  std::string bytes;
  bytes.reserve(n * esize);
  for (int64_t k = 0; k < n; ++k) {
    switch (t.data_type()) {
    case TP::FLOAT:
      appendBitsLE<uint32_t>(bytes, t.float_data(k));
      break;
    case TP::DOUBLE:
      appendBitsLE<uint64_t>(bytes, t.double_data(k));
      break;
    case TP::INT64:
      appendLE(bytes, static_cast<uint64_t>(t.int64_data(k)), 8);
      break;
    case TP::UINT32:
    case TP::UINT64:
      appendLE(bytes, t.uint64_data(k), esize);
      break;
    case TP::BOOL:
      appendLE(bytes, t.int32_data(k) != 0 ? 1 : 0, 1);
      break;
    default: // int8/16/32, uint8/16, float16/bfloat16 bit patterns
      appendLE(bytes, static_cast<uint64_t>(static_cast<int64_t>(t.int32_data(k))),
               esize);
    }
  }
  return bytes;
}

/// Element k of a little-endian byte buffer as T.
template <typename T> static T loadLE(const char *data, int64_t k) {
  T v;
  std::memcpy(&v, data + k * sizeof(T), sizeof(T));
  return v;
}

llvm::Expected<DenseElementsAttr> readTensor(MLIRContext *ctx,
                                             const onnx::TensorProto &t,
                                             llvm::StringRef modelDir) {
  auto type = checkTensor(ctx, t, modelDir);
  if (!type)
    return type.takeError();
  auto bytesOr = readTensorBytes(t, *type, modelDir);
  if (!bytesOr)
    return bytesOr.takeError();
  const char *bytes = bytesOr->data();
  int64_t n = type->getNumElements();
  Type elt = type->getElementType();
  if (auto ft = dyn_cast<FloatType>(elt)) {
    llvm::SmallVector<llvm::APFloat> vals;
    vals.reserve(n);
    for (int64_t k = 0; k < n; ++k) {
      if (ft.isF32())
        vals.emplace_back(loadLE<float>(bytes, k));
      else if (ft.isF64())
        vals.emplace_back(loadLE<double>(bytes, k));
      else // f16 / bf16 bit patterns
        vals.emplace_back(ft.getFloatSemantics(),
                          llvm::APInt(16, loadLE<uint16_t>(bytes, k)));
    }
    return DenseElementsAttr::get(*type, vals);
  }
  auto it = cast<IntegerType>(elt);
  unsigned width = it.getWidth();
  int64_t esize = elementSize(t.data_type());
  llvm::SmallVector<llvm::APInt> vals;
  vals.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    uint64_t v = 0;
    std::memcpy(&v, bytes + k * esize, esize);
    if (width == 1)
      vals.emplace_back(1, v != 0);
    else
      vals.emplace_back(width, v, /*isSigned=*/false, /*implicitTrunc=*/true);
  }
  return DenseElementsAttr::get(*type, vals);
}

} // namespace smp::onnx_frontend
