//===- AttentionChecks.cpp - Checks of the fused attention ops ------------===//
//
// The argument checks kernels/cpu and kernels/cuda share for attention and
// attention_grad and attention_mask_grad (the layout is in KernelApi.inc, "Attention").
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/common/OpChecks.h"

namespace smp::kernels::common {

namespace {

using smp::base::describe;

/// q, k, v: one supported float dtype, rank 4, sizes that fit together.
Status checkQkv(const char *op, const TensorRef &q, const TensorRef &k,
                const TensorRef &v, AttentionDims &g) {
  SMP_RETURN_IF_ERROR(checkTensor(op, "q", q));
  SMP_RETURN_IF_ERROR(checkTensor(op, "k", k));
  SMP_RETURN_IF_ERROR(checkTensor(op, "v", v));
  if (q.dtype != DType::F32 && q.dtype != DType::F16 && q.dtype != DType::BF16)
    return fail(op, "q is " + describe(q) + ", expected f32, f16 or bf16");
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    return fail(op, "q, k and v must have one dtype, got " + describe(q) +
                        ", " + describe(k) + " and " + describe(v));
  // The head and sequence axes of q, k, v (and out).
  const int hAx = g.bshd ? 2 : 1, sAx = g.bshd ? 1 : 2;
  const char *qForm =
      g.bshd ? "q must be [B, S, Hq, D]" : "q must be [B, Hq, S, D]";
  const char *kForm =
      g.bshd ? "k must be [B, Sk, Hkv, D]" : "k must be [B, Hkv, Sk, D]";
  const char *vForm =
      g.bshd ? "v must be [B, Sk, Hkv, Dv]" : "v must be [B, Hkv, Sk, Dv]";
  if (q.rank() != 4)
    return fail(op, std::string(qForm) + ", got " + shapeStr(q.shape));
  if (k.rank() != 4)
    return fail(op, std::string(kForm) + ", got " + shapeStr(k.shape));
  if (v.rank() != 4)
    return fail(op, std::string(vForm) + ", got " + shapeStr(v.shape));
  g.b = q.shape[0];
  g.hq = q.shape[hAx];
  g.s = q.shape[sAx];
  g.d = q.shape[3];
  g.hkv = k.shape[hAx];
  g.sk = k.shape[sAx];
  g.dv = v.shape[3];
  if (k.shape[0] != g.b || k.shape[3] != g.d)
    return fail(op, "k " + shapeStr(k.shape) + " does not match q " +
                        shapeStr(q.shape) +
                        " (batch and head dim must be equal)");
  if (v.shape[0] != g.b || v.shape[hAx] != g.hkv || v.shape[sAx] != g.sk)
    return fail(op, "v " + shapeStr(v.shape) + " does not match k " +
                        shapeStr(k.shape) +
                        " (batch, heads and keys must be equal)");
  if (g.hkv == 0 ? g.hq != 0 : g.hq % g.hkv != 0)
    return fail(op, "q has " + std::to_string(g.hq) +
                        " heads, not a multiple of the " +
                        std::to_string(g.hkv) + " heads of k and v");
  g.group = g.hkv == 0 ? 1 : g.hq / g.hkv;
  return Status::success();
}

/// The optional mask: rank 4, each dim 1 or [B, Hq, S, Sk]'s, Bool or q's
/// dtype; fills the mask fields of g.
Status checkMask(const char *op, const TensorRef *mask, DType qType,
                 AttentionDims &g) {
  g.hasMask = mask != nullptr;
  if (!mask)
    return Status::success();
  SMP_RETURN_IF_ERROR(checkTensor(op, "mask", *mask));
  std::vector<int64_t> full = {g.b, g.hq, g.s, g.sk};
  bool fits = mask->rank() == 4;
  for (size_t d = 0; fits && d < 4; ++d)
    fits = mask->shape[d] == 1 || mask->shape[d] == full[d];
  if (!fits)
    return fail(op, "mask " + shapeStr(mask->shape) +
                        " must be rank 4 with each dim 1 or that of [B, Hq, "
                        "S, Sk] = " +
                        shapeStr(full));
  if (mask->dtype != DType::Bool && mask->dtype != qType)
    return fail(op, "mask is " + describe(*mask) +
                        ", expected bool or q's element type " +
                        smp::base::dtypeName(qType));
  g.boolMask = mask->dtype == DType::Bool;
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    g.maskStride[d] = mask->shape[d] == 1 ? 0 : stride;
    stride *= mask->shape[d];
  }
  return Status::success();
}

/// out [B, Hq, S, Dv] (bshd: [B, S, Hq, Dv]) of q's dtype, lse [B, Hq, S, 2]
/// f32.
Status checkOutLse(const char *op, const TensorRef &q, const TensorRef &out,
                   const TensorRef &lse, const AttentionDims &g) {
  SMP_RETURN_IF_ERROR(checkTensor(op, "out", out));
  SMP_RETURN_IF_ERROR(checkTensor(op, "lse", lse));
  SMP_RETURN_IF_ERROR(checkDType(op, "out", out, q.dtype));
  SMP_RETURN_IF_ERROR(
      checkShape(op, "out", out,
                 g.bshd ? std::vector<int64_t>{g.b, g.s, g.hq, g.dv}
                        : std::vector<int64_t>{g.b, g.hq, g.s, g.dv}));
  SMP_RETURN_IF_ERROR(checkDType(op, "lse", lse, DType::F32));
  return checkShape(op, "lse", lse, {g.b, g.hq, g.s, 2});
}

/// A gradient: what `like` is, a tensor of its shape and dtype `t`.
struct LikeArg {
  const char *name;
  const TensorRef *grad, *like;
};

Status checkLike(const char *op, DType t, std::initializer_list<LikeArg> args) {
  for (const LikeArg &a : args) {
    SMP_RETURN_IF_ERROR(checkTensor(op, a.name, *a.grad));
    SMP_RETURN_IF_ERROR(checkDType(op, a.name, *a.grad, t));
    SMP_RETURN_IF_ERROR(checkShape(op, a.name, *a.grad, a.like->shape));
  }
  return Status::success();
}

} // namespace

