//===- OpChecks.h - Argument checks of the kernel ops -----------*- C++ -*-===//
//
// The host-side part of each op that kernels/cpu and kernels/cuda share:
// the checks of a call's arguments (in the order both libraries run them,
// with the messages the tests compare) and the shapes/strides computed from
// them. What a library checks in addition (CUDA: the current context, the
// dtypes its kernels cover, its rank limits) it checks itself, between or
// after these calls, so that each library keeps its order of checks.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_COMMON_OPCHECKS_H
#define SMP_KERNELS_COMMON_OPCHECKS_H

#include "smp/kernels/common/Checks.h"

namespace smp::kernels::common {

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// binary: operands, dtypes (output Bool when boolOutput, else lhs's) and
/// the broadcast: `shape` is out's shape, sa / sb the operands' strides
/// onto it.
Status checkBinary(const char *op, const TensorRef &lhs, const TensorRef &rhs,
                   const TensorRef &out, bool boolOutput,
                   std::vector<int64_t> &shape, std::vector<int64_t> &sa,
                   std::vector<int64_t> &sb);

/// where: as checkBinary with a Bool condition (strides sc).
Status checkWhere(const TensorRef &cond, const TensorRef &lhs,
                  const TensorRef &rhs, const TensorRef &out,
                  std::vector<int64_t> &shape, std::vector<int64_t> &sc,
                  std::vector<int64_t> &sa, std::vector<int64_t> &sb);

/// cast: input, output, same shape (any dtypes).
Status checkCast(const TensorRef &in, const TensorRef &out);
/// cast_multi: an output of its input's shape for each input.
Status checkCastMulti(const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out);
/// add_multi: as many lhs, rhs and outputs; each output f32, its lhs and
/// rhs f32, f16 or bf16 of its shape.
Status checkAddMulti(const std::vector<TensorRef> &lhs,
                     const std::vector<TensorRef> &rhs,
                     const std::vector<TensorRef> &out);

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

/// matmul's operands and dtypes (valid tensors, one dtype, no scalars).
Status checkMatMulOperands(const TensorRef &lhs, const TensorRef &rhs,
                           const TensorRef &out);

/// The matrices of numpy.matmul(op(lhs), op(rhs)): stored matrices are
/// rowsX x colsX (rank-1 operands promoted), op(A) is M x K, op(B) K x N.
/// Plain data (kernels/cuda passes it to its kernels).
struct MatMulDims {
  bool transA = false, transB = false;
  int64_t rowsA = 0, colsA = 0, rowsB = 0, colsB = 0, M = 0, K = 0, N = 0;
};

/// MatMulDims and the batch: `batch` broadcasts batchA and batchB, and
/// strA / strB are the operands' element strides along it (matrix-sized
/// steps, 0 on broadcast dims).
struct MatMulShape : MatMulDims {
  std::vector<int64_t> batchA, batchB, batch, strA, strB;
};

/// Fills g after checkMatMulOperands; fails on a contraction mismatch,
/// batch dims that do not broadcast, or a wrong output shape.
Status matmulShape(const TensorRef &lhs, const TensorRef &rhs,
                   const TensorRef &out, bool transposeLhs, bool transposeRhs,
                   MatMulShape &g);

/// sum_squares: at least one input, each f32, f16 or bf16; an f32 output
/// of one element.
Status checkSumSquares(const std::vector<TensorRef> &inputs,
                       const TensorRef &out);

/// matmul_bias's bias: a float of out's dtype with one element per column
/// of out (out of rank 1 or more, its last dim N; any shape of N elements
/// whose last dim is N), and a rhs of rank 2 or more.
Status checkMatMulBias(const TensorRef &rhs, const TensorRef &bias,
                       const TensorRef &out, const char *op = "matmul_bias");
/// matmul_add's: float operands, and an addend of out's dtype and shape.
Status checkMatMulAdd(const TensorRef &addend, const TensorRef &out,
                      const char *op = "matmul_add");
/// matmul_bias_add's: checkMatMulBias's, and an addend of out's dtype and
/// shape.
Status checkMatMulBiasAdd(const TensorRef &rhs, const TensorRef &bias,
                          const TensorRef &addend, const TensorRef &out);

/// matmul_bias_gelu's and matmul_gelu_grad's operands (`op` names it):
/// f16/bf16 lhs, rhs and out of one dtype, out and `other` (the
/// preactivation, or the product's other output) of one shape and dtype,
/// a rhs of rank 2 or more and `bias` (or the bias gradient) of out's
/// dtype with one element per column of out.
Status checkGeluEpilogue(const char *op, const TensorRef &lhs,
                         const TensorRef &rhs, const TensorRef &out,
                         const TensorRef &other, const TensorRef &bias);

/// matmul_bias_grad's operands: f16/bf16 lhs [M, N] and rhs [M, K] of one
/// dtype, out [N, K] and dbias (N elements) of theirs.
Status checkMatMulBiasGrad(const TensorRef &lhs, const TensorRef &rhs,
                           const TensorRef &out, const TensorRef &dbias);

/// A bias gradient as reduce(Sum) writes it: the leading dims of `x` (every
/// dim but the last) as `axes`, and `dbias` viewed with x's rank (keepdims).
struct BiasSums {
  std::vector<int64_t> axes;
  TensorRef sums;
};
BiasSums biasSums(const TensorRef &x, const TensorRef &dbias);

//===----------------------------------------------------------------------===//
// Reductions, softmax
//===----------------------------------------------------------------------===//

/// reduce: operands, the axes (distinct, in range; `reduced` per input dim)
/// and out's shape (the kept dims, with or without keepdims).
Status checkReduce(const char *op, const TensorRef &in,
                   const std::vector<int64_t> &axes, const TensorRef &out,
                   std::vector<bool> &reduced);

/// The input's dims as runs of kept or reduced dims: size-1 dims dropped,
/// neighbours of the same kind merged (stride: the run's innermost).
struct DimGroup {
  int64_t size, stride;
  bool reduced;
};
std::vector<DimGroup> reduceGroups(const std::vector<int64_t> &shape,
                                   const std::vector<bool> &reduced);

/// normAxis, or "op: axis A out of range for rank R".
Status checkAxis(const char *op, int64_t axis, int64_t rank, int64_t &a);

/// A tensor viewed as [outer, len, inner] around dim `axis` (normalised).
struct AxisSplit {
  int64_t axis = 0, outer = 1, len = 1, inner = 1;
};

/// cumsum: same dtype and shape (integers or floats, at least one dim) and
/// the split at the axis.
Status checkCumSum(const TensorRef &in, int64_t axis, const TensorRef &out,
                   AxisSplit &s);

/// softmax / log_softmax (named op): same dtype and shape and the split at
/// the axis (a scalar: all 1, the axis unchecked).
Status checkSoftmax(const char *op, const TensorRef &in, int64_t axis,
                    const TensorRef &out, AxisSplit &s);

//===----------------------------------------------------------------------===//
// Normalisation, losses
//===----------------------------------------------------------------------===//

/// A float parameter (scale, bias) that broadcasts onto `target`.
Status checkParam(const char *op, const char *what, const TensorRef &p,
                  const std::vector<int64_t> &target);

/// layer_norm: operands, axis and parameters; normShape = in dims [axis, rank).
Status checkLayerNorm(const TensorRef &in, const TensorRef &scale,
                      const TensorRef *bias, int64_t axis, const TensorRef &out,
                      std::vector<int64_t> &normShape);
/// rms_norm: operands and scale; normShape = {last dim}.
Status checkRmsNorm(const TensorRef &in, const TensorRef &scale,
                    const TensorRef &out, std::vector<int64_t> &normShape);
/// batch_norm: operands and the four [C] parameters.
Status checkBatchNorm(const TensorRef &in, const TensorRef &scale,
                      const TensorRef &bias, const TensorRef &mean,
                      const TensorRef &variance, const TensorRef &out);

/// Labels of a cross-entropy: one per row of logits (their shape without
/// the last dim).
Status checkLabelsOfLogits(const char *op, const TensorRef &logits,
                           const TensorRef &labels);
/// cross_entropy: logits, integer labels of logits' shape without its last
/// dim, the output (labels' shape, or one element when `reduced`) and the
/// optional [classes] float weights. `requested` classes (0: all of the
/// last dim) must be in [1, last dim]: a row is `stride` = last dim values,
/// its first `classes` the logits and the rest padding (smp-pad-classes).
Status checkCrossEntropy(const TensorRef &logits, const TensorRef &labels,
                         bool reduced, const TensorRef &out,
                         const TensorRef *weights, int64_t requested,
                         int64_t &classes, int64_t &stride);

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// copy: same dtype and element count.
Status checkCopy(const TensorRef &in, const TensorRef &out);
/// copy_multi: as many outputs as inputs, each pair as copy's, all of the
/// first input's dtype.
Status checkCopyMulti(const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out);
/// transpose: a permutation of in's dims; `strides` reads in for out.
Status checkTranspose(const TensorRef &in, const std::vector<int64_t> &perm,
                      const TensorRef &out, std::vector<int64_t> &strides);
/// slice: operands and the ranks of starts, steps and out.
Status checkSlice(const TensorRef &in, const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &steps, const TensorRef &out);
/// The base offset and strides of a slice of `full` (starts, steps) with
/// `counts` elements per dim; fails when an index leaves `full`.
Status sliceGeometry(const char *op, const TensorRef &full,
                     const std::vector<int64_t> &starts,
                     const std::vector<int64_t> &steps,
                     const std::vector<int64_t> &counts, int64_t &base,
                     std::vector<int64_t> &strides);
/// expand: in broadcasts onto out's shape with `strides`.
Status checkExpand(const TensorRef &in, const TensorRef &out,
                   std::vector<int64_t> &strides);
/// tile: out's shape is in's times repeats; `shape` and `strides` read in
/// for out viewed as [r0, d0, r1, d1, ..] (stride 0 along the r dims).
Status checkTile(const TensorRef &in, const std::vector<int64_t> &repeats,
                 const TensorRef &out, std::vector<int64_t> &shape,
                 std::vector<int64_t> &strides);
/// concat (toOut: parts are inputs, whole the output) or split: the parts
/// match `whole` outside axis `a` (normalised) and sum to it along it.
Status checkConcatSplit(const char *op, bool toOut,
                        const std::vector<TensorRef> &parts, int64_t axis,
                        const TensorRef &whole, int64_t &a);
/// gather: integer indices, axis `a` (normalised) and out's shape.
Status checkGather(const TensorRef &data, const TensorRef &indices,
                   int64_t axis, const TensorRef &out, int64_t &a);
/// gather_nd's geometry: data [batch (b dims), tuple dims (k), slice...];
/// `positions` index tuples, `perBatch` of them per batch entry of
/// `batchStride` data elements; tuple component j indexes dims[j] with
/// element stride strides[j]; each tuple reads `slice` contiguous elements.
struct GatherNdGeom {
  int64_t b = 0, k = 0, positions = 0, perBatch = 1, batchStride = 0,
          slice = 1;
  std::vector<int64_t> dims, strides;
};
/// gather_nd (ONNX GatherND with batch_dims; grad: gather_nd_grad):
/// `dataLike` is the data (gather_nd) or the gradient of the data (grad),
/// `gathered` the output or dy; the operands (one dtype; float for grad),
/// integer indices, the geometry and the gathered shape.
Status checkGatherNd(bool grad, const TensorRef &dataLike,
                     const TensorRef &indices, int64_t batchDims,
                     const TensorRef &gathered, GatherNdGeom &g);
/// gather_elements' geometry: the normalised axis and the data's shape.
struct GatherElementsGeom {
  int64_t axis = 0;
  std::vector<int64_t> data;
};
/// gather_elements (torch.gather; grad: gather_elements_grad), operands as
/// checkGatherNd's: indices of the data's rank, no dim but the axis larger
/// than the data's; `gathered` has the indices' shape.
Status checkGatherElements(bool grad, const TensorRef &dataLike,
                           const TensorRef &indices, int64_t axis,
                           const TensorRef &gathered, GatherElementsGeom &g);
/// trilu: same dtype and shape, at least two dims.
Status checkTrilu(const TensorRef &in, const TensorRef &out);

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Spatial geometry of a sliding-window op on [N, C, spatial...].
struct Window {
  size_t dims = 0;
  std::vector<int64_t> in, out, kernel, strides, padBegin, padEnd, dilations;
  int64_t inSize = 1, outSize = 1, kernelSize = 1;
};

/// ShapeUtils' windowOutputSize (ONNX/PyTorch): -1 when the window does not
/// fit.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t padBegin, int64_t padEnd, int64_t dilation,
                         bool ceilMode);

