//===- DeviceSpec.h - What a device and its links can do --------*- C++ -*-===//
//
// Peak rates of one device (a GPU, or one CPU core as a rank of the CPU
// backend) and of the links between devices of a node and between nodes.
// Presets for common GPUs (vendor datasheet figures, dense, no sparsity)
// and this project's CPU machine; a cluster JSON file overrides any of
// them (see parseCluster).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_ANALYSIS_COST_DEVICESPEC_H
#define SMP_ANALYSIS_COST_DEVICESPEC_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace smp {

struct DeviceSpec {
  std::string name;
  double memoryBytes = 0;      // device memory
  double matrixFlops16 = 0;    // bf16/fp16 matrix products (tensor cores)
  double matrixFlops32 = 0;    // f32 matrix products
  double vectorFlops = 0;      // other arithmetic, f32
  double memoryBandwidth = 0;  // device memory, bytes/s
  int devicesPerNode = 1;
  double intraNodeBandwidth = 0; // per device, one direction, bytes/s
  double intraNodeLatency = 0;   // s per message
  double interNodeBandwidth = 0; // per device (its share of the NICs)
  double interNodeLatency = 0;
  double kernelOverhead = 0;     // s per kernel launch
  double hostBandwidth = 0;      // device <-> host memory, bytes/s (offload)
  /// Achievable fractions of the peaks (calibrated, see the planner).
  double matrixEfficiency = 1.0;
  double memoryEfficiency = 1.0;
  /// The backend fuses elementwise chains into their producers and absorbs
  /// layout changes into matrix products (the CUDA backend; the CPU backend
  /// runs one kernel per instruction).
  bool fusesElementwise = false;
  /// The backend runs collectives on a stream of their own beside compute
  /// (the CUDA backend: a gradient bucket's all-reduce or reduce-scatter
  /// beside the rest of the backward, ZeRO-3's prefetched gathers beside
  /// the ops before their use); the CPU backend's collectives block. The
  /// planner prices the time they add to the step, not all of it.
  bool overlapsCommunication = false;
  /// A matrix product's memory traffic runs beside its arithmetic (a GPU's
  /// GEMM streams its tiles while the tensor cores work: max of the two).
  /// False on the CPU backend, where OpenBLAS packs the operands into its
  /// own buffers before the kernel runs: the two add, and a small
  /// micro-batch's product is slower per row than its FLOPs say (64 rows
  /// of a 1024 x 1024 layer at ~72 GFLOP/s against 512 rows at ~92).
  bool matrixOverlapsMemory = true;
};

/// The preset names: h100-sxm-80g, a100-sxm-80g, a100-sxm-40g, v100-32g, cpu.
std::vector<std::string> deviceSpecPresets();
std::optional<DeviceSpec> deviceSpecPreset(llvm::StringRef name);

/// A cluster description in JSON:
///   {"base": "a100-sxm-80g",            optional preset to start from
///    "name": "...", "devices_per_node": 8, "memory_gb": 80,
///    "peak_tflops": {"bf16": 312, "fp16": 312, "fp32": 19.5,
///                    "vector": 19.5},
///    "memory_gbps": 2039, "intra_node_gbps": 300, "inter_node_gbps": 25,
///    "intra_node_latency_us": 5, "inter_node_latency_us": 10,
///    "kernel_overhead_us": 5, "host_gbps": 25,
///    "matrix_efficiency": 0.6, "memory_efficiency": 0.8,
///    "fuses_elementwise": true, "overlaps_communication": true,
///    "matrix_overlaps_memory": true}
/// (GB = 1e9 bytes). Without a base every rate must be given. Errors name
/// `source` and the key.
llvm::Expected<DeviceSpec> parseCluster(llvm::StringRef json,
                                        llvm::StringRef source);

/// A preset name or a JSON file's path.
llvm::Expected<DeviceSpec> loadDeviceSpec(llvm::StringRef nameOrPath);

} // namespace smp

#endif // SMP_ANALYSIS_COST_DEVICESPEC_H
