//===- ConvertNN.cpp - ONNX neural-network ops -> smp ---------------------===//
//
// Conv, ConvTranspose, pooling, BatchNormalization (inference),
// LayerNormalization, RMSNormalization and SoftmaxCrossEntropyLoss.
//
//===----------------------------------------------------------------------===//

#include "Chain.h"
#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Support/CheckedMath.h"

#include <array>
#include <functional>
#include <numeric>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

/// Reads kernel/stride/pad/dilation attributes for `spatial` dims and
/// resolves auto_pad.
llvm::Expected<Window> readWindow(NodeContext &nc, ArrayRef<int64_t> input,
                                  SmallVector<int64_t> kernel) {
  size_t spatial = input.size() - 2;
  Window w;
  w.kernel = std::move(kernel);
  w.strides = nc.attrInts("strides");
  w.dilations = nc.attrInts("dilations");
  w.pads = nc.attrInts("pads");
  if (w.strides.empty())
    w.strides.assign(spatial, 1);
  if (w.dilations.empty())
    w.dilations.assign(spatial, 1);
  if (w.pads.empty())
    w.pads.assign(2 * spatial, 0);
  if (w.kernel.size() != spatial || w.strides.size() != spatial ||
      w.dilations.size() != spatial || w.pads.size() != 2 * spatial)
    return nc.error("kernel/strides/dilations/pads do not match " +
                    llvm::Twine(spatial) + " spatial dims");
  std::string autoPad = nc.attrString("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    w.pads.assign(2 * spatial, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < spatial; ++i) {
      int64_t in = input[2 + i], s = w.strides[i];
      if (s <= 0)
        return nc.error("stride must be positive");
      if (w.kernel[i] <= 0 || w.dilations[i] <= 0)
        return nc.error("kernel and dilation must be positive");
      // Checked: kernel, dilation and stride come from the model.
      int64_t out = in / s + (in % s != 0);
      std::optional<int64_t> reach =
          checkedMul(w.kernel[i] - 1, w.dilations[i]);
      if (reach)
        reach = checkedAdd(*reach, (out - 1) * s); // (out - 1) * s < in
      if (reach)
        reach = checkedSub(*reach, in - 1);
      if (!reach)
        return nc.error(llvm::Twine("auto_pad ") + autoPad + ": the window (kernel " +
                        llvm::Twine(w.kernel[i]) + ", dilation " +
                        llvm::Twine(w.dilations[i]) + ") of spatial dim " +
                        llvm::Twine(i) + " overflows int64");
      int64_t total = std::max<int64_t>(0, *reach);
      int64_t small = total / 2, large = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : large;
      w.pads[spatial + i] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad != "NOTSET") {
    return nc.error("unknown auto_pad '" + autoPad + "'");
  }
  return w;
}

/// Inputs 0 and 1 and the optional input 2 (a null Value when absent).
llvm::Expected<std::array<Value, 3>> inputsWithOptionalThird(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  auto third = nc.optionalInput(2);
  if (!third)
    return third.takeError();
  return std::array<Value, 3>{(*in)[0], (*in)[1], *third};
}

llvm::Error convertConv(NodeContext &nc) {
  auto in = inputsWithOptionalThird(nc);
  if (!in)
    return in.takeError();
  Value bias = (*in)[2];
  auto input = shapeOf((*in)[0]), weight = shapeOf((*in)[1]);
  if (input.size() < 3 || weight.size() != input.size())
    return nc.error("expects input [N, C, spatial...] and a weight of the "
                    "same rank, got " +
                    shapeToString(input) + " and " + shapeToString(weight));
  SmallVector<int64_t> kernel = nc.attrInts("kernel_shape");
  if (kernel.empty())
    kernel.assign(weight.begin() + 2, weight.end());
  auto w = readWindow(nc, input, kernel);
  if (!w)
    return w.takeError();
  auto &b = nc.builder();
  return nc.output(nc.create<smp::ConvOp>(
      nc.placeholder(), (*in)[0], (*in)[1], bias,
      b.getDenseI64ArrayAttr(w->strides), b.getDenseI64ArrayAttr(w->pads),
      b.getDenseI64ArrayAttr(w->dilations),
      b.getI64IntegerAttr(nc.attrInt("group", 1))));
}

