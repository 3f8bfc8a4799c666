//===- DropoutKey.cpp - The dropout key of any op that draws a mask -------===//

#include "smp/Dialect/Smp/IR/DropoutKey.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp {

namespace {

struct PlaceAttr {
  const char *name;
  int64_t def;
};

/// Smp_DropoutPlacement's names and defaults, in DropoutPlace's order.
constexpr PlaceAttr kPlaces[] = {{"samples", 0},       {"sample_offset", 0},
                                 {"shard_samples", 0}, {"tp_dim", -1},
                                 {"tp_parts", 1},      {"tp_blocks", 1}};

bool isAttention(Operation *op) {
  return isa<AttentionOp, AttentionGradOp, AttentionMaskGradOp,
             PackedAttentionOp, PackedAttentionGradOp>(op);
}

} // namespace

bool drawsDropout(Operation *op) {
  if (isa<DropoutOp>(op))
    return true;
  if (!isAttention(op))
    return false;
  auto ratio = op->getAttrOfType<FloatAttr>("ratio");
  return ratio && ratio.getValueAsDouble() != 0;
}

int64_t dropoutStream(Operation *op) {
  auto s = op->getAttrOfType<IntegerAttr>("stream");
  return s ? s.getInt() : 0;
}

Value dropoutSampled(Operation *op) {
  if (auto d = dyn_cast<DropoutOp>(op))
    return d.getInput();
  return op->getOperand(0); // query, or qkv
}

int64_t getDropoutPlace(Operation *op, DropoutPlace p) {
  const PlaceAttr &a = kPlaces[static_cast<int>(p)];
  auto v = op->getAttrOfType<IntegerAttr>(a.name);
  return v ? v.getInt() : a.def;
}

void setDropoutPlace(Operation *op, DropoutPlace p, int64_t value) {
  const PlaceAttr &a = kPlaces[static_cast<int>(p)];
  op->setAttr(a.name,
              IntegerAttr::get(IntegerType::get(op->getContext(), 64), value));
}

void setDropoutTpSplit(Operation *op, int64_t dim, int64_t parts,
                       int64_t blocks) {
  setDropoutPlace(op, DropoutPlace::TpDim, dim);
  setDropoutPlace(op, DropoutPlace::TpParts, parts);
  setDropoutPlace(op, DropoutPlace::TpBlocks, blocks);
}

void copyDropoutKey(Operation *from, Operation *to) {
  if (!drawsDropout(from))
    return;
  Builder b(from->getContext());
  auto ratio = from->getAttrOfType<FloatAttr>("ratio");
  to->setAttr("ratio",
              b.getF32FloatAttr(static_cast<float>(ratio.getValueAsDouble())));
  to->setAttr("stream", b.getI64IntegerAttr(dropoutStream(from)));
  for (int p = 0; p < static_cast<int>(std::size(kPlaces)); ++p)
    setDropoutPlace(to, static_cast<DropoutPlace>(p),
                    getDropoutPlace(from, static_cast<DropoutPlace>(p)));
}

} // namespace smp
