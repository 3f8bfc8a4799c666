//===- ConvertInstanceNorm.cpp - InstanceNormalization, GroupNormalization ===//
//
// Both normalise x [N, C, d1...] over groups of channels and the spatial
// dims, then scale and shift per channel: instance norm per (n, c), group
// norm per (n, group of C/G channels). x is viewed as [N, G, rest] and
// normalised by smp.layer_norm over its last dim (its kernels, statistics
// and gradient; the scale ones filled at run time), viewed back and multiplied
// and shifted per channel. torch.onnx.export writes nn.GroupNorm as exactly
// that with a reshape around InstanceNormalization(ones, zeros) and the
// module's affine parameters folded to [C, 1, 1] (trained as they are);
// nn.InstanceNorm*d(affine=True) reads its weight and bias directly.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// x [N, C, d1...] normalised over each of `groups` groups of channels (and
/// the dims after them), then times `scale` and plus `bias`, each of
/// `affineShape` (broadcast against x viewed as [N, G, C/G, d1...] when
/// `perGroup`, else against x).
llvm::Expected<Value> normalizeGroups(NodeContext &nc, Value x, int64_t groups,
                                      float epsilon, Value scale, Value bias,
                                      bool perGroup) {
  SmallVector<int64_t> shape = shapeOf(x);
  if (shape.size() < 3)
    return nc.error(
        "input must be [N, C, d1, ...] (rank 3 or more), got rank " +
        llvm::Twine(shape.size()));
  int64_t n = shape[0], c = shape[1];
  if (groups <= 0 || c % groups != 0)
    return nc.error("num_groups " + llvm::Twine(groups) +
                    " does not divide the " + llvm::Twine(c) + " channels");
  int64_t rest = 1;
  for (int64_t d : ArrayRef<int64_t>(shape).drop_front(1))
    rest *= d;
  rest /= groups;
  for (auto [what, v] : {std::pair{"scale", scale}, std::pair{"bias", bias}}) {
    int64_t want = perGroup ? groups : c;
    if (shapeOf(v) != SmallVector<int64_t>{want})
      return nc.error(llvm::Twine(what) + " must be [" + llvm::Twine(want) +
                      "] (one per " + (perGroup ? "group" : "channel") + ")");
  }
  auto rows = nc.reshape(x, {n, groups, rest});
  if (!rows)
    return rows.takeError();
  auto &b = nc.builder();
  Type elt = tensorType(x).getElementType();
  auto normed = nc.create<smp::LayerNormOp>(
      nc.placeholder(), *rows, nc.filled(elt, {rest}, 1.0), Value(),
      b.getI64IntegerAttr(2), b.getF32FloatAttr(epsilon));
  if (!normed)
    return normed.takeError();
  // Scale and shift: per group on [N, G, rest], or per channel on x's shape
  // with the parameters viewed as [C, 1, ...].
  Value y = *normed;
  SmallVector<int64_t> affine{perGroup ? groups : c};
  if (!perGroup) {
    auto back = nc.reshape(y, shape);
    if (!back)
      return back.takeError();
    y = *back;
  }
  affine.append((perGroup ? 1 : shape.size() - 2), 1);
  auto s = nc.reshape(scale, affine);
  if (!s)
    return s.takeError();
  auto t = nc.reshape(bias, affine);
  if (!t)
    return t.takeError();
  auto scaled = nc.create<smp::MulOp>(nc.placeholder(), y, *s);
  if (!scaled)
    return scaled.takeError();
  auto shifted = nc.create<smp::AddOp>(nc.placeholder(), *scaled, *t);
  if (!shifted)
    return shifted.takeError();
  if (!perGroup)
    return shifted;
  return nc.reshape(*shifted, shape);
}

llvm::Error convertInstanceNorm(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  SmallVector<int64_t> shape = shapeOf((*in)[0]);
  int64_t channels = shape.size() > 1 ? shape[1] : 0;
  return nc.output(normalizeGroups(nc, (*in)[0], channels,
                                   nc.attrFloat("epsilon", 1e-5f), (*in)[1],
                                   (*in)[2], /*perGroup=*/false));
}

/// Opset 18 scales and shifts per group ([G]); opset 21 per channel ([C]),
/// with statistics in stash_type (fp32 only here).
llvm::Error convertGroupNorm(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  if (!nc.hasAttr("num_groups"))
    return nc.error("the num_groups attribute is required");
  if (nc.attrInt("stash_type", 1) != 1)
    return nc.error("only stash_type=1 (fp32 statistics) is supported");
  return nc.output(normalizeGroups(nc, (*in)[0], nc.attrInt("num_groups", 0),
                                   nc.attrFloat("epsilon", 1e-5f), (*in)[1],
                                   (*in)[2], /*perGroup=*/nc.opset() < 21));
}

} // namespace

void registerInstanceNormConverters(ConverterTable &t) {
  t["InstanceNormalization"] = convertInstanceNorm;
  t["GroupNormalization"] = convertGroupNorm;
}

} // namespace smp::onnx_frontend
