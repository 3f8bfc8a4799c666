//===- BaseTypes.cpp - MLIR element types as smp_base dtypes --------------===//

#include "smp/Dialect/Smp/IR/BaseTypes.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

std::optional<smp::base::DType> smp::baseDType(Type t) {
  using smp::base::DType;
  if (t.isF32())
    return DType::F32;
  if (t.isF64())
    return DType::F64;
  if (t.isF16())
    return DType::F16;
  if (t.isBF16())
    return DType::BF16;
  auto it = dyn_cast<IntegerType>(t);
  if (!it)
    return std::nullopt;
  bool isUnsigned = it.isUnsigned();
  switch (it.getWidth()) {
  case 1:
    return DType::Bool;
  case 8:
    return isUnsigned ? DType::U8 : DType::I8;
  case 16:
    return isUnsigned ? DType::U16 : DType::I16;
  case 32:
    return isUnsigned ? DType::U32 : DType::I32;
  case 64:
    return isUnsigned ? DType::U64 : DType::I64;
  default:
    return std::nullopt;
  }
}