/// [batch, channels, w.out...].
std::vector<int64_t> windowShape(const Window &w, int64_t batch,
                                 int64_t channels);

/// conv: operands, dtypes, channels and group, the window (at most maxDims
/// spatial dims), out's shape and the optional float bias [M].
Status checkConv(const TensorRef &in, const TensorRef &weight,
                 const TensorRef *bias, const std::vector<int64_t> &strides,
                 const std::vector<int64_t> &pads,
                 const std::vector<int64_t> &dilations, int64_t group,
                 const TensorRef &out, size_t maxDims, Window &w);

/// max_pool / avg_pool: operands, the window and out's shape.
Status checkPool(const char *op, const TensorRef &in,
                 const std::vector<int64_t> &kernel,
                 const std::vector<int64_t> &strides,
                 const std::vector<int64_t> &pads,
                 const std::vector<int64_t> &dilations, bool ceilMode,
                 const TensorRef &out, size_t maxDims, Window &w);

/// conv_grad: float operands, [N, C, spatial...] tensors, the window of x
/// with dy's spatial sizes (empty strides/dilations 1, pads 0; at most
/// maxDims spatial dims), channels and group, and dx / dweight of the
/// input's / weight's sizes.
Status checkConvGrad(const TensorRef &x, const TensorRef &weight,
                     const TensorRef &dy, const std::vector<int64_t> &strides,
                     const std::vector<int64_t> &pads,
                     const std::vector<int64_t> &dilations, int64_t group,
                     const TensorRef &dx, const TensorRef &dweight,
                     size_t maxDims, Window &w);

