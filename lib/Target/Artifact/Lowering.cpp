//===- Lowering.cpp - Arguments, ops and memory of one rank's program -----===//
//
// Lowers `func @main` (or a pipeline rank's function) to one rank's program:
// arguments become inputs, states and parameters (weights), ops become
// instructions (InstructionEncoding.cpp) or aliases, and a first-fit plan
// over live ranges places the buffers in the device arena and the host pool.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpLayout.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Support/CheckedMath.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringSet.h"

namespace smp::writer {

llvm::Expected<unsigned> Lowering::newBuffer(Value v, const std::string &name,
                                             int64_t start) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return fail("value '" + name + "' does not have a static tensor type");
  auto dtype = smp::baseDType(type.getElementType());
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
  viewOffsetOf.push_back(0);
  live.push_back(LiveRange{start, start, buf->bytes()});
  return id;
}

void Lowering::use(Value v, int64_t at) {
  unsigned r = root[bufferOf.lookup(v)];
  live[r].end = std::max(live[r].end, at);
}

llvm::Error Lowering::aliasUpdate(Value v, llvm::StringRef name) {
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
  return llvm::Error::success();
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
  if (auto err = checkArgumentNames())
    return err;
  for (BlockArgument arg : func.getBody().front().getArguments())
    if (auto err = lowerArgument(arg))
      return err;
  int64_t index = 0;
  for (Operation &op : func.getBody().front().getOperations()) {
    int64_t before = index;
    int instructions = program.instructions_size();
    if (auto err = lowerOp(op, index))
      return err;
    if (forward && forward->contains(&op)) {
      bool only = evalOnly && evalOnly->contains(&op);
      for (int k = instructions; k < program.instructions_size(); ++k) {
        program.mutable_instructions(k)->set_forward(true);
        program.mutable_instructions(k)->set_eval_only(only);
      }
      addEvalBatchNorm(op);
    }
    if (index != before) {
      firstInstruction.push_back(instructions);
      instantOf[&op] = before;
      if (program.instructions_size() > instructions)
        recordSideWork(op, before);
    }
  }
  instants = index;
  for (const pb::Instruction &inst : program.instructions())
    if (auto err = checkSchema(inst))
      return err;
  shareInPlace();
  holdSideOperands();
  planBuffers();
  return llvm::Error::success();
}

void Lowering::addEvalBatchNorm(Operation &op) {
  auto bn = dyn_cast<BatchNormOp>(op);
  BlockArgument mean, var;
  if (!bn || !runningStatsOf(func, bn, mean, var).empty() || !mean)
    return; // evaluationRefusal says why, or it reads them already
  pb::Instruction eval = program.instructions(program.instructions_size() - 1);
  for (auto [k, stat] : {std::pair{3, mean}, std::pair{4, var}}) {
    if (stat.getType() == bn->getOperand(k).getType()) {
      eval.mutable_inputs()->Set(k, bufferOf.lookup(stat));
      continue;
    }
    pb::Instruction *cast = program.add_instructions();
    cast->set_op("cast");
    cast->add_inputs(bufferOf.lookup(stat));
    cast->add_outputs(eval.inputs(k));
    cast->set_loc(eval.loc());
    cast->set_forward(true);
    cast->set_eval_only(true);
  }
  eval.mutable_attrs()->erase("@flops"); // not the step's cost
  eval.mutable_attrs()->erase("@bytes");
  eval.set_eval_only(true);
  *program.add_instructions() = std::move(eval);
}

/// A parameter or state is one buffer of a rank: two arguments of one name
/// would be updated twice (or alias silently).
llvm::Error Lowering::checkArgumentNames() {
  llvm::StringSet<> named;
  for (BlockArgument arg : func.getBody().front().getArguments()) {
    unsigned i = arg.getArgNumber();
    for (llvm::StringRef attr : {"smp.param", "smp.state"})
      if (auto name = func.getArgAttrOfType<StringAttr>(i, attr))
        if (!named.insert(name.getValue()).second)
          return fail("'" + name.getValue() +
                      "' is two arguments of one rank's program (a weight "
                      "that several chunks of the rank read must be one "
                      "copy per rank)");
  }
  return llvm::Error::success();
}

