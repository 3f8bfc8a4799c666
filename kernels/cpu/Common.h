//===- Common.h - Internals shared by the CPU kernels ------------*- C++
//-*-===//
//
// The fp16/bf16 storage types, the strided N-d loop behind broadcasting and
// data movement, and parallelFor; the checks, shapes and integer dispatch
// shared with kernels/cuda come from kernels/common. Private to kernels/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CPU_COMMON_H
#define SMP_KERNELS_CPU_COMMON_H

#include "smp/kernels/common/Dispatch.h"
#include "smp/kernels/common/OpChecks.h"
#include "smp/kernels/cpu/Kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace smp::kernels::cpu::detail {

//===----------------------------------------------------------------------===//
// Checks and shapes (kernels/common, shared with kernels/cuda)
//===----------------------------------------------------------------------===//

// fail, unsupported, checkTensor / checkDType / checkShape, broadcasting,
// normAxis, product, Tag, visitInt, visitBytes, ...
using namespace common;

/// The CPU kernels take sliding windows of any number of spatial dims.
constexpr size_t kAnyDims = SIZE_MAX;

//===----------------------------------------------------------------------===//
// Storage types and their compute types
//===----------------------------------------------------------------------===//

struct Half {
  uint16_t bits;
};
struct BHalf {
  uint16_t bits;
};

