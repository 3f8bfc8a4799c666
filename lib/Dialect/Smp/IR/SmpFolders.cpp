//===- SmpFolders.cpp - Constant folding of smp ops -----------------------===//
//
// Folds ops whose operands are constants. This is how the ONNX frontend turns
// shape-computation subgraphs (Shape/Gather/Concat/...) into constants once
// the symbolic dims are bound, and how `canonicalize` cleans smp IR.
//
// Splat operands fold up to kMaxConstantBytes (the result stays a splat, but
// the artifact writes it out); other constants fold only up to kFoldLimit
// elements so that the IR stays small.
//
// Integer arithmetic is checked: a result that overflows int64 or the
// result's element type (INT64_MIN / -1, INT32_MAX + 1 in i32, ...) is not
// folded, as integer division by zero is not: the op stays and the runtime
// kernel computes it (wrapping, as onnxruntime does), rather than the folder
// silently writing a value of its own choosing.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Support/CheckedMath.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>

using namespace mlir;
using namespace smp;

namespace {

constexpr int64_t kFoldLimit = int64_t(1) << 16;

/// A host copy of a constant: doubles for float element types, int64 for
/// integers (i1 as 0/1). A splat holds one value.
struct Host {
  RankedTensorType type;
  bool isFloat = false;
  bool splat = false;
  SmallVector<double> f;
  SmallVector<int64_t> i;

  double getF(int64_t k) const {
    int64_t idx = splat ? 0 : k;
    return isFloat ? f[idx] : static_cast<double>(i[idx]);
  }
  int64_t getI(int64_t k) const {
    int64_t idx = splat ? 0 : k;
    return isFloat ? static_cast<int64_t>(f[idx]) : i[idx];
  }
};

std::optional<Host> readConst(Attribute attr) {
  auto dense = dyn_cast_if_present<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(dense.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  Host h;
  h.type = type;
  h.splat = dense.isSplat();
  if (!h.splat && type.getNumElements() > kFoldLimit)
    return std::nullopt;
  Type elt = type.getElementType();
  if (isa<FloatType>(elt)) {
    h.isFloat = true;
    if (h.splat)
      h.f.push_back(dense.getSplatValue<APFloat>().convertToDouble());
    else
      for (const APFloat &v : dense.getValues<APFloat>())
        h.f.push_back(v.convertToDouble());
    return h;
  }
  auto intType = dyn_cast<IntegerType>(elt);
  if (!intType || intType.getWidth() > 64)
    return std::nullopt;
  bool isBool = intType.getWidth() == 1;
  auto toInt = [&](const APInt &v) {
    return isBool || intType.isUnsigned() ? static_cast<int64_t>(v.getZExtValue())
                                          : v.getSExtValue();
  };
  if (h.splat)
    h.i.push_back(toInt(dense.getSplatValue<APInt>()));
  else
    for (const APInt &v : dense.getValues<APInt>())
      h.i.push_back(toInt(v));
  return h;
}

/// Builds a constant of `type` whose k-th element is `get(k)` (a double for
/// float result types, an int64 otherwise). `splat` builds one value.
template <typename GetF, typename GetI>
Attribute makeConst(RankedTensorType type, bool splat, GetF getF, GetI getI) {
  if (!type.hasStaticShape())
    return {};
  int64_t n = splat ? 1 : type.getNumElements();
  if (!splat && n > kFoldLimit)
    return {};
  // Nor a splat the artifact would have to write out over the limit: the
  // op stays (docs/threat-model.md, sizes and limits).
  auto bytes = checkedByteSize(type.getShape(),
                               type.getElementType().getIntOrFloatBitWidth());
  if (!bytes || *bytes > kMaxConstantBytes)
    return {};
  Type elt = type.getElementType();
  if (auto ft = dyn_cast<FloatType>(elt)) {
    SmallVector<APFloat> vals;
    vals.reserve(n);
    for (int64_t k = 0; k < n; ++k) {
      APFloat v(getF(k));
      bool loses;
      v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &loses);
      vals.push_back(v);
    }
    return splat ? DenseElementsAttr::get(type, vals.front())
                 : DenseElementsAttr::get(type, vals);
  }
  auto it = dyn_cast<IntegerType>(elt);
  if (!it || it.getWidth() > 64)
    return {};
  SmallVector<APInt> vals;
  vals.reserve(n);
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = getI(k);
    // Wraps to narrower types on purpose (Cast); arithmetic folds check
    // the range first (fitsElementType).
    vals.push_back(it.getWidth() == 1
                       ? APInt(1, v != 0)
                       : APInt(it.getWidth(), static_cast<uint64_t>(v),
                               /*isSigned=*/true, /*implicitTrunc=*/true));
  }
  return splat ? DenseElementsAttr::get(type, vals.front())
               : DenseElementsAttr::get(type, vals);
}

