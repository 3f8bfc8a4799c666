//===- ArtifactWriter.cpp - smp module -> model.smpx ----------------------===//
//
// Lowers `func @main` to one rank's program: every value gets a buffer in a
// single arena, every smp op (but reshape, which aliases its input) becomes an
// instruction, parameters and constants become weight references into the
// rank's weights file, and a first-fit plan over live ranges places the
// buffers. Then writes the artifact directory.
//
//===----------------------------------------------------------------------===//

#include "smp/Target/Artifact/ArtifactWriter.h"

#include "artifact.pb.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Support/CheckedMath.h"
#include "smp/Target/Artifact/DeviceGrid.h"
#include "smp/Target/Artifact/MemoryPlan.h"
#include "smp/base/FileFormat.h"
#include "smp/base/OpSchema.h"
#include "smp/base/Tensor.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <memory>
#include <set>

using namespace mlir;
namespace pb = smp::artifact;

namespace smp {
namespace {

constexpr int64_t kForever = std::numeric_limits<int64_t>::max();
constexpr uint64_t kWeightAlignment = 64;

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

std::optional<smp::base::DType> dtypeOf(Type t) {
  using smp::base::DType;
  if (t.isF32())
    return DType::F32;
  if (t.isF64())
    return DType::F64;
  if (t.isF16())
    return DType::F16;
  if (t.isBF16())
    return DType::BF16;
  auto it = dyn_cast<IntegerType>(t);
  if (!it)
    return std::nullopt;
  bool isUnsigned = it.isUnsigned();
  switch (it.getWidth()) {
  case 1:
    return DType::Bool;
  case 8:
    return isUnsigned ? DType::U8 : DType::I8;
  case 16:
    return isUnsigned ? DType::U16 : DType::I16;
  case 32:
    return isUnsigned ? DType::U32 : DType::I32;
  case 64:
    return isUnsigned ? DType::U64 : DType::I64;
  default:
    return std::nullopt;
  }
}

std::string valueName(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  return op->getName().getStringRef().str();
}

/// Little-endian bytes of a constant, one element at a time.
/// The caller has checked the size (at most kMaxConstantBytes).
std::string elementsToBytes(DenseElementsAttr attr, size_t elementBytes) {
  std::string out;
  int64_t n = attr.getNumElements();
  out.reserve(static_cast<size_t>(n) * elementBytes);
  auto put = [&](uint64_t v) {
    for (size_t b = 0; b < elementBytes; ++b)
      out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
  };
  if (isa<FloatType>(attr.getElementType())) {
    auto values = attr.getValues<APFloat>();
    for (int64_t k = 0; k < n; ++k)
      put(values[attr.isSplat() ? 0 : k].bitcastToAPInt().getZExtValue());
  } else {
    auto values = attr.getValues<APInt>();
    for (int64_t k = 0; k < n; ++k) {
      const APInt &v = values[attr.isSplat() ? 0 : k];
      put(v.getBitWidth() == 1 ? (v.isZero() ? 0 : 1) : v.getZExtValue());
    }
  }
  return out;
}

/// Converts an op's attributes to artifact attributes.
llvm::Error convertAttrs(Operation *op, pb::Instruction &inst) {
  for (NamedAttribute named : op->getAttrDictionary()) {
    if (named.getName().getValue().starts_with("smp."))
      continue; // compiler annotations (stages, recomputation), not semantics
    pb::Attribute attr;
    Attribute a = named.getValue();
    if (auto b = dyn_cast<BoolAttr>(a))
      attr.set_i(b.getValue() ? 1 : 0);
    else if (auto i = dyn_cast<IntegerAttr>(a))
      attr.set_i(i.getValue().getSExtValue());
    else if (auto f = dyn_cast<FloatAttr>(a))
      attr.set_f(f.getValueAsDouble());
    else if (auto arr = dyn_cast<DenseI64ArrayAttr>(a))
      for (int64_t v : arr.asArrayRef())
        attr.mutable_ints()->add_values(v);
    else if (auto str = dyn_cast<StringAttr>(a))
      attr.set_s(str.str());
    else if (auto g = dyn_cast<GeluApproximationAttr>(a))
      attr.set_s(stringifyGeluApproximation(g.getValue()).str());
    else if (auto r = dyn_cast<ReductionAttr>(a))
      attr.set_s(stringifyReduction(r.getValue()).str());
    else
      return fail("cannot lower attribute '" + named.getName().getValue() +
                  "' of " + op->getName().getStringRef());
    (*inst.mutable_attrs())[named.getName().str()] = attr;
  }
  return llvm::Error::success();
}

/// Checks an instruction against the runtime's op schema (OpSchema.def):
/// the runtime would refuse it at load time.
llvm::Error checkSchema(const pb::Instruction &inst) {
  const smp::base::OpSchema *schema = smp::base::findOp(inst.op());
  if (!schema)
    return fail("op '" + inst.op() + "' at '" + inst.loc() +
                "' is not in the runtime's op schema (smp/base/OpSchema.def)");
  std::vector<std::pair<std::string, smp::base::AttrKind>> attrs;
  for (const auto &[name, a] : inst.attrs()) {
    // An empty list is stored as no value: it passes as any kind.
    smp::base::OpAttr id;
    smp::base::AttrKind kind =
        a.has_f()      ? smp::base::AttrKind::Float
        : a.has_s()    ? smp::base::AttrKind::String
        : a.has_ints() ? smp::base::AttrKind::Ints
        : a.has_i()    ? smp::base::AttrKind::Int
        : smp::base::findAttr(name, id) ? smp::base::attrSchema(id).kind
                                        : smp::base::AttrKind::Int;
    attrs.emplace_back(name, kind);
  }
  smp::base::Status s = smp::base::checkInstruction(
      *schema, inst.inputs_size(), inst.outputs_size(), attrs);
  if (!s.ok())
    return fail(s.error + " (at '" + inst.loc() + "')");
  return llvm::Error::success();
}

class Lowering {
public:
  /// `tpRank` of `tpSize`: which slice of tensor-parallel parameters this
  /// rank holds.
  Lowering(func::FuncOp func, WeightSource &weights, int64_t tpRank = 0,
           int64_t tpSize = 1)
      : func(func), weights(weights), tpRank(tpRank), tpSize(tpSize) {}