/// pool_grad: float operands, the window of x with dy's spatial sizes, dy
/// of x's planes and dx of x's size.
Status checkPoolGrad(const TensorRef &x, const TensorRef &dy,
                     const std::vector<int64_t> &kernel,
                     const std::vector<int64_t> &strides,
                     const std::vector<int64_t> &pads,
                     const std::vector<int64_t> &dilations, const TensorRef &dx,
                     size_t maxDims, Window &w);

//===----------------------------------------------------------------------===//
// Training (the checks both libraries run first; each adds its own after)
//===----------------------------------------------------------------------===//

/// gelu_grad: float operands, x and dy of one shape, dx of x's size.
Status checkGeluGrad(const TensorRef &x, const TensorRef &dy,
                     const TensorRef &dx);
/// bias_gelu_grad: gelu_grad's checks, x of rank >= 1 and a float dbias of
/// one element per column (x's last dim).
Status checkBiasGeluGrad(const TensorRef &x, const TensorRef &dy,
                         const TensorRef &dx, const TensorRef &dbias);
/// gather_grad's geometry: out viewed as [outer, dim, inner] (dim along
/// the normalised axis), dy as [outer, count, inner] (count indices).
struct GatherGradGeom {
  int64_t axis, outer, dim, inner, count;
};
/// gather_grad: float dy and out, integer indices, the axis in out's range,
/// dy of the gathered size.
Status checkGatherGrad(const TensorRef &indices, const TensorRef &dy,
                       int64_t axis, const TensorRef &out, GatherGradGeom &g);
