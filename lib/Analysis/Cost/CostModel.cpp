//===- CostModel.cpp - Time of ops and collectives on a device ------------===//

#include "smp/Analysis/Cost/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir;

namespace smp {

double rooflineTime(const OpCost &cost, unsigned elementBits,
                    const DeviceSpec &d) {
  if (cost.flops <= 0 && cost.bytes() <= 0)
    return 0;
  double peak = cost.matrix ? (elementBits <= 16 ? d.matrixFlops16
                                                 : d.matrixFlops32) *
                                  d.matrixEfficiency
                            : d.vectorFlops;
  double compute = peak > 0 ? cost.flops / peak : 0;
  double memory = d.memoryBandwidth > 0
                      ? cost.bytes() / (d.memoryBandwidth * d.memoryEfficiency)
                      : 0;
  if (cost.matrix && !d.matrixOverlapsMemory)
    return compute + memory + d.kernelOverhead;
  return std::max(compute, memory) + d.kernelOverhead;
}

double collectiveTime(Collective kind, double n, int p, bool crossNode,
                      const DeviceSpec &d) {
  double alpha = crossNode ? d.interNodeLatency : d.intraNodeLatency;
  double beta = crossNode ? d.interNodeBandwidth : d.intraNodeBandwidth;
  if (beta <= 0)
    return 0;
  if (kind == Collective::P2P)
    return alpha + n / beta;
  if (p <= 1)
    return 0;
  double steps = p - 1, share = (p - 1.0) / p, logp = std::ceil(std::log2(p));
  switch (kind) {
  case Collective::AllReduce:
    return std::min(2 * steps * alpha + 2 * share * n / beta,
                    2 * logp * alpha + 2 * n / beta);
  case Collective::AllGather:
  case Collective::ReduceScatter:
    return steps * alpha + share * n / beta;
  case Collective::Broadcast:
    return logp * alpha + n / beta;
  case Collective::P2P:
    break;
  }
  return 0;
}

double groupCollectiveTime(Collective kind, double n, int p, int k,
                           const DeviceSpec &d) {
  k = std::max(1, std::min(k, p));
  if (k == p)
    return collectiveTime(kind, n, p, /*crossNode=*/false, d);
  if (k == 1 || kind == Collective::Broadcast || kind == Collective::P2P)
    return collectiveTime(kind, n, p, /*crossNode=*/true, d);
  int nodes = (p + k - 1) / k;
  double inNode = collectiveTime(Collective::ReduceScatter, n, k, false, d);
  switch (kind) {
  case Collective::AllReduce:
    return 2 * inNode +
           collectiveTime(Collective::AllReduce, n / k, nodes, true, d);
  case Collective::AllGather:
  case Collective::ReduceScatter:
    return inNode + collectiveTime(kind, n / k, nodes, true, d);
  default:
    return 0;
  }
}

llvm::Error ProfileDB::addFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": cannot read the profile");
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        path + ": not a profile (JSON list of instructions): " +
            llvm::toString(parsed.takeError()));
  const llvm::json::Array *entries = parsed->getAsArray();
  if (!entries)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": not a profile (expected a list)");
  for (const llvm::json::Value &e : *entries) {
    const llvm::json::Object *o = e.getAsObject();
    auto op = o ? o->getString("op") : std::nullopt;
    auto node = o ? o->getString("node") : std::nullopt;
    auto seconds = o ? o->getNumber("seconds") : std::nullopt;
    if (!op || !node || !seconds)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": an entry lacks op, node or seconds");
    double calls = o->getNumber("calls").value_or(1);
    Entry &slot = table[(*op + "|" + *node).str()];
    slot.seconds += *seconds;
    slot.calls += calls;
    slot.elements += o->getNumber("elements").value_or(0);
    slot.flops += o->getNumber("flops").value_or(0);
    slot.bytes += o->getNumber("bytes").value_or(0);
    slot.entries += 1;
  }
  return llvm::Error::success();
}

std::optional<double> ProfileDB::lookup(llvm::StringRef op,
                                        llvm::StringRef node,
                                        double elements) const {
  auto it = table.find((op + "|" + node).str());
  if (it == table.end() || it->second.calls <= 0)
    return std::nullopt;
  const Entry &e = it->second;
  double perCall = e.seconds / e.calls;
  double profiled = e.entries > 0 ? e.elements / e.entries : 0;
  if (elements > 0 && profiled > 0)
    perCall *= elements / profiled;
  return perCall;
}

