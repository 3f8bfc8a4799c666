//===- SizeLimits.cpp - Size limits of a parsed module --------------------===//

#include "smp/Dialect/Smp/IR/SizeLimits.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Support/CheckedMath.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace smp {
namespace {

std::string where(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << op->getName() << "' at line ";
  if (auto loc = dyn_cast<FileLineColLoc>(op->getLoc()))
    os << loc.getLine() << ":" << loc.getColumn();
  else
    os << op->getLoc();
  return s;
}

/// The byte size of `type`, or nullopt when it overflows; 0 for types
/// that are not ranked tensors with a static shape (nothing to check).
std::optional<int64_t> byteSize(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return 0;
  return checkedByteSize(t.getShape(),
                         t.getElementType().getIntOrFloatBitWidth());
}

std::string sizeText(std::optional<int64_t> bytes, const char *limit) {
  return bytes ? std::to_string(*bytes) + " bytes, over the limit of " + limit
               : std::string("a byte size that overflows int64");
}

llvm::Error tooLarge(llvm::StringRef path, const std::string &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 path + ": " + what);
}

} // namespace

llvm::Error checkSizeLimits(ModuleOp module, llvm::StringRef path) {
  std::string error;
  auto check = [&](Type type, const std::string &what) {
    auto bytes = byteSize(type);
    if (bytes && *bytes <= kMaxTensorBytes)
      return true;
    error = what + " of type tensor<" +
            shapeToString(cast<RankedTensorType>(type).getShape()) + "> has " +
            sizeText(bytes, "2^48 bytes for one tensor");
    return false;
  };
  module.walk([&](Operation *op) {
    for (Region &r : op->getRegions())
      for (Block &b : r)
        for (BlockArgument a : b.getArguments())
          if (!check(a.getType(), "argument #" +
                                      std::to_string(a.getArgNumber()) +
                                      " of a block of " + where(op)))
            return WalkResult::interrupt();
    for (OpResult res : op->getResults())
      if (!check(res.getType(), "result #" +
                                    std::to_string(res.getResultNumber()) +
                                    " of " + where(op)))
        return WalkResult::interrupt();
    for (NamedAttribute a : op->getAttrs()) {
      auto dense = dyn_cast<DenseElementsAttr>(a.getValue());
      if (!dense)
        continue;
      auto bytes = byteSize(dense.getType());
      if (bytes && *bytes <= kMaxConstantBytes)
        continue;
      error = "constant '" + a.getName().str() + "' of " + where(op) +
              " has " + sizeText(bytes, "2^30 bytes for one constant");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return error.empty() ? llvm::Error::success() : tooLarge(path, error);
}

} // namespace smp