  llvm::Error run();

  pb::RankProgram program;
  std::string weightsBytes;
  pb::Manifest manifestIO; // inputs/outputs specs only

private:
  llvm::Expected<unsigned> newBuffer(Value v, const std::string &name,
                                     int64_t start);
  void use(Value v, int64_t at);
  void addWeight(unsigned buffer, const std::string &bytes);
  /// Records how the buffer holds part of a global tensor (checkpoints).
  void setLayout(pb::Buffer &buffer, DenseI64ArrayAttr shard,
                 DenseI64ArrayAttr zeroShape) const;
  /// The whole tensor's shape of a tensor-parallel slice of shape `local`.
  SmallVector<int64_t> fullShape(ArrayRef<int64_t> local,
                                 DenseI64ArrayAttr shard) const;
  /// This rank's slice of a tensor-parallel parameter's bytes.
  std::string tpSlice(const std::string &bytes, RankedTensorType full,
                      int64_t dim, int64_t blocks) const;

  func::FuncOp func;
  WeightSource &weights;
  int64_t tpRank, tpSize;

public:
  /// False: plan memory only, reading no parameter bytes.
  bool withWeights = true;

private:
  /// Writes an updated parameter or state in place: its producer must be
  /// the last user of the argument it replaces.
  llvm::Error aliasUpdate(Value v, llvm::StringRef name, int64_t end);

