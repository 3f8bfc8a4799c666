//===- WeightLayout.cpp - Tensor-parallel slices and layout metadata ------===//
//
// How a rank's buffer holds part of a global tensor: the #smp.layout of an
// argument turned into the Buffer's Layout message that checkpoints read,
// and the tensor-parallel slice of a parameter's bytes. Both go through
// smp/base/Layout.h, the arithmetic the runtime's loader and resharding use
// too.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "smp/base/Layout.h"

namespace smp::writer {

smp::base::Layout Lowering::rankLayout(ArrayRef<int64_t> local,
                                       LayoutAttr layout) const {
  if (!layout)
    return smp::base::Layout::wholeOf({local.begin(), local.end()});
  // The shape the tp split applies to: the value's, or the one a dp chunk
  // flattens.
  ArrayRef<int64_t> slice =
      layout.getDpChunked() ? layout.getDpChunkOf() : local;
  SmallVector<int64_t> full = layout.fullShape(slice, tpSize);
  smp::base::Layout l;
  l.fullShape.assign(full.begin(), full.end());
  if (layout.hasTpSplit()) {
    l.tpDim = layout.getTpDim();
    l.tpBlocks = layout.getTpBlocks();
    l.tpParts = tpSize;
    l.tpIndex = tpRank;
  }
  if (layout.getDpChunked()) {
    // One chunk until rankProgram gives each data-parallel replica its own.
    l.zeroShape.assign(slice.begin(), slice.end());
    l.zeroParts = 1;
  }
  return l;
}

std::string Lowering::tpSlice(const std::string &bytes, RankedTensorType full,
                              LayoutAttr layout) const {
  std::vector<int64_t> shape(full.getShape().begin(), full.getShape().end());
  size_t elementBytes = bytes.size() / full.getNumElements();
  return smp::base::cutShard(
      bytes,
      smp::base::Layout::tpSliceOf(shape, layout.getTpDim(),
                                   layout.getTpBlocks(), tpSize, tpRank),
      elementBytes);
}

void Lowering::setLayout(pb::Buffer &buffer, LayoutAttr layout) const {
  smp::base::setLayout(buffer,
                       rankLayout({buffer.shape().data(),
                                   static_cast<size_t>(buffer.shape().size())},
                                  layout));
}

} // namespace smp::writer
