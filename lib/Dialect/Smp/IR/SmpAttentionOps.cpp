//===- SmpAttentionOps.cpp - attention and attention_grad ------------------===//
//
// Type inference, which is the verifier: the shapes of q, k, v and the mask
// (see SmpAttentionOps.td), checked once for the forward and the backward.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <array>

using namespace mlir;
using namespace smp;

namespace {

RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// The bshd flag as a builder's adaptor holds it (null until the op's
/// default properties are filled in).
template <typename Adaptor> bool layoutIsBshd(Adaptor adaptor) {
  BoolAttr a = adaptor.getBshdAttr();
  return a && a.getValue();
}

/// The optional mask: rank 4, each dim 1 or that of full = [B, Hq, S, Sk],
/// i1 or the query's element type.
LogicalResult checkMask(std::optional<Location> loc, StringRef name, Value mask,
                        Type elementType, std::array<int64_t, 4> full) {
  if (!mask)
    return success();
  auto mt = rankedType(mask);
  Type et = mt.getElementType();
  if (!et.isInteger(1) && et != elementType)
    return emitOptionalError(loc, "'smp.", name,
                             "' mask must be i1 or the query's element "
                             "type, got ",
                             mt);
  bool ok = mt.getRank() == 4;
  for (int64_t i = 0; ok && i < 4; ++i)
    ok = mt.getDimSize(i) == 1 || mt.getDimSize(i) == full[i];
  if (!ok)
    return emitOptionalError(
        loc, "'smp.", name, "' mask ", mt,
        " must be rank 4 with each dim 1 or that of [batch, heads, seq, "
        "key seq] = [",
        full[0], ", ", full[1], ", ", full[2], ", ", full[3], "]");
  return success();
}

/// Checks q [B, Hq, S, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] (with
/// bshd: [B, S, H, D] each) and the mask; returns the output's type [B, Hq,
/// S, Dv] ([B, S, Hq, Dv]).
template <typename Adaptor>
FailureOr<RankedTensorType> checkOperands(std::optional<Location> loc,
                                          StringRef name, Adaptor adaptor) {
  Value q = adaptor.getQuery(), k = adaptor.getKey(), v = adaptor.getValue(),
        mask = adaptor.getMask();
  bool bshd = layoutIsBshd(adaptor);
  auto qt = rankedType(q), kt = rankedType(k), vt = rankedType(v);
  for (auto [what, t] : {std::pair{"query", qt}, {"key", kt}, {"value", vt}})
    if (t.getRank() != 4)
      return emitOptionalError(loc, "'smp.", name, "' ", what,
                               bshd ? " must be rank 4 [batch, seq, heads, "
                                      "head_dim] (bshd), got "
                                    : " must be rank 4 [batch, heads, seq, "
                                      "head_dim], got ",
                               t);
  if (kt.getElementType() != qt.getElementType() ||
      vt.getElementType() != qt.getElementType())
    return emitOptionalError(loc, "'smp.", name,
                             "' query, key and value must share one element "
                             "type, got ",
                             qt, ", ", kt, ", ", vt);
  // [B, H, S, D] viewed through the layout: heads at dim h, sequence at s.
  const int h = bshd ? 2 : 1, sq = bshd ? 1 : 2;
  auto perm = [&](RankedTensorType t) {
    auto d = t.getShape();
    return SmallVector<int64_t, 4>{d[0], d[h], d[sq], d[3]};
  };
  SmallVector<int64_t, 4> qs = perm(qt), ks = perm(kt), vs = perm(vt);
  if (ks[0] != qs[0] || vs[0] != qs[0])
    return emitOptionalError(loc, "'smp.", name,
                             "' batch sizes differ: query ", qt, ", key ", kt,
                             ", value ", vt);
  if (vs[1] != ks[1] || vs[2] != ks[2])
    return emitOptionalError(loc, "'smp.", name, "' key ", kt, " and value ",
                             vt, " must have the same heads and length");
  if (ks[3] != qs[3])
    return emitOptionalError(loc, "'smp.", name, "' key ", kt,
                             " must have the query's head dim ", qs[3]);
  if (ks[1] <= 0 || qs[1] % ks[1] != 0)
    return emitOptionalError(loc, "'smp.", name, "' query heads ", qs[1],
                             " are not a multiple of the key/value heads ",
                             ks[1]);
  if (failed(checkMask(loc, name, mask, qt.getElementType(),
                       {qs[0], qs[1], qs[2], ks[2]})))
    return failure();
  SmallVector<int64_t, 4> out = {qs[0], qs[1], qs[2], vs[3]};
  if (bshd)
    std::swap(out[1], out[2]);
  return RankedTensorType::get(out, qt.getElementType());
}

/// [B, Hq, S, 2] f32 (the maximum and log of the sum) from the output's type.
RankedTensorType lseType(RankedTensorType out, bool bshd) {
  auto d = out.getShape();
  return RankedTensorType::get(
      {d[0], bshd ? d[2] : d[1], bshd ? d[1] : d[2], 2},
      Float32Type::get(out.getContext()));
}

} // namespace

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            AttentionOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto out = checkOperands(loc, "attention", adaptor);
  if (failed(out))
    return failure();
  results.push_back(*out);
  results.push_back(lseType(*out, layoutIsBshd(adaptor)));
  return success();
}