/// cross_entropy_grad: float logits, dloss and dlogits (logits' shape);
/// integer labels, one per row of logits; optional [classes] float weights;
/// dloss one element when `reduced`, else one per label; `requested`,
/// `classes` and `stride` as for checkCrossEntropy.
Status checkCrossEntropyGrad(const TensorRef &logits, const TensorRef &labels,
                             const TensorRef *weights, const TensorRef &dloss,
                             bool reduced, const TensorRef &dlogits,
                             int64_t requested, int64_t &classes,
                             int64_t &stride, int64_t &rows);
/// cross_entropy_shard (`grad` and `dlogits` null) and its gradient: float
/// logits [..., width], integer labels [...] (`rows` of them), a
/// one-element integer offset, classes >= 1, statistics and their gradient
/// labels' shape + [2] in f32 (f64 for f64 logits), dlogits the logits'
/// shape and dtype.
Status checkCrossEntropyShard(const char *op, const TensorRef &logits,
                              const TensorRef &labels, const TensorRef &offset,
                              int64_t classes, const TensorRef &stats,
                              const TensorRef *grad, const TensorRef *dlogits,
                              int64_t &rows, int64_t &width);
/// label_rank: logits, labels and offset as cross_entropy_shard's, a float
/// `target` (when given) and an f32 `out` of the labels' shape.
Status checkLabelRank(const char *op, const TensorRef &logits,
                      const TensorRef &labels, const TensorRef &offset,
                      const TensorRef *target, int64_t classes,
                      const TensorRef &out, int64_t &rows, int64_t &width);