  llvm::DenseMap<Value, unsigned> bufferOf;
  std::vector<Value> valueOf; // buffer -> the value it was made for
  llvm::StringMap<unsigned> argByName;
  llvm::DenseSet<unsigned> argBuffers; // the buffers in argByName
  std::vector<unsigned> root;  // buffer -> storage root (reshape aliases)
  /// root -> the buffers it is the root of (re-rooting touches only those).
  std::vector<SmallVector<unsigned, 1>> members;
  std::vector<uint8_t> pool;   // buffer -> 0 device arena, 1 host pool
  std::vector<LiveRange> live; // per buffer; meaningful for roots
  int64_t constantBytes = 0;   // written out by constants so far
};

llvm::Expected<unsigned> Lowering::newBuffer(Value v, const std::string &name,
                                             int64_t start) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return fail("value '" + name + "' does not have a static tensor type");
  auto dtype = dtypeOf(type.getElementType());
  if (!dtype)
    return fail("value '" + name + "' has unsupported element type");
  unsigned id = program.buffers_size();
  pb::Buffer *buf = program.add_buffers();
  buf->set_dtype(static_cast<uint32_t>(*dtype));
  for (int64_t d : type.getShape())
    buf->add_shape(d);
  auto bytes =
      checkedByteSize(type.getShape(), 8 * smp::base::dtypeSize(*dtype));
  if (!bytes || *bytes > kMaxTensorBytes)
    return fail("value '" + name + "' of shape " +
                shapeToString(type.getShape()) +
                " is over the limit of 2^48 bytes for one tensor");
  buf->set_bytes(*bytes);
  buf->set_name(name);
  bufferOf[v] = id;
  valueOf.push_back(v);
  root.push_back(id);
  members.emplace_back(1, id);
  pool.push_back(0);
  live.push_back(LiveRange{start, start, buf->bytes()});
  return id;
}

void Lowering::use(Value v, int64_t at) {
  unsigned r = root[bufferOf.lookup(v)];
  live[r].end = std::max(live[r].end, at);
}

llvm::Error Lowering::aliasUpdate(Value v, llvm::StringRef name, int64_t end) {
  auto it = argByName.find(name);
  if (it == argByName.end())
    return fail("result updates '" + name +
                "', which is not a parameter or state");
  unsigned target = it->second;
  auto arg = dyn_cast<BlockArgument>(valueOf[target]);
  unsigned id = bufferOf.lookup(v);
  unsigned r = root[id];
  // The op that wrote the storage (through reshape aliases).
  Operation *producer = valueOf[r].getDefiningOp();
  if (!producer || !arg)
    return fail("update of '" + name + "' is not computed by an op");
  for (Operation *user : arg.getUsers())
    if (user != producer && producer->isBeforeInBlock(user))
      return fail("'" + name + "' is read after its update");
  if (r == root[target] || argBuffers.contains(r))
    return fail("update of '" + name + "' aliases another parameter");
  // Re-root the update's storage (and its aliases) onto the parameter's.
  unsigned to = root[target];
  for (unsigned x : members[r])
    root[x] = to;
  members[to].append(members[r].begin(), members[r].end());
  members[r].clear();
  program.mutable_buffers(id)->set_name(name.str());
  (void)end;
  return llvm::Error::success();
}

SmallVector<int64_t> Lowering::fullShape(ArrayRef<int64_t> local,
                                         DenseI64ArrayAttr shard) const {
  SmallVector<int64_t> full(local);
  full[shard[0]] = shard.size() > 2 ? shard[2] : full[shard[0]] * tpSize;
  return full;
}

std::string Lowering::tpSlice(const std::string &bytes, RankedTensorType full,
                              int64_t dim, int64_t blocks) const {
  // dim viewed as [blocks, tpSize, n], n = ceil(size / (blocks * tpSize)):
  // this rank takes [:, tpRank, :]; rows past the end (a vocabulary that tp
  // does not divide) are zeros.
  uint64_t outer = 1, inner = bytes.size() / full.getNumElements();
  for (int64_t d = 0; d < dim; ++d)
    outer *= full.getDimSize(d);
  for (int64_t d = dim + 1; d < full.getRank(); ++d)
    inner *= full.getDimSize(d);
  uint64_t size = full.getDimSize(dim);
  uint64_t n = (size + blocks * tpSize - 1) / (blocks * tpSize);
  std::string out;
  out.reserve(outer * blocks * n * inner);
  for (uint64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < blocks; ++j) {
      uint64_t first = j * (size / blocks) + tpRank * n;
      uint64_t end = std::min<uint64_t>(first + n, (j + 1) * (size / blocks));
      uint64_t valid = end > first ? end - first : 0;
      out.append(bytes, (o * size + first) * inner, valid * inner);
      out.append((n - valid) * inner, '\0');
    }
  return out;
}

void Lowering::setLayout(pb::Buffer &buffer, DenseI64ArrayAttr shard,
                         DenseI64ArrayAttr zeroShape) const {
  SmallVector<int64_t> global(zeroShape ? zeroShape.asArrayRef()
                                        : ArrayRef<int64_t>(
                                              buffer.shape().data(),
                                              buffer.shape().size()));
  if (shard) {
    global = fullShape(global, shard);
    buffer.set_tp_dim(shard[0]);
    buffer.set_tp_blocks(shard[1]);
    buffer.set_tp_parts(tpSize);
    buffer.set_tp_index(tpRank);
  }
  if (zeroShape)
    for (int64_t d : zeroShape.asArrayRef())
      buffer.add_zero_shape(d);
  if (shard || zeroShape)
    for (int64_t d : global)
      buffer.add_global_shape(d);
}

void Lowering::addWeight(unsigned buffer, const std::string &bytes) {
  uint64_t offset = (weightsBytes.size() + kWeightAlignment - 1) /
                    kWeightAlignment * kWeightAlignment;
  weightsBytes.resize(offset, '\0');
  weightsBytes += bytes;
  pb::WeightRef *ref = program.add_weights();
  ref->set_buffer(buffer);
  ref->set_file_offset(offset);
  ref->set_bytes(bytes.size());
  live[buffer] = LiveRange{-1, kForever, live[buffer].bytes};
}

llvm::Error Lowering::run() {
  Block &body = func.getBody().front();
  // A parameter or state is one buffer of a rank: two arguments of one name
  // would be updated twice (or alias silently).
  llvm::StringSet<> named;
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    for (llvm::StringRef attr : {"smp.param", "smp.state"})
      if (auto name = func.getArgAttrOfType<StringAttr>(i, attr))
        if (!named.insert(name.getValue()).second)
          return fail("'" + name.getValue() +
                      "' is two arguments of one rank's program (a weight "
                      "that several chunks of the rank read must be one "
                      "copy per rank)");
  }
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (auto input = func.getArgAttrOfType<StringAttr>(i, "smp.input")) {
      auto id = newBuffer(arg, input.str(), -1);
      if (!id)
        return id.takeError();
      program.mutable_buffers(*id)->set_role("input");
      live[*id].end = kForever;
      pb::Binding *b = program.add_inputs();
      b->set_name(input.str());
      b->set_buffer(*id);
      pb::TensorSpec *spec = manifestIO.add_inputs();
      spec->set_name(input.str());
      spec->set_dtype(program.buffers(*id).dtype());
      *spec->mutable_shape() = program.buffers(*id).shape();
      continue;
    }
    if (auto state = func.getArgAttrOfType<StringAttr>(i, "smp.state")) {
      // Optimizer state starts at zero: no bytes in the weights file.
      auto id = newBuffer(arg, state.str(), -1);
      if (!id)
        return id.takeError();
      program.mutable_buffers(*id)->set_role("state");
      setLayout(*program.mutable_buffers(*id),
                func.getArgAttrOfType<DenseI64ArrayAttr>(i, "smp.tp_shard"),
                func.getArgAttrOfType<DenseI64ArrayAttr>(i, "smp.zero_shape"));
      pb::WeightRef *ref = program.add_weights();
      ref->set_buffer(*id);
      ref->set_bytes(program.buffers(*id).bytes());
      ref->set_zero_init(true);
      if (auto init = func.getArgAttrOfType<FloatAttr>(i, "smp.init"))
        ref->set_fill_value(init.getValueAsDouble());
      live[*id] = LiveRange{-1, kForever, live[*id].bytes};
      argByName[state.getValue()] = *id;
      argBuffers.insert(*id);
      continue;
    }
    auto param = func.getArgAttrOfType<StringAttr>(i, "smp.param");
    if (!param)
      return fail("argument #" + llvm::Twine(i) +
                  " is neither an smp.input, an smp.param nor an smp.state");
    auto id = newBuffer(arg, param.str(), -1);
    if (!id)
      return id.takeError();
    auto type = cast<RankedTensorType>(arg.getType());
    auto shard = func.getArgAttrOfType<DenseI64ArrayAttr>(i, "smp.tp_shard");
    if (shard && (shard.size() < 2 || shard[0] < 0 || shard[0] >= type.getRank()))
      return fail("parameter '" + param.getValue() + "' has a bad smp.tp_shard");
    RankedTensorType fullType = type;
    if (shard)
      fullType = type.clone(fullShape(type.getShape(), shard));
    if (!withWeights) {
      // Memory planning only: the parameter lives for the whole step.
      live[*id] = LiveRange{-1, kForever, live[*id].bytes};
      program.mutable_buffers(*id)->set_role("param");
      argByName[param.getValue()] = *id;
      argBuffers.insert(*id);
      continue;
    }
    // A parameter the importer untied starts from the merged initializer.
    auto initFrom = func.getArgAttrOfType<StringAttr>(i, "smp.init_from");
    auto initValue =
        func.getArgAttrOfType<DenseElementsAttr>(i, "smp.init_value");
    llvm::Expected<std::string> bytes =
        initValue && !initValue.isSplat()
            ? llvm::Expected<std::string>(std::string(
                  initValue.getRawData().begin(), initValue.getRawData().end()))
        : func.getArgAttr(i, "smp.init_zero")
            ? llvm::Expected<std::string>(std::string(
                  static_cast<size_t>(fullType.getNumElements() *
                                      ((fullType.getElementTypeBitWidth() + 7) /
                                       8)),
                  '\0'))
            : weights.read(initFrom ? initFrom.getValue() : param.getValue(),
                           fullType);
    if (!bytes)
      return bytes.takeError();
    if (shard)
      *bytes = tpSlice(*bytes, fullType, shard[0], shard[1]);
    if (bytes->size() != program.buffers(*id).bytes())
      return fail("parameter '" + param.getValue() + "' has " +
                  llvm::Twine(bytes->size()) + " bytes, expected " +
                  llvm::Twine(program.buffers(*id).bytes()));
    addWeight(*id, *bytes);
    program.mutable_buffers(*id)->set_role("param");
    setLayout(*program.mutable_buffers(*id), shard, nullptr);
    argByName[param.getValue()] = *id;
    argBuffers.insert(*id);
  }

  int64_t index = 0;
  for (Operation &op : body.getOperations()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        if (auto update = func.getResultAttrOfType<StringAttr>(i, "smp.update")) {
          if (auto err = aliasUpdate(v, update.getValue(), index))
            return err;
          continue;
        }
        use(v, kForever);
        auto name = func.getResultAttrOfType<StringAttr>(i, "smp.output");
        std::string outName = name ? name.str() : "output" + std::to_string(i);
        pb::Binding *b = program.add_outputs();
        b->set_name(outName);
        b->set_buffer(bufferOf.lookup(v));
        pb::TensorSpec *spec = manifestIO.add_outputs();
        spec->set_name(outName);
        spec->set_dtype(program.buffers(b->buffer()).dtype());
        *spec->mutable_shape() = program.buffers(b->buffer()).shape();
      }
      continue;
    }
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op)) {
      // A collective over the ranks of a grid axis.
      pb::Instruction *inst = program.add_instructions();
      inst->set_op("all_reduce");
      inst->set_loc(valueName(&op));
      inst->add_inputs(bufferOf.lookup(reduce.getInput()));
      use(reduce.getInput(), index);
      auto id = newBuffer(reduce.getResult(), valueName(&op), index);
      if (!id)
        return id.takeError();
      inst->add_outputs(*id);
      pb::Attribute kind, grid, axes;
      kind.set_s(shard::stringifyReductionKind(reduce.getReduction()).str());
      grid.set_s(reduce.getGrid().str());
      for (int16_t axis : reduce.getGridAxes())
        axes.mutable_ints()->add_values(axis);
      (*inst->mutable_attrs())["reduction"] = kind;
      (*inst->mutable_attrs())["grid"] = grid;
      (*inst->mutable_attrs())["grid_axes"] = axes;
      ++index;
      continue;
    }
    if (isa<shard::ReduceScatterOp, shard::AllGatherOp, shard::AllSliceOp>(op)) {
      // Collectives that split or join dim 0 across the grid's ranks.
      pb::Instruction *inst = program.add_instructions();
      inst->set_loc(valueName(&op));
      Value input = op.getOperand(0);
      inst->add_inputs(bufferOf.lookup(input));
      use(input, index);
      auto id = newBuffer(op.getResult(0), valueName(&op), index);
      if (!id)
        return id.takeError();
      inst->add_outputs(*id);
      int64_t axis = 0;
      if (auto rs = dyn_cast<shard::ReduceScatterOp>(op)) {
        inst->set_op("reduce_scatter");
        axis = rs.getScatterAxis().getSExtValue();
        pb::Attribute kind;
        kind.set_s(shard::stringifyReductionKind(rs.getReduction()).str());
        (*inst->mutable_attrs())["reduction"] = kind;
      } else if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
        inst->set_op("all_gather");
        axis = ag.getGatherAxis().getSExtValue();
      } else {
        inst->set_op("all_slice");
        axis = cast<shard::AllSliceOp>(op).getSliceAxis().getSExtValue();
      }
      if (axis != 0)
        return fail("collectives along dims other than 0 are not supported");
      pb::Attribute grid;
      grid.set_s(op.getAttrOfType<FlatSymbolRefAttr>("grid").getValue().str());
      (*inst->mutable_attrs())["grid"] = grid;
      ++index;
      continue;
    }
    if (op.getDialect() == nullptr ||
        op.getDialect()->getNamespace() != SmpDialect::getDialectNamespace())
      return fail("cannot lower op '" + op.getName().getStringRef() +
                  "' (only smp ops and shard collectives run on a device)");
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      auto id = newBuffer(constant.getResult(), valueName(&op), -1);
      if (!id)
        return id.takeError();
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      if (!dense)
        return fail("constant '" + valueName(&op) + "' is not dense");
      // Checked before a byte is allocated: a splat of [2^62] elements made
      // this loop grow memory for ever (the size wrapped).
      int64_t bytes = program.buffers(*id).bytes();
      if (bytes > kMaxConstantBytes)
        return fail("constant '" + valueName(&op) + "' of shape " +
                    shapeToString(dense.getType().getShape()) + " has " +
                    llvm::Twine(bytes) +
                    " bytes, over the limit of 2^30 bytes for one constant");
      constantBytes += bytes;
      if (constantBytes > kMaxConstantBytesPerRank)
        return fail("the constants of this program take over 2^32 bytes (at "
                    "constant '" +
                    valueName(&op) + "')");
      addWeight(*id,
                elementsToBytes(
                    dense, smp::base::dtypeSize(static_cast<smp::base::DType>(
                               program.buffers(*id).dtype()))));
      continue;
    }
    if (isa<TpRankOp>(op)) {
      // This tensor-parallel rank's index: a constant of its program.
      auto id = newBuffer(op.getResult(0), valueName(&op), -1);
      if (!id)
        return id.takeError();
      std::string bytes(8, '\0');
      for (int k = 0; k < 8; ++k)
        bytes[k] = static_cast<char>((static_cast<uint64_t>(tpRank) >> (8 * k)) & 0xff);
      addWeight(*id, bytes);
      continue;
    }
    if (isa<ReshapeOp, TpCopyOp>(op)) {
      // Same bytes (new shape): alias the input's storage.
      auto id = newBuffer(op.getResult(0), valueName(&op), index);
      if (!id)
        return id.takeError();
      unsigned to = root[bufferOf.lookup(op.getOperand(0))];
      root[*id] = to;
      members[*id].clear();
      members[to].push_back(*id);
      use(op.getOperand(0), index);
      ++index;
      continue;
    }
    pb::Instruction *inst = program.add_instructions();
    inst->set_op(op.getName().stripDialect().str());
    inst->set_loc(valueName(&op));
    for (Value operand : op.getOperands()) {
      inst->add_inputs(bufferOf.lookup(operand));
      use(operand, index);
    }
    for (Value result : op.getResults()) {
      auto id = newBuffer(result, valueName(&op), index);
      if (!id)
        return id.takeError();
      inst->add_outputs(*id);
      if (isa<OffloadOp>(op)) {
        pool[*id] = 1;
        program.mutable_buffers(*id)->set_pool(1);
      }
    }
    if (auto err = convertAttrs(&op, *inst))
      return err;
    // The compiler's cost of the instruction, for profiles that predict
    // other plans (smprun --profile writes it beside the measured time).
    OpCost cost = costOf(&op);
    pb::Attribute flops, bytes;
    flops.set_f(cost.flops);
    bytes.set_f(cost.bytes());
    (*inst->mutable_attrs())["@flops"] = flops;
    (*inst->mutable_attrs())["@bytes"] = bytes;
    ++index;
  }

  for (const pb::Instruction &inst : program.instructions())
    if (auto err = checkSchema(inst))
      return err;

  // An alias keeps its root alive: fold alias uses into the root's range
  // (done by `use`), then plan the roots.
  // The device arena and the host pool are planned separately.
  std::vector<uint64_t> offsetOfRoot(root.size(), 0);
  for (uint8_t which : {0, 1}) {
    std::vector<LiveRange> rootRanges;
    std::vector<unsigned> rootIds;
    for (unsigned id = 0; id < root.size(); ++id)
      if (root[id] == id && pool[id] == which) {
        rootIds.push_back(id);
        rootRanges.push_back(live[id]);
      }
    MemoryPlan plan = planMemory(rootRanges);
    for (size_t k = 0; k < rootIds.size(); ++k)
      offsetOfRoot[rootIds[k]] = plan.offsets[k];
    if (which == 0)
      program.set_arena_bytes(plan.arenaBytes);
    else
      program.set_host_arena_bytes(plan.arenaBytes);
  }
  for (unsigned id = 0; id < root.size(); ++id)
    program.mutable_buffers(id)->set_offset(offsetOfRoot[root[id]]);
  return llvm::Error::success();
}