/// ConvTranspose: the input gradient of the convolution whose weight is
/// this node's ([C_in, C_out / group, k...]) and whose input is the output
/// [N, C_out, out...]: smp.conv_grad's input_grad (its gradient,
/// OpModels/Conv.cpp, is the convolution and its weight gradient), the
/// output's shape given by an expanded zero (its values are not read for
/// input_grad). out = stride (in - 1) + output_padding + (k - 1) dilation +
/// 1 - pads; output_shape or auto_pad SAME_* give the pads instead.
llvm::Error convertConvTranspose(NodeContext &nc) {
  auto in = inputsWithOptionalThird(nc);
  if (!in)
    return in.takeError();
  auto [x, weight, bias] = *in;
  SmallVector<int64_t> xs = shapeOf(x), ws = shapeOf(weight);
  if (xs.size() < 3 || ws.size() != xs.size())
    return nc.error("expects input [N, C, spatial...] and a weight of the "
                    "same rank, got " +
                    shapeToString(xs) + " and " + shapeToString(ws));
  size_t spatial = xs.size() - 2;
  int64_t group = nc.attrInt("group", 1);
  if (group <= 0 || ws[0] != xs[1] || xs[1] % group != 0)
    return nc.error("weight " + shapeToString(ws) +
                    " must be [C_in, C_out / group, k...] with C_in = " +
                    llvm::Twine(xs[1]) + " divisible by group " +
                    llvm::Twine(group));
  auto attrOr = [&](llvm::StringRef name, size_t n, int64_t def) {
    SmallVector<int64_t> v = nc.attrInts(name);
    if (v.empty())
      v.assign(n, def);
    return v;
  };
  SmallVector<int64_t> kernel = nc.attrInts("kernel_shape");
  SmallVector<int64_t> strides = attrOr("strides", spatial, 1),
                       dilations = attrOr("dilations", spatial, 1),
                       pads = attrOr("pads", 2 * spatial, 0),
                       outPad = attrOr("output_padding", spatial, 0),
                       outShape = nc.attrInts("output_shape");
  if (!kernel.empty() &&
      ArrayRef<int64_t>(kernel) != ArrayRef(ws).drop_front(2))
    return nc.error("kernel_shape " + shapeToString(kernel) +
                    " differs from the weight's kernel " +
                    shapeToString(ArrayRef(ws).drop_front(2)));
  if (outShape.size() > spatial) // given with N and C
    outShape.erase(outShape.begin(), outShape.end() - spatial);
  std::string autoPad = nc.attrString("auto_pad", "NOTSET");
  if (strides.size() != spatial || dilations.size() != spatial ||
      pads.size() != 2 * spatial || outPad.size() != spatial ||
      (!outShape.empty() && outShape.size() != spatial))
    return nc.error("strides/dilations/pads/output_padding/output_shape do "
                    "not match " +
                    llvm::Twine(spatial) + " spatial dims");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return nc.error("unknown auto_pad '" + autoPad + "'");
  SmallVector<int64_t> out{xs[0], ws[1] * group};
  for (size_t i = 0; i < spatial; ++i) {
    int64_t s = strides[i], d = dilations[i], in = xs[2 + i];
    if (s <= 0 || d <= 0)
      return nc.error("strides and dilations must be positive");
    if (outPad[i] < 0 || (outPad[i] >= s && outPad[i] >= d))
      return nc.error("output_padding " + llvm::Twine(outPad[i]) +
                      " must be smaller than the stride or the dilation");
    int64_t full = s * (in - 1) + outPad[i] + (ws[2 + i] - 1) * d + 1;
    if (autoPad == "VALID") {
      pads[i] = pads[spatial + i] = 0;
    } else if (!outShape.empty() || autoPad != "NOTSET") {
      // A larger output_shape than `full` adds rows at the end, as
      // output_padding does (onnxruntime's rule).
      int64_t target = outShape.empty() ? in * s : outShape[i];
      int64_t total = std::max<int64_t>(0, full - target);
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? total / 2 : total - total / 2;
      pads[spatial + i] = upper ? total - total / 2 : total / 2;
      full = std::max(full, target);
    }
    out.push_back(full - pads[i] - pads[spatial + i]);
    // The convolution of the output must give the input back.
    int64_t reach =
        out.back() + pads[i] + pads[spatial + i] - (ws[2 + i] - 1) * d - 1;
    if (pads[i] < 0 || pads[spatial + i] < 0 || out.back() <= 0 || reach < 0 ||
        reach / s + 1 != in)
      return nc.error("spatial dim " + llvm::Twine(i) + ": " + llvm::Twine(in) +
                      " rows give an output of " + llvm::Twine(out.back()) +
                      " with pads " + llvm::Twine(pads[i]) + ", " +
                      llvm::Twine(pads[spatial + i]) +
                      " (pads must not be negative, and output_shape at most "
                      "stride - 1 rows past the natural size)");
  }
  Type elt = tensorType(x).getElementType();
  auto &b = nc.builder();
  Value zeros = nc.filled(elt, out, 0.0);
  auto grads = nc.createMulti<smp::ConvGradOp>(
      zeros.getType(), weight.getType(), zeros, weight, x,
      b.getDenseI64ArrayAttr(strides), b.getDenseI64ArrayAttr(pads),
      b.getDenseI64ArrayAttr(dilations), b.getI64IntegerAttr(group));
  if (!grads)
    return grads.takeError();
  Value y = grads->front();
  if (!bias)
    return nc.output(y);
  SmallVector<int64_t> biasShape(out.size() - 1, 1);
  biasShape[0] = out[1];
  auto shaped = nc.reshape(bias, biasShape);
  if (!shaped)
    return shaped.takeError();
  return nc.output(nc.create<smp::AddOp>(nc.placeholder(), y, *shaped));
}