/// For every element of `result` (row-major), the flat index of the operand
/// element that broadcasts onto it.
SmallVector<int64_t> broadcastMap(ArrayRef<int64_t> result,
                                  ArrayRef<int64_t> operand) {
  int64_t n = 1;
  for (int64_t d : result)
    n *= d;
  size_t rank = result.size(), off = rank - operand.size();
  SmallVector<int64_t> strides(rank, 0);
  int64_t s = 1;
  for (size_t d = rank; d-- > off;) {
    int64_t od = operand[d - off];
    strides[d] = od == 1 ? 0 : s;
    s *= od;
  }
  SmallVector<int64_t> map(n), idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d)
      o += idx[d] * strides[d];
    map[k] = o;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < result[d])
        break;
      idx[d] = 0;
    }
  }
  return map;
}

/// Whether `v` is a value of integer element type `elt` (i1 takes any value
/// as true/false; 64-bit types take any int64).
bool fitsElementType(Type elt, int64_t v) {
  auto it = dyn_cast<IntegerType>(elt);
  if (!it || it.getWidth() == 1 || it.getWidth() >= 64)
    return true;
  unsigned w = it.getWidth();
  if (it.isUnsigned())
    return v >= 0 && v < (int64_t(1) << w);
  return v >= -(int64_t(1) << (w - 1)) && v < (int64_t(1) << (w - 1));
}

/// Whether a double converts to int64 without undefined behaviour.
bool fitsInt64(double v) {
  return std::isfinite(v) && v >= -0x1p63 && v < 0x1p63;
}

RankedTensorType resultType(Operation *op, unsigned i = 0) {
  return cast<RankedTensorType>(op->getResult(i).getType());
}

/// Elementwise fold over any number of broadcast operands. `ff` computes in
/// double (float operands), `fi` in int64 (integer operands); either returns
/// std::nullopt to refuse (e.g. integer division by zero). With
/// `checkRange`, an integer result that does not fit the result's element
/// type is refused too (Cast passes false: it wraps by definition).
template <typename FF, typename FI>
OpFoldResult foldElementwise(Operation *op, ArrayRef<Attribute> operands,
                             FF ff, FI fi, bool checkRange = true) {
  SmallVector<Host> hosts;
  for (Attribute a : operands) {
    auto h = readConst(a);
    if (!h)
      return {};
    hosts.push_back(std::move(*h));
  }
  RankedTensorType type = resultType(op);
  bool allSplat = llvm::all_of(hosts, [](const Host &h) { return h.splat; });
  if (!allSplat && type.getNumElements() > kFoldLimit)
    return {};
  // The computation domain is that of the last operand (where's condition
  // is i1, its values are float or int).
  bool floatDomain = hosts.back().isFloat;
  Type resultElt = type.getElementType();
  bool intResult = isa<IntegerType>(resultElt);
  int64_t n = allSplat ? 1 : type.getNumElements();
  SmallVector<SmallVector<int64_t>> maps;
  for (const Host &h : hosts)
    maps.push_back(h.splat ? SmallVector<int64_t>()
                           : broadcastMap(type.getShape(),
                                          h.type.getShape()));
  SmallVector<double> fres(n);
  SmallVector<int64_t> ires(n);
  SmallVector<double> fargs(hosts.size());
  SmallVector<int64_t> iargs(hosts.size());
  for (int64_t k = 0; k < n; ++k) {
    for (size_t a = 0; a < hosts.size(); ++a) {
      int64_t idx = hosts[a].splat ? 0 : maps[a][k];
      // Only the domain's values: a float operand read as int64 could be
      // out of range (undefined behaviour).
      if (floatDomain)
        fargs[a] = hosts[a].getF(idx);
      else
        iargs[a] = hosts[a].getI(idx);
    }
    if (floatDomain) {
      std::optional<double> v = ff(fargs);
      if (!v)
        return {};
      if (intResult && !fitsInt64(*v))
        return {};
      fres[k] = *v;
      ires[k] = intResult ? static_cast<int64_t>(*v) : 0;
      if (intResult && checkRange && !fitsElementType(resultElt, ires[k]))
        return {};
    } else {
      std::optional<int64_t> v = fi(iargs);
      if (!v || (checkRange && !fitsElementType(resultElt, *v)))
        return {};
      ires[k] = *v;
      fres[k] = static_cast<double>(*v);
    }
  }
  return makeConst(
      type, allSplat, [&](int64_t k) { return fres[k]; },
      [&](int64_t k) { return ires[k]; });
}

