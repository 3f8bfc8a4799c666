//===- MlirWriter.cpp - GraphBuilder producing smp dialect ops ------------===//

#include "MlirWriter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Pipelines/Pipelines.h"

using namespace mlir;

namespace smp::modelgen {
namespace {

class MlirWriter : public GraphBuilder {
public:
  MlirWriter(MLIRContext &ctx, ModuleOp module) : ctx(ctx), b(&ctx) {
    b.setInsertionPointToEnd(module.getBody());
    func = func::FuncOp::create(b, b.getUnknownLoc(), "main",
                                b.getFunctionType({}, {}));
    body = func.addEntryBlock();
    b.setInsertionPointToStart(body);
  }

  /// Sets the signature and the attributes, and adds the return.
  void finish() {
    func::ReturnOp::create(b, b.getUnknownLoc(), results);
    func.setType(b.getFunctionType(argTypes, resultTypes));
    func.setAllArgAttrs(argAttrs);
    func.setAllResultAttrs(resultAttrs);
  }

  V inputIds(const std::string &name, const Shape &shape) override {
    return argument(RankedTensorType::get(shape, b.getI64Type()),
                    SmpDialect::kInputAttr, name);
  }
  V param(const std::string &name, const Shape &shape, Init) override {
    return argument(RankedTensorType::get(shape, b.getF32Type()),
                    SmpDialect::kParamAttr, name);
  }
  void output(const std::string &name, V v, const Shape &) override {
    results.push_back(values[v]);
    resultTypes.push_back(values[v].getType());
    resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        SmpDialect::kOutputAttr, b.getStringAttr(name))));
  }

  V constI64(const std::string &node, const Shape &shape,
             const std::vector<int64_t> &v) override {
    auto type = RankedTensorType::get(shape, b.getI64Type());
    return constant(node, DenseElementsAttr::get(type, llvm::ArrayRef(v)));
  }
  V constF32(const std::string &node, const Shape &shape,
             const std::vector<float> &v) override {
    auto type = RankedTensorType::get(shape, b.getF32Type());
    return constant(node, DenseElementsAttr::get(type, llvm::ArrayRef(v)));
  }
  V fillF32(const std::string &node, const Shape &shape, float v) override {
    auto type = RankedTensorType::get(shape, b.getF32Type());
    return constant(node, DenseElementsAttr::get(type, v));
  }
  V fillBool(const std::string &node, const Shape &shape, bool v) override {
    auto type = RankedTensorType::get(shape, b.getI1Type());
    return constant(node, DenseElementsAttr::get(type, v));
  }

  V gather(const std::string &node, V table, V indices) override {
    return make<GatherOp>(node, values[table], values[indices],
                          b.getI64IntegerAttr(0));
  }
  V binary(Binary kind, const std::string &node, V x, V y) override {
    Value l = values[x], r = values[y];
    switch (kind) {
    case Binary::Add:
      return make<AddOp>(node, l, r);
    case Binary::Sub:
      return make<SubOp>(node, l, r);
    case Binary::Mul:
      return make<MulOp>(node, l, r);
    case Binary::Div:
      return make<DivOp>(node, l, r);
    }
    llvm_unreachable("binary op");
  }
  V unary(Unary kind, const std::string &node, V x) override {
    switch (kind) {
    case Unary::Neg:
      return make<NegOp>(node, values[x]);
    case Unary::Cos:
      return make<CosOp>(node, values[x]);
    case Unary::Sin:
      return make<SinOp>(node, values[x]);
    }
    llvm_unreachable("unary op");
  }
  V matmul(const std::string &node, V x, V y) override {
    return make<MatMulOp>(node, values[x], values[y], b.getBoolAttr(false),
                          b.getBoolAttr(false));
  }
  V transpose(const std::string &node, V x, const Shape &perm) override {
    return make<TransposeOp>(node, values[x], b.getDenseI64ArrayAttr(perm));
  }
  V reshape(const std::string &node, V x, const Shape &shape) override {
    return make<ReshapeOp>(node, typeLike(x, shape), values[x]);
  }
  V expand(const std::string &node, V x, const Shape &shape) override {
    return make<ExpandOp>(node, typeLike(x, shape), values[x]);
  }
  std::vector<V> split(const std::string &node, V x, int64_t axis,
                       const Shape &sizes) override {
    SmallVector<Value> parts;
    b.createOrFold<SplitOp>(parts, loc(node), values[x],
                            b.getI64IntegerAttr(axis),
                            b.getDenseI64ArrayAttr(sizes));
    std::vector<V> out;
    for (Value p : parts)
      out.push_back(push(p));
    return out;
  }
  V slice(const std::string &node, V x, int64_t rank, int64_t axis,
          int64_t start, int64_t end) override {
    auto type = cast<RankedTensorType>(values[x].getType());
    SmallVector<int64_t> starts(rank, 0), limits(type.getShape()),
        steps(rank, 1);
    starts[axis] = start;
    limits[axis] = end;
    return make<SliceOp>(node, values[x], b.getDenseI64ArrayAttr(starts),
                         b.getDenseI64ArrayAttr(limits),
                         b.getDenseI64ArrayAttr(steps));
  }
  V concat(const std::string &node, const std::vector<V> &xs,
           int64_t axis) override {
    SmallVector<Value> in;
    for (V x : xs)
      in.push_back(values[x]);
    return make<ConcatOp>(node, ValueRange(in), b.getI64IntegerAttr(axis));
  }
  V trilu(const std::string &node, V x, bool upper, int64_t k) override {
    return make<TriluOp>(node, values[x], b.getBoolAttr(upper),
                         b.getI64IntegerAttr(k));
  }
  V where(const std::string &node, V c, V x, V y) override {
    return make<WhereOp>(node, values[c], values[x], values[y]);
  }
  V softmax(const std::string &node, V x, int64_t axis) override {
    return make<SoftmaxOp>(node, values[x], b.getI64IntegerAttr(axis));
  }
  V layerNorm(const std::string &node, V x, V scale, V bias, int64_t axis,
              float eps) override {
    return make<LayerNormOp>(node, values[x], values[scale], values[bias],
                             b.getI64IntegerAttr(axis), b.getF32FloatAttr(eps));
  }
  V rmsNorm(const std::string &node, V x, V scale, int64_t,
            float eps) override {
    return make<RmsNormOp>(node, values[x], values[scale],
                           b.getF32FloatAttr(eps));
  }
  V geluTanh(const std::string &node, V x) override {
    return make<GeluOp>(
        node, values[x],
        GeluApproximationAttr::get(&ctx, GeluApproximation::tanh));
  }
  V silu(const std::string &node, V x) override {
    return make<SiluOp>(node, values[x]);
  }

