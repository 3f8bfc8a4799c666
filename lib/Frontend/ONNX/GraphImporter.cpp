//===- Importer.cpp - ONNX ModelProto -> smp dialect ----------------------===//

#include "smp/Frontend/ONNX/Importer.h"

#include "FxGraph.h"
#include "GraphImporter.h"
#include "ModelLoader.h"
#include "NodeContext.h"
#include "SharedInitializers.h"
#include "TensorData.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Pipelines/Pipelines.h"
#include "smp/Support/CheckedMath.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include <set>

using namespace mlir;

namespace smp::onnx_frontend {

/// Float initializers are parameters; other initializers (index tables,
/// masks, shape constants) become IR constants up to this many elements and
/// frozen parameters beyond it, so the IR stays small.
static constexpr int64_t kMaxInlineElements = int64_t(1) << 16;

const ConverterTable &converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    registerElementwiseConverters(t);
    registerActivationConverters(t);
    registerPadConverters(t);
    registerInstanceNormConverters(t);
    registerResizeConverters(t);
    registerRecurrentConverters(t);
    registerEinsumConverters(t);
    registerMatMulConverters(t);
    registerReduceConverters(t);
    registerShapeConverters(t);
    registerNNConverters(t);
    registerGatherIndexedConverters(t);
    registerSequenceConverters(t);
    registerAttentionConverters(t);
    return t;
  }();
  return table;
}

std::vector<std::string> supportedOps() {
  std::vector<std::string> ops;
  for (const auto &entry : converters())
    ops.push_back(entry.getKey().str());
  std::sort(ops.begin(), ops.end());
  return ops;
}

static bool isDefaultDomain(const std::string &domain) {
  return domain.empty() || domain == "ai.onnx";
}

GraphImporter::GraphImporter(MLIRContext &ctx, llvm::StringRef path,
                             const ImportOptions &options,
                             const onnx::ModelProto &model, int64_t opset)
    : ctx(ctx), builder(&ctx), path(path.str()),
      modelDir(llvm::sys::path::parent_path(path).str()), opset(opset),
      options(options), model(model) {}

llvm::Error GraphImporter::error(const llvm::Twine &msg) const {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 path + ": " + msg);
}

llvm::Error GraphImporter::checkTensorSize(RankedTensorType type,
                                           const llvm::Twine &what) const {
  auto bytes = checkedByteSize(type.getShape(),
                               type.getElementType().getIntOrFloatBitWidth());
  if (bytes && *bytes <= kMaxTensorBytes)
    return llvm::Error::success();
  std::string size = bytes ? std::to_string(*bytes) +
                                 " bytes, over the limit of 2^48 bytes"
                           : "a byte size that overflows int64";
  return error(what + " of shape " + shapeToString(type.getShape()) + " has " +
               size);
}

llvm::Expected<Value> GraphImporter::lookup(llvm::StringRef name) const {
  auto it = values.find(name);
  if (it != values.end() && it->second)
    return it->second;
  if (sequences.count(name))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "'" + name +
            "' is a sequence of tensors, read here as a tensor (smp reads "
            "sequences with SequenceAt and ConcatFromSequence only)");
  auto why = unavailable.find(name);
  if (why != unavailable.end())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   why->second);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "tensor '" + name + "' is not defined");
}

llvm::Expected<llvm::ArrayRef<Value>>
GraphImporter::lookupSequence(llvm::StringRef name) const {
  auto it = sequences.find(name);
  if (it != sequences.end())
    return llvm::ArrayRef<Value>(it->second);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "sequence '" + name + "' is not defined");
}

