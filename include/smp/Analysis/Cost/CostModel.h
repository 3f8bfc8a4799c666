//===- CostModel.h - Time of ops and collectives on a device ----*- C++ -*-===//
//
// Roofline time of an op (CostOpInterface) on a DeviceSpec, alpha-beta time
// of collectives and point-to-point messages, measured kernel times from
// `smprun --profile` in preference to both, and the step time of a rank's
// function as their sum (the CPU backend runs one instruction at a time).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_ANALYSIS_COST_COSTMODEL_H
#define SMP_ANALYSIS_COST_COSTMODEL_H

#include "smp/Analysis/Cost/DeviceSpec.h"
#include "smp/Interfaces/CostInterface.h"
#include "llvm/ADT/StringMap.h"

namespace mlir {
class Operation;
class Type;
namespace func {
class FuncOp;
}
} // namespace mlir

namespace smp {

/// max(FLOPs / peak, bytes / bandwidth) + a kernel launch; the peak is the
/// matrix one for matrix work (16-bit or 32-bit by `elementBits`), the
/// vector one otherwise. Nothing to do costs nothing.
double rooflineTime(const OpCost &cost, unsigned elementBits,
                    const DeviceSpec &device);

enum class Collective { AllReduce, AllGather, ReduceScatter, Broadcast, P2P };

/// Time of a collective over `ranks` devices on `bytes` (the whole buffer:
/// the all-reduced tensor, the gathered result, the scattered input; the
/// message for P2P), with the link of a node when `crossNode` is false and
/// of the network otherwise. Ring (bandwidth-optimal) and tree
/// (latency-optimal) algorithms, the faster of both:
///   all-reduce ring  2(p-1) alpha + 2 (p-1)/p * n / beta
///   all-reduce tree  2 log2(p) alpha + 2 n / beta
///   all-gather, reduce-scatter: (p-1) alpha + (p-1)/p * n / beta
///   broadcast: log2(p) alpha + n / beta;  p2p: alpha + n / beta.
double collectiveTime(Collective kind, double bytes, int ranks, bool crossNode,
                      const DeviceSpec &device);

/// The same over a group of `ranks` devices of which `ranksPerNode` share a
/// node (the group spans ranks / ranksPerNode nodes): with several per node
/// and several nodes, hierarchically, as NCCL does: a reduce-scatter within
/// the node, the collective of each device's 1/k share across the nodes
/// (each device on its own NIC), an all-gather within the node.
double groupCollectiveTime(Collective kind, double bytes, int ranks,
                           int ranksPerNode, const DeviceSpec &device);

/// Measured seconds per call of each instruction, keyed by op and node
/// name, from `smprun --profile FILE` (the instructions of one rank).
class ProfileDB {
public:
  /// Reads a profile file; several files (ranks) may be added.
  llvm::Error addFile(llvm::StringRef path);
  /// Seconds per call; with `elements` (the outputs' element count where
  /// it runs now) and a profile that recorded its own, scaled by their
  /// ratio (the same op on another plan's slice of the data).
  std::optional<double> lookup(llvm::StringRef op, llvm::StringRef node,
                               double elements = 0) const;
  /// Seconds per call of the op with cost `now`: when the profile recorded
  /// the compiler's cost of what it measured, scaled by the ratio of the
  /// two costs' roofline times on `device` (the same op on another plan's
  /// shapes); else as lookup().
  std::optional<double> lookupScaled(llvm::StringRef op, llvm::StringRef node,
                                     const OpCost &now, unsigned bits,
                                     const DeviceSpec &device,
                                     double elements) const;
  size_t size() const { return table.size(); }

private:
  struct Entry {
    double seconds = 0, calls = 0, elements = 0; // elements: summed per entry
    double entries = 0;
    double flops = 0, bytes = 0; // the profiled op's cost (summed per entry)
  };
  llvm::StringMap<Entry> table;
};

struct StepEstimate {
  double computeSeconds = 0;
  double communicationSeconds = 0;
  double totalSeconds() const { return computeSeconds + communicationSeconds; }
  size_t measuredOps = 0, modelledOps = 0;
};

/// One op's time on `device`, as estimateFunction counts it: measured in
/// `profile` (matched by op and node name, scaled to this op's cost) or
/// modelled (roofline; collectives over their grid's ranks; a send the
/// point-to-point time of its bytes).
struct OpEstimate {
  double seconds = 0;
  bool communication = false; // a collective, send or receive
  bool measured = false;      // from the profile
};
OpEstimate estimateOp(mlir::Operation *op, const DeviceSpec &device,
                      const ProfileDB *profile = nullptr);

/// The time of one run of `func` on `device`: every op's roofline time (or
/// its measured time from `profile`, matched by op and node name),
/// collectives over their grid's ranks (all on one node when
/// `ranksPerNode` covers them), sends and receives as messages.
StepEstimate estimateFunction(mlir::func::FuncOp func, const DeviceSpec &device,
                              const ProfileDB *profile = nullptr);

} // namespace smp

#endif // SMP_ANALYSIS_COST_COSTMODEL_H