llvm::Error Lowering::lowerArgument(BlockArgument arg) {
  unsigned i = arg.getArgNumber();
  if (auto input = func.getArgAttrOfType<StringAttr>(i, "smp.input"))
    return lowerInput(arg, input);
  if (auto state = func.getArgAttrOfType<StringAttr>(i, "smp.state"))
    return lowerState(arg, state);
  if (auto param = func.getArgAttrOfType<StringAttr>(i, "smp.param"))
    return lowerParam(arg, param);
  return fail("argument #" + llvm::Twine(i) +
              " is neither an smp.input, an smp.param nor an smp.state");
}

llvm::Error Lowering::lowerInput(BlockArgument arg, StringAttr name) {
  auto id = newBuffer(arg, name.str(), -1);
  if (!id)
    return id.takeError();
  program.mutable_buffers(*id)->set_role("input");
  live[*id].end = kForever;
  pb::Binding *b = program.add_inputs();
  b->set_name(name.str());
  b->set_buffer(*id);
  pb::TensorSpec *spec = manifestIO.add_inputs();
  spec->set_name(name.str());
  spec->set_dtype(program.buffers(*id).dtype());
  *spec->mutable_shape() = program.buffers(*id).shape();
  return llvm::Error::success();
}

/// A parameter or state: named (an update aliases it by name), live for the
/// whole step.
void Lowering::bindArgument(unsigned id, StringAttr name, const char *role) {
  program.mutable_buffers(id)->set_role(role);
  live[id] = LiveRange{-1, kForever, live[id].bytes};
  argByName[name.getValue()] = id;
  argBuffers.insert(id);
}

/// Optimizer state starts at zero: no bytes in the weights file.
llvm::Error Lowering::lowerState(BlockArgument arg, StringAttr name) {
  unsigned i = arg.getArgNumber();
  auto id = newBuffer(arg, name.str(), -1);
  if (!id)
    return id.takeError();
  bindArgument(*id, name, "state");
  setLayout(*program.mutable_buffers(*id), getArgLayout(func, i));
  pb::WeightRef *ref = program.add_weights();
  ref->set_buffer(*id);
  ref->set_bytes(program.buffers(*id).bytes());
  ref->set_zero_init(true);
  if (auto init = func.getArgAttrOfType<FloatAttr>(i, "smp.init"))
    ref->set_fill_value(init.getValueAsDouble());
  return llvm::Error::success();
}