llvm::Error GraphImporter::checkSupported() const {
  const auto &table = converters();
  std::set<std::string> missing;
  std::string firstNode;
  for (int i = 0; i < model.graph().node_size(); ++i) {
    const auto &node = model.graph().node(i);
    bool known = isDefaultDomain(node.domain()) && table.count(node.op_type());
    if (known)
      continue;
    std::string op = isDefaultDomain(node.domain())
                         ? node.op_type()
                         : node.domain() + "." + node.op_type();
    if (missing.insert(op).second && firstNode.empty())
      firstNode = describeNode(node, i);
  }
  if (missing.empty())
    return llvm::Error::success();
  std::string list;
  for (const auto &op : missing)
    list += (list.empty() ? "" : ", ") + op;
  return error("unsupported ONNX op" + llvm::Twine(missing.size() > 1 ? "s" : "") +
               " " + list + " (first at " + firstNode + ")");
}

llvm::Expected<RankedTensorType>
GraphImporter::valueInfoType(const onnx::ValueInfoProto &info,
                             llvm::StringRef what) {
  if (!info.type().has_tensor_type())
    return error(what + " '" + info.name() + "' is not a tensor");
  const auto &tt = info.type().tensor_type();
  Type elt = elementType(&ctx, tt.elem_type());
  if (!elt)
    return error(what + " '" + info.name() + "' has unsupported element type " +
                 onnxTypeName(tt.elem_type()));
  if (!tt.has_shape())
    return error(what + " '" + info.name() +
                 "' has no shape; smp needs static shapes");
  SmallVector<int64_t> dims;
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto &dim = tt.shape().dim(d);
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0)
        return error(what + " '" + info.name() + "' has negative dim " +
                     llvm::Twine(dim.dim_value()) + " at index " +
                     llvm::Twine(d));
      dims.push_back(dim.dim_value());
    } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
      auto it = boundDims.find(dim.dim_param());
      if (it == boundDims.end())
        return error("unbound symbolic dim '" + dim.dim_param() + "' of " +
                     what + " '" + info.name() + "'; pass --dim " +
                     dim.dim_param() + "=N");
      dims.push_back(it->second);
    } else {
      return error(what + " '" + info.name() + "' has an unknown dim at index " +
                   llvm::Twine(d) + "; give it a name and bind it with --dim");
    }
  }
  if (!checkedNumElements(dims))
    return error(what + " '" + info.name() + "' shape " + shapeToString(dims) +
                 " has too many elements");
  if (auto err = checkTensorSize(RankedTensorType::get(dims, elt),
                                 what + " '" + info.name() + "'"))
    return std::move(err);
  return RankedTensorType::get(dims, elt);
}

/// The graph inputs the user feeds (not initializers, not folded in).
static SmallVector<const onnx::ValueInfoProto *>
fedInputs(const onnx::GraphProto &graph, const ImportOptions &options) {
  llvm::StringSet<> initializers;
  for (const auto &init : graph.initializer())
    initializers.insert(init.name());
  SmallVector<const onnx::ValueInfoProto *> fed;
  for (const auto &input : graph.input())
    if (!initializers.count(input.name()) &&
        !options.constantInputs.count(input.name()) &&
        input.type().has_tensor_type() &&
        input.type().tensor_type().has_shape())
      fed.push_back(&input);
  return fed;
}

