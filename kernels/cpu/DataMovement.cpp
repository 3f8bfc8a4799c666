//===- DataMovement.cpp - copy, transpose, slice, concat, split, gather,
//                        expand, tile, trilu
//                        -------------------------------------===//
//
// Dtype-agnostic: elements are moved by byte size. Transpose, slice, tile and
// expand are one strided copy (StridedLoop: dims merged, runs along the
// innermost dim memcpy'd when contiguous).
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include <cstring>

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// memcpy of `bytes` bytes, in parallel chunks when large.
void parallelCopy(void *dst, const void *src, size_t bytes) {
  constexpr int64_t kChunk = 1 << 20;
  int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
  parallelFor(chunks, 1, [&](int64_t b, int64_t e) {
    size_t from = static_cast<size_t>(b) * kChunk;
    size_t to = std::min(bytes, static_cast<size_t>(e) * kChunk);
    std::memcpy(static_cast<char *>(dst) + from,
                static_cast<const char *>(src) + from, to - from);
  });
}

} // namespace

Status copy(const TensorRef &in, const TensorRef &out) {
  SMP_RETURN_IF_ERROR(common::checkCopy(in, out));
  if (in.data != out.data && in.numel() != 0)
    parallelCopy(out.data, in.data, in.bytes());
  return Status::success();
}

Status copyMulti(const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out) {
  SMP_RETURN_IF_ERROR(common::checkCopyMulti(in, out));
  for (size_t i = 0; i < in.size(); ++i)
    SMP_RETURN_IF_ERROR(copy(in[i], out[i]));
  return Status::success();
}

Status transpose(const TensorRef &in, const std::vector<int64_t> &perm,
                 const TensorRef &out) {
  const char *name = "transpose";
  std::vector<int64_t> strides;
  SMP_RETURN_IF_ERROR(common::checkTranspose(in, perm, out, strides));
  return stridedCopy(name, in, 0, strides, out);
}

Status slice(const TensorRef &in, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &steps, const TensorRef &out) {
  const char *name = "slice";
  SMP_RETURN_IF_ERROR(common::checkSlice(in, starts, steps, out));
  if (out.numel() == 0)
    return Status::success();
  int64_t base;
  std::vector<int64_t> strides;
  SMP_RETURN_IF_ERROR(
      common::sliceGeometry(name, in, starts, steps, out.shape, base, strides));
  return stridedCopy(name, in, base, strides, out);
}

Status expand(const TensorRef &in, const TensorRef &out) {
  const char *name = "expand";
  std::vector<int64_t> strides;
  SMP_RETURN_IF_ERROR(common::checkExpand(in, out, strides));
  return stridedCopy(name, in, 0, strides, out);
}

Status tile(const TensorRef &in, const std::vector<int64_t> &repeats,
            const TensorRef &out) {
  const char *name = "tile";
  std::vector<int64_t> shape, strides;
  SMP_RETURN_IF_ERROR(common::checkTile(in, repeats, out, shape, strides));
  TensorRef view = out; // out as [r0, d0, r1, d1, ..]
  view.shape = shape;
  return stridedCopy(name, in, 0, strides, view);
}

/// Concat (toOut) or split (!toOut): out viewed as [outer, total * inner]
/// bytes, each part as [outer, size_i * inner].
Status concatSplit(bool toOut, const std::vector<TensorRef> &parts,
                   int64_t axis, const TensorRef &whole) {
  const char *name = toOut ? "concat" : "split";
  int64_t a;
  SMP_RETURN_IF_ERROR(
      common::checkConcatSplit(name, toOut, parts, axis, whole, a));
  if (whole.numel() == 0)
    return Status::success();
  size_t es = smp::base::dtypeSize(whole.dtype);
  int64_t outer = product(whole.shape, 0, a),
          innerBytes = product(whole.shape, a + 1) * static_cast<int64_t>(es);
  int64_t rowBytes = whole.shape[a] * innerBytes;
  parallelFor(outer, grainFor(rowBytes / 8 + 1), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      char *row = static_cast<char *>(whole.data) + o * rowBytes;
      for (const TensorRef &p : parts) {
        int64_t bytes = p.shape[a] * innerBytes;
        char *pp = static_cast<char *>(p.data) + o * bytes;
        if (bytes) {
          if (toOut)
            std::memcpy(row, pp, static_cast<size_t>(bytes));
          else
            std::memcpy(pp, row, static_cast<size_t>(bytes));
        }
        row += bytes;
      }
    }
  });
  return Status::success();
}

Status gather(const TensorRef &data, const TensorRef &indices, int64_t axis,
              const TensorRef &out) {
  const char *name = "gather";
  int64_t a;
  SMP_RETURN_IF_ERROR(common::checkGather(data, indices, axis, out, a));
  int64_t dim = data.shape[a], ni = indices.numel();
  std::vector<int64_t> idx(static_cast<size_t>(ni));
  for (int64_t k = 0; k < ni; ++k) {
    int64_t v = loadInt(indices, k);
    bool huge =
        indices.dtype == DType::U64 &&
        static_cast<const uint64_t *>(indices.data)[k] > uint64_t(INT64_MAX);
    if (huge || v < -dim || v >= dim)
      return fail(
          name, "index " +
                    (huge ? std::to_string(
                                static_cast<const uint64_t *>(indices.data)[k])
                          : std::to_string(v)) +
                    " at position " + std::to_string(k) +
                    " is out of range for axis " + std::to_string(a) +
                    " of size " + std::to_string(dim));
    idx[k] = v < 0 ? v + dim : v;
  }
  if (out.numel() == 0)
    return Status::success();
  int64_t outer = product(data.shape, 0, a), inner = product(data.shape, a + 1);
  return visitBytes(data.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *src = data.as<T>();
    T *dst = out.as<T>();
    parallelFor(outer * ni, grainFor(inner), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / ni, k = t % ni;
        const T *from = src + (o * dim + idx[k]) * inner;
        std::copy_n(from, inner, dst + t * inner);
      }
    });
    return Status::success();
  });
}

Status trilu(const TensorRef &in, bool upper, int64_t k, const TensorRef &out) {
  const char *name = "trilu";
  SMP_RETURN_IF_ERROR(common::checkTrilu(in, out));
  int64_t rows = in.shape[in.rank() - 2], cols = in.shape.back();
  int64_t es = static_cast<int64_t>(smp::base::dtypeSize(in.dtype));
  int64_t allRows = in.numel() / std::max<int64_t>(cols, 1);
  k = std::clamp<int64_t>(k, -(rows + cols), rows + cols); // no overflow below
  if (in.numel() == 0)
    return Status::success();
  parallelFor(allRows, grainFor(cols * es / 8 + 1), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t r = t % rows;
      // Kept columns: [keepFrom, keepTo).
      int64_t keepFrom = upper ? std::clamp<int64_t>(r + k, 0, cols) : 0;
      int64_t keepTo = upper ? cols : std::clamp<int64_t>(r + k + 1, 0, cols);
      const char *src = static_cast<const char *>(in.data) + t * cols * es;
      char *dst = static_cast<char *>(out.data) + t * cols * es;
      if (keepFrom > 0)
        std::memset(dst, 0, static_cast<size_t>(keepFrom * es));
      if (keepTo > keepFrom && src != dst)
        std::memcpy(dst + keepFrom * es, src + keepFrom * es,
                    static_cast<size_t>((keepTo - keepFrom) * es));
      if (keepTo < cols)
        std::memset(dst + keepTo * es, 0,
                    static_cast<size_t>((cols - keepTo) * es));
    }
  });
  return Status::success();
}

} // namespace smp::kernels::cpu
