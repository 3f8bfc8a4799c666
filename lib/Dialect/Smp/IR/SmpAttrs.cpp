//===- SmpAttrs.cpp - smp attributes; the smp.layout accessors -----------===//
//
// The dialect's attributes (SmpAttrs.td): #smp.layout's syntax and checks,
// and the accessors of the `smp.layout` argument and result attribute
// (SmpLayout.h). Syntax:
//
//   #smp.layout<tp = split(dim = D[, blocks = B][, full = F])>
//   #smp.layout<dp = chunk(of = [S...])>
//   #smp.layout<tp = split(dim = D, ...), dp = chunk(of = [S...])>
//
//===----------------------------------------------------------------------===//

#include "smp/Dialect/Smp/IR/SmpLayout.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace smp;

#define GET_ATTRDEF_CLASSES
#include "smp/Dialect/Smp/IR/SmpAttrs.cpp.inc"

void SmpDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "smp/Dialect/Smp/IR/SmpAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// LayoutAttr
//===----------------------------------------------------------------------===//

LayoutAttr LayoutAttr::split(MLIRContext *ctx, int64_t dim, int64_t blocks,
                             int64_t full) {
  return get(ctx, dim, blocks, full, /*dpChunked=*/false, {});
}

LayoutAttr LayoutAttr::chunk(MLIRContext *ctx, ArrayRef<int64_t> of) {
  return get(ctx, -1, 1, 0, /*dpChunked=*/true, of);
}

LayoutAttr LayoutAttr::chunkOf(LayoutAttr tp, MLIRContext *ctx,
                               ArrayRef<int64_t> of) {
  if (!tp || !tp.hasTpSplit())
    return chunk(ctx, of);
  return get(ctx, tp.getTpDim(), tp.getTpBlocks(), tp.getTpFull(),
             /*dpChunked=*/true, of);
}

SmallVector<int64_t> LayoutAttr::fullShape(ArrayRef<int64_t> local,
                                           int64_t tp) const {
  SmallVector<int64_t> full(local);
  if (hasTpSplit() && getTpDim() < static_cast<int64_t>(full.size()))
    full[getTpDim()] = fullExtent(full[getTpDim()], tp);
  return full;
}

LogicalResult LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t tpDim, int64_t tpBlocks,
                                 int64_t tpFull, bool dpChunked,
                                 ArrayRef<int64_t> dpChunkOf) {
  if (tpDim < -1)
    return emitError() << "#smp.layout: tp split dim " << tpDim
                       << " is negative";
  if (tpDim == -1 && (tpBlocks != 1 || tpFull != 0))
    return emitError() << "#smp.layout: blocks and full need a tp split";
  if (tpBlocks < 1)
    return emitError() << "#smp.layout: tp split blocks must be >= 1, got "
                       << tpBlocks;
  if (tpFull < 0 || (tpFull > 0 && tpFull % tpBlocks != 0))
    return emitError() << "#smp.layout: full extent " << tpFull
                       << " is not a positive multiple of the " << tpBlocks
                       << " block(s)";
  if (!dpChunked && !dpChunkOf.empty())
    return emitError() << "#smp.layout: a chunk shape without a dp chunk";
  if (tpDim == -1 && !dpChunked)
    return emitError() << "#smp.layout splits over neither tp nor dp (a "
                          "whole value carries no smp.layout)";
  if (llvm::any_of(dpChunkOf, [](int64_t d) { return d < 0; }))
    return emitError() << "#smp.layout: dp chunk of a shape with a negative "
                          "dim";
  if (dpChunked && tpDim >= static_cast<int64_t>(dpChunkOf.size()))
    return emitError() << "#smp.layout: tp split dim " << tpDim
                       << " is out of range for the chunked tensor of rank "
                       << dpChunkOf.size();
  return success();
}

Attribute LayoutAttr::parse(AsmParser &p, Type) {
  int64_t dim = -1, blocks = 1, full = 0;
  bool chunked = false, seenTp = false;
  SmallVector<int64_t> of;
  SMLoc start = p.getCurrentLocation();
  // `key = N` where N must be at least `least` (dim and full: a negative
  // dim and full = 0 would read as "no split" and "tp divides it").
  auto parseCount = [&](StringRef key, int64_t &value,
                        int64_t least) -> ParseResult {
    SMLoc at = p.getCurrentLocation();
    if (p.parseEqual() || p.parseInteger(value))
      return failure();
    if (value < least)
      return p.emitError(at)
             << "'" << key << "' must be >= " << least << ", got " << value;
    return success();
  };
  auto parseSplit = [&]() -> ParseResult {
    if (p.parseKeyword("split") || p.parseLParen() || p.parseKeyword("dim") ||
        parseCount("dim", dim, 0))
      return failure();
    bool seenBlocks = false, seenFull = false;
    while (succeeded(p.parseOptionalComma())) {
      StringRef key;
      SMLoc at = p.getCurrentLocation();
      if (p.parseKeyword(&key))
        return failure();
      bool &seen = key == "blocks" ? seenBlocks : seenFull;
      if ((key != "blocks" && key != "full") || seen)
        return p.emitError(at) << "expected 'blocks' or 'full' (once each) "
                                  "in a tp split, got '"
                               << key << "'";
      seen = true;
      // blocks: any integer, refused by verify below 1.
      if (parseCount(key, key == "blocks" ? blocks : full,
                     key == "blocks" ? INT64_MIN : 1))
        return failure();
    }
    return p.parseRParen();
  };
  auto parseChunk = [&]() -> ParseResult {
    chunked = true;
    auto dimOf = [&]() -> ParseResult {
      int64_t d;
      if (p.parseInteger(d))
        return failure();
      of.push_back(d);
      return success();
    };
    return failure(
        p.parseKeyword("chunk") || p.parseLParen() || p.parseKeyword("of") ||
        p.parseEqual() ||
        p.parseCommaSeparatedList(AsmParser::Delimiter::Square, dimOf) ||
        p.parseRParen());
  };
  auto parseAxis = [&]() -> ParseResult {
    StringRef axis;
    SMLoc at = p.getCurrentLocation();
    if (p.parseKeyword(&axis))
      return failure();
    if (axis == "tp" && !seenTp && !chunked) {
      seenTp = true;
      return failure(p.parseEqual() || parseSplit());
    }
    if (axis == "dp" && !chunked)
      return failure(p.parseEqual() || parseChunk());
    return p.emitError(at) << "expected 'tp = split(...)' then 'dp = "
                              "chunk(...)' (once each), got '"
                           << axis << "'";
  };
  if (p.parseLess())
    return {};
  if (failed(p.parseOptionalGreater()) &&
      (p.parseCommaSeparatedList(parseAxis) || p.parseGreater()))
    return {};
  return getChecked([&] { return p.emitError(start); }, p.getContext(), dim,
                    blocks, full, chunked, of);
}

