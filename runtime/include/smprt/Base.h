//===- Base.h - The base layer's names in the runtime's namespace -*- C++
//-*-===//
//
// The runtime is written in namespace smprt on top of smp_base
// (runtime/base, namespace smp::base). As mlir/Support/LLVM.h does for the
// llvm:: names MLIR uses everywhere, this header makes the base names the
// runtime uses visible in smprt, so that runtime code and its users write
// Status, TensorRef or smprt::readNpy. Every runtime header that needs a
// base type includes this one, never base headers' names by themselves.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_BASE_H
#define SMPRT_BASE_H

#include "smp/base/DType.h"
#include "smp/base/FileFormat.h"
#include "smp/base/Files.h"
#include "smp/base/NonCopyable.h"
#include "smp/base/Npy.h"
#include "smp/base/Shape.h"
#include "smp/base/Status.h"
#include "smp/base/Tensor.h"

namespace smprt {

// Status.h, DType.h, Tensor.h
using smp::base::bf16ToFloat;
using smp::base::convertFloats;
using smp::base::describe;
using smp::base::DType;
using smp::base::dtypeName;
using smp::base::dtypeSize;
using smp::base::elementAsDouble;
using smp::base::floatToBf16;
using smp::base::floatToHalf;
using smp::base::halfToFloat;
using smp::base::isFloat;
using smp::base::isInteger;
using smp::base::isSignedInteger;
using smp::base::NonCopyable;
using smp::base::roundingNote;
using smp::base::roundsTo;
using smp::base::Status;
using smp::base::TensorRef;
// Shape.h
using smp::base::checkedElementCount;
using smp::base::checkedMul;
using smp::base::contiguousStrides;
// FileFormat.h, Files.h, Npy.h
using smp::base::checksum64;
using smp::base::FileKind;
using smp::base::fileNameFor;
using smp::base::frame;
using smp::base::kFrameHeaderBytes;
using smp::base::NpyArray;
using smp::base::readNpy;
using smp::base::readRegularFile;
using smp::base::RegularFile;
using smp::base::unframe;
using smp::base::writeNpy;

} // namespace smprt

#endif // SMPRT_BASE_H
