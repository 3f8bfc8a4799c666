//===- InstructionEncoding.cpp - An op -> an instruction ------------------===//
//
// The instruction of an smp op or a shard collective: operands and results
// as buffers, attributes converted to artifact attributes, the compiler's
// cost as "@flops"/"@bytes", and the check against the runtime's op schema
// (smp/base/OpSchema.def).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/base/OpSchema.h"

namespace smp::writer {

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
    // The groups of a variadic op's operands and results: the runtime reads
    // them from the counts (OpSchema.def says how, op by op).
    if (named.getName() == "operandSegmentSizes" ||
        named.getName() == "resultSegmentSizes")
      continue;
    // max/min's `strict` chose their gradient, built before lowering.
    if (isa<MaxOp, MinOp>(op) && named.getName() == "strict")
      continue;
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

/// The artifact's name of the ranks a collective over `grid` (along
/// `axes`) spans: the grid's name, or under hybrid sharding (a 2-D @dp)
/// "dp_shard" (axis 1: the ranks that split a ZeRO chunk) or "dp_replica"
/// (axis 0: the ranks that hold the same chunk).
static llvm::Expected<std::string> groupName(Operation &op,
                                             llvm::StringRef grid,
                                             ArrayRef<int16_t> axes) {
  auto module = op.getParentOfType<ModuleOp>();
  auto g = module ? module.lookupSymbol<shard::GridOp>(grid) : shard::GridOp();
  size_t rank = g ? g.getShape().size() : 1;
  if (rank <= 1 || axes.size() == rank)
    return grid.str();
  if (grid == "dp" && rank == 2 && axes.size() == 1)
    return axes[0] == 1 ? std::string("dp_shard") : std::string("dp_replica");
  return fail("collective over axes of grid '" + grid +
              "' that no rank group names");
}

/// A collective over the ranks of a grid axis.
llvm::Error Lowering::lowerAllReduce(Operation &op, int64_t index) {
  auto reduce = cast<shard::AllReduceOp>(op);
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
  recordInPlace(op, *inst, index); // where nothing reads the input after
  pb::Attribute kind, grid, axes;
  kind.set_s(shard::stringifyReductionKind(reduce.getReduction()).str());
  auto name = groupName(op, reduce.getGrid(), reduce.getGridAxes());
  if (!name)
    return name.takeError();
  grid.set_s(*name);
  for (int16_t axis : reduce.getGridAxes())
    axes.mutable_ints()->add_values(axis);
  (*inst->mutable_attrs())["reduction"] = kind;
  (*inst->mutable_attrs())["grid"] = grid;
  (*inst->mutable_attrs())["grid_axes"] = axes;
  return llvm::Error::success();
}

/// Collectives that split or join dim 0 across the grid's ranks (and
/// all_slice_multi: all_slice of each of its inputs).
llvm::Error Lowering::lowerShardCollective(Operation &op, int64_t index) {
  pb::Instruction *inst = program.add_instructions();
  inst->set_loc(valueName(&op));
  for (Value input : op.getOperands()) {
    inst->add_inputs(bufferOf.lookup(input));
    use(input, index);
  }
  for (Value result : op.getResults()) {
    auto id = newBuffer(result, valueName(&op), index);
    if (!id)
      return id.takeError();
    inst->add_outputs(*id);
  }
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
  } else if (auto as = dyn_cast<shard::AllSliceOp>(op)) {
    inst->set_op("all_slice");
    axis = as.getSliceAxis().getSExtValue();
  } else {
    inst->set_op("all_slice"); // all_slice_multi: along dim 0
  }
  if (axis != 0)
    return fail("collectives along dims other than 0 are not supported");
  pb::Attribute grid;
  auto axes = op.getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  auto name = groupName(
      op, op.getAttrOfType<FlatSymbolRefAttr>("grid").getValue(),
      axes ? axes.asArrayRef() : ArrayRef<int16_t>{});
  if (!name)
    return name.takeError();
  grid.set_s(*name);
  (*inst->mutable_attrs())["grid"] = grid;
  return llvm::Error::success();
}

llvm::Error Lowering::lowerInstruction(Operation &op, int64_t index) {
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
recordInPlace(op, *inst, index);
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
  return llvm::Error::success();
}

} // namespace smp::writer