void LayoutAttr::print(AsmPrinter &p) const {
  p << "<";
  if (hasTpSplit()) {
    p << "tp = split(dim = " << getTpDim();
    if (getTpBlocks() != 1)
      p << ", blocks = " << getTpBlocks();
    if (getTpFull())
      p << ", full = " << getTpFull();
    p << ")";
  }
  if (getDpChunked()) {
    if (hasTpSplit())
      p << ", ";
    p << "dp = chunk(of = [";
    llvm::interleaveComma(getDpChunkOf(), p);
    p << "])";
  }
  p << ">";
}

//===----------------------------------------------------------------------===//
// The smp.layout argument and result attribute
//===----------------------------------------------------------------------===//

LayoutAttr smp::getArgLayout(FunctionOpInterface f, unsigned i) {
  return f.getArgAttrOfType<LayoutAttr>(i, SmpDialect::kLayoutAttr);
}

LayoutAttr smp::getResultLayout(FunctionOpInterface f, unsigned i) {
  return f.getResultAttrOfType<LayoutAttr>(i, SmpDialect::kLayoutAttr);
}

void smp::setArgLayout(FunctionOpInterface f, unsigned i, LayoutAttr layout) {
  if (layout)
    f.setArgAttr(i, SmpDialect::kLayoutAttr, layout);
  else
    f.removeArgAttr(i, SmpDialect::kLayoutAttr);
}

void smp::setResultLayout(FunctionOpInterface f, unsigned i,
                          LayoutAttr layout) {
  if (layout)
    f.setResultAttr(i, SmpDialect::kLayoutAttr, layout);
  else
    f.removeResultAttr(i, SmpDialect::kLayoutAttr);
}

NamedAttribute smp::namedLayout(LayoutAttr layout) {
  return NamedAttribute(
      StringAttr::get(layout.getContext(), SmpDialect::kLayoutAttr), layout);
}

std::optional<int64_t> smp::gridSize(Operation *op, StringRef name) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  if (!module)
    return std::nullopt;
  auto grid = dyn_cast_or_null<shard::GridOp>(
      SymbolTable::lookupSymbolIn(module, name));
  if (!grid || grid.getShape().empty() || grid.getShape().back() < 1)
    return std::nullopt;
  return grid.getShape().back();
}

LogicalResult smp::verifyLayoutOf(Operation *op, Attribute attr, Type type,
                                  const Twine &what) {
  auto layout = dyn_cast<LayoutAttr>(attr);
  if (!layout)
    return op->emitError() << "'" << SmpDialect::kLayoutAttr << "' of " << what
                           << " must be a #smp.layout";
  auto fail = [&]() {
    return op->emitError() << "'" << SmpDialect::kLayoutAttr << "' of " << what
                           << " (" << type << "): ";
  };
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return fail() << "a layout needs a statically shaped tensor";
  // The shape the tp split applies to: the value's, or the chunked tensor's.
  ArrayRef<int64_t> shape =
      layout.getDpChunked() ? layout.getDpChunkOf() : tensor.getShape();
  if (layout.getDpChunked()) {
    if (tensor.getRank() != 1)
      return fail() << "a dp chunk is 1-D";
    int64_t n = 1;
    for (int64_t d : shape)
      if (__builtin_mul_overflow(n, d, &n))
        return fail() << "the chunked shape has too many elements";
    if (std::optional<int64_t> dp = gridSize(op, "dp")) {
      int64_t expected = n / *dp + (n % *dp != 0);
      if (tensor.getDimSize(0) != expected)
        return fail() << "a dp chunk of the " << n << " elements over dp "
                      << *dp << " holds " << expected << ", not "
                      << tensor.getDimSize(0);
    }
  }
  if (!layout.hasTpSplit())
    return success();
  int64_t dim = layout.getTpDim(), blocks = layout.getTpBlocks();
  if (dim >= static_cast<int64_t>(shape.size()))
    return fail() << "tp split dim " << dim << " is out of range for rank "
                  << shape.size();
  if (shape[dim] % blocks != 0)
    return fail() << "dim " << dim << " of size " << shape[dim] << " is not "
                  << blocks << " equal blocks";
  std::optional<int64_t> tp = gridSize(op, "tp");
  if (layout.getTpFull() && tp) {
    int64_t per = blocks * *tp;
    int64_t expected = (layout.getTpFull() + per - 1) / per * blocks;
    if (shape[dim] != expected)
      return fail() << "dim " << dim << " holds " << shape[dim]
                    << ", but a split of the full " << layout.getTpFull()
                    << " over tp " << *tp << " holds " << expected;
  }
  return success();
}