static std::string joinNames(const llvm::StringSet<> &names) {
  SmallVector<std::string> sorted;
  for (const auto &n : names)
    sorted.push_back(n.getKey().str());
  llvm::sort(sorted);
  std::string out;
  for (const auto &n : sorted)
    out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

llvm::Error GraphImporter::bindDims() {
  auto inputs = fedInputs(model.graph(), options);
  // The batch dims: the symbolic leading dims of the fed inputs.
  llvm::StringSet<> batchNames, symbolic;
  const onnx::ValueInfoProto *firstBatched = nullptr;
  for (const auto *in : inputs) {
    const auto &shape = in->type().tensor_type().shape();
    for (int d = 0; d < shape.dim_size(); ++d)
      if (shape.dim(d).has_dim_param() && !shape.dim(d).dim_param().empty())
        symbolic.insert(shape.dim(d).dim_param());
    if (shape.dim_size() > 0 && shape.dim(0).has_dim_param() &&
        !shape.dim(0).dim_param().empty()) {
      batchNames.insert(shape.dim(0).dim_param());
      if (!firstBatched)
        firstBatched = in;
    }
  }
  // Every --dim names a symbolic dim of an input (or of an output, whose
  // computed shape is then checked against it).
  for (const auto &out : model.graph().output())
    if (out.type().has_tensor_type() && out.type().tensor_type().has_shape())
      for (const auto &d : out.type().tensor_type().shape().dim())
        if (d.has_dim_param() && !d.dim_param().empty())
          symbolic.insert(d.dim_param());
  for (const auto &b : options.dims)
    if (!symbolic.count(b.getKey()))
      return error("--dim " + b.getKey() + "=" + llvm::Twine(b.getValue()) +
                   ": the model has no symbolic dim '" + b.getKey() +
                   "' (its symbolic dims: " +
                   joinNames(symbolic) + ")");
  int64_t split = std::max<int64_t>(1, options.batchSplit);
  std::string splitText =
      "dp x micro-batches = " + std::to_string(split);
  for (const auto &b : options.dims) {
    if (b.getValue() <= 0)
      return error("symbolic dim '" + b.getKey() + "' must be positive, got " +
                   llvm::Twine(b.getValue()));
    boundDims[b.getKey()] = b.getValue();
    if (!batchNames.count(b.getKey()))
      continue;
    // --dim on the batch dim states the global batch, as --batch-size does.
    if (options.globalBatch > 0 && b.getValue() != options.globalBatch)
      return error("--dim " + b.getKey() + "=" + llvm::Twine(b.getValue()) +
                   " and --batch-size " + llvm::Twine(options.globalBatch) +
                   " disagree on the batch ('" + b.getKey() +
                   "' is the batch dim of input '" + firstBatched->name() +
                   "'); pass only --batch-size");
    if (options.batchSize <= 0 && split > 1)
      return error("--dim " + b.getKey() + "=" + llvm::Twine(b.getValue()) +
                   " binds the batch dim, which is split over " + splitText +
                   "; give the global batch as --batch-size instead");
  }
  if (options.batchSize > 0)
    for (const auto &name : batchNames)
      boundDims[name.getKey()] = options.batchSize;
  if (!batchNames.empty() ||
      (options.globalBatch <= 0 && options.batchSize <= 0))
    return llvm::Error::success();
  // No symbolic batch dim: the file fixes the batch (an export without
  // dynamic axes). It must be the batch asked for, unsplit.
  for (const auto *in : inputs) {
    const auto &shape = in->type().tensor_type().shape();
    if (shape.dim_size() == 0 || !shape.dim(0).has_dim_value())
      continue;
    int64_t fixed = shape.dim(0).dim_value();
    std::string reexport =
        "re-export with a symbolic batch dim (smp.export does; with "
        "torch.onnx.export pass dynamic_axes={'" +
        in->name() + "': {0: 'batch'}, ...} for every input and output)";
    if (options.globalBatch > 0 && fixed != options.globalBatch)
      return error("input '" + in->name() + "' has batch " +
                   llvm::Twine(fixed) + " fixed in the file but --batch-size " +
                   llvm::Twine(options.globalBatch) + " was given; pass "
                   "--batch-size " + llvm::Twine(fixed) + " or " + reexport);
    if (split > 1)
      return error("input '" + in->name() + "' has batch " +
                   llvm::Twine(fixed) + " fixed in the file, which cannot "
                   "be split over " + splitText + "; " + reexport);
    if (options.batchSize > 0 && fixed != options.batchSize)
      return error("input '" + in->name() + "' has batch " +
                   llvm::Twine(fixed) + " fixed in the file, but this "
                   "import needs batch " + llvm::Twine(options.batchSize) +
                   " (the planner reads the model at one sample per batch); " +
                   reexport);
  }
  return llvm::Error::success();
}

int64_t GraphImporter::takePaddingRow(llvm::StringRef name) {
  auto it = options.paddingRows.find(name);
  if (it == options.paddingRows.end())
    return -1;
  paddingApplied.insert(name);
  return it->second;
}

llvm::Error GraphImporter::declareArguments(
    Block *body, Location fileLoc, SmallVectorImpl<Type> &argTypes,
    SmallVectorImpl<DictionaryAttr> &argAttrs) {
  const onnx::GraphProto &graph = model.graph();
  // Which initializers are used at all.
  llvm::StringSet<> used;
  for (const auto &node : graph.node())
    for (const auto &in : node.input())
      used.insert(in);
  for (const auto &out : graph.output())
    used.insert(out.name());

  llvm::StringSet<> initializerNames;
  for (const auto &init : graph.initializer())
    initializerNames.insert(init.name());
  const std::set<std::string> settings = settingInitializers(graph);

  // Graph inputs first (those without an initializer), then parameters.
  for (const auto &input : graph.input()) {
    if (initializerNames.count(input.name()))
      continue;
    if (auto it = options.constantInputs.find(input.name());
        it != options.constantInputs.end()) {
      onnx::TensorProto tensor;
      if (!tensor.ParseFromString(it->second))
        return error("the value given for input '" + input.name() +
                     "' is not a TensorProto");
      auto value = readTensor(&ctx, tensor, modelDir);
      if (!value)
        return error("input '" + input.name() +
                     "': " + llvm::toString(value.takeError()));
      define(input.name(), ConstantOp::create(builder, fileLoc,
                                              cast<TypedAttr>(*value)));
      continue;
    }
    auto type = valueInfoType(input, "input");
    if (!type)
      return type.takeError();
    Value arg = body->addArgument(*type, fileLoc);
    define(input.name(), arg);
    argTypes.push_back(*type);
    argAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        SmpDialect::kInputAttr, builder.getStringAttr(input.name()))));
  }
  for (const auto &init : graph.initializer()) {
    auto type = checkTensor(&ctx, init, modelDir);
    if (!type)
      return error(llvm::toString(type.takeError()));
    if (auto err = checkTensorSize(*type, "initializer '" + init.name() + "'"))
      return err;
    if (!used.count(init.name()))
      continue;
    bool isFloat = isa<FloatType>(type->getElementType());
    int64_t numel = type->getNumElements();
    bool asParam =
        (isFloat && !settings.count(init.name()) &&
         (numel > 1 || options.scalarParameters.contains(init.name()))) ||
        (!isFloat && numel > kMaxInlineElements);
    if (!asParam) {
      auto value = readTensor(&ctx, init, modelDir);
      if (!value)
        return error(llvm::toString(value.takeError()));
      define(init.name(), ConstantOp::create(builder, fileLoc,
                                             cast<TypedAttr>(*value)));
      continue;
    }
    Value arg = body->addArgument(*type, fileLoc);
    define(init.name(), arg);
    argTypes.push_back(*type);
    SmallVector<NamedAttribute> attrs{builder.getNamedAttr(
        SmpDialect::kParamAttr, builder.getStringAttr(init.name()))};
    if (!isFloat)
      attrs.push_back(
          builder.getNamedAttr(SmpDialect::kFrozenAttr, builder.getUnitAttr()));
    argAttrs.push_back(builder.getDictionaryAttr(attrs));
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::convertNodes(llvm::ArrayRef<int> order,
                                        Location fileLoc) {
  const onnx::GraphProto &graph = model.graph();
  const auto &table = converters();
  for (int index : order) {
    const auto &node = graph.node(index);
    std::string locName =
        node.name().empty() ? node.op_type() + "#" + std::to_string(index)
                            : node.name();
    NodeContext nc(*this, node, index,
                   NameLoc::get(builder.getStringAttr(locName), fileLoc));
    if (auto err = table.find(node.op_type())->second(nc))
      return err;
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string &out = node.output(i);
      if (out.empty())
        continue;
      if (auto it = values.find(out); it != values.end()) {
        if (auto err = checkTensorSize(
                cast<RankedTensorType>(it->second.getType()),
                describeNode(node, index) + ": output '" + out + "'"))
          return err;
        continue;
      }
      unavailable[out] = "output #" + std::to_string(i) + " ('" + out +
                         "') of " + describeNode(node, index) +
                         " is not supported";
    }
  }
  return llvm::Error::success();
}