Status checkAttention(const TensorRef &q, const TensorRef &k,
                      const TensorRef &v, const TensorRef *mask,
                      const TensorRef &out, const TensorRef &lse,
                      AttentionDims &dims) {
  const char *op = "attention";
  SMP_RETURN_IF_ERROR(checkQkv(op, q, k, v, dims));
  SMP_RETURN_IF_ERROR(checkMask(op, mask, q.dtype, dims));
  return checkOutLse(op, q, out, lse, dims);
}

Status checkAttentionGrad(const TensorRef &q, const TensorRef &k,
                          const TensorRef &v, const TensorRef &out,
                          const TensorRef &lse, const TensorRef &dout,
                          const TensorRef *mask, const TensorRef &dq,
                          const TensorRef &dk, const TensorRef &dv,
                          AttentionDims &dims) {
  const char *op = "attention_grad";
  SMP_RETURN_IF_ERROR(checkQkv(op, q, k, v, dims));
  SMP_RETURN_IF_ERROR(checkMask(op, mask, q.dtype, dims));
  SMP_RETURN_IF_ERROR(checkOutLse(op, q, out, lse, dims));
  return checkLike(op, q.dtype,
                   {{"dout", &dout, &out}, {"dq", &dq, &q}, {"dk", &dk, &k},
                    {"dv", &dv, &v}});
}

