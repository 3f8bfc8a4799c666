//===- Layout.h - A rank's part of a global tensor --------------*- C++ -*-===//
//
// The parallel layouts of the runtime side, once: the message
// smp.artifact.Layout (runtime/proto/layout.proto) as a struct, its
// validation, the shape a rank holds, and the copies between a global tensor
// and a rank's shard of it. The compiler's artifact writer cuts each rank's
// weights with it, the artifact loader validates buffers with it, and
// resharding (checkpoints, ONNX export) cuts and joins with it. The
// compiler's side is the #smp.layout attribute (docs/layouts.md).
//
// No protobuf header here (smp_base sits below the generated code): the
// conversions are templates over any message with Layout's fields.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_LAYOUT_H
#define SMP_BASE_LAYOUT_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace smp::base {

/// How the tensor a rank holds (an artifact buffer, a checkpoint shard) is
/// part of a global tensor of shape `fullShape`. Mirrors the proto message
/// field by field.
struct Layout {
  std::vector<int64_t> fullShape;
  /// Tensor-parallel split when tpParts > 0: dim tpDim of the global tensor
  /// viewed as [tpBlocks, tpParts, n], n = ceil(size / (tpBlocks *
  /// tpParts)); this part is [:, tpIndex, :], the rows past the end of the
  /// dim (a vocabulary tp does not divide) zeros. All 0 when not split.
  int64_t tpDim = 0, tpBlocks = 0, tpParts = 0, tpIndex = 0;
  /// ZeRO-1 chunk when zeroParts > 0: the tensor-parallel slice (of shape
  /// zeroShape) flattened, zero-padded to a multiple of zeroParts, chunk
  /// zeroIndex. Empty / 0 when not chunked.
  std::vector<int64_t> zeroShape;
  int64_t zeroParts = 0, zeroIndex = 0;

  bool tpSplit() const { return tpParts > 0; }
  bool zeroChunk() const { return zeroParts > 0; }
  bool whole() const { return !tpSplit() && !zeroChunk(); }

  /// A whole tensor of shape `shape`.
  static Layout wholeOf(const std::vector<int64_t> &shape);
  /// Slice `index` of `parts` along `dim` (viewed as `blocks` blocks) of a
  /// tensor of shape `full`.
  static Layout tpSliceOf(const std::vector<int64_t> &full, int64_t dim,
                          int64_t blocks, int64_t parts, int64_t index);

  bool operator==(const Layout &o) const;
  bool operator!=(const Layout &o) const { return !(*this == o); }
};

/// The largest element count of a tensor a layout describes (2^50, as the
/// artifact loader's cap): element counts and byte offsets never wrap.
constexpr uint64_t kMaxLayoutElements = uint64_t(1) << 50;

/// Whether `l` is a layout the copies below can use for a tensor of shape
/// `shape`: element counts of at most 2^50, the tensor-parallel fields (dim
/// inside the global shape, 1 <= blocks, index < parts < 2^31) and the ZeRO
/// fields (index < parts < 2^31, zeroShape the slice) in range, and `shape`
/// the shape the layout holds. Returns "" when it is, else what is wrong as
/// a phrase that follows the tensor's name ("has an impossible ...").
std::string checkLayout(const Layout &l, const std::vector<int64_t> &shape);

/// The shape of the tensor-parallel slice (fullShape when not split) of a
/// layout that checkLayout accepts.
std::vector<int64_t> tpSliceShape(const Layout &l);

/// The shape a rank holds: the tensor-parallel slice, or for a ZeRO chunk
/// [ceil(elements of the slice / zeroParts)].
std::vector<int64_t> localShape(const Layout &l);

/// The element count of `shape` (of a layout checkLayout accepts).
uint64_t elementCount(const std::vector<int64_t> &shape);

/// Cuts the shard `l` (of localShape(l), dense) out of the whole tensor
/// `global` (of l.fullShape, elements of `elementBytes`); padding (rows past
/// the end, the last chunk's tail) is zero.
void cutShard(const char *global, const Layout &l, size_t elementBytes,
              char *shard);

/// The shard `l` of `global` as bytes.
std::string cutShard(const std::string &global, const Layout &l,
                     size_t elementBytes);

/// Writes the elements of the shard `l` into the whole tensor `global` (the
/// inverse of cutShard; padding is dropped). Pasting every shard of a plan
/// rebuilds the tensor.
void pasteShard(const char *shard, const Layout &l, size_t elementBytes,
                char *global);

/// The layout a message with Layout's fields (smp.artifact.Layout) holds.
template <typename Proto> Layout layoutFromProto(const Proto &p) {
  Layout l;
  l.fullShape.assign(p.full_shape().begin(), p.full_shape().end());
  l.tpDim = p.tp_dim();
  l.tpBlocks = p.tp_blocks();
  l.tpParts = p.tp_parts();
  l.tpIndex = p.tp_index();
  l.zeroShape.assign(p.zero_shape().begin(), p.zero_shape().end());
  l.zeroParts = p.zero_parts();
  l.zeroIndex = p.zero_index();
  return l;
}

/// The layout of a message holding a tensor of `shape()` and an optional
/// `layout` (an artifact Buffer, a CheckpointTensor): whole without one.
template <typename Holder> Layout layoutOf(const Holder &h) {
  if (!h.has_layout())
    return Layout::wholeOf({h.shape().begin(), h.shape().end()});
  return layoutFromProto(h.layout());
}

/// Writes `l` into a message with Layout's fields.
template <typename Proto> void layoutToProto(const Layout &l, Proto &p) {
  p.Clear();
  for (int64_t d : l.fullShape)
    p.add_full_shape(d);
  p.set_tp_dim(l.tpDim);
  p.set_tp_blocks(l.tpBlocks);
  p.set_tp_parts(l.tpParts);
  p.set_tp_index(l.tpIndex);
  for (int64_t d : l.zeroShape)
    p.add_zero_shape(d);
  p.set_zero_parts(l.zeroParts);
  p.set_zero_index(l.zeroIndex);
}

/// Records `l` on a message holding a tensor (no layout for a whole one).
template <typename Holder> void setLayout(Holder &h, const Layout &l) {
  if (l.whole())
    h.clear_layout();
  else
    layoutToProto(l, *h.mutable_layout());
}

} // namespace smp::base

#endif // SMP_BASE_LAYOUT_H