llvm::Error GraphImporter::checkPaddingApplied() const {
  for (const auto &row : options.paddingRows)
    if (!paddingApplied.contains(row.getKey()))
      return error("padding row " + llvm::Twine(row.getValue()) + " of '" +
                   row.getKey() +
                   "' (nn.Embedding padding_idx, from the smp.export "
                   "sidecar) cannot be kept: no Gather on axis 0 reads '" +
                   row.getKey() + "' directly; export again with smp.export");
  return llvm::Error::success();
}

llvm::Error
GraphImporter::checkDeclaredOutput(const onnx::ValueInfoProto &out,
                                   RankedTensorType type) const {
  if (!out.type().has_tensor_type() || !out.type().tensor_type().has_shape())
    return llvm::Error::success();
  const auto &shape = out.type().tensor_type().shape();
  bool rankOk = shape.dim_size() == type.getRank();
  for (int d = 0; rankOk && d < shape.dim_size(); ++d) {
    int64_t expect = -1;
    if (shape.dim(d).has_dim_value())
      expect = shape.dim(d).dim_value();
    else if (auto it = boundDims.find(shape.dim(d).dim_param());
             it != boundDims.end())
      expect = it->second;
    if (expect >= 0 && expect != type.getDimSize(d))
      rankOk = false;
  }
  Type declared = elementType(&ctx, out.type().tensor_type().elem_type());
  if (declared && declared != type.getElementType()) {
    std::string want, got;
    llvm::raw_string_ostream(want) << declared;
    llvm::raw_string_ostream(got) << type.getElementType();
    return error("graph output '" + out.name() +
                 "' is declared with element type " + want +
                 " but computes " + got);
  }
  if (!rankOk)
    return error("graph output '" + out.name() +
                 "' is declared with a shape that differs from the "
                 "computed " +
                 shapeToString(type.getShape()));
  return llvm::Error::success();
}