llvm::Error Lowering::lowerParam(BlockArgument arg, StringAttr name) {
  unsigned i = arg.getArgNumber();
  auto id = newBuffer(arg, name.str(), -1);
  if (!id)
    return id.takeError();
  auto type = cast<RankedTensorType>(arg.getType());
  // A parameter is whole, split over tp, and (ZeRO-3) a dp chunk of that
  // (the verifier checked the layout against its type).
  LayoutAttr layout = getArgLayout(func, i);
  bool chunked = layout && layout.getDpChunked();
  RankedTensorType sliceType =
      chunked ? type.clone(layout.getDpChunkOf()) : type;
  RankedTensorType fullType = sliceType;
  if (layout)
    fullType = sliceType.clone(layout.fullShape(sliceType.getShape(), tpSize));
  if (!withWeights) {
    bindArgument(*id, name, "param"); // memory planning only
    return llvm::Error::success();
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
          : weights.read(initFrom ? initFrom.getValue() : name.getValue(),
                         fullType);
  if (!bytes)
    return bytes.takeError();
  if (layout && layout.hasTpSplit())
    *bytes = tpSlice(*bytes, fullType, layout);
  uint64_t chunkBytes = program.buffers(*id).bytes();
  // ZeRO-3: the weights file holds the whole tp slice, zero-padded to dp
  // chunks; rankProgram points each data-parallel replica at its chunk.
  uint64_t dp = chunked ? static_cast<uint64_t>(dpSize) : 1;
  if (chunked && bytes->size() <= chunkBytes * dp)
    bytes->resize(chunkBytes * dp, '\0');
  if (bytes->size() != chunkBytes * dp)
    return fail("parameter '" + name.getValue() + "' has " +
                llvm::Twine(bytes->size()) + " bytes, expected " +
                llvm::Twine(chunkBytes * dp));
  addWeight(*id, *bytes);
  program.mutable_weights(program.weights_size() - 1)->set_bytes(chunkBytes);
  bindArgument(*id, name, "param");
  setLayout(*program.mutable_buffers(*id), layout);
  return llvm::Error::success();
}

llvm::Error Lowering::lowerOp(Operation &op, int64_t &index) {
  if (auto ret = dyn_cast<func::ReturnOp>(op))
    return lowerReturn(ret);
  if (isa<shard::AllReduceOp>(op))
    return lowerAllReduce(op, index++);
  if (isa<shard::ReduceScatterOp, shard::AllGatherOp, shard::AllSliceOp,
          AllSliceMultiOp>(op))
    return lowerShardCollective(op, index++);
  if (op.getDialect() == nullptr ||
      op.getDialect()->getNamespace() != SmpDialect::getDialectNamespace())
    return fail("cannot lower op '" + op.getName().getStringRef() +
                "' (only smp ops and shard collectives run on a device)");
  if (isa<ConstantOp>(op))
    return lowerConstant(op);
  if (isa<TpRankOp>(op))
    return lowerTpRank(op);
  if (isa<ReshapeOp, TpCopyOp>(op))
    return lowerAlias(op, index++);
  if (auto slice = dyn_cast<SliceOp>(op))
    if (std::optional<uint64_t> at = viewOffset(slice))
      return lowerView(slice, *at, index++);
  return lowerInstruction(op, index++);
}

llvm::Error Lowering::lowerReturn(func::ReturnOp ret) {
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (auto update = func.getResultAttrOfType<StringAttr>(i, "smp.update")) {
      if (auto err = aliasUpdate(v, update.getValue()))
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
    if (auto samples =
            func.getResultAttrOfType<StringAttr>(i, SmpDialect::kSamplesAttr))
      spec->set_samples(samples.str());
  }
  return llvm::Error::success();
}

llvm::Error Lowering::lowerConstant(Operation &op) {
  auto constant = cast<ConstantOp>(op);
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
  return llvm::Error::success();
}

/// This tensor-parallel rank's index: a constant of its program.
llvm::Error Lowering::lowerTpRank(Operation &op) {
  auto id = newBuffer(op.getResult(0), valueName(&op), -1);
  if (!id)
    return id.takeError();
  std::string bytes(8, '\0');
  for (int k = 0; k < 8; ++k)
    bytes[k] = static_cast<char>((static_cast<uint64_t>(tpRank) >> (8 * k)) & 0xff);
  addWeight(*id, bytes);
  return llvm::Error::success();
}

/// Same bytes (new shape): alias the input's storage.
llvm::Error Lowering::lowerAlias(Operation &op, int64_t index) {
  auto id = newBuffer(op.getResult(0), valueName(&op), index);
  if (!id)
    return id.takeError();
  unsigned from = bufferOf.lookup(op.getOperand(0));
  unsigned to = root[from];
  root[*id] = to;
  viewOffsetOf[*id] = viewOffsetOf[from];
  members[*id].clear();
  members[to].push_back(*id);
  use(op.getOperand(0), index);
  aliases.insert(&op);
  return llvm::Error::success();
}

/// Whether `v` reaches the step's results, itself or through aliases (a
/// view of it must not become a parameter's update or an output).
static bool reachesReturn(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<func::ReturnOp>(user))
      return true;
    if (isa<ReshapeOp, TpCopyOp, SliceOp>(user) &&
        reachesReturn(user->getResult(0)))
      return true;
  }
  return false;
}

std::optional<uint64_t> Lowering::viewOffset(SliceOp slice) {
  if (!slice->hasAttr(SmpDialect::kViewAttr) ||
      reachesReturn(slice.getResult()))
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(slice.getInput().getType());
  auto it = bufferOf.find(slice.getInput());
  if (!type || !type.hasStaticShape() || it == bufferOf.end())
    return std::nullopt;
  unsigned r = root[it->second];
  if (pool[r] != 0 || argBuffers.contains(r) || live[r].start < 0)
    return std::nullopt; // weights and arguments keep their own storage
  // Contiguous: unit steps; after the first dimension the slice narrows
  // every dimension whole, before it every dimension a single index.
  ArrayRef<int64_t> shape = type.getShape();
  ArrayRef<int64_t> starts = slice.getStarts(), limits = slice.getLimits(),
                    steps = slice.getSteps();
  int64_t narrowed = -1, element = 0, stride = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    int64_t extent = limits[d] - starts[d];
    if (steps[d] != 1 || extent < 1)
      return std::nullopt;
    if (narrowed >= 0 && extent != 1)
      return std::nullopt;
    if (extent != shape[d])
      narrowed = d;
    element += starts[d] * stride;
    stride *= shape[d];
  }
  auto dtype = smp::baseDType(type.getElementType());
  if (!dtype)
    return std::nullopt;
  uint64_t bytes = static_cast<uint64_t>(element) *
                   static_cast<uint64_t>(smp::base::dtypeSize(*dtype));
  // The arena's alignment, which the kernels' vector loads rely on.
  if (bytes % kViewAlignment != 0)
    return std::nullopt;
  return bytes;
}