llvm::Error writeFile(const std::string &path, const std::string &bytes) {
  std::string tmp = path + ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return fail(tmp + ": " + ec.message());
    os << bytes;
    os.close();
    if (os.has_error())
      return fail(tmp + ": write failed");
  }
  if (auto ec = llvm::sys::fs::rename(tmp, path))
    return fail(path + ": " + ec.message());
  return llvm::Error::success();
}

std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    snprintf(buf, sizeof(buf), "%.2f GiB", bytes / double(1ull << 30));
  else if (bytes >= (1ull << 20))
    snprintf(buf, sizeof(buf), "%.2f MiB", bytes / double(1ull << 20));
  else
    snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  return buf;
}

/// The grid axis a collective over grid `name` runs along.
llvm::Expected<int> axisOfGrid(llvm::StringRef name) {
  if (name == "dp")
    return kDataAxis;
  if (name == "tp")
    return kTensorAxis;
  if (name == "pp")
    return kPipelineAxis;
  return fail("collective over unknown grid '" + name +
              "' (expected dp, tp or pp)");
}

/// Rank `rank`'s copy of its stage's program: the grid coordinates, the
/// batch share, collectives bound to their rank groups and pipeline peers
/// to world ranks.
llvm::Expected<pb::RankProgram> rankProgram(const pb::RankProgram &stage,
                                            const DeviceGrid &grid,
                                            int64_t rank) {
  pb::RankProgram program = stage;
  auto coord = grid.coordOf(rank);
  program.set_rank(static_cast<uint32_t>(rank));
  program.set_dp_rank(coord[kDataAxis]);
  program.set_pp_rank(coord[kPipelineAxis]);
  program.set_tp_rank(coord[kTensorAxis]);
  program.set_data_shard(coord[kDataAxis]);
  program.set_data_shards(grid.size[kDataAxis]);
  for (pb::Buffer &b : *program.mutable_buffers())
    if (b.zero_shape_size()) { // ZeRO-1 state: this replica's chunk
      b.set_zero_parts(grid.size[kDataAxis]);
      b.set_zero_index(coord[kDataAxis]);
    }
  for (pb::Instruction &inst : *program.mutable_instructions()) {
    auto &attrs = *inst.mutable_attrs();
    if (inst.op() == "send" || inst.op() == "recv") {
      auto peer = coord;
      peer[kPipelineAxis] = attrs["peer"].i();
      if (peer[kPipelineAxis] < 0 ||
          peer[kPipelineAxis] >= grid.size[kPipelineAxis])
        return fail(inst.op() + " to pipeline rank " +
                    llvm::Twine(peer[kPipelineAxis]) + " of " +
                    llvm::Twine(grid.size[kPipelineAxis]));
      attrs["peer"].set_i(grid.rankOf(peer));
      continue;
    }
    auto it = attrs.find("grid");
    if (it == attrs.end())
      continue;
    auto axis = axisOfGrid(it->second.s());
    if (!axis)
      return axis.takeError();
    pb::Attribute ranks;
    for (int r : grid.group(rank, *axis))
      ranks.mutable_ints()->add_values(r);
    attrs["ranks"] = ranks;
  }
  return program;
}

