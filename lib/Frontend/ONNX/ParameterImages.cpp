//===- ParameterImages.cpp - Folds computed from a kept parameter ---------===//
//
// The dynamo optimiser folds whatever it can compute at export: a weight
// scaled, cloned or negated in the forward (`F.linear(x, self.fc.weight *
// 0.5)`) becomes a constant initializer (`val_3`, the scaled transpose)
// that no parameter names, read by a call whose metadata passes the folded
// value (`aten.linear(%x, %mul)`), not a parameter. Where the parameter is
// gone from the file the fold rules refuse it (FoldedParameters.cpp); where
// it is still read elsewhere (fc's own call) nothing is gone, and the fold
// looked like a mask folded from constants: frozen, 13% off PyTorch's
// gradient norm at step 1, silently.
//
// Such a fold is told by its values: a strictly monotone function of a
// parameter's (a scale, a shift, exp, a negation), in the parameter's order
// or, for a matrix, transposed. For a parameter of distinct values this
// happens by chance with probability about 2 / n! for n elements: a mask,
// a rotary table or a constant is no such image.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"
#include "TensorData.h"

#include "llvm/ADT/STLExtras.h"

#include <cstring>
#include <numeric>

namespace smp::onnx_frontend {
namespace {

/// A float tensor's shape and values (f32 and f64 only), or nullopt.
struct Values {
  std::vector<int64_t> shape;
  std::vector<double> v;
};

std::optional<Values> readValues(const onnx::TensorProto &t,
                                 mlir::MLIRContext *ctx,
                                 llvm::StringRef modelDir) {
  int32_t dt = t.data_type();
  if (dt != onnx::TensorProto::FLOAT && dt != onnx::TensorProto::DOUBLE)
    return std::nullopt;
  auto type = checkTensor(ctx, t, modelDir);
  if (!type) {
    llvm::consumeError(type.takeError());
    return std::nullopt;
  }
  auto bytes = readTensorBytes(t, *type, modelDir);
  if (!bytes) {
    llvm::consumeError(bytes.takeError());
    return std::nullopt;
  }
  Values out;
  out.shape.assign(type->getShape().begin(), type->getShape().end());
  size_t n = static_cast<size_t>(type->getNumElements());
  out.v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (dt == onnx::TensorProto::FLOAT) {
      float f;
      std::memcpy(&f, bytes->data() + i * sizeof f, sizeof f);
      out.v[i] = f;
    } else {
      std::memcpy(&out.v[i], bytes->data() + i * sizeof(double),
                  sizeof(double));
    }
  }
  return out;
}

/// The elements of `t` by its dims (no data read).
int64_t elementCount(const onnx::TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims())
    n *= d;
  return n;
}

/// Whether `fold` is a strictly monotone function of `param`'s values taken
/// in `order` (fold[k] is the image of param[order[k]]): sorted by the
/// parameter's values, which must be distinct, the fold's rise or fall.
bool monotoneImage(const std::vector<double> &param,
                   const std::vector<double> &fold,
                   const std::vector<size_t> &order) {
  std::vector<size_t> byParam(order.size());
  std::iota(byParam.begin(), byParam.end(), 0);
  llvm::sort(byParam, [&](size_t a, size_t b) {
    return param[order[a]] < param[order[b]];
  });
  bool up = true, down = true;
  for (size_t k = 1; k < byParam.size(); ++k) {
    if (!(param[order[byParam[k - 1]]] < param[order[byParam[k]]]))
      return false; // equal parameter values: no order to compare
    double a = fold[byParam[k - 1]], b = fold[byParam[k]];
    up &= a < b;
    down &= a > b;
  }
  return up || down;
}