template <typename OpT> llvm::Error convertPool(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  if (nc.hasOutput(1))
    return nc.error("the Indices output is not supported");
  auto input = shapeOf(*x);
  if (input.size() < 3)
    return nc.error("expects input [N, C, spatial...], got " +
                    shapeToString(input));
  if (!nc.hasAttr("kernel_shape"))
    return nc.error("missing attribute 'kernel_shape'");
  auto w = readWindow(nc, input, nc.attrInts("kernel_shape"));
  if (!w)
    return w.takeError();
  if (nc.attrInt("storage_order", 0) != 0)
    return nc.error("storage_order=1 is not supported");
  auto &b = nc.builder();
  return nc.output(nc.create<OpT>(
      nc.placeholder(), *x, b.getDenseI64ArrayAttr(w->kernel),
      b.getDenseI64ArrayAttr(w->strides), b.getDenseI64ArrayAttr(w->pads),
      b.getDenseI64ArrayAttr(w->dilations), nc.attrInt("ceil_mode", 0) != 0,
      nc.attrInt("count_include_pad", 0) != 0));
}

template <typename OpT> llvm::Error convertGlobalPool(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  int64_t rank = tensorType(*x).getRank();
  if (rank < 3)
    return nc.error("expects input [N, C, spatial...]");
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  return nc.output(nc.create<OpT>(nc.placeholder(), *x,
                                  nc.builder().getDenseI64ArrayAttr(axes),
                                  true));
}