std::optional<double> ProfileDB::lookupScaled(llvm::StringRef op,
                                              llvm::StringRef node,
                                              const OpCost &now, unsigned bits,
                                              const DeviceSpec &device,
                                              double elements) const {
  auto it = table.find((op + "|" + node).str());
  if (it == table.end() || it->second.calls <= 0)
    return std::nullopt;
  const Entry &e = it->second;
  if (e.entries > 0 && (e.flops > 0 || e.bytes > 0)) {
    OpCost then = now;
    then.flops = e.flops / e.entries;
    then.bytesRead = e.bytes / e.entries;
    then.bytesWritten = 0;
    double a = rooflineTime(now, bits, device);
    double b = rooflineTime(then, bits, device);
    if (b > 0)
      return e.seconds / e.calls * (a / b);
  }
  return lookup(op, node, elements);
}

namespace {

unsigned elementBits(Operation *op) {
  unsigned bits = 32;
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType()))
      if (isa<FloatType>(t.getElementType()))
        return t.getElementTypeBitWidth();
  return bits;
}

double bytesOf(Value v) { return tensorBytes(v); }

std::string nodeName(Operation *op) {
  if (auto loc = dyn_cast<NameLoc>(op->getLoc()))
    return loc.getName().str();
  return op->getName().getStringRef().str();
}

/// The ranks a collective spans: the sizes of its grid axes (a hybrid-
/// sharded @dp's shard or replica groups), or of the whole grid.
int gridRanks(Operation *op, FlatSymbolRefAttr grid) {
  auto module = op->getParentOfType<ModuleOp>();
  auto g = module ? module.lookupSymbol<shard::GridOp>(grid.getAttr())
                  : shard::GridOp();
  if (!g)
    return 1;
  ArrayRef<int64_t> shape = g.getShape();
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
  int ranks = 1;
  if (axes && !axes.empty()) {
    for (int16_t a : axes.asArrayRef())
      if (a >= 0 && static_cast<size_t>(a) < shape.size())
        ranks *= static_cast<int>(shape[a]);
    return ranks;
  }
  for (int64_t d : shape)
    ranks *= static_cast<int>(d);
  return ranks;
}

} // namespace

OpEstimate estimateOp(Operation *op, const DeviceSpec &device,
                      const ProfileDB *profile) {
  OpEstimate e;
  e.communication = isa<shard::AllReduceOp, shard::AllGatherOp,
                        shard::ReduceScatterOp, SendOp, RecvOp>(op);
  std::string name = op->getName().getStringRef().str();
  llvm::StringRef opName = llvm::StringRef(name).rsplit('.').second;
  if (opName.empty())
    opName = name;
  double elements = 0;
  for (Value r : op->getResults())
    if (auto t = dyn_cast<RankedTensorType>(r.getType()))
      if (t.hasStaticShape())
        elements += static_cast<double>(t.getNumElements());
  if (profile)
    if (auto t = profile->lookupScaled(opName, nodeName(op), costOf(op),
                                       elementBits(op), device, elements)) {
      e.seconds = *t;
      e.measured = true;
      return e;
    }
  auto collective = [&](Collective kind, Value buffer, FlatSymbolRefAttr grid) {
    int p = gridRanks(op, grid);
    return collectiveTime(kind, bytesOf(buffer), p, p > device.devicesPerNode,
                          device);
  };
  if (auto ar = dyn_cast<shard::AllReduceOp>(op))
    e.seconds =
        collective(Collective::AllReduce, ar.getInput(), ar.getGridAttr());
  else if (auto ag = dyn_cast<shard::AllGatherOp>(op))
    e.seconds =
        collective(Collective::AllGather, ag.getResult(), ag.getGridAttr());
  else if (auto rs = dyn_cast<shard::ReduceScatterOp>(op))
    e.seconds =
        collective(Collective::ReduceScatter, rs.getInput(), rs.getGridAttr());
  else if (auto send = dyn_cast<SendOp>(op))
    e.seconds = collectiveTime(Collective::P2P, bytesOf(send.getInput()), 2,
                               false, device);
  else
    e.seconds = rooflineTime(costOf(op), elementBits(op), device);
  return e;
}

StepEstimate estimateFunction(func::FuncOp func, const DeviceSpec &device,
                              const ProfileDB *profile) {
  StepEstimate e;
  func.walk([&](Operation *op) {
    if (op == func.getOperation() || isa<func::ReturnOp>(op))
      return;
    OpEstimate t = estimateOp(op, device, profile);
    (t.communication ? e.communicationSeconds : e.computeSeconds) += t.seconds;
    ++(t.measured ? e.measuredOps : e.modelledOps);
  });
  return e;
}

} // namespace smp
