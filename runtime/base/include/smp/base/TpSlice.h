//===- TpSlice.h - A tensor-parallel slice of a tensor ----------*- C++ -*-===//
//
// The slicing arithmetic of a tensor-parallel parameter, once: the
// compiler's artifact writer cuts each rank's slice from the whole weights
// with it, the runtime's resharding (checkpoints) cuts and joins with it.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_TPSLICE_H
#define SMP_BASE_TPSLICE_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace smp::base {

/// How a tensor-parallel slice is cut: dim `dim` of the whole tensor viewed
/// as [blocks, parts, n] with n = ceil(size / (blocks * parts)); part `index`
/// is [:, index, :]. Rows past the end (a vocabulary that parts does not
/// divide) are zeros in the slice.
struct TpSliceSpec {
  int64_t dim = 0, blocks = 1, parts = 1, index = 0;
};

/// The element count along `dim` of a slice of a dim of `size`.
int64_t tpSliceDim(int64_t size, const TpSliceSpec &spec);

/// Copies between the whole tensor `global` (of shape `shape`, elements of
/// `elementBytes`) and its slice `slice` (dense, of tpSliceDim rows along
/// spec.dim): toSlice, global -> slice (zero-filling the padded rows);
/// otherwise slice -> global (the padded rows are dropped).
void copyTpSlice(char *global, char *slice, const std::vector<int64_t> &shape,
                 const TpSliceSpec &spec, size_t elementBytes, bool toSlice);

} // namespace smp::base

#endif // SMP_BASE_TPSLICE_H