/// BatchNormalization. `@main` is the file's forward: an eval-mode node
/// normalises with its running statistics; a training-mode one
/// (training_mode=1, TorchScript's TrainingMode.TRAINING export) with the
/// batch's mean and biased variance, its optional outputs 1 and 2 being the
/// running statistics updated by ONNX's rule (`running * momentum + batch *
/// (1 - momentum)`, biased variance). Imported for training, every batch norm
/// keeps its running statistics as operands: smp-build-train-step trains it
/// in PyTorch's train() mode whatever mode the file has.
llvm::Error convertBatchNorm(NodeContext &nc) {
  auto in = nc.inputs(5);
  if (!in)
    return in.takeError();
  auto &v = *in;
  auto &b = nc.builder();
  float epsilon = nc.attrFloat("epsilon", 1e-5f);
  float momentum = nc.attrFloat("momentum", 0.9f);
  bool trainingMode = nc.attrInt("training_mode", 0) != 0;
  if (!trainingMode && (nc.hasOutput(1) || nc.hasOutput(2)))
    return nc.error("outputs running_mean and running_var need training_mode=1");
  auto bn = [&](Value mean, Value var) {
    return nc.create<smp::BatchNormOp>(nc.placeholder(), v[0], v[1], v[2], mean,
                                       var, b.getF32FloatAttr(epsilon),
                                       b.getF32FloatAttr(momentum));
  };
  if (!trainingMode || (nc.training() && !nc.hasOutput(1) && !nc.hasOutput(2)))
    return nc.output(bn(v[3], v[4]));
  // The batch's statistics over every dim but the channels (dim 1).
  auto xt = tensorType(v[0]);
  if (xt.getRank() < 2)
    return nc.error("expects input [N, C, ...]");
  SmallVector<int64_t> others, perChannel{xt.getDimSize(1)}, chan(xt.getRank(), 1);
  chan[1] = xt.getDimSize(1);
  for (int64_t d = 0; d < xt.getRank(); ++d)
    if (d != 1)
      others.push_back(d);
  auto axes = b.getDenseI64ArrayAttr(others);
  auto mean = nc.create<smp::ReduceMeanOp>(nc.placeholder(), v[0], axes, false);
  if (!mean)
    return mean.takeError();
  auto meanC = nc.reshape(*mean, chan);
  if (!meanC)
    return meanC.takeError();
  auto centred = nc.create<smp::SubOp>(nc.placeholder(), v[0], *meanC);
  if (!centred)
    return centred.takeError();
  auto square = nc.create<smp::MulOp>(nc.placeholder(), *centred, *centred);
  if (!square)
    return square.takeError();
  auto var = nc.create<smp::ReduceMeanOp>(nc.placeholder(), *square, axes, false);
  if (!var)
    return var.takeError();
  // Output i (1: mean, 2: variance): running * momentum + batch * (1 - m).
  for (unsigned i : {1u, 2u}) {
    if (!nc.hasOutput(i))
      continue;
    Value running = v[i + 2], batch = i == 1 ? *mean : *var;
    if (tensorType(running).getShape() != ArrayRef<int64_t>(perChannel))
      return nc.error("running statistics must be [C]");
    auto kept = nc.create<smp::MulOp>(nc.placeholder(), running,
                                      nc.scalarLike(running, momentum));
    if (!kept)
      return kept.takeError();
    auto fresh = nc.create<smp::MulOp>(nc.placeholder(), batch,
                                       nc.scalarLike(batch, 1.0f - momentum));
    if (!fresh)
      return fresh.takeError();
    if (auto err = nc.output(nc.create<smp::AddOp>(nc.placeholder(), *kept,
                                                   *fresh),
                             i))
      return err;
  }
  if (nc.training())
    return nc.output(bn(v[3], v[4]));
  nc.warnOnce("training-mode BatchNormalization",
              "training_mode=1 (and every other such node): this forward "
              "normalises with each batch's statistics (ONNX semantics), not "
              "the running ones; compile with --train to train it, and use "
              "an eval() export or smprun --save-onnx's trained file for "
              "inference");
  return nc.output(bn(*mean, *var));
}

/// The optional Mean and InvStdDev outputs of LayerNormalization, computed
/// from their definition over the normalised axes (keepdims shapes).
llvm::Error layerNormStatistics(NodeContext &nc, Value x, int64_t axis,
                                float epsilon) {
  // The statistics are of the stash type (fp32), computed from x cast to it.
  auto stashed = nc.castTo(x, nc.builder().getF32Type());
  if (!stashed)
    return stashed.takeError();
  x = *stashed;
  SmallVector<int64_t> axes;
  for (int64_t d = axis; d < tensorType(x).getRank(); ++d)
    axes.push_back(d);
  auto axesAttr = nc.builder().getDenseI64ArrayAttr(axes);
  auto mean = nc.create<smp::ReduceMeanOp>(nc.placeholder(), x, axesAttr, true);
  if (!mean)
    return mean.takeError();
  if (nc.hasOutput(1))
    nc.setOutput(1, *mean);
  if (!nc.hasOutput(2))
    return llvm::Error::success();
  auto centered = nc.create<smp::SubOp>(nc.placeholder(), x, *mean);
  if (!centered)
    return centered.takeError();
  auto square = nc.create<smp::MulOp>(nc.placeholder(), *centered, *centered);
  if (!square)
    return square.takeError();
  auto var = nc.create<smp::ReduceMeanOp>(nc.placeholder(), *square, axesAttr,
                                          true);
  if (!var)
    return var.takeError();
  auto shifted =
      nc.create<smp::AddOp>(nc.placeholder(), *var, nc.scalarLike(*var, epsilon));
  if (!shifted)
    return shifted.takeError();
  return nc.output(nc.create<smp::RsqrtOp>(*shifted), 2);
}

llvm::Error convertLayerNorm(NodeContext &nc) {
  auto in = inputsWithOptionalThird(nc);
  if (!in)
    return in.takeError();
  Value bias = (*in)[2];
  if (nc.attrInt("stash_type", 1) != 1)
    return nc.error("only stash_type=1 (fp32 statistics) is supported");
  int64_t rank = tensorType((*in)[0]).getRank();
  auto axis = nc.attrAxis(-1, rank);
  if (!axis)
    return axis.takeError();
  float epsilon = nc.attrFloat("epsilon", 1e-5f);
  auto &b = nc.builder();
  auto y = nc.create<smp::LayerNormOp>(nc.placeholder(), (*in)[0], (*in)[1],
                                       bias, b.getI64IntegerAttr(*axis),
                                       b.getF32FloatAttr(epsilon));
  if (auto err = nc.output(std::move(y)))
    return err;
  if (nc.hasOutput(1) || nc.hasOutput(2))
    return layerNormStatistics(nc, (*in)[0], *axis, epsilon);
  return llvm::Error::success();
}