template <typename FF, typename FI>
OpFoldResult foldBinary(Operation *op, ArrayRef<Attribute> operands, FF ff,
                        FI fi) {
  return foldElementwise(
      op, operands,
      [&](ArrayRef<double> a) -> std::optional<double> {
        return ff(a[0], a[1]);
      },
      [&](ArrayRef<int64_t> a) -> std::optional<int64_t> {
        return fi(a[0], a[1]);
      });
}

template <typename FF, typename FI>
OpFoldResult foldUnary(Operation *op, ArrayRef<Attribute> operands, FF ff,
                       FI fi, bool checkRange = true) {
  return foldElementwise(
      op, operands,
      [&](ArrayRef<double> a) -> std::optional<double> { return ff(a[0]); },
      [&](ArrayRef<int64_t> a) -> std::optional<int64_t> { return fi(a[0]); },
      checkRange);
}

std::optional<int64_t> noInt(int64_t) { return std::nullopt; }

/// b^e, or std::nullopt when it overflows int64.
std::optional<int64_t> ipow(int64_t b, int64_t e) {
  // A negative exponent gives 1 / b^|e| truncated toward zero: +-1 for
  // |b| = 1, else 0 (division by zero for b = 0 also folds to 0, as
  // onnxruntime's integer pow does).
  if (e < 0)
    return b == 1 ? 1 : b == -1 ? (e % 2 ? -1 : 1) : 0;
  // |b| <= 1 never overflows (and must not loop e times).
  if (b == 0)
    return e == 0 ? 1 : 0;
  if (b == 1)
    return 1;
  if (b == -1)
    return e % 2 ? -1 : 1;
  // |b| >= 2 overflows within 63 multiplications.
  int64_t r = 1;
  while (e--) {
    std::optional<int64_t> next = llvm::checkedMul(r, b);
    if (!next)
      return std::nullopt;
    r = *next;
  }
  return r;
}

/// Maps each result element of a pure data-movement op to an input element.
OpFoldResult foldGatherLike(Operation *op, Attribute input,
                            function_ref<int64_t(int64_t)> sourceIndex) {
  auto h = readConst(input);
  if (!h)
    return {};
  RankedTensorType type = resultType(op);
  if (h->splat)
    return makeConst(
        type, true, [&](int64_t) { return h->getF(0); },
        [&](int64_t) { return h->getI(0); });
  return makeConst(
      type, false, [&](int64_t k) { return h->getF(sourceIndex(k)); },
      [&](int64_t k) { return h->getI(sourceIndex(k)); });
}

/// Whether an op that makes more elements than it reads (expand, tile)
/// would fold into a result over kFoldLimit that is not a splat.
bool growsPastFoldLimit(Operation *op, Attribute input) {
  if (resultType(op).getNumElements() <= kFoldLimit)
    return false;
  auto h = readConst(input);
  return !h || !h->splat;
}

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// Multi-index of flat index k in `shape`.
SmallVector<int64_t> unflatten(int64_t k, ArrayRef<int64_t> shape) {
  SmallVector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  return idx;
}

/// foldGatherLike for an op (transpose, tile, slice) whose result index i
/// along dim d reads its input (operand 0) at `position(d, i)`: the pair
/// (input dim, index along it).
template <typename Fn>
OpFoldResult foldIndexMap(Operation *op, Attribute input, Fn position) {
  auto inStrides = rowMajorStrides(
      cast<RankedTensorType>(op->getOperand(0).getType()).getShape());
  auto outShape = resultType(op).getShape();
  return foldGatherLike(op, input, [&](int64_t k) {
    auto idx = unflatten(k, outShape);
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      auto [inDim, i] = position(d, idx[d]);
      src += i * inStrides[inDim];
    }
    return src;
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

#define SMP_FLOAT_UNARY_FOLD(OP, EXPR)                                         \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldUnary(                                                          \
        *this, adaptor.getOperands(), [](double x) { return EXPR; }, noInt);   \
  }