std::string planReport(ModuleOp module,
                       const std::vector<std::unique_ptr<Lowering>> &stages,
                       const ArtifactOptions &options, const DeviceGrid &grid) {
  std::string s;
  llvm::raw_string_ostream os(s);
  int64_t dp = grid.size[kDataAxis], pp = grid.size[kPipelineAxis],
          tp = grid.size[kTensorAxis];
  os << "smp plan report\n"
     << "target: " << options.target << "\n"
     << "ranks: " << grid.numRanks() << " (dp=" << dp << " tp=" << tp
     << " pp=" << pp << ", placement " << grid.placementLetters()
     << ": the right-most axis gets adjacent ranks)\n";
  if (grid.numRanks() == 1)
    os << "a single device runs the whole model\n";
  if (dp > 1)
    os << "data parallel: " << dp << " replicas train on their share of the "
       << "batch; gradients are summed with all_reduce"
       << (module.lookupSymbol<shard::GridOp>("dp") &&
                   llvm::any_of(stages, [](const auto &l) {
                     for (const auto &i : l->program.instructions())
                       if (i.op() == "reduce_scatter")
                         return true;
                     return false;
                   })
               ? " (ZeRO-1: reduce_scatter, sharded optimizer state, "
                 "all_gather of the parameters)"
               : "")
       << "\n";
  if (tp > 1) {
    int64_t regions = 0;
    for (const auto &inst : stages.front()->program.instructions())
      if (inst.op() == "all_reduce" && inst.attrs().count("grid") &&
          inst.attrs().at("grid").s() == "tp")
        ++regions;
    os << "tensor parallel: " << tp << " ranks split the MLP and attention "
       << "layers (column- then row-parallel); " << regions
       << " all_reduce(s) over tp per step in the forward and backward\n";
    if (auto main = module.lookupSymbol<func::FuncOp>("main"))
      for (unsigned i = 0; i < main.getNumResults(); ++i)
        if (auto v = main.getResultAttrOfType<IntegerAttr>(i, "smp.tp_vocab"))
          os << "vocab parallel: the LM head and the cross-entropy over "
             << v.getInt() << " classes are split by vocabulary, "
             << (v.getInt() + tp - 1) / tp << " rows per rank"
             << (v.getInt() % tp ? " (the last zero-padded)" : "") << "\n";
  }
  if (pp > 1 || module->hasAttr(SmpDialect::kScheduleAttr)) {
    os << "pipeline: " << pp << " ranks";
    if (auto sched = module->getAttrOfType<StringAttr>(SmpDialect::kScheduleAttr))
      os << ", schedule " << sched.getValue();
    os << "\n";
    if (auto costs =
            module->getAttrOfType<DenseF64ArrayAttr>(SmpDialect::kStageCostsAttr)) {
      double total = 0;
      for (double c : costs.asArrayRef())
        total += c;
      os << "stage costs (predicted FLOPs + bytes of the forward, share):";
      for (auto [k, c] : llvm::enumerate(costs.asArrayRef())) {
        char buf[64];
        snprintf(buf, sizeof(buf), " %zu: %.3g (%.0f%%)", k, c,
                 total > 0 ? 100.0 * c / total : 0.0);
        os << buf;
      }
      os << "\n";
    }
  }
  for (auto [p, lowering] : llvm::enumerate(stages)) {
    const pb::RankProgram &program = lowering->program;
    uint64_t weights = 0, sends = 0, recvs = 0;
    for (const auto &w : program.weights())
      weights += w.bytes();
    for (const auto &inst : program.instructions()) {
      sends += inst.op() == "send";
      recvs += inst.op() == "recv";
    }
    std::string who = pp > 1 ? "pipeline rank " + std::to_string(p) : "rank 0";
    os << who << ": arena " << humanBytes(program.arena_bytes()) << " ("
       << program.arena_bytes() << " bytes), of which parameters, states and "
       << "constants " << humanBytes(weights) << "\n"
       << who << ": " << program.instructions_size() << " instructions over "
       << program.buffers_size() << " buffers";
    if (pp > 1)
      os << ", " << sends << " sends and " << recvs << " receives per step";
    os << "\n";
  }
  std::map<std::string, int> ops;
  for (const auto &inst : stages.front()->program.instructions())
    ++ops[inst.op()];
  os << (pp > 1 ? "pipeline rank 0" : "rank 0") << " instructions by op:\n";
  for (const auto &[op, n] : ops)
    os << "  " << op << ": " << n << "\n";
  return s;
}

} // namespace

