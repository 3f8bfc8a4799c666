//===- ConvertResize.cpp - Resize, Upsample, DepthToSpace, SpaceToDepth ---===//
//
// Resize (and the older Upsample) is separable: each resized axis maps its
// input rows to output rows with fixed weights. Nearest modes pick a row: a
// smp.gather along the axis with constant indices. Linear and cubic modes
// mix rows with weights: a matmul by a constant [in, out] interpolation
// matrix with the axis moved last. The weights follow the ONNX reference
// (onnx/reference/ops/op_resize.py): the coordinate transformation gives
// each output position's source coordinate x; with base = ceil(x) - 1 and
// r = x - base in (0, 1], nearest picks base or base + 1 (nearest_mode),
// linear weighs base and base + 1 by 1 - r and r, cubic base - 1 .. base + 2
// by the cubic convolution coefficients (cubic_coeff_a); rows outside the
// input are the edge rows (exclude_outside instead drops them and
// renormalises). Gathers and matmuls run on every backend and have
// gradients, so Resize has no op of its own: PyTorch's nn.Upsample
// (nearest, bilinear, bicubic; align_corners or not) trains exactly. A
// matmul costs in x out per row, against out for a dedicated kernel: fine
// for the sizes the CPU backend trains.
//
// DepthToSpace (PyTorch's PixelShuffle) and SpaceToDepth are a reshape, a
// transpose and a reshape.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <cmath>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

struct ResizeMode {
  std::string mode = "nearest";         // nearest, linear, cubic
  std::string transform = "half_pixel"; // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";
  double cubicA = -0.75;
  bool excludeOutside = false;
};

/// The source coordinate of output position `i` (ONNX's
/// coordinate_transformation_mode; `outWidth` is scale x in, unrounded, as
/// the reference computes it).
double sourceCoordinate(const ResizeMode &m, double i, double scale,
                        int64_t in) {
  double outWidth = scale * static_cast<double>(in);
  const std::string &t = m.transform;
  if (t == "align_corners")
    return outWidth == 1 ? 0.0 : i * (in - 1) / (outWidth - 1);
  if (t == "asymmetric")
    return i / scale;
  if (t == "pytorch_half_pixel")
    return outWidth == 1 ? -0.5 : (i + 0.5) / scale - 0.5;
  if (t == "tf_half_pixel_for_nn")
    return (i + 0.5) / scale;
  if (t == "half_pixel_symmetric") {
    double adjustment = outWidth / (scale * in);
    double center = in / 2.0;
    return center * (1 - adjustment) + (i + 0.5) / scale - 0.5;
  }
  return (i + 0.5) / scale - 0.5; // half_pixel
}

/// Output row i's source rows and weights along one axis.
SmallVector<std::pair<int64_t, double>> taps(const ResizeMode &m, double x,
                                             double scale, int64_t in) {
  double base = std::ceil(x) - 1, r = x - base; // r in (0, 1]
  SmallVector<std::pair<int64_t, double>> out;
  if (m.mode == "nearest") {
    bool up;
    if (r == 1)
      up = true; // x is a row: base + 1 == x
    else if (m.nearest == "round_prefer_ceil")
      up = r >= 0.5;
    else if (m.nearest == "floor")
      up = false;
    else if (m.nearest == "ceil")
      up = true;
    else if (m.nearest == "simple") // Upsample and Resize-10
      up = scale < 1;
    else // round_prefer_floor
      up = r > 0.5;
    out.push_back({static_cast<int64_t>(base) + (up ? 1 : 0), 1.0});
  } else if (m.mode == "linear") {
    out.push_back({static_cast<int64_t>(base), 1 - r});
    out.push_back({static_cast<int64_t>(base) + 1, r});
  } else { // cubic
    double a = m.cubicA, p = r + 1, q = 1 - r, s = 2 - r;
    double c[4] = {((a * p - 5 * a) * p + 8 * a) * p - 4 * a,
                   ((a + 2) * r - (a + 3)) * r * r + 1,
                   ((a + 2) * q - (a + 3)) * q * q + 1,
                   ((a * s - 5 * a) * s + 8 * a) * s - 4 * a};
    for (int k = 0; k < 4; ++k)
      out.push_back({static_cast<int64_t>(base) - 1 + k, c[k]});
  }
  if (m.excludeOutside && m.mode != "nearest") {
    double sum = 0;
    for (auto &[row, w] : out) {
      if (row < 0 || row >= in)
        w = 0;
      sum += w;
    }
    for (auto &[row, w] : out)
      w = sum != 0 ? w / sum : 0;
  }
  for (auto &[row, w] : out) // the edge rows beyond the input
    row = std::clamp<int64_t>(row, 0, in - 1);
  return out;
}