SMP_FLOAT_UNARY_FOLD(ExpOp, std::exp(x))
SMP_FLOAT_UNARY_FOLD(LogOp, std::log(x))
SMP_FLOAT_UNARY_FOLD(SqrtOp, std::sqrt(x))
SMP_FLOAT_UNARY_FOLD(RsqrtOp, 1.0 / std::sqrt(x))
SMP_FLOAT_UNARY_FOLD(ReciprocalOp, 1.0 / x)
SMP_FLOAT_UNARY_FOLD(TanhOp, std::tanh(x))
SMP_FLOAT_UNARY_FOLD(ErfOp, std::erf(x))
SMP_FLOAT_UNARY_FOLD(SigmoidOp, 1.0 / (1.0 + std::exp(-x)))
SMP_FLOAT_UNARY_FOLD(SiluOp, x / (1.0 + std::exp(-x)))
SMP_FLOAT_UNARY_FOLD(SinOp, std::sin(x))
SMP_FLOAT_UNARY_FOLD(CosOp, std::cos(x))

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  return foldUnary(
      *this, adaptor.getOperands(), [](double x) { return -x; },
      [](int64_t x) -> std::optional<int64_t> {
        return llvm::checkedSub<int64_t>(0, x);
      });
}
OpFoldResult AbsOp::fold(FoldAdaptor adaptor) {
  return foldUnary(
      *this, adaptor.getOperands(), [](double x) { return std::fabs(x); },
      [](int64_t x) -> std::optional<int64_t> {
        return x < 0 ? llvm::checkedSub<int64_t>(0, x) : std::optional(x);
      });
}
OpFoldResult ReluOp::fold(FoldAdaptor adaptor) {
  return foldUnary(
      *this, adaptor.getOperands(), [](double x) { return x > 0 ? x : 0.0; },
      [](int64_t x) -> std::optional<int64_t> { return x > 0 ? x : 0; });
}
OpFoldResult NotOp::fold(FoldAdaptor adaptor) {
  return foldUnary(
      *this, adaptor.getOperands(), [](double x) { return x == 0 ? 1.0 : 0.0; },
      [](int64_t x) -> std::optional<int64_t> { return x == 0 ? 1 : 0; });
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  // A copy marked smp.no_grad stops a gradient (PyTorch's detach) until
  // smp-build-gradients has built them and removes it.
  if (getInput().getType() == getType())
    return (*this)->hasAttr(SmpDialect::kNoGradAttr) ? OpFoldResult()
                                                     : getInput();
  Type to = getType().getElementType();
  bool toBool = to.isInteger(1);
  return foldUnary(
      *this, adaptor.getOperands(),
      [&](double x) -> std::optional<double> {
        if (isa<IntegerType>(to) && !std::isfinite(x))
          return std::nullopt;
        if (toBool)
          return x != 0 ? 1.0 : 0.0;
        return isa<IntegerType>(to) ? std::trunc(x) : x;
      },
      [&](int64_t x) -> std::optional<int64_t> {
        return toBool ? (x != 0 ? 1 : 0) : x;
      },
      /*checkRange=*/false);
}

//===----------------------------------------------------------------------===//
// Binary and where
//===----------------------------------------------------------------------===//

#define SMP_BINARY_FOLD(OP, FEXPR, IEXPR)                                      \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldBinary(                                                         \
        *this, adaptor.getOperands(),                                          \
        [](double a, double b) -> double { return FEXPR; },                    \
        [](int64_t a, int64_t b) -> std::optional<int64_t> { return IEXPR; }); \
  }

SMP_BINARY_FOLD(AddOp, a + b, llvm::checkedAdd(a, b))
SMP_BINARY_FOLD(SubOp, a - b, llvm::checkedSub(a, b))
SMP_BINARY_FOLD(MulOp, a *b, llvm::checkedMul(a, b))
// Division by zero and INT64_MIN / -1 (which overflows) are not folded.
SMP_BINARY_FOLD(DivOp, a / b,
                b == 0 || (a == INT64_MIN && b == -1) ? std::optional<int64_t>()
                                                      : std::optional(a / b))
