//===- DataMovement.cu - copy, transpose, slice, concat, split, gather,
//                       expand, tile, trilu, slice_grad -----------------===//
//
// Dtype-agnostic: elements are moved as unsigned integers of their size.
// Transpose, slice, expand and tile are one strided gather into a contiguous
// output (Strided<1>: dims merged, any sign of stride); slice_grad is the
// matching strided scatter into zeros. Concat / split copy each part as
// rows of [outer, size_i * inner]: a launch a part for up to kDirectParts
// parts, else one multi-tensor launch for all (a data-parallel step's
// gradient bucket concatenates a model's every gradient: GPT-2 124M's 148
// launches become one, plus the descriptors' upload; copy_multi shares
// its kernel, copyRowsMulti). gather_grad is in
// GatherGrad.cu.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

/// out[i] = in[base + offset(i)] (scatter: out[base + offset(i)] = in[i]).
template <class T, bool Scatter>
__global__ void stridedKernel(const T *in, T *out, int64_t base, Strided<1> st,
                              int64_t n) {
  SMP_GRID_STRIDE(i, n) {
    int64_t off[1];
    st.offsets(i, off);
    if (Scatter)
      out[base + off[0]] = in[i];
    else
      out[i] = in[base + off[0]];
  }
}

/// Gather (or scatter) through strides: the strided side has `strides` over
/// `shape`, the other side is contiguous of `shape`.
Status stridedCopy(const char *op, Context *ctx, bool scatter,
                   const TensorRef &in, int64_t base,
                   const std::vector<int64_t> &shape,
                   const std::vector<int64_t> &strides, const TensorRef &out) {
  int64_t n = product(shape);
  if (n == 0)
    return Status::success();
  Strided<1> st;
  SMP_RETURN_IF_ERROR(makeStrided<1>(op, shape, {strides}, st));
  return visitBytes(out.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto kernel = scatter ? stridedKernel<T, true> : stridedKernel<T, false>;
    return launchGrid(op, ctx, n, kernel, in.as<T>(), out.as<T>(), base, st, n);
  });
}

} // namespace

Status copy(const TensorRef &in, const TensorRef &out) {
  const char *name = "copy";
  SMP_RETURN_IF_ERROR(common::checkCopy(in, out));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  if (in.data == out.data || in.numel() == 0)
    return Status::success();
  // cudaMemcpyDefault: either side may be pinned host memory (activation
  // offloading copies between the arena and the host pool).
  return cudaStatus(name, cudaMemcpyAsync(out.data, in.data, in.bytes(),
                                          cudaMemcpyDefault, ctx->stream));
}

namespace {

/// One tensor of a multi-tensor row copy: n elements in rows of `width`,
/// src's rows `srcRow` elements apart, dst's `dstRow` (copy_multi: one
/// row; a concat's part into the whole, a split's out of it).
struct RowsDesc {
  const void *src;
  void *dst;
  int64_t n, width, srcRow, dstRow;
};

/// copyRows of each described tensor in one launch (multiChunk).
template <class T>
__global__ void copyRowsMulti(const RowsDesc *descs, const int64_t *firstBlock,
                              int64_t count) {
  MultiChunk c = multiChunk(firstBlock, count);
  RowsDesc d = descs[c.tensor];
  int64_t end = c.begin + kMultiChunk < d.n ? c.begin + kMultiChunk : d.n;
  const T *src = static_cast<const T *>(d.src);
  T *dst = static_cast<T *>(d.dst);
  for (int64_t i = c.begin + threadIdx.x; i < end; i += blockDim.x) {
    int64_t o = i / d.width, k = i - o * d.width;
    dst[o * d.dstRow + k] = src[o * d.srcRow + k];
  }
}

/// The launch of copyRowsMulti over `descs` (elements of `dtype`).
Status launchRowsMulti(const char *name, DType dtype,
                       const std::vector<RowsDesc> &descs) {
  MultiTensorPlan plan;
  for (const RowsDesc &d : descs)
    plan.add(d.n);
  return visitBytes(dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchMulti(name, descs, plan, copyRowsMulti<T>);
  });
}

} // namespace