llvm::Expected<OwningOpRef<ModuleOp>> GraphImporter::run() {
  const onnx::GraphProto &graph = model.graph();
  auto order = checkGraph(graph, path);
  if (!order)
    return order.takeError();
  if (auto err = checkSupported())
    return std::move(err);
  if (auto err = bindDims())
    return std::move(err);

  // Capture op diagnostics so converters can report them with the node.
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Warning)
      return failure(); // a converter's warning: the caller's handler
    if (diag.getSeverity() == DiagnosticSeverity::Error)
      lastDiagnostic = diag.str();
    return success();
  });

  Location fileLoc = FileLineColLoc::get(&ctx, path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  module->getOperation()->setAttr(SmpDialect::kSourceAttr,
                                  builder.getStringAttr(path));
  module->getOperation()->setAttr(SmpDialect::kOpsetAttr,
                                  builder.getI64IntegerAttr(opset));
  if (!graph.name().empty())
    module->setSymName(graph.name());
  builder.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(builder, fileLoc, "main",
                                   builder.getFunctionType({}, {}));
  Block *body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);

  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  if (auto err = declareArguments(body, fileLoc, argTypes, argAttrs))
    return std::move(err);
  if (auto err = convertNodes(*order, fileLoc))
    return std::move(err);
  if (auto err = checkPaddingApplied())
    return std::move(err);

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  for (const auto &out : graph.output()) {
    auto v = lookup(out.name());
    if (!v)
      return error("graph output: " + llvm::toString(v.takeError()));
    auto type = cast<RankedTensorType>(v->getType());
    // A declared static shape must agree with what the graph computes.
    if (auto err = checkDeclaredOutput(out, type))
      return std::move(err);
    results.push_back(*v);
    resultTypes.push_back(type);
    resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        SmpDialect::kOutputAttr, builder.getStringAttr(out.name()))));
  }
  builder.setInsertionPointToEnd(body);
  func::ReturnOp::create(builder, fileLoc, results);
  func.setType(builder.getFunctionType(argTypes, resultTypes));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);

  if (failed(verify(*module)))
    return error("internal error: imported IR does not verify: " +
                 lastDiagnostic);
  return module;
}