/// x resized along `axis` to `out` rows with `scale`.
llvm::Expected<Value> resizeAxis(NodeContext &nc, const ResizeMode &m, Value x,
                                 int64_t axis, int64_t out, double scale) {
  SmallVector<int64_t> shape = shapeOf(x);
  int64_t in = shape[axis], rank = shape.size();
  auto &b = nc.builder();
  std::vector<std::vector<std::pair<int64_t, double>>> rows;
  bool identity = out == in;
  for (int64_t i = 0; i < out; ++i) {
    auto t = taps(m, sourceCoordinate(m, i, scale, in), scale, in);
    double self = 0;
    for (auto [row, w] : t)
      self += row == i ? w : 0;
    identity &= self == 1;
    rows.emplace_back(t.begin(), t.end());
  }
  if (identity)
    return x;
  if (m.mode == "nearest") {
    SmallVector<double> index;
    for (auto &t : rows)
      index.push_back(t.front().first);
    return nc.create<smp::GatherOp>(nc.placeholder(), x,
                                    nc.constantOf(b.getI64Type(), {out}, index),
                                    b.getI64IntegerAttr(axis), IntegerAttr());
  }
  // [in, out] weights; x with `axis` last times them.
  std::vector<double> w(in * out, 0.0);
  for (int64_t i = 0; i < out; ++i)
    for (auto [row, weight] : rows[i])
      w[row * out + i] += weight;
  Value matrix = nc.constantOf(tensorType(x).getElementType(), {in, out}, w);
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[axis], perm[rank - 1]);
  Value moved = x;
  if (axis != rank - 1) {
    auto t = nc.create<smp::TransposeOp>(nc.placeholder(), x,
                                         b.getDenseI64ArrayAttr(perm));
    if (!t)
      return t.takeError();
    moved = *t;
  }
  auto y =
      nc.create<smp::MatMulOp>(nc.placeholder(), moved, matrix, false, false);
  if (!y || axis == rank - 1)
    return y;
  return nc.create<smp::TransposeOp>(nc.placeholder(), *y,
                                     b.getDenseI64ArrayAttr(perm));
}

/// Every axis resized by `scales` (output floor(in x scale)) or to `sizes`.
llvm::Error resize(NodeContext &nc, const ResizeMode &m, Value x,
                   ArrayRef<double> scales, ArrayRef<int64_t> sizes) {
  SmallVector<int64_t> shape = shapeOf(x);
  size_t rank = shape.size();
  if (!isa<FloatType>(tensorType(x).getElementType()))
    return nc.error("only float inputs are supported");
  if ((!sizes.empty() && sizes.size() != rank) ||
      (sizes.empty() && scales.size() != rank))
    return nc.error("needs " + llvm::Twine(rank) +
                    " scales or sizes (one per dim of the input), got " +
                    llvm::Twine(sizes.empty() ? scales.size() : sizes.size()));
  Value y = x;
  for (size_t d = 0; d < rank; ++d) {
    int64_t out =
        sizes.empty()
            ? static_cast<int64_t>(std::floor(shape[d] * scales[d] + 1e-9))
            : sizes[d];
    double scale =
        sizes.empty() ? scales[d] : static_cast<double>(out) / shape[d];
    if (out <= 0 || scale <= 0)
      return nc.error("dim " + llvm::Twine(d) + " resizes " +
                      llvm::Twine(shape[d]) + " rows to " + llvm::Twine(out));
    auto r = resizeAxis(nc, m, y, d, out, scale);
    if (!r)
      return r.takeError();
    y = *r;
  }
  return nc.output(y);
}

llvm::Error convertResize(NodeContext &nc) {
  ResizeMode m;
  m.mode = nc.attrString("mode", "nearest");
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic")
    return nc.error("unknown mode '" + m.mode + "'");
  if (nc.opset() < 11) { // Resize-10: Upsample's coordinates
    m.transform = "asymmetric";
    m.nearest = "simple";
  } else {
    m.transform = nc.attrString("coordinate_transformation_mode", "half_pixel");
    m.nearest = nc.attrString("nearest_mode", "round_prefer_floor");
    m.cubicA = nc.attrFloat("cubic_coeff_a", -0.75f);
    m.excludeOutside = nc.attrInt("exclude_outside", 0) != 0;
  }
  static const char *transforms[] = {
      "half_pixel", "pytorch_half_pixel",   "align_corners",
      "asymmetric", "tf_half_pixel_for_nn", "half_pixel_symmetric"};
  if (!llvm::is_contained(transforms, m.transform))
    return nc.error("coordinate_transformation_mode '" + m.transform +
                    "' is not supported");
  static const char *nearests[] = {"round_prefer_floor", "round_prefer_ceil",
                                   "floor", "ceil"};
  if (nc.opset() >= 11 && !llvm::is_contained(nearests, m.nearest))
    return nc.error("unknown nearest_mode '" + m.nearest + "'");
  if (nc.attrInt("antialias", 0) != 0)
    return nc.error("antialias=1 is not supported");
  if (nc.hasAttr("axes"))
    return nc.error("the axes attribute is not supported (give every dim)");
  if (nc.attrString("keep_aspect_ratio_policy", "stretch") != "stretch")
    return nc.error("keep_aspect_ratio_policy other than 'stretch' is not "
                    "supported");
  auto x = nc.inputs(1);
  if (!x)
    return x.takeError();
  auto scales = nc.constantFloats(nc.opset() < 11 ? 1 : 2, "scales");
  if (!scales)
    return scales.takeError();
  SmallVector<int64_t> sizes;
  if (nc.opset() >= 11 && nc.hasInput(3)) {
    auto s = nc.constantInts(3, "sizes");
    if (!s)
      return s.takeError();
    sizes = *s;
  }
  return resize(nc, m, (*x)[0], *scales, sizes);
}