/// A contiguous part of the input's storage, `offset` bytes in.
llvm::Error Lowering::lowerView(SliceOp slice, uint64_t offset, int64_t index) {
  if (auto err = lowerAlias(*slice, index))
    return err;
  unsigned id = bufferOf.lookup(slice.getResult());
  viewOffsetOf[id] += offset;
  return llvm::Error::success();
}

/// An op whose results may take operands' storage (inPlaceOperands:
/// cross_entropy_grad over its logits: for a language model the two
/// largest tensors of the step, GPT-2 at 16 x 1024 tokens: 1.65 GB each in
/// bf16, need one buffer; plain SGD's momentum buffers over the gradients).
/// Recorded here, shared by shareInPlace once every buffer's last use is known.
void Lowering::recordInPlace(Operation &op, const pb::Instruction &inst,
                             int64_t index) {
  for (auto [result, input] : inPlaceOperands(&op))
    inPlace.push_back({inst.outputs(static_cast<int>(result)),
                       bufferOf.lookup(input), index});
}

/// Each recorded output joins its input's storage where nothing reads the
/// input's root after the op: an input that is its own root (no aliases)
/// lends the whole root, a view its region of the root (plain SGD's new
/// momentum buffers over gradients that are views of their data-parallel
/// buckets). Neither may be an argument, a weight or in the host pool; both
/// are of one size. An op's pairs are judged by the ranges as they were
/// before its own shares (which extend them), and no two of its outputs
/// take overlapping regions of one root.
void Lowering::shareInPlace() {
  int64_t op = -1;
  llvm::DenseMap<unsigned, int64_t> endBefore; // root -> end before this op
  llvm::DenseMap<unsigned, SmallVector<std::pair<uint64_t, uint64_t>, 4>>
      lent; // root -> the regions this op's outputs took
  for (const InPlace &p : inPlace) {
    if (p.index != op) {
      op = p.index;
      endBefore.clear();
      lent.clear();
    }
    unsigned in = p.input, out = p.output, r = root[in];
    auto before = endBefore.find(r);
    int64_t end = before == endBefore.end() ? live[r].end : before->second;
    if (root[out] != out || (r == in && members[in].size() != 1) ||
        argBuffers.contains(in) || argBuffers.contains(r) ||
        live[r].start < 0 || end != p.index || pool[r] != 0 || pool[out] != 0 ||
        live[in].bytes != live[out].bytes)
      continue;
    uint64_t first = viewOffsetOf[in], last = first + live[in].bytes;
    auto &regions = lent[r];
    if (llvm::any_of(regions, [&](auto region) {
          return first < region.second && region.first < last;
        }))
      continue;
    regions.push_back({first, last});
    endBefore.try_emplace(r, live[r].end);
    for (unsigned x : members[out]) {
      root[x] = r;
      viewOffsetOf[x] += first;
    }
    members[r].append(members[out].begin(), members[out].end());
    members[out].clear();
    live[r].end = std::max(live[r].end, live[out].end);
  }
}

/// An alias keeps its root alive: alias uses are folded into the root's
/// range (by `use`); the roots are planned, the device arena and the host
/// pool separately.
void Lowering::planBuffers() {
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
    if (which == 0) {
      plan = planWithHolds(rootIds, rootRanges, std::move(plan));
      peak = arenaPeak(program, firstInstruction, rootIds, rootRanges, plan);
    }
    for (size_t k = 0; k < rootIds.size(); ++k)
      offsetOfRoot[rootIds[k]] = plan.offsets[k];
    if (which == 0)
      program.set_arena_bytes(plan.arenaBytes);
    else
      program.set_host_arena_bytes(plan.arenaBytes);
  }
  for (unsigned id = 0; id < root.size(); ++id)
    program.mutable_buffers(id)->set_offset(offsetOfRoot[root[id]] +
                                            viewOffsetOf[id]);
}

} // namespace smp::writer
