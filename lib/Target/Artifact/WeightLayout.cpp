//===- WeightLayout.cpp - Tensor-parallel slices and layout metadata ------===//
//
// How a rank's buffer holds part of a global tensor: the tensor-parallel
// slice of a parameter's bytes (smp/base/TpSlice.h, the arithmetic the
// runtime's resharding uses too) and the layout fields of the artifact's
// Buffer (tp_*, zero_*, global_shape) that checkpoints read.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "smp/base/TpSlice.h"

namespace smp::writer {

SmallVector<int64_t> Lowering::fullShape(ArrayRef<int64_t> local,
                                         DenseI64ArrayAttr shard) const {
  SmallVector<int64_t> full(local);
  full[shard[0]] = shard.size() > 2 ? shard[2] : full[shard[0]] * tpSize;
  return full;
}

std::string Lowering::tpSlice(const std::string &bytes, RankedTensorType full,
                              int64_t dim, int64_t blocks) const {
  smp::base::TpSliceSpec spec{dim, blocks, tpSize, tpRank};
  std::vector<int64_t> shape(full.getShape().begin(), full.getShape().end());
  size_t elementBytes = bytes.size() / full.getNumElements();
  std::vector<int64_t> sliced = shape;
  sliced[dim] = smp::base::tpSliceDim(shape[dim], spec);
  uint64_t n = elementBytes;
  for (int64_t d : sliced)
    n *= d;
  std::string out(n, '\0');
  smp::base::copyTpSlice(const_cast<char *>(bytes.data()), out.data(), shape,
                         spec, elementBytes, /*toSlice=*/true);
  return out;
}

void Lowering::setLayout(pb::Buffer &buffer, DenseI64ArrayAttr shard,
                         DenseI64ArrayAttr zeroShape) const {
  SmallVector<int64_t> global(zeroShape ? zeroShape.asArrayRef()
                                        : ArrayRef<int64_t>(
                                              buffer.shape().data(),
                                              buffer.shape().size()));
  if (shard) {
    global = fullShape(global, shard);
    buffer.set_tp_dim(shard[0]);
    buffer.set_tp_blocks(shard[1]);
    buffer.set_tp_parts(tpSize);
    buffer.set_tp_index(tpRank);
  }
  if (zeroShape)
    for (int64_t d : zeroShape.asArrayRef())
      buffer.add_zero_shape(d);
  if (shard || zeroShape)
    for (int64_t d : global)
      buffer.add_global_shape(d);
}

} // namespace smp::writer