/// How `fold` is an image of `param`: "in its order" or "in its
/// transposed order" (nullopt if neither).
std::optional<std::string> imageOf(const Values &param, const Values &fold) {
  size_t n = param.v.size();
  if (n < 8 || fold.v.size() != n)
    return std::nullopt;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (monotoneImage(param.v, fold.v, order))
    return std::string("in its order");
  if (param.shape.size() != 2)
    return std::nullopt;
  // fold read as the [cols, rows] transpose of a [rows, cols] parameter.
  size_t rows = param.shape[0], cols = param.shape[1];
  for (size_t c = 0; c < cols; ++c)
    for (size_t r = 0; r < rows; ++r)
      order[c * rows + r] = r * cols + c;
  if (monotoneImage(param.v, fold.v, order))
    return std::string("in its transposed order");
  return std::nullopt;
}

/// `init` as the message names it: a fold with the node that reads it and
/// the PyTorch parameters that node's call takes (`'val_0' (read by
/// node_MatMul_1, whose call takes fc.bias, fc.weight)`).
std::string describeParameter(const onnx::GraphProto &g,
                              const std::string &init,
                              const std::map<std::string, std::string> &sig) {
  for (const auto &n : g.node())
    if (llvm::is_contained(n.input(), init) &&
        llvm::none_of(sig, [&](const auto &s) { return s.second == init; })) {
      std::string params = torchCallParameters(n, sig);
      if (!params.empty())
        return "'" + init + "' (read by " + n.name() + ", whose call takes " +
               params + ")";
    }
  return "'" + init + "'";
}

} // namespace

llvm::Error
refuseFoldedParameterImages(const onnx::GraphProto &g, llvm::StringRef path,
                            const std::map<std::string, std::string> &sig,
                            mlir::MLIRContext *ctx, llvm::StringRef modelDir) {
  if (sig.empty())
    return llvm::Error::success();
  std::set<std::string> targets;
  for (const auto &[var, target] : sig)
    targets.insert(target);
  std::set<std::string> folds = dynamoConstantFolds(g);
  // The folds by element count: a parameter is read only when one has its
  // size (reading every parameter would hold the model's weights again, in
  // double).
  std::map<int64_t, std::vector<const onnx::TensorProto *>> foldsBySize;
  for (const auto &t : g.initializer())
    if (folds.count(t.name()) && !targets.count(t.name()))
      foldsBySize[elementCount(t)].push_back(&t);
  if (foldsBySize.empty())
    return llvm::Error::success();
  // The parameters in the file: under their names, or folded and read by
  // their calls (a Linear's transposed weight, `val_0`).
  std::vector<std::string> names;
  for (const auto &t : g.initializer())
    names.push_back(t.name());
  std::set<std::string> paramReads = readByParameterCalls(g, names);
  std::map<std::string, std::optional<Values>> foldValues;
  for (const auto &p : g.initializer()) {
    auto same = foldsBySize.find(elementCount(p));
    if (same == foldsBySize.end() || folds.count(p.name()) ||
        !(targets.count(p.name()) || paramReads.count(p.name())))
      continue;
    auto param = readValues(p, ctx, modelDir);
    if (!param)
      continue;
    for (const onnx::TensorProto *t : same->second) {
      auto [it, fresh] = foldValues.try_emplace(t->name());
      if (fresh)
        it->second = readValues(*t, ctx, modelDir);
      if (!it->second)
        continue;
      auto how = imageOf(*param, *it->second);
      if (!how)
        continue;
      std::string what = describeParameter(g, p.name(), sig);
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": initializer '" + t->name() +
              "' holds a function of parameter " + what +
              ": each value a strictly monotone function of one of its "
              "values, " +
              *how +
              ", as the exporter's optimiser computes and folds a weight "
              "scaled, negated or cloned in the forward (`F.linear(x, w * "
              "0.5)`); no node that reads it takes a parameter, so smp "
              "would freeze it where PyTorch trains " +
              what +
              " through it: re-export with torch.onnx.export(..., "
              "optimize=False)");
    }
  }
  return llvm::Error::success();
}

} // namespace smp::onnx_frontend