namespace {

/// The backward ops' checks: the forward's operands, and the output, its
/// gradient and the log-sum-exp of the types the forward gives.
template <typename Adaptor>
LogicalResult checkSaved(std::optional<Location> loc, StringRef name,
                         Adaptor adaptor, RankedTensorType out, bool bshd) {
  for (auto [what, v, want] : {std::tuple{"output", adaptor.getOutput(), out},
                               {"grad", adaptor.getGrad(), out},
                               {"lse", adaptor.getLse(), lseType(out, bshd)}})
    if (rankedType(v) != want)
      return emitOptionalError(loc, "'smp.", name, "' ", what, " ", v.getType(),
                               " must be ", want);
  return success();
}

template <typename Adaptor>
LogicalResult checkGradOperands(std::optional<Location> loc, StringRef name,
                                Adaptor adaptor) {
  auto out = checkOperands(loc, name, adaptor);
  if (failed(out))
    return failure();
  return checkSaved(loc, name, adaptor, *out, layoutIsBshd(adaptor));
}

} // namespace

LogicalResult AttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, AttentionGradOp::Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  if (failed(checkGradOperands(loc, "attention_grad", adaptor)))
    return failure();
  results.push_back(rankedType(adaptor.getQuery()));
  results.push_back(rankedType(adaptor.getKey()));
  results.push_back(rankedType(adaptor.getValue()));
  return success();
}

LogicalResult AttentionMaskGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    AttentionMaskGradOp::Adaptor adaptor, SmallVectorImpl<Type> &results) {
  if (failed(checkGradOperands(loc, "attention_mask_grad", adaptor)))
    return failure();
  // The mask is float (ODS), so of the query's type (checkOperands).
  results.push_back(rankedType(adaptor.getMask()));
  return success();
}

namespace {

/// Checks qkv [B, S, Hq + 2 Hkv, D] (kv_heads = Hkv, Hq a positive
/// multiple of it) and the mask; returns the output's type [B, S, Hq, D].
template <typename Adaptor>
FailureOr<RankedTensorType> checkPacked(std::optional<Location> loc,
                                        StringRef name, Adaptor adaptor) {
  auto t = rankedType(adaptor.getQkv());
  if (t.getRank() != 4)
    return emitOptionalError(loc, "'smp.", name,
                             "' qkv must be rank 4 [batch, seq, q heads + 2 "
                             "kv heads, head_dim], got ",
                             t);
  IntegerAttr kvAttr = adaptor.getKvHeadsAttr();
  int64_t kv = kvAttr ? kvAttr.getInt() : 0, heads = t.getDimSize(2);
  if (kv <= 0 || heads <= 2 * kv || (heads - 2 * kv) % kv != 0)
    return emitOptionalError(loc, "'smp.", name, "' qkv ", t, " has ", heads,
                             " heads, not q heads + 2 kv heads with the q "
                             "heads a positive multiple of kv_heads = ",
                             kv);
  int64_t b = t.getDimSize(0), s = t.getDimSize(1), hq = heads - 2 * kv;
  if (failed(checkMask(loc, name, adaptor.getMask(), t.getElementType(),
                       {b, hq, s, s})))
    return failure();
  return RankedTensorType::get({b, s, hq, t.getDimSize(3)}, t.getElementType());
}

} // namespace

LogicalResult
PackedAttentionOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                    PackedAttentionOp::Adaptor adaptor,
                                    SmallVectorImpl<Type> &results) {
  auto out = checkPacked(loc, "packed_attention", adaptor);
  if (failed(out))
    return failure();
  results.push_back(*out);
  results.push_back(lseType(*out, /*bshd=*/true));
  return success();
}

LogicalResult PackedAttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    PackedAttentionGradOp::Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto out = checkPacked(loc, "packed_attention_grad", adaptor);
  if (failed(out))
    return failure();
  if (failed(checkSaved(loc, "packed_attention_grad", adaptor, *out, true)))
    return failure();
  results.push_back(rankedType(adaptor.getQkv()));
  return success();
}