/// The classes of a cross-entropy row of `stride` values when `requested`
/// (0: all of them); an error naming `op` outside [1, stride].
Status crossEntropyClasses(const char *op, int64_t requested, int64_t stride,
                           int64_t &classes);
/// layer_norm_grad (dbias given; dims [axis, rank) normalised) and
/// rms_norm_grad (no dbias; the last dim): float operands, x and dy of one
/// shape, scale broadcasting onto the normalised dims `norm`, gradients of
/// the input's and the scale's sizes.
Status checkNormGrad(const char *op, const TensorRef &x,
                     const TensorRef &scale, const TensorRef &dy, int64_t axis,
                     const TensorRef &dx, const TensorRef &dscale,
                     const TensorRef *dbias, std::vector<int64_t> &norm);
/// A norm gradient's optional residual (added to dx): float, x's shape.
Status checkResidual(const char *op, const TensorRef &x,
                     const TensorRef *residual);
/// sgd_update: float operands; grad and buffer of param's size.
Status checkSgd(const TensorRef &param, const TensorRef &grad,
                const TensorRef &buffer, const TensorRef &newParam,
                const TensorRef &newBuffer);
/// adam_update (op names the caller): float operands; grad and the states
/// of param's size.
Status checkAdam(const char *op, const TensorRef &param, const TensorRef &grad,
                 const TensorRef &expAvg, const TensorRef &expAvgSq,
                 const TensorRef &newParam, const TensorRef &newExpAvg,
                 const TensorRef &newExpAvgSq);

//===----------------------------------------------------------------------===//
// Attention (AttentionChecks.cpp)
//===----------------------------------------------------------------------===//