/// Float storage type S is computed in Float<S>::C.
template <class S> struct Float;
template <> struct Float<float> {
  using C = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
template <> struct Float<double> {
  using C = double;
  static double load(double v) { return v; }
  static double store(double v) { return v; }
};
template <> struct Float<Half> {
  using C = float;
  static float load(Half v) { return smp::base::halfToFloat(v.bits); }
  static Half store(float v) { return Half{smp::base::floatToHalf(v)}; }
};
template <> struct Float<BHalf> {
  using C = float;
  static float load(BHalf v) { return smp::base::bf16ToFloat(v.bits); }
  static BHalf store(float v) { return BHalf{smp::base::floatToBf16(v)}; }
};

/// Row x[0, n) of f32 compute type as f32: x itself for f32, else widened
/// (exactly) into `buf` (resized to n). Lets an f16/bf16 row run a kernel's
/// f32 vector path with the bits of its f32 copy.
template <class S>
const float *widenRow(const S *x, std::vector<float> &buf, int64_t n) {
  static_assert(std::is_same_v<typename Float<S>::C, float>);
  if constexpr (std::is_same_v<S, float>) {
    return x;
  } else {
    buf.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      buf[i] = Float<S>::load(x[i]);
    return buf.data();
  }
}

/// Calls f(Tag<S>{}) for the float storage type of t.
template <class F> Status visitFloat(DType t, const char *op, F &&f) {
  return common::visitFloat<Half, BHalf>(t, op, f);
}

/// Reads integer element i of t (any integer dtype or Bool) as int64.
int64_t loadInt(const TensorRef &t, int64_t i);
/// A cross-entropy's labels as int64, each ignoreIndex or in [0, classes):
/// else an error naming `op`, the label and its position.
Status loadLabels(const char *op, const TensorRef &labels, int64_t classes,
                  int64_t ignoreIndex, std::vector<int64_t> &out);
/// Elements [begin, begin + n) of a float tensor as double, and back
/// (rounding through the compute type): one chunk of toDouble and
/// storeDouble, for kernels that stream through doubles on the stack. They
/// fail (visitFloat's error) for a dtype that is not float.
Status loadDoubles(const TensorRef &t, int64_t begin, int64_t n, double *dst);
Status storeDoubles(const char *op, const TensorRef &t, int64_t begin,
                    int64_t n, const double *src);
/// All elements of a float tensor as double (small parameter tensors).
std::vector<double> toDouble(const TensorRef &t);
/// Writes `values` (one per element) into a float tensor (toDouble's
/// inverse, rounding through the compute type).
Status storeDouble(const char *op, const TensorRef &out,
                   const std::vector<double> &values);

//===----------------------------------------------------------------------===//
// Threads
//===----------------------------------------------------------------------===//

inline int maxThreads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

/// Runs f(begin, end) over [0, n) split into contiguous chunks of at least
/// `grain` items, one per thread.
template <class F> void parallelFor(int64_t n, int64_t grain, F &&f) {
  if (n <= 0)
    return;
  int64_t chunks =
      std::min<int64_t>(maxThreads(), n / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    f(int64_t(0), n);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for num_threads(static_cast <int>(chunks))                \
    schedule(static, 1)
#endif
  for (int64_t c = 0; c < chunks; ++c)
    f(n * c / chunks, n * (c + 1) / chunks);
}

/// Items per chunk so that a chunk does about 32K units of work.
inline int64_t grainFor(int64_t costPerItem) {
  return std::max<int64_t>(1, (int64_t(1) << 15) /
                                  std::max<int64_t>(costPerItem, 1));
}

//===----------------------------------------------------------------------===//
// Sums over rows, the same bits for any thread count
//===----------------------------------------------------------------------===//

/// The number of row blocks for sums over `rows` rows into `accSize`
/// doubles: at most 256 and at least one per 16 rows, the partials within
/// 32 MiB. A function of the shape only.
inline int64_t rowBlockCount(int64_t rows, int64_t accSize) {
  int64_t byMemory =
      std::max<int64_t>(1, (int64_t(1) << 22) / std::max<int64_t>(accSize, 1));
  return std::max<int64_t>(
      1, std::min({(rows + 15) / 16, int64_t(256), byMemory}));
}

/// Rows [0, rows) in rowBlockCount(rows, accSize) blocks of consecutive
/// rows; fn(r0, r1, acc) adds its rows, in order, into its block's partial
/// (accSize doubles, zeroed). The blocks run in parallel; the result is the
/// partials summed in block order. Column sums (bias and norm-parameter
/// gradients, reduce_sum over the leading dims) all go through here, so a
/// fused kernel sums exactly as the unfused reduce does.
template <class BlockFn>
std::vector<double> sumRowBlocks(int64_t rows, int64_t accSize,
                                 int64_t costPerRow, BlockFn &&fn) {
  int64_t blocks = rowBlockCount(rows, accSize);
  int64_t per = (rows + blocks - 1) / blocks;
  std::vector<double> partial(static_cast<size_t>(blocks * accSize), 0.0);
  parallelFor(blocks, grainFor(per * costPerRow), [&](int64_t b0,
                                                      int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      fn(std::min(rows, b * per), std::min(rows, (b + 1) * per),
         partial.data() + b * accSize);
  });
  std::vector<double> total(static_cast<size_t>(accSize), 0.0);
  parallelFor(accSize, grainFor(blocks), [&](int64_t j0, int64_t j1) {
    for (int64_t b = 0; b < blocks; ++b) {
      const double *pb = partial.data() + b * accSize;
      for (int64_t j = j0; j < j1; ++j)
        total[j] += pb[j];
    }
  });
  return total;
}

//===----------------------------------------------------------------------===//
// Streaming stores
//===----------------------------------------------------------------------===//

/// Outputs of at least this many bytes are written with non-temporal stores:
/// they cannot stay in the last-level cache anyway, and streaming stores skip
/// reading every line before writing it (a third of the memory traffic of
/// an elementwise op).
constexpr int64_t kStreamBytes = int64_t(32) << 20;

/// Copies n bytes to dst, with non-temporal stores on its 16-byte aligned
/// part (x86-64; a plain memcpy elsewhere).
void streamCopy(void *dst, const void *src, size_t n);
/// Orders the streaming stores of this thread before later stores (call it
/// before the data is handed to another thread).
void streamFence();

/// Writes dst[0, len): fill(p, i, l) writes elements [i, i + l) of the run
/// to p[0, l). With stream, through a 4 KiB buffer copied out by streamCopy
/// (fill must then not read dst beyond element i + l, which in-place
/// elementwise ops do not); the caller calls streamFence once its chunk of
/// the output is written.
template <class T, class Fill>
void writeRun(T *dst, int64_t len, bool stream, Fill &&fill) {
  if (!stream) {
    fill(dst, int64_t(0), len);
    return;
  }
  constexpr int64_t kBuf = 4096 / static_cast<int64_t>(sizeof(T));
  alignas(64) T buf[kBuf];
  for (int64_t i = 0; i < len; i += kBuf) {
    int64_t l = std::min(kBuf, len - i);
    fill(buf, i, l);
    streamCopy(dst + i, buf, static_cast<size_t>(l) * sizeof(T));
  }
}

//===----------------------------------------------------------------------===//
// GEMM (Gemm.cpp)
//===----------------------------------------------------------------------===//

/// One row-major product C (m x n) = op(A) (m x k) op(B) (k x n), cblas
/// conventions: op transposes when its flag is set, ldX is the row stride of
/// the stored matrix.
struct GemmShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
};

/// nb products of shape g: product i reads a + offA[i] and b + offB[i] and
/// writes c + i * strideC. Split over the OpenMP threads; OpenBLAS itself
/// runs single-threaded (see Gemm.cpp). T is float or double; g.k >= 1.
template <class T>
void gemmBatch(const GemmShape &g, const T *a, const int64_t *offA, const T *b,
               const int64_t *offB, T *c, int64_t strideC, int64_t nb);

/// A single product.
template <class T> void gemm(const GemmShape &g, const T *a, const T *b, T *c) {
  const int64_t zero = 0;
  gemmBatch(g, a, &zero, b, &zero, c, 0, 1);
}

//===----------------------------------------------------------------------===//
// Strided N-d loops
//===----------------------------------------------------------------------===//

/// A loop over a contiguous output of `shape` with N strided operands,
/// dims of size 1 dropped and mergeable dims merged.
template <size_t N> struct StridedLoop {
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, N> strides;

  StridedLoop(const std::vector<int64_t> &outShape,
              const std::array<std::vector<int64_t>, N> &operandStrides) {
    common::mergeDims<N>(outShape, operandStrides, shape, strides);
  }

  /// Calls f(outPos, offsets, len, innerStrides) for the runs along the
  /// innermost dim that cover output positions [begin, end).
  template <class F> void forEachRun(int64_t begin, int64_t end, F &&f) const {
    size_t r = shape.size();
    std::vector<int64_t> idx(r);
    std::array<int64_t, N> off{}, inner{};
    int64_t rem = begin;
    for (size_t d = r; d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    for (size_t k = 0; k < N; ++k) {
      inner[k] = strides[k][r - 1];
      for (size_t d = 0; d < r; ++d)
        off[k] += idx[d] * strides[k][d];
    }
    int64_t pos = begin;
    while (pos < end) {
      int64_t len = std::min(shape[r - 1] - idx[r - 1], end - pos);
      f(pos, off, len, inner);
      pos += len;
      idx[r - 1] += len;
      for (size_t k = 0; k < N; ++k)
        off[k] += len * inner[k];
      for (size_t d = r - 1; d > 0 && idx[d] == shape[d]; --d) {
        for (size_t k = 0; k < N; ++k)
          off[k] += strides[k][d - 1] - idx[d] * strides[k][d];
        idx[d] = 0;
        ++idx[d - 1];
      }
    }
  }

  /// forEachRun over [0, total) in parallel chunks; with fence, each chunk
  /// ends with streamFence (for runs written by writeRun with stream).
  template <class F>
  void parallelRuns(int64_t total, int64_t grain, F &&f,
                    bool fence = false) const {
    parallelFor(total, grain, [&](int64_t b, int64_t e) {
      forEachRun(b, e, f);
      if (fence)
        streamFence();
    });
  }
};

/// out (contiguous, outShape) = in at offset `base` with element `strides`
/// (any sign, 0 for broadcast dims), copying elements of `elemSize` bytes.
Status stridedCopy(const char *op, const TensorRef &in, int64_t base,
                   const std::vector<int64_t> &strides, const TensorRef &out);

} // namespace smp::kernels::cpu::detail

#endif // SMP_KERNELS_CPU_COMMON_H