Status copyMulti(const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out) {
  const char *name = "copy_multi";
  SMP_RETURN_IF_ERROR(common::checkCopyMulti(in, out));
  std::vector<RowsDesc> descs;
  for (size_t i = 0; i < in.size(); ++i)
    if (int64_t n = in[i].numel(); n > 0 && in[i].data != out[i].data)
      descs.push_back({in[i].data, out[i].data, n, n, n, n});
  if (descs.empty())
    return Status::success();
  return launchRowsMulti(name, in[0].dtype, descs);
}

Status transpose(const TensorRef &in, const std::vector<int64_t> &perm,
                 const TensorRef &out) {
  const char *name = "transpose";
  std::vector<int64_t> strides;
  SMP_RETURN_IF_ERROR(common::checkTranspose(in, perm, out, strides));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  return stridedCopy(name, ctx, false, in, 0, out.shape, strides, out);
}

Status slice(const TensorRef &in, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &steps, const TensorRef &out) {
  const char *name = "slice";
  SMP_RETURN_IF_ERROR(common::checkSlice(in, starts, steps, out));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  if (out.numel() == 0)
    return Status::success();
  int64_t base;
  std::vector<int64_t> strides;
  SMP_RETURN_IF_ERROR(
      common::sliceGeometry(name, in, starts, steps, out.shape, base, strides));
  return stridedCopy(name, ctx, false, in, base, out.shape, strides, out);
}

Status expand(const TensorRef &in, const TensorRef &out) {
  const char *name = "expand";
  std::vector<int64_t> strides;
  SMP_RETURN_IF_ERROR(common::checkExpand(in, out, strides));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  return stridedCopy(name, ctx, false, in, 0, out.shape, strides, out);
}

Status tile(const TensorRef &in, const std::vector<int64_t> &repeats,
            const TensorRef &out) {
  const char *name = "tile";
  std::vector<int64_t> shape, strides;
  SMP_RETURN_IF_ERROR(common::checkTile(in, repeats, out, shape, strides));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  // out viewed as [r0, d0, r1, d1, ..], reading in with stride 0 along r.
  return stridedCopy(name, ctx, false, in, 0, shape, strides, out);
}

namespace {

/// dst[o * dstRow + dstOff + k] = src[o * srcRow + srcOff + k], k < width.
template <class T>
__global__ void copyRows(const T *src, int64_t srcRow, int64_t srcOff, T *dst,
                         int64_t dstRow, int64_t dstOff, int64_t width,
                         int64_t rows) {
  SMP_GRID_STRIDE(i, rows * width) {
    int64_t o = i / width, k = i - o * width;
    dst[o * dstRow + dstOff + k] = src[o * srcRow + srcOff + k];
  }
}

/// Up to this many parts a launch each; more in one multi-tensor launch
/// (which uploads its descriptors first).
constexpr size_t kDirectParts = 3;

} // namespace

Status concatSplit(bool toOut, const std::vector<TensorRef> &parts,
                   int64_t axis, const TensorRef &whole) {
  const char *name = toOut ? "concat" : "split";
  int64_t a;
  SMP_RETURN_IF_ERROR(
      common::checkConcatSplit(name, toOut, parts, axis, whole, a));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  if (whole.numel() == 0)
    return Status::success();
  int64_t outer = product(whole.shape, 0, a),
          inner = product(whole.shape, a + 1);
  int64_t row = whole.shape[a] * inner;
  if (parts.size() > kDirectParts) {
    // One launch; a part's rows sit `at` columns into the whole's.
    std::vector<RowsDesc> descs;
    size_t size = smp::base::dtypeSize(whole.dtype);
    int64_t at = 0;
    for (const TensorRef &p : parts) {
      int64_t width = p.shape[a] * inner;
      void *w = static_cast<char *>(whole.data) + at * size;
      if (width > 0)
        descs.push_back(
            toOut ? RowsDesc{p.data, w, outer * width, width, width, row}
                  : RowsDesc{w, p.data, outer * width, width, row, width});
      at += width;
    }
    return launchRowsMulti(name, whole.dtype, descs);
  }
  return visitBytes(whole.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t at = 0;
    for (const TensorRef &p : parts) {
      int64_t width = p.shape[a] * inner;
      SMP_RETURN_IF_ERROR(
          toOut
              ? launchGrid(name, ctx, outer * width, copyRows<T>, p.as<T>(),
                           width, 0, whole.as<T>(), row, at, width, outer)
              : launchGrid(name, ctx, outer * width, copyRows<T>, whole.as<T>(),
                           row, at, p.as<T>(), width, 0, width, outer));
      at += width;
    }
    return Status::success();
  });
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