/// The sizes of an attention call: q [b, hq, s, d], k [b, hkv, sk, d],
/// v [b, hkv, sk, dv]; query head h reads key/value head h / group. The
/// optional mask (boolMask: Bool, else q's dtype added to the scores) is
/// read at element b * maskStride[0] + h * maskStride[1] + i *
/// maskStride[2] + j * maskStride[3] (0 along its broadcast dims).
/// Plain data (kernels/cuda passes it to its kernels).
struct AttentionDims {
  int64_t b = 0, hq = 0, hkv = 0, s = 0, sk = 0, d = 0, dv = 0, group = 1;
  /// Set by the caller before the check: q, k, v, out and their gradients
  /// are [B, S, H, D] (the heads inside each position, as the projections
  /// produce them) instead of [B, H, S, D]; lse and the mask keep theirs.
  bool bshd = false;
  /// Packed (bshd only): q, k and v are heads [0, Hq), [Hq, Hq + Hkv) and
  /// [Hq + Hkv, Hq + 2 Hkv) of one [B, S, Hq + 2 Hkv, D] tensor, so their
  /// rows (and those of dq, dk, dv) are qkvLd = (Hq + 2 Hkv) D elements
  /// apart; 0: each is its own tensor.
  int64_t qkvLd = 0;
  bool hasMask = false, boolMask = false;
  int64_t maskStride[4] = {0, 0, 0, 0};
};

/// attention: q, k, v of one float dtype (f32, f16 or bf16) and rank 4 with
/// matching sizes, Hq a multiple of Hkv, the optional mask (rank 4, each dim
/// 1 or [B, Hq, S, Sk]'s, Bool or q's dtype), out [B, Hq, S, Dv] of q's
/// dtype and lse [B, Hq, S, 2] f32. Messages name the operand and both shapes.
Status checkAttention(const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const TensorRef *mask,
                      const TensorRef &out, const TensorRef &lse,
                      AttentionDims &dims);
/// attention_grad: checkAttention's checks of q, k, v, mask, out and lse
/// ("attention_grad: ..."), dout of out's shape and dtype, and dq, dk, dv
/// of q's, k's and v's.
Status checkAttentionGrad(const TensorRef &q, const TensorRef &k,
                          const TensorRef &v, const TensorRef &out,
                          const TensorRef &lse, const TensorRef &dout,
                          const TensorRef *mask, const TensorRef &dq,
                          const TensorRef &dk, const TensorRef &dv,
                          AttentionDims &dims);
/// attention_mask_grad: checkAttentionGrad's checks of q, k, v, out, lse and
/// dout ("attention_mask_grad: ..."), a float mask of q's dtype, and dmask
/// of the mask's shape and dtype.
Status checkAttentionMaskGrad(const TensorRef &q, const TensorRef &k,
                              const TensorRef &v, const TensorRef &out,
                              const TensorRef &lse, const TensorRef &dout,
                              const TensorRef &mask, const TensorRef &dmask,
                              AttentionDims &dims);

/// packed_attention: qkv [B, S, Hq + 2 Hkv, D] of a supported float dtype
/// with kvHeads = Hkv > 0 and Hq a positive multiple of it, the mask as
/// checkAttention's, out [B, S, Hq, D] of qkv's dtype and lse [B, Hq, S, 2]
/// f32. Sets dims as for bshd q, k, v views of it, with qkvLd.
Status checkPackedAttention(const TensorRef &qkv, int64_t kvHeads,
                            const TensorRef *mask, const TensorRef &out,
                            const TensorRef &lse, AttentionDims &dims);
/// packed_attention_grad: checkPackedAttention's checks, dout of out's shape
/// and dtype and dqkv of qkv's.
Status checkPackedAttentionGrad(const TensorRef &qkv, int64_t kvHeads,
                                const TensorRef &out, const TensorRef &lse,
                                const TensorRef &dout, const TensorRef *mask,
                                const TensorRef &dqkv, AttentionDims &dims);

/// q, k and v (or dq, dk and dv) of a packed qkv that
/// checkPackedAttention accepted: [B, S, H, D] views whose data start at
/// their first head (their rows are dims.qkvLd apart, not H D).
struct PackedViews {
  TensorRef q, k, v;
};
PackedViews packedViews(const TensorRef &qkv, const AttentionDims &dims);

} // namespace smp::kernels::common

#endif // SMP_KERNELS_COMMON_OPCHECKS_H