/// The functions to lower, one per pipeline rank in rank order; without
/// any, the single step (@train_step, else @main, else the first).
llvm::Expected<SmallVector<func::FuncOp>> rankFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> funcs;
  for (auto f : module.getOps<func::FuncOp>())
    if (f->hasAttr(SmpDialect::kPipelineRankAttr))
      funcs.push_back(f);
  llvm::sort(funcs, [](func::FuncOp a, func::FuncOp b) {
    return a->getAttrOfType<IntegerAttr>(SmpDialect::kPipelineRankAttr).getInt() <
           b->getAttrOfType<IntegerAttr>(SmpDialect::kPipelineRankAttr).getInt();
  });
  for (auto [k, f] : llvm::enumerate(funcs))
    if (f->getAttrOfType<IntegerAttr>(SmpDialect::kPipelineRankAttr).getInt() !=
        static_cast<int64_t>(k))
      return fail("the pipeline-rank functions are not numbered 0.." +
                  llvm::Twine(funcs.size() - 1));
  if (funcs.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>("train_step");
    if (!func)
      func = module.lookupSymbol<func::FuncOp>("main");
    if (!func) {
      auto all = module.getOps<func::FuncOp>();
      if (all.empty())
        return fail("module has no function to compile");
      func = *all.begin();
    }
    funcs.push_back(func);
  }
  return funcs;
}