private:
  Location loc(const std::string &node) {
    return NameLoc::get(b.getStringAttr(node));
  }
  V push(Value v) {
    values.push_back(v);
    return static_cast<V>(values.size() - 1);
  }
  /// Builds the op with its inferred type and folds it when its operands
  /// are constants, as the importer does (small results only).
  template <typename OpTy, typename... Args>
  V make(const std::string &node, Args &&...args) {
    return push(b.createOrFold<OpTy>(loc(node), std::forward<Args>(args)...));
  }
  V constant(const std::string &node, DenseElementsAttr value) {
    return push(ConstantOp::create(b, loc(node), cast<TypedAttr>(value)));
  }
  Type typeLike(V x, const Shape &shape) {
    return RankedTensorType::get(
        shape, cast<RankedTensorType>(values[x].getType()).getElementType());
  }
  V argument(Type type, llvm::StringRef attr, const std::string &name) {
    Value arg = body->addArgument(type, b.getUnknownLoc());
    argTypes.push_back(type);
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(attr, b.getStringAttr(name))));
    return push(arg);
  }

  MLIRContext &ctx;
  OpBuilder b;
  func::FuncOp func;
  Block *body = nullptr;
  std::vector<Value> values;
  SmallVector<Type> argTypes, resultTypes;
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  SmallVector<Value> results;
};

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
buildMlirModule(MLIRContext &ctx, const ModelConfig &c, bool fuseAttention) {
  ctx.loadDialect<SmpDialect, func::FuncDialect>();
  OpBuilder b(&ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  module->setSymName(c.kind);
  module->getOperation()->setAttr(SmpDialect::kModelAttr,
                                  b.getStringAttr(c.kind));
  SmallVector<NamedAttribute> config{
      b.getNamedAttr("layers", b.getI64IntegerAttr(c.layers)),
      b.getNamedAttr("hidden", b.getI64IntegerAttr(c.hidden)),
      b.getNamedAttr("heads", b.getI64IntegerAttr(c.heads)),
      b.getNamedAttr("ffn", b.getI64IntegerAttr(c.ffn)),
      b.getNamedAttr("seq", b.getI64IntegerAttr(c.seq)),
      b.getNamedAttr("vocab", b.getI64IntegerAttr(c.vocab)),
      b.getNamedAttr("batch", b.getI64IntegerAttr(c.batch ? c.batch : 1))};
  if (c.kind == "llama")
    config.push_back(b.getNamedAttr("kv_heads", b.getI64IntegerAttr(c.kvHeads)));
  module->getOperation()->setAttr(SmpDialect::kModelConfigAttr,
                                  b.getDictionaryAttr(config));

  MlirWriter writer(ctx, *module);
  buildModel(c, c.batch ? c.batch : 1, writer);
  writer.finish();

  // The importer's last step: raising (norms and activations are written
  // raised already, attention is fused unless --no-fuse-attention, as smpc
  // import does; the greedy driver uniques and hoists constants and drops
  // dead ones, so the module reads like an imported one), then verification.
  std::string diagnostic;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && diagnostic.empty())
      diagnostic = diag.str();
    return success();
  });
  PassManager pm(&ctx);
  buildRaisePipeline(pm, fuseAttention);
  if (failed(pm.run(*module)) || failed(verify(*module)))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "internal error: the generated module does not verify: " + diagnostic);
  return module;
}

} // namespace smp::modelgen