namespace {

struct Index : IndexIn {
  int64_t count; // indices
  int64_t dim;   // size of the gathered axis
  int64_t axis;
};

template <class T>
__global__ void gatherKernel(const T *src, T *dst, Index ix, int64_t inner,
                             int64_t n, DeviceError *err) {
  SMP_GRID_STRIDE(t, n) {
    int64_t i = t % inner, rest = t / inner;
    int64_t k = rest % ix.count, o = rest / ix.count;
    int64_t idx = ix.checked(k, ix.dim, ix.axis, err, kErrGatherIndex);
    dst[t] = idx < 0 ? T(0) : src[(o * ix.dim + idx) * inner + i];
  }
}

} // namespace

Status gather(const TensorRef &data, const TensorRef &indices, int64_t axis,
              const TensorRef &out) {
  const char *name = "gather";
  int64_t a;
  SMP_RETURN_IF_ERROR(common::checkGather(data, indices, axis, out, a));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  int64_t n = out.numel();
  Index ix{asIndexIn(indices), indices.numel(), data.shape[a], a};
  int64_t inner = product(data.shape, a + 1);
  return visitBytes(data.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchGrid(name, ctx, n, gatherKernel<T>, data.as<T>(), out.as<T>(),
                      ix, inner, n, ctx->dError);
  });
}

Status sliceGrad(const TensorRef &dy, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, const TensorRef &out) {
  const char *op = "slice_grad";
  SMP_RETURN_IF_ERROR(checkTensor(op, "grad", dy));
  SMP_RETURN_IF_ERROR(checkTensor(op, "output", out));
  if (dy.dtype != out.dtype || dy.rank() != out.rank() ||
      static_cast<int64_t>(starts.size()) != out.rank() ||
      static_cast<int64_t>(steps.size()) != out.rank())
    return fail(op, "grad, starts and steps must match the input's rank");
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (out.numel() > 0)
    SMP_RETURN_IF_ERROR(
        cudaStatus(op, cudaMemsetAsync(out.data, 0, out.bytes(), ctx->stream)));
  if (dy.numel() == 0)
    return Status::success();
  // A step is irrelevant on a dim of one element (the CPU accepts 0 there).
  std::vector<int64_t> st = steps;
  for (size_t d = 0; d < st.size(); ++d)
    if (st[d] == 0 && dy.shape[d] == 1)
      st[d] = 1;
  int64_t base;
  std::vector<int64_t> strides;
  if (Status s =
          common::sliceGeometry(op, out, starts, st, dy.shape, base, strides);
      !s.ok())
    return fail(op, "slice position outside the input");
  return stridedCopy(op, ctx, true, dy, base, dy.shape, strides, out);
}

//===----------------------------------------------------------------------===//
// Trilu
//===----------------------------------------------------------------------===//

namespace {

template <class T>
__global__ void triluKernel(const T *in, T *out, int64_t rows, int64_t cols,
                            bool upper, int64_t k, int64_t n) {
  SMP_GRID_STRIDE(t, n) {
    int64_t c = t % cols, r = (t / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    out[t] = keep ? in[t] : T(0);
  }
}

} // namespace

Status trilu(const TensorRef &in, bool upper, int64_t k, const TensorRef &out) {
  const char *name = "trilu";
  SMP_RETURN_IF_ERROR(common::checkTrilu(in, out));
  int64_t rows = in.shape[in.rank() - 2], cols = in.shape.back();
  k = std::clamp<int64_t>(k, -(rows + cols), rows + cols); // no overflow
  int64_t n = in.numel();
  return visitBytes(in.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch(name, n, triluKernel<T>, in.as<T>(), out.as<T>(), rows, cols,
                  upper, k, n);
  });
}

} // namespace smp::kernels::cuda
