//===- ConvertAttention.cpp - ONNX Attention as smp.attention -------------===//
//
// Attention (opset 23: what torch.onnx.export writes for
// scaled_dot_product_attention at opset 23) is smp.attention itself: q, k, v
// [B, H, S, D] (3-D inputs [B, S, H * D] with q_num_heads and kv_num_heads
// are viewed as heads first), grouped-query attention by head counts, an
// additive or boolean mask broadcast to [B, Hq, S, Sk], `is_causal` top-left
// aligned (PyTorch's), and a query with no key allowed giving 0: ONNX's
// semantics. What training has no use for is refused by name: a key/value
// cache (past_key, past_value, nonpad_kv_seqlen), softcap, a sliding window
// and the qk_matmul_output output.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <cmath>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// [B, S, H * D] -> [B, H, S, D].
llvm::Expected<Value> headsFirst(NodeContext &nc, Value x, int64_t heads,
                                 llvm::StringRef what) {
  SmallVector<int64_t> s = shapeOf(x);
  if (heads <= 0 || s[2] % heads != 0)
    return nc.error(what + " hidden size " + llvm::Twine(s[2]) +
                    " is not a multiple of its head count " +
                    llvm::Twine(heads) +
                    " (q_num_heads, kv_num_heads: needed with 3-D inputs)");
  auto split = nc.reshape(x, {s[0], s[1], heads, s[2] / heads});
  if (!split)
    return split.takeError();
  return nc.create<smp::TransposeOp>(
      nc.placeholder(), *split,
      nc.builder().getDenseI64ArrayAttr({0, 2, 1, 3}));
}

/// What of the node smp does not run, or "".
std::string unsupported(NodeContext &nc) {
  if (nc.hasInput(4) || nc.hasInput(5))
    return "a key/value cache (past_key, past_value) is not supported: "
           "export the model without one (training has none)";
  if (nc.hasInput(6))
    return "nonpad_kv_seqlen (a static key/value cache) is not supported";
  if (nc.hasOutput(3))
    return "the qk_matmul_output output is not supported";
  if (nc.attrFloat("softcap", 0.0f) != 0.0f)
    return "softcap is not supported";
  if (nc.attrInt("left_window_size", -1) != -1 ||
      nc.attrInt("right_window_size", -1) != -1)
    return "a sliding window (left_window_size, right_window_size) is not "
           "supported: pass it as attn_mask";
  return "";
}

/// The mask as rank 4 (leading 1s), each dim 1 or that of `full`.
llvm::Expected<Value> attentionMask(NodeContext &nc, Value mask, Type qType,
                                    ArrayRef<int64_t> full) {
  auto t = tensorType(mask);
  if (!t.getElementType().isInteger(1) && t.getElementType() != qType)
    return nc.error("attn_mask must be bool or Q's element type");
  if (t.getRank() > 4)
    return nc.error("attn_mask has rank " + llvm::Twine(t.getRank()) +
                    ", more than 4");
  SmallVector<int64_t> shape(4 - t.getRank(), 1);
  llvm::append_range(shape, t.getShape());
  if (shape[3] < full[3])
    return nc.error("attn_mask covers " + llvm::Twine(shape[3]) + " of " +
                    llvm::Twine(full[3]) +
                    " keys (ONNX pads it for a key/value cache, which is "
                    "not supported)");
  for (int i = 0; i < 4; ++i)
    if (shape[i] != 1 && shape[i] != full[i])
      return nc.error("attn_mask " + shapeToString(t.getShape()) +
                      " does not broadcast to the scores " +
                      shapeToString(full));
  if (t.getRank() == 4)
    return mask;
  return nc.reshape(mask, shape);
}

llvm::Error convertAttention(NodeContext &nc) {
  if (std::string why = unsupported(nc); !why.empty())
    return nc.error(why);
  auto qkv = nc.inputs(3);
  if (!qkv)
    return qkv.takeError();
  Value q = (*qkv)[0], k = (*qkv)[1], v = (*qkv)[2];
  int64_t rank = tensorType(q).getRank();
  if (rank != tensorType(k).getRank() || rank != tensorType(v).getRank() ||
      (rank != 3 && rank != 4))
    return nc.error("Q, K and V must all be rank 3 or all rank 4");
  if (rank == 3) {
    int64_t qHeads = nc.attrInt("q_num_heads", 0),
            kvHeads = nc.attrInt("kv_num_heads", 0);
    for (auto [x, heads, what] : {std::tuple{&q, qHeads, "Q"},
                                  {&k, kvHeads, "K"},
                                  {&v, kvHeads, "V"}}) {
      auto h = headsFirst(nc, *x, heads, what);
      if (!h)
        return h.takeError();
      *x = *h;
    }
  } else if ((nc.hasAttr("q_num_heads") &&
              nc.attrInt("q_num_heads", 0) != shapeOf(q)[1]) ||
             (nc.hasAttr("kv_num_heads") &&
              nc.attrInt("kv_num_heads", 0) != shapeOf(k)[1])) {
    return nc.error("q_num_heads or kv_num_heads disagrees with the heads "
                    "of the 4-D inputs");
  }
  SmallVector<int64_t> qs = shapeOf(q), ks = shapeOf(k);
  float scale = nc.hasAttr("scale")
                    ? nc.attrFloat("scale", 1.0f)
                    : static_cast<float>(1.0 / std::sqrt(double(qs[3])));
  Value mask;
  if (nc.hasInput(3)) {
    auto m = nc.input(3);
    if (!m)
      return m.takeError();
    auto m4 = attentionMask(nc, *m, tensorType(q).getElementType(),
                            {qs[0], qs[1], qs[2], ks[2]});
    if (!m4)
      return m4.takeError();
    mask = *m4;
  }
  // The flag cannot apply: ONNX's Attention is one op, as smp.attention.
  if (!nc.fuseAttention())
    nc.warnOnce("no-fuse-attention",
                "--no-fuse-attention keeps attention chains (matmul, mask, "
                "softmax, matmul) as imported, but this is ONNX's fused "
                "Attention (opset 23), which smp runs as one smp.attention "
                "like a fused chain; export with opset_version 22 or lower "
                "for the chain");
  auto &b = nc.builder();
  auto out = nc.createMulti<smp::AttentionOp>(
      TypeRange{nc.placeholder(), nc.placeholder()}, q, k, v, mask,
      b.getF32FloatAttr(scale), b.getBoolAttr(nc.attrInt("is_causal", 0) != 0),
      b.getBoolAttr(false));
  if (!out)
    return out.takeError();
  Value y = (*out)[0];
  if (rank == 3) {
    auto t = nc.create<smp::TransposeOp>(nc.placeholder(), y,
                                         b.getDenseI64ArrayAttr({0, 2, 1, 3}));
    if (!t)
      return t.takeError();
    SmallVector<int64_t> ys = shapeOf(y);
    auto r = nc.reshape(*t, {ys[0], ys[2], ys[1] * ys[3]});
    if (!r)
      return r.takeError();
    y = *r;
  }
  nc.setOutput(0, y);
  // Without a cache the present key and value are K and V, heads first.
  nc.setOutput(1, k);
  nc.setOutput(2, v);
  return llvm::Error::success();
}

} // namespace

void registerAttentionConverters(ConverterTable &t) {
  t["Attention"] = convertAttention;
}

} // namespace smp::onnx_frontend