/// Error messages quote names taken from the model; escape control bytes so
/// that every error stays on one line whatever the file holds.
static llvm::Error oneLine(llvm::Error err) {
  std::string msg = llvm::toString(std::move(err)), out;
  for (unsigned char c : msg) {
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(), out);
}

llvm::Expected<OwningOpRef<ModuleOp>>
importONNXFile(MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options) {
  context.loadDialect<SmpDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (auto err = loadModel(path, model))
    return oneLine(std::move(err));
  auto opset = defaultOpset(model, path);
  if (!opset)
    return oneLine(opset.takeError());
  // Parameters as the framework had them (exporters merge and copy them).
  std::vector<std::string> warnings;
  std::set<std::string> scalars;
  auto origins = resolveSharedInitializers(model, path, &context, options,
                                           warnings, scalars);
  if (!origins)
    return oneLine(origins.takeError());
  ImportOptions opts = options;
  for (const std::string &name : scalars)
    opts.scalarParameters.insert(name);
  // Values PyTorch detaches (after the untying: the inputs are the
  // importer's).
  if (options.training) {
    const auto sig = signatureParams(model.graph());
    auto stops = stopDetachedGradients(*model.mutable_graph(), path, sig);
    if (!stops)
      return oneLine(stops.takeError());
    for (const std::string &name : *stops)
      opts.stopGradientNodes.insert(name);
    if (auto w = noGradBlockWarning(model.graph(), sig))
      warnings.push_back(*w);
  }
  // Padding rows the TorchScript exporter dropped (after the untying: the
  // names are the importer's).
  if (options.training)
    if (auto err =
            inferPaddingRows(model.graph(), llvm::sys::path::parent_path(path),
                             &context, opts, warnings))
      return oneLine(std::move(err));
  // What the warnings say is how a parameter trains (tied, untied, folded
  // rows): nothing trains in an inference compile, and the values are the
  // file's either way.
  Location fileLoc = FileLineColLoc::get(&context, path, 0, 0);
  if (options.training || options.parameterWarnings)
    for (const std::string &w : warnings)
      emitWarning(fileLoc) << w; // the location names the file
  GraphImporter importer(context, path, opts, model, *opset);
  auto module = importer.run();
  if (!module)
    return oneLine(module.takeError());
  // A flag that changes nothing is said to (an eval() export holds no
  // trace of dropout: the user may think it had some).
  if (options.noDropout && !options.dropoutListed &&
      importer.droppedDropouts == 0)
    emitWarning(fileLoc)
        << "--no-dropout changes nothing: the model has no random Dropout "
           "node (torch.onnx.export's eval() export writes none; a "
           "training-mode export and smp.export write Dropout with "
           "training_mode=1)";
  recordParamOrigins(**module, *origins);
  if (auto err = recordCausalBuffers(
          **module, model.graph(), llvm::sys::path::parent_path(path)))
    return oneLine(std::move(err));
  // Raised after the parameters are known: a mask that needs no gradient
  // (a frozen buffer) may be fused into smp.attention.
  if (options.raise) {
    PassManager pm(&context);
    buildRaisePipeline(pm, options.fuseAttention);
    if (failed(pm.run(**module)))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path + ": internal error: raising the "
                                            "imported IR failed");
  }
  return module;
}

llvm::Expected<std::vector<std::string>>
unsupportedOpsIn(llvm::StringRef path) {
  onnx::ModelProto model;
  if (auto err = loadModel(path, model))
    return std::move(err);
  std::set<std::string> missing;
  for (const auto &node : model.graph().node())
    if (!isDefaultDomain(node.domain()) || !converters().count(node.op_type()))
      missing.insert(node.op_type());
  return std::vector<std::string>(missing.begin(), missing.end());
}

} // namespace smp::onnx_frontend