SMP_BINARY_FOLD(PowOp, std::pow(a, b), ipow(a, b))
SMP_BINARY_FOLD(MaxOp, std::max(a, b), std::max(a, b))
SMP_BINARY_FOLD(MinOp, std::min(a, b), std::min(a, b))
SMP_BINARY_FOLD(EqualOp, a == b ? 1.0 : 0.0, a == b ? 1 : 0)
SMP_BINARY_FOLD(LessOp, a < b ? 1.0 : 0.0, a < b ? 1 : 0)
SMP_BINARY_FOLD(GreaterOp, a > b ? 1.0 : 0.0, a > b ? 1 : 0)
SMP_BINARY_FOLD(AndOp, (a != 0 && b != 0) ? 1.0 : 0.0, (a && b) ? 1 : 0)
SMP_BINARY_FOLD(OrOp, (a != 0 || b != 0) ? 1.0 : 0.0, (a || b) ? 1 : 0)

/// Floor (sign of b) or C (sign of a) remainder; integer remainders by zero
/// are left for the runtime to report, as division by zero is.
OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  bool cmod = getFmod();
  bool isUnsigned = getType().getElementType().isUnsignedInteger();
  return foldBinary(
      *this, adaptor.getOperands(),
      [cmod](double a, double b) -> double {
        double r = std::fmod(a, b);
        if (!cmod && r != 0 && ((r < 0) != (b < 0)))
          r += b;
        return r;
      },
      [cmod, isUnsigned](int64_t a, int64_t b) -> std::optional<int64_t> {
        // Unsigned values above INT64_MAX read as negative: the kernel's.
        if (b == 0 || (isUnsigned && (a < 0 || b < 0)))
          return std::nullopt;
        if (b == -1) // INT64_MIN % -1 overflows in C; the remainder is 0
          return 0;
        int64_t r = a % b;
        if (!cmod && r != 0 && ((r < 0) != (b < 0)))
          r += b;
        return r;
      });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  return foldElementwise(
      *this, adaptor.getOperands(),
      [](ArrayRef<double> a) -> std::optional<double> {
        return a[0] != 0 ? a[1] : a[2];
      },
      [](ArrayRef<int64_t> a) -> std::optional<int64_t> {
        return a[0] != 0 ? a[1] : a[2];
      });
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  return foldIndexMap(*this, adaptor.getInput(), [&](size_t d, int64_t i) {
    return std::make_pair(perm[d], i);
  });
}

LogicalResult SplitOp::fold(FoldAdaptor adaptor,
                            SmallVectorImpl<OpFoldResult> &results) {
  auto h = readConst(adaptor.getInput());
  RankedTensorType in = getInput().getType();
  if (!h || (!h->splat && in.getNumElements() > kFoldLimit))
    return failure();
  int64_t axis = *normalizeAxis(static_cast<int64_t>(getAxis()), in.getRank());
  auto inStrides = rowMajorStrides(in.getShape());
  SmallVector<OpFoldResult> parts;
  for (int64_t i = 0, offset = 0, n = getNumResults(); i < n; ++i) {
    auto shape = resultType(*this, i).getShape();
    // Piece i's element k: the input's at the same index, shifted along the
    // axis by the pieces before it.
    auto source = [&](int64_t k) {
      auto idx = unflatten(k, shape);
      idx[axis] += offset;
      int64_t src = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        src += idx[d] * inStrides[d];
      return h->splat ? 0 : src;
    };
    Attribute part = makeConst(
        resultType(*this, i), h->splat,
        [&](int64_t k) { return h->getF(source(k)); },
        [&](int64_t k) { return h->getI(source(k)); });
    if (!part)
      return failure();
    parts.push_back(part);
    offset += shape[axis];
  }
  results.append(parts.begin(), parts.end());
  return success();
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (growsPastFoldLimit(*this, adaptor.getInput()))
    return {};
  auto inShape = getInput().getType().getShape();
  SmallVector<int64_t> map;
  if (getType().getNumElements() <= kFoldLimit)
    map = broadcastMap(getType().getShape(), inShape);
  return foldGatherLike(*this, adaptor.getInput(),
                        [&](int64_t k) { return map[k]; });
}