namespace {
/// Zeros of the right size: the memory plan does not need the weights.
class ZeroWeights : public WeightSource {
public:
  llvm::Expected<std::string> read(llvm::StringRef,
                                   RankedTensorType type) override {
    unsigned bits = type.getElementTypeBitWidth();
    return std::string(type.getNumElements() * std::max(1u, bits / 8), '\0');
  }
};
} // namespace

llvm::Expected<std::vector<uint64_t>> planArenaBytes(ModuleOp module) {
  auto funcs = rankFunctions(module);
  if (!funcs)
    return funcs.takeError();
  int64_t tp = 1;
  if (auto g = module.lookupSymbol<shard::GridOp>("tp"))
    for (int64_t d : g.getShape())
      tp *= d;
  ZeroWeights zeros;
  std::vector<uint64_t> bytes;
  for (func::FuncOp f : *funcs) {
    Lowering lowering(f, zeros, 0, tp);
    lowering.withWeights = false;
    if (auto err = lowering.run())
      return std::move(err);
    bytes.push_back(lowering.program.arena_bytes());
  }
  return bytes;
}

llvm::Expected<ArtifactSummary> writeArtifact(ModuleOp module,
                                              WeightSource &weights,
                                              const ArtifactOptions &options) {
  // One function per pipeline rank, or the single step (or forward).
  auto rankFuncs = rankFunctions(module);
  if (!rankFuncs)
    return rankFuncs.takeError();
  SmallVector<func::FuncOp> funcs = std::move(*rankFuncs);
  DeviceGrid grid;
  grid.size[kPipelineAxis] = funcs.size();
  for (auto [name, axis] : {std::make_pair("dp", kDataAxis),
                            std::make_pair("tp", kTensorAxis)})
    if (auto g = module.lookupSymbol<shard::GridOp>(name))
      for (int64_t d : g.getShape())
        grid.size[axis] *= d;
  if (auto placement = module->getAttrOfType<StringAttr>(SmpDialect::kPlacementAttr)) {
    auto order = DeviceGrid::parsePlacement(placement.str());
    if (!order)
      return fail("bad placement '" + placement.getValue() +
                  "' (expected cluster, spread or an order of D, P, T)");
    grid.order = *order;
  }

  // One lowering per pipeline stage and tensor-parallel rank (the same
  // program, each with its slice of the weights): index p * tp + t.
  int64_t tp = grid.size[kTensorAxis];
  std::vector<std::unique_ptr<Lowering>> lowered;
  for (func::FuncOp f : funcs)
    for (int64_t t = 0; t < tp; ++t) {
      lowered.push_back(std::make_unique<Lowering>(f, weights, t, tp));
      if (auto err = lowered.back()->run())
        return std::move(err);
    }
  // What one rank may need: checked before a file is written (smprun
  // would only fail to allocate it).
  for (size_t k = 0; k < lowered.size(); ++k) {
    const Lowering &l = *lowered[k];
    std::string which = "pipeline stage " + std::to_string(k / tp) +
                        ", tensor rank " + std::to_string(k % tp);
    for (auto [what, bytes] :
         {std::pair<const char *, uint64_t>{"arena", l.program.arena_bytes()},
          {"host arena", l.program.host_arena_bytes()},
          {"weights", l.weightsBytes.size()}})
      if (bytes > uint64_t(kMaxArenaBytes)) {
        const pb::Buffer *largest = nullptr;
        for (const pb::Buffer &b : l.program.buffers())
          if (!largest || b.bytes() > largest->bytes())
            largest = &b;
        std::string detail;
        if (largest) {
          SmallVector<int64_t> shape(largest->shape().begin(),
                                     largest->shape().end());
          detail = " (its largest tensor: '" + largest->name() +
                   "' of shape " + shapeToString(shape) + ")";
        }
        return fail(which + " needs " + llvm::Twine(bytes) + " bytes of " +
                    what + detail +
                    ", over the limit of 2^40 bytes (1 TiB) per rank");
      }
  }
  std::vector<std::unique_ptr<Lowering>> stages; // tensor rank 0 of each
  for (size_t p = 0; p < funcs.size(); ++p)
    stages.push_back(std::move(lowered[p * tp]));

  if (auto ec = llvm::sys::fs::create_directories(options.outputDir))
    return fail(options.outputDir + ": " + ec.message());
  auto path = [&](const std::string &name) {
    llvm::SmallString<256> p(options.outputDir);
    llvm::sys::path::append(p, name);
    return std::string(p.str());
  };
  // Inputs: every stage's (a pipeline's first stage reads the tokens, its
  // last the labels); outputs: every stage returns the step's.
  pb::Manifest manifest;
  std::set<std::string> seen;
  for (const auto &lowering : stages)
    for (const auto &spec : lowering->manifestIO.inputs())
      if (seen.insert(spec.name()).second)
        *manifest.add_inputs() = spec;
  *manifest.mutable_outputs() = stages.front()->manifestIO.outputs();
  manifest.set_producer(options.producer);
  manifest.set_model_name(module.getSymName() ? module.getSymName()->str()
                                              : "model");
  manifest.set_target(options.target);
  manifest.set_num_ranks(static_cast<uint32_t>(grid.numRanks()));
  manifest.set_dp(grid.size[kDataAxis]);
  manifest.set_pp(grid.size[kPipelineAxis]);
  manifest.set_tp(grid.size[kTensorAxis]);
  manifest.set_placement(grid.placementLetters());
  if (auto sched = module->getAttrOfType<StringAttr>(SmpDialect::kScheduleAttr))
    manifest.set_schedule(sched.str());
  if (options.training) {
    pb::TrainingConfig *t = manifest.mutable_training();
    t->set_loss(options.training->loss);
    t->set_optimizer(options.training->optimizer);
    t->set_lr(options.training->lr);
    t->set_lr_schedule(options.training->lrSchedule);
    t->set_warmup_steps(options.training->warmupSteps);
    t->set_batch_size(options.training->batchSize);
    t->set_source_model(options.training->sourceModel);
    if (auto origins =
            module->getAttrOfType<ArrayAttr>(SmpDialect::kParamOriginsAttr))
      for (auto entry : origins.getAsRange<DictionaryAttr>()) {
        pb::ParamOrigin *o = t->add_param_origins();
        auto text = [&](const char *key) {
          auto v = entry.getAs<StringAttr>(key);
          return v ? v.str() : std::string();
        };
        o->set_name(text("name"));
        o->set_from(text("from"));
        o->set_kind(text("kind"));
        o->set_transposed(entry.get("transposed") != nullptr);
        if (auto uses = entry.getAs<DenseI64ArrayAttr>("uses"))
          for (int64_t u : uses.asArrayRef())
            o->add_uses(u);
      }
  }
  // Weights: one file per pipeline stage and tensor-parallel rank, read by
  // the data-parallel replicas of that rank.
  auto lowering = [&](int64_t p, int64_t t) -> Lowering & {
    return t == 0 ? *stages[p] : *lowered[p * tp + t];
  };
  std::vector<std::string> weightFiles;
  std::vector<uint64_t> checksums;
  for (size_t p = 0; p < stages.size(); ++p)
    for (int64_t t = 0; t < tp; ++t) {
      std::string name = stages.size() == 1 && tp == 1 ? "rank0" : "";
      if (stages.size() > 1)
        name = "stage" + std::to_string(p);
      if (tp > 1)
        name += (name.empty() ? "" : ".") + std::string("tp") + std::to_string(t);
      weightFiles.push_back(name + ".weights.bin");
      const std::string &bytes = lowering(p, t).weightsBytes;
      checksums.push_back(smp::base::checksum64(bytes.data(), bytes.size()));
    }
  std::vector<std::string> programs;
  for (int64_t r = 0; r < grid.numRanks(); ++r) {
    auto coord = grid.coordOf(r);
    int64_t p = coord[kPipelineAxis], t = coord[kTensorAxis];
    auto program = rankProgram(lowering(p, t).program, grid, r);
    if (!program)
      return program.takeError();
    programs.push_back(smp::base::frame(program->SerializeAsString()));
    pb::RankFile *rank = manifest.add_ranks();
    rank->set_rank(r);
    rank->set_program_file("rank" + std::to_string(r) + ".program.pb");
    rank->set_program_bytes(programs.back().size());
    rank->set_weights_file(weightFiles[p * tp + t]);
    rank->set_weights_bytes(lowering(p, t).weightsBytes.size());
    rank->set_weights_checksum(checksums[p * tp + t]);
  }

  std::string ir;
  llvm::raw_string_ostream irStream(ir);
  module.print(irStream);
  // Weights and programs first, the manifest last: a crash in between leaves
  // no manifest that points at missing files.
  for (size_t p = 0; p < stages.size(); ++p)
    for (int64_t t = 0; t < tp; ++t)
      if (auto err = writeFile(path(weightFiles[p * tp + t]),
                               lowering(p, t).weightsBytes))
        return std::move(err);
  for (int64_t r = 0; r < grid.numRanks(); ++r)
    if (auto err = writeFile(path("rank" + std::to_string(r) + ".program.pb"),
                             programs[r]))
      return std::move(err);
  if (auto err = writeFile(path("model.mlir"), ir))
    return std::move(err);
  if (auto err = writeFile(path("plan.txt"),
                           planReport(module, stages, options, grid)))
    return std::move(err);
  if (auto err = writeFile(path("manifest.pb"),
                           smp::base::frame(manifest.SerializeAsString())))
    return std::move(err);

  ArtifactSummary summary;
  for (const auto &lowering : stages) {
    summary.arenaBytes = std::max<uint64_t>(summary.arenaBytes,
                                            lowering->program.arena_bytes());
    summary.weightsBytes += lowering->weightsBytes.size();
    summary.numInstructions += lowering->program.instructions_size();
    summary.numBuffers += lowering->program.buffers_size();
  }
  return summary;
}

} // namespace smp
