//===- WeightLayout.cpp - Tensor-parallel slices and layout metadata ------===//
//
// How a rank's buffer holds part of a global tensor: the tensor-parallel
// slice of a parameter's bytes (smp/base/TpSlice.h, the arithmetic the
// runtime's resharding uses too) and the layout fields of the artifact's
// Buffer (tp_*, zero_*, global_shape) that checkpoints read, from the
// argument's #smp.layout.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "smp/base/TpSlice.h"

namespace smp::writer {

std::string Lowering::tpSlice(const std::string &bytes, RankedTensorType full,
                              LayoutAttr layout) const {
  int64_t dim = layout.getTpDim();
  smp::base::TpSliceSpec spec{dim, layout.getTpBlocks(), tpSize, tpRank};
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

void Lowering::setLayout(pb::Buffer &buffer, LayoutAttr layout) const {
  if (!layout)
    return;
  ArrayRef<int64_t> slice =
      layout.getDpChunked()
          ? layout.getDpChunkOf()
          : ArrayRef<int64_t>(buffer.shape().data(), buffer.shape().size());
  SmallVector<int64_t> global = layout.fullShape(slice, tpSize);
  if (layout.hasTpSplit()) {
    buffer.set_tp_dim(layout.getTpDim());
    buffer.set_tp_blocks(layout.getTpBlocks());
    buffer.set_tp_parts(tpSize);
    buffer.set_tp_index(tpRank);
  }
  if (layout.getDpChunked())
    for (int64_t d : slice)
      buffer.add_zero_shape(d);
  for (int64_t d : global)
    buffer.add_global_shape(d);
}

} // namespace smp::writer