Status checkAttentionMaskGrad(const TensorRef &q, const TensorRef &k,
                              const TensorRef &v, const TensorRef &out,
                              const TensorRef &lse, const TensorRef &dout,
                              const TensorRef &mask, const TensorRef &dmask,
                              AttentionDims &dims) {
  const char *op = "attention_mask_grad";
  SMP_RETURN_IF_ERROR(checkQkv(op, q, k, v, dims));
  SMP_RETURN_IF_ERROR(checkMask(op, &mask, q.dtype, dims));
  if (dims.boolMask)
    return fail(op, "mask is " + describe(mask) +
                        "; only an additive mask of q's dtype has a gradient");
  SMP_RETURN_IF_ERROR(checkOutLse(op, q, out, lse, dims));
  return checkLike(op, q.dtype,
                   {{"dout", &dout, &out}, {"dmask", &dmask, &mask}});
}

namespace {

/// qkv [B, S, Hq + 2 Hkv, D] with Hq a positive multiple of Hkv > 0.
Status checkPacked(const char *op, const TensorRef &qkv, int64_t kvHeads,
                   AttentionDims &g) {
  SMP_RETURN_IF_ERROR(checkTensor(op, "qkv", qkv));
  if (qkv.dtype != DType::F32 && qkv.dtype != DType::F16 &&
      qkv.dtype != DType::BF16)
    return fail(op, "qkv is " + describe(qkv) + ", expected f32, f16 or bf16");
  if (qkv.rank() != 4)
    return fail(op, "qkv must be [B, S, Hq + 2 Hkv, D], got " +
                        shapeStr(qkv.shape));
  int64_t heads = qkv.shape[2];
  if (kvHeads <= 0 || heads <= 2 * kvHeads || (heads - 2 * kvHeads) % kvHeads)
    return fail(op, "qkv " + shapeStr(qkv.shape) + " has " +
                        std::to_string(heads) +
                        " heads, not Hq + 2 Hkv with Hq a positive multiple "
                        "of kv_heads = " +
                        std::to_string(kvHeads));
  g.bshd = true;
  g.b = qkv.shape[0];
  g.s = g.sk = qkv.shape[1];
  g.hkv = kvHeads;
  g.hq = heads - 2 * kvHeads;
  g.d = g.dv = qkv.shape[3];
  g.group = g.hq / g.hkv;
  g.qkvLd = heads * g.d;
  return Status::success();
}

} // namespace

PackedViews packedViews(const TensorRef &qkv, const AttentionDims &g) {
  auto view = [&](int64_t firstHead, int64_t heads) {
    TensorRef t = qkv;
    t.shape = {g.b, g.s, heads, g.d};
    t.data = static_cast<unsigned char *>(qkv.data) +
             static_cast<size_t>(firstHead * g.d) * dtypeSize(qkv.dtype);
    return t;
  };
  return {view(0, g.hq), view(g.hq, g.hkv), view(g.hq + g.hkv, g.hkv)};
}

Status checkPackedAttention(const TensorRef &qkv, int64_t kvHeads,
                            const TensorRef *mask, const TensorRef &out,
                            const TensorRef &lse, AttentionDims &dims) {
  const char *op = "packed_attention";
  SMP_RETURN_IF_ERROR(checkPacked(op, qkv, kvHeads, dims));
  SMP_RETURN_IF_ERROR(checkMask(op, mask, qkv.dtype, dims));
  return checkOutLse(op, qkv, out, lse, dims);
}

Status checkPackedAttentionGrad(const TensorRef &qkv, int64_t kvHeads,
                                const TensorRef &out, const TensorRef &lse,
                                const TensorRef &dout, const TensorRef *mask,
                                const TensorRef &dqkv, AttentionDims &dims) {
  const char *op = "packed_attention_grad";
  SMP_RETURN_IF_ERROR(checkPacked(op, qkv, kvHeads, dims));
  SMP_RETURN_IF_ERROR(checkMask(op, mask, qkv.dtype, dims));
  SMP_RETURN_IF_ERROR(checkOutLse(op, qkv, out, lse, dims));
  return checkLike(op, qkv.dtype,
                   {{"dout", &dout, &out}, {"dqkv", &dqkv, &qkv}});
}

} // namespace smp::kernels::common