OpFoldResult TileOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (growsPastFoldLimit(*this, adaptor.getInput()))
    return {};
  auto inShape = getInput().getType().getShape();
  return foldIndexMap(*this, adaptor.getInput(), [&](size_t d, int64_t i) {
    return std::make_pair(d, i % inShape[d]);
  });
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getSteps(), [](int64_t s) { return s == 1; }))
    return getInput();
  ArrayRef<int64_t> starts = getStarts(), steps = getSteps();
  return foldIndexMap(*this, adaptor.getInput(), [&](size_t d, int64_t i) {
    return std::make_pair(d, starts[d] + i * steps[d]);
  });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  SmallVector<Host> hosts;
  for (Attribute a : adaptor.getInputs()) {
    auto h = readConst(a);
    if (!h)
      return {};
    hosts.push_back(std::move(*h));
  }
  RankedTensorType type = getType();
  if (type.getNumElements() > kFoldLimit)
    return {};
  int64_t axis = *normalizeAxis(static_cast<int64_t>(getAxis()),
                                type.getRank());
  auto outShape = type.getShape();
  // For each output element: which input and which flat index in it.
  SmallVector<int64_t> which, at;
  for (int64_t k = 0, n = type.getNumElements(); k < n; ++k) {
    auto idx = unflatten(k, outShape);
    size_t in = 0;
    while (idx[axis] >= hosts[in].type.getDimSize(axis)) {
      idx[axis] -= hosts[in].type.getDimSize(axis);
      ++in;
    }
    auto strides = rowMajorStrides(hosts[in].type.getShape());
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      src += idx[d] * strides[d];
    which.push_back(in);
    at.push_back(src);
  }
  return makeConst(
      type, false, [&](int64_t k) { return hosts[which[k]].getF(at[k]); },
      [&](int64_t k) { return hosts[which[k]].getI(at[k]); });
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto indices = readConst(adaptor.getIndices());
  if (!indices)
    return {};
  auto dataType = getData().getType();
  int64_t axis = *normalizeAxis(static_cast<int64_t>(getAxis()),
                                dataType.getRank());
  int64_t axisSize = dataType.getDimSize(axis);
  int64_t numIdx = indices->type.getNumElements();
  for (int64_t k = 0; k < (indices->splat ? 1 : numIdx); ++k) {
    int64_t v = indices->getI(k);
    if (v < -axisSize || v >= axisSize)
      return {};
  }
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < dataType.getRank(); ++d)
    inner *= dataType.getDimSize(d);
  return foldGatherLike(*this, adaptor.getData(), [&](int64_t k) {
    int64_t innerIdx = k % inner;
    int64_t rest = k / inner;
    int64_t idxFlat = rest % numIdx;
    int64_t outer = rest / numIdx;
    int64_t v = indices->getI(idxFlat);
    if (v < 0)
      v += axisSize;
    return (outer * axisSize + v) * inner + innerIdx;
  });
}

/// Reads constant indices normalised into [0, bound(k)) for index k, or
/// nothing when one is out of range (the op stays: the kernel reports it).
static std::optional<SmallVector<int64_t>>
readIndices(Attribute attr, function_ref<int64_t(int64_t)> bound) {
  auto h = readConst(attr);
  if (!h)
    return std::nullopt;
  int64_t n = h->type.getNumElements();
  if (n > kFoldLimit)
    return std::nullopt;
  SmallVector<int64_t> idx(n);
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = h->getI(k), dim = bound(k);
    if (v < -dim || v >= dim)
      return std::nullopt;
    idx[k] = v < 0 ? v + dim : v;
  }
  return idx;
}

/// The data's and the indices' shapes of a gather, when both are static.
template <typename GatherOp>
static bool staticShapes(GatherOp op, ArrayRef<int64_t> &data,
                         ArrayRef<int64_t> &indices) {
  data = op.getData().getType().getShape();
  indices = op.getIndices().getType().getShape();
  return op.getData().getType().hasStaticShape() &&
         op.getIndices().getType().hasStaticShape();
}