/// Upsample (opset 7: `scales` attribute; 9: input): nearest repeats rows
/// (floor), linear interpolates with asymmetric coordinates.
llvm::Error convertUpsample(NodeContext &nc) {
  ResizeMode m;
  m.mode = nc.attrString("mode", "nearest");
  if (m.mode != "nearest" && m.mode != "linear")
    return nc.error("unknown mode '" + m.mode + "'");
  m.transform = "asymmetric";
  m.nearest = "simple";
  auto x = nc.inputs(1);
  if (!x)
    return x.takeError();
  SmallVector<double> scales;
  if (nc.opset() < 9) {
    for (float s : [&] {
           SmallVector<float> v;
           if (const auto *a = nc.attr("scales"))
             v.append(a->floats().begin(), a->floats().end());
           return v;
         }())
      scales.push_back(s);
  } else {
    auto s = nc.constantFloats(1, "scales");
    if (!s)
      return s.takeError();
    scales = *s;
  }
  return resize(nc, m, (*x)[0], scales, {});
}

/// DepthToSpace (mode DCR or CRD: PyTorch's PixelShuffle) and SpaceToDepth
/// as reshape, transpose, reshape.
llvm::Error convertDepthSpace(NodeContext &nc, bool toSpace) {
  auto x = nc.inputs(1);
  if (!x)
    return x.takeError();
  SmallVector<int64_t> s = shapeOf((*x)[0]);
  int64_t bs = nc.attrInt("blocksize", 0);
  if (s.size() != 4)
    return nc.error("input must be [N, C, H, W], got rank " +
                    llvm::Twine(s.size()));
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (bs <= 0 || (toSpace ? c % (bs * bs) : h % bs + w % bs) != 0)
    return nc.error(toSpace ? "blocksize " + llvm::Twine(bs) +
                                  " squared does not divide the " +
                                  llvm::Twine(c) + " channels"
                            : "blocksize " + llvm::Twine(bs) +
                                  " does not divide H " + llvm::Twine(h) +
                                  " and W " + llvm::Twine(w));
  std::string mode = nc.attrString("mode", "DCR");
  if (toSpace && mode != "DCR" && mode != "CRD")
    return nc.error("unknown mode '" + mode + "'");
  SmallVector<int64_t> view, perm, out;
  if (!toSpace) {
    view = {n, c, h / bs, bs, w / bs, bs};
    perm = {0, 3, 5, 1, 2, 4};
    out = {n, c * bs * bs, h / bs, w / bs};
  } else if (mode == "DCR") {
    view = {n, bs, bs, c / (bs * bs), h, w};
    perm = {0, 3, 4, 1, 5, 2};
    out = {n, c / (bs * bs), h * bs, w * bs};
  } else {
    view = {n, c / (bs * bs), bs, bs, h, w};
    perm = {0, 1, 4, 2, 5, 3};
    out = {n, c / (bs * bs), h * bs, w * bs};
  }
  auto v = nc.reshape((*x)[0], view);
  if (!v)
    return v.takeError();
  auto t = nc.create<smp::TransposeOp>(nc.placeholder(), *v,
                                       nc.builder().getDenseI64ArrayAttr(perm));
  if (!t)
    return t.takeError();
  return nc.output(nc.reshape(*t, out));
}

} // namespace

void registerResizeConverters(ConverterTable &t) {
  t["Resize"] = convertResize;
  t["Upsample"] = convertUpsample;
  t["DepthToSpace"] = [](NodeContext &nc) {
    return convertDepthSpace(nc, /*toSpace=*/true);
  };
  t["SpaceToDepth"] = [](NodeContext &nc) {
    return convertDepthSpace(nc, /*toSpace=*/false);
  };
}

} // namespace smp::onnx_frontend