/// RMSNormalization (opset 23: nn.RMSNorm, exported at opset 23) as
/// smp.rms_norm over the dims from `axis` on, flattened into one. A scale of
/// the normalized shape (or one element) is flattened with them; another
/// broadcastable one multiplies the unit-scaled result.
llvm::Error convertRmsNorm(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  auto [x, scale] = std::pair{(*in)[0], (*in)[1]};
  if (nc.attrInt("stash_type", 1) != 1)
    return nc.error("only stash_type=1 (fp32 statistics) is supported");
  SmallVector<int64_t> shape = shapeOf(x);
  auto axis = nc.attrAxis(-1, shape.size());
  if (!axis)
    return axis.takeError();
  ArrayRef<int64_t> normShape = ArrayRef<int64_t>(shape).drop_front(*axis);
  int64_t n = std::accumulate(normShape.begin(), normShape.end(), int64_t(1),
                              std::multiplies<int64_t>());
  SmallVector<int64_t> scaleShape = shapeOf(scale);
  auto broadcast = broadcastShapes(normShape, scaleShape);
  if (!broadcast || ArrayRef<int64_t>(*broadcast) != normShape)
    return nc.error("scale shape " + shapeToString(scaleShape) +
                    " does not broadcast to the normalized shape " +
                    shapeToString(normShape));
  // Broadcasting to the normalized shape, a scale of n elements is that
  // shape (leading 1s aside).
  int64_t scaleElements = tensorType(scale).getNumElements();
  bool flattened = scaleElements == 1 || scaleElements == n;
  auto flatScale = flattened ? nc.reshape(scale, {scaleElements})
                             : llvm::Expected<Value>(nc.filled(
                                   tensorType(x).getElementType(), {n}, 1.0));
  if (!flatScale)
    return flatScale.takeError();
  SmallVector<int64_t> flat(shape.begin(), shape.begin() + *axis);
  flat.push_back(n);
  auto flatX = nc.reshape(x, flat);
  if (!flatX)
    return flatX.takeError();
  auto y = nc.create<smp::RmsNormOp>(
      nc.placeholder(), *flatX, *flatScale,
      nc.builder().getF32FloatAttr(nc.attrFloat("epsilon", 1e-5f)));
  if (!y)
    return y.takeError();
  auto back = nc.reshape(*y, shape);
  if (!back || flattened)
    return nc.output(std::move(back));
  return nc.output(nc.create<smp::MulOp>(nc.placeholder(), *back, scale));
}

/// ONNX puts classes in dim 1 ([N, C, d1...]); smp.cross_entropy wants them
/// last, so move dim 1 to the end first.
llvm::Error convertSoftmaxCrossEntropy(NodeContext &nc) {
  auto in = inputsWithOptionalThird(nc);
  if (!in)
    return in.takeError();
  auto [scores, labels, weights] = *in;
  int64_t rank = tensorType(scores).getRank();
  if (rank < 2)
    return nc.error("scores must be [N, C, ...]");
  Value logits = scores;
  if (rank > 2) {
    SmallVector<int64_t> perm{0};
    for (int64_t d = 2; d < rank; ++d)
      perm.push_back(d);
    perm.push_back(1);
    auto moved = nc.create<smp::TransposeOp>(
        nc.placeholder(), scores, nc.builder().getDenseI64ArrayAttr(perm));
    if (!moved)
      return moved.takeError();
    logits = *moved;
  }
  std::string red = nc.attrString("reduction", "mean");
  smp::Reduction reduction;
  if (red == "mean")
    reduction = smp::Reduction::mean;
  else if (red == "sum")
    reduction = smp::Reduction::sum;
  else if (red == "none")
    reduction = smp::Reduction::none;
  else
    return nc.error("unknown reduction '" + red + "'");
  int64_t ignore = nc.hasAttr("ignore_index")
                       ? nc.attrInt("ignore_index", 0)
                       : std::numeric_limits<int64_t>::min();
  auto loss =
      nc.create<smp::CrossEntropyOp>(nc.placeholder(), logits, labels, weights,
                                     ignore, reduction, mlir::IntegerAttr());
  if (auto err = nc.output(std::move(loss)))
    return err;
  if (nc.hasOutput(1)) {
    auto logp = nc.create<smp::LogSoftmaxOp>(scores,
                                             nc.builder().getI64IntegerAttr(1));
    if (auto err = nc.output(std::move(logp), 1))
      return err;
  }
  return llvm::Error::success();
}