OpFoldResult GatherNdOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> data, ishape;
  if (!staticShapes(*this, data, ishape))
    return {};
  int64_t b = static_cast<int64_t>(getBatchDims()), k = ishape.back();
  auto idx = readIndices(adaptor.getIndices(),
                         [&](int64_t i) { return data[b + i % k]; });
  if (!idx)
    return {};
  SmallVector<int64_t> strides = rowMajorStrides(data);
  int64_t inner = strides[b + k - 1]; // elements of one gathered slice
  int64_t perBatch = 1;
  for (int64_t d = b; d + 1 < static_cast<int64_t>(ishape.size()); ++d)
    perBatch *= ishape[d];
  int64_t batchStride = b == 0 ? 0 : strides[b - 1];
  return foldGatherLike(*this, adaptor.getData(), [&](int64_t e) {
    int64_t p = e / inner, off = (p / perBatch) * batchStride + e % inner;
    for (int64_t j = 0; j < k; ++j)
      off += (*idx)[p * k + j] * strides[b + j];
    return off;
  });
}

OpFoldResult GatherElementsOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> data, ishape;
  if (!staticShapes(*this, data, ishape))
    return {};
  int64_t axis = *normalizeAxis(static_cast<int64_t>(getAxis()), data.size());
  auto idx = readIndices(adaptor.getIndices(),
                         [&](int64_t) { return data[axis]; });
  if (!idx)
    return {};
  SmallVector<int64_t> strides = rowMajorStrides(data);
  return foldGatherLike(*this, adaptor.getData(), [&](int64_t e) {
    SmallVector<int64_t> at = unflatten(e, ishape);
    at[axis] = (*idx)[e];
    int64_t off = 0;
    for (size_t d = 0; d < at.size(); ++d)
      off += at[d] * strides[d];
    return off;
  });
}

OpFoldResult TriluOp::fold(FoldAdaptor adaptor) {
  auto h = readConst(adaptor.getInput());
  RankedTensorType type = getType();
  if (!h || type.getNumElements() > kFoldLimit)
    return {};
  auto shape = type.getShape();
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t k = static_cast<int64_t>(getK());
  bool upper = getUpper();
  auto keep = [&](int64_t flat) {
    int64_t c = flat % cols, r = (flat / cols) % rows;
    return upper ? c - r >= k : c - r <= k;
  };
  return makeConst(
      type, false,
      [&](int64_t f) { return keep(f) ? h->getF(f) : 0.0; },
      [&](int64_t f) { return keep(f) ? h->getI(f) : int64_t(0); });
}

//===----------------------------------------------------------------------===//
// Scans
//===----------------------------------------------------------------------===//

/// Integer sums that overflow int64 or the element type are not folded
/// (the kernel wraps them); floats accumulate in double, as the kernel does.
OpFoldResult CumSumOp::fold(FoldAdaptor adaptor) {
  auto h = readConst(adaptor.getInput());
  RankedTensorType type = getType();
  if (!h || type.getNumElements() > kFoldLimit)
    return {};
  auto shape = type.getShape();
  int64_t axis = *normalizeAxis(static_cast<int64_t>(getAxis()),
                                type.getRank());
  int64_t len = shape[axis], inner = 1, n = type.getNumElements();
  for (size_t d = axis + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t outer = len * inner == 0 ? 0 : n / (len * inner);
  Type elt = type.getElementType();
  bool isUnsigned = elt.isUnsignedInteger();
  SmallVector<double> fres(n);
  SmallVector<int64_t> ires(n);
  bool exclusive = getExclusive(), reverse = getReverse();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double fsum = 0;
      int64_t isum = 0;
      for (int64_t step = 0; step < len; ++step) {
        int64_t j = reverse ? len - 1 - step : step;
        int64_t k = (o * len + j) * inner + i;
        if (exclusive) {
          fres[k] = fsum;
          ires[k] = isum;
        }
        if (h->isFloat) {
          fsum += h->getF(k);
        } else {
          int64_t v = h->getI(k);
          std::optional<int64_t> next = llvm::checkedAdd(isum, v);
          if ((isUnsigned && v < 0) || !next)
            return {};
          isum = *next;
        }
        if (!exclusive) {
          fres[k] = fsum;
          ires[k] = isum;
        }
      }
    }
  if (!h->isFloat)
    for (int64_t v : ires)
      if (!fitsElementType(elt, v))
        return {};
  return makeConst(
      type, false, [&](int64_t k) { return fres[k]; },
      [&](int64_t k) { return ires[k]; });
}