/// NegativeLogLikelihoodLoss(input [N, C, d...], target [N, d...], weight
/// [C]?): loss = -input[n, target, d...] * weight[target], 0 where the
/// target is ignore_index; `mean` divides the sum by the sum of those
/// weights (the count of targets not ignored), as PyTorch's nll_loss.
/// Composed of a GatherElements along the classes and a Gather of the
/// weights (so a mean is a ratio of two sums, which dp can split).
llvm::Error convertNegativeLogLikelihood(NodeContext &nc) {
  auto in = inputsWithOptionalThird(nc);
  if (!in)
    return in.takeError();
  auto [input, target, weight] = *in;
  auto shape = shapeOf(input);
  SmallVector<int64_t> targetShape(shapeOf(target));
  SmallVector<int64_t> expected(shape);
  if (shape.size() >= 2)
    expected.erase(expected.begin() + 1);
  if (shape.size() < 2 || targetShape != expected ||
      !isa<IntegerType>(tensorType(target).getElementType()))
    return nc.error("expects input [N, C, d...] and an integer target [N, "
                    "d...], got " +
                    shapeToString(shape) + " and " +
                    shapeToString(targetShape));
  std::string red = nc.attrString("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none")
    return nc.error("unknown reduction '" + red + "'");
  auto &b = nc.builder();
  Chain c(nc);
  Value idx = target, ignored;
  if (nc.hasAttr("ignore_index")) {
    ignored = c.binary<smp::EqualOp>(
        target, c.scalar(target, nc.attrInt("ignore_index", 0)));
    idx = c.where(ignored, c.scalar(target, 0), target);
  }
  // A negative target that is not ignored is out of range (PyTorch stops):
  // moved to C, which the gathers refuse at run time, rather than wrapped.
  idx = c.where(c.binary<smp::LessOp>(idx, c.scalar(idx, 0)),
                c.scalar(idx, shape[1]), idx);
  SmallVector<int64_t> column(targetShape);
  column.insert(column.begin() + 1, 1);
  Value picked =
      c.reshape(c.make<smp::GatherElementsOp>(input, c.reshape(idx, column),
                                              b.getI64IntegerAttr(1)),
                targetShape);
  Value w = weight ? c.make<smp::GatherOp>(weight, idx, b.getI64IntegerAttr(0),
                                           IntegerAttr())
                   : Value();
  if (ignored)
    w = c.where(ignored, c.scalar(picked, 0), w ? w : c.scalar(picked, 1));
  Value loss = c.unary<smp::NegOp>(picked);
  if (w)
    loss = c.binary<smp::MulOp>(loss, w);
  if (red == "none")
    return c.finish(loss);
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < static_cast<int64_t>(targetShape.size()); ++d)
    axes.push_back(d);
  auto all = b.getDenseI64ArrayAttr(axes);
  if (red == "mean" && !w)
    return c.finish(c.make<smp::ReduceMeanOp>(loss, all, false));
  Value sum = c.make<smp::ReduceSumOp>(loss, all, false);
  if (red == "sum")
    return c.finish(sum);
  Value count = c.make<smp::ReduceSumOp>(w, all, false);
  return c.finish(c.binary<smp::DivOp>(sum, count));
}

} // namespace

void registerNNConverters(ConverterTable &t) {
  t["Conv"] = convertConv;
  t["ConvTranspose"] = convertConvTranspose;
  t["MaxPool"] = convertPool<smp::MaxPoolOp>;
  t["AveragePool"] = convertPool<smp::AvgPoolOp>;
  t["GlobalAveragePool"] = convertGlobalPool<smp::ReduceMeanOp>;
  t["GlobalMaxPool"] = convertGlobalPool<smp::ReduceMaxOp>;
  t["BatchNormalization"] = convertBatchNorm;
  t["LayerNormalization"] = convertLayerNorm;
  t["RMSNormalization"] = convertRmsNorm;
  t["SoftmaxCrossEntropyLoss"] = convertSoftmaxCrossEntropy;
  t["NegativeLogLikelihoodLoss"] = convertNegativeLogLikelihood;
}

} // namespace smp::onnx_frontend
