//===- DeviceSpec.cpp - What a device and its links can do ----------------===//

#include "smp/Analysis/Cost/DeviceSpec.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

namespace smp {
namespace {

constexpr double G = 1e9, T = 1e12, us = 1e-6;

llvm::Error fail(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

DeviceSpec make(const char *name, double memGB, double bf16TF, double fp32TF,
                double hbmGBps, int perNode, double nvlinkGBps,
                double netGBps) {
  DeviceSpec d;
  d.name = name;
  d.memoryBytes = memGB * G;
  d.matrixFlops16 = bf16TF * T;
  d.matrixFlops32 = fp32TF * T;
  d.vectorFlops = fp32TF * T;
  d.memoryBandwidth = hbmGBps * G;
  d.devicesPerNode = perNode;
  d.intraNodeBandwidth = nvlinkGBps * G;
  d.intraNodeLatency = 5 * us;
  d.interNodeBandwidth = netGBps * G;
  d.interNodeLatency = 10 * us;
  d.kernelOverhead = 4 * us;
  d.hostBandwidth = 25 * G;
  d.fusesElementwise = true; // the CUDA backend's fused kernels
  d.overlapsCommunication = true; // and its communication stream
  // Achievable fractions of the peaks (docs/benchmarks.md, "Cost model
  // against Megatron-LM"): matrix products at 80% of the tensor-core peak
  // (a prior: what cuBLAS reaches on large bf16 GEMMs), memory-bound work at
  // the fraction calibrated on the 1.7B row of Megatron-LM's Table 1 on
  // A100s (bench/megatron_table1.py), carried over to the other GPUs.
  d.matrixEfficiency = 0.8;
  d.memoryEfficiency = 0.43;
  return d;
}

} // namespace

std::vector<std::string> deviceSpecPresets() {
  return {"h100-sxm-80g", "a100-sxm-80g", "a100-sxm-40g", "v100-32g", "cpu"};
}

std::optional<DeviceSpec> deviceSpecPreset(llvm::StringRef name) {
  // NVLink: per direction (half the bidirectional figure); network: each
  // GPU's NIC (H100: 400 Gb/s, A100: 200 Gb/s HDR, V100: 100 Gb/s EDR).
  if (name == "h100-sxm-80g") {
    DeviceSpec d = make("h100-sxm-80g", 80, 989, 67, 3350, 8, 450, 50);
    d.hostBandwidth = 55 * G; // PCIe 5 x16
    return d;
  }
  if (name == "a100-sxm-80g")
    return make("a100-sxm-80g", 80, 312, 19.5, 2039, 8, 300, 25);
  if (name == "a100-sxm-40g")
    return make("a100-sxm-40g", 40, 312, 19.5, 1555, 8, 300, 25);
  if (name == "v100-32g") {
    DeviceSpec d = make("v100-32g", 32, 125, 15.7, 900, 8, 150, 12.5);
    d.hostBandwidth = 12 * G; // PCIe 3 x16
    return d;
  }
  if (name == "cpu") {
    // One core of this project's 2-core Zen 4 VM per rank (docs/benchmarks.md:
    // ~115 GFLOP/s f32 FMA peak per core); ranks talk through shared memory.
    DeviceSpec d = make("cpu", 8, 0.115, 0.115, 20, 2, 5, 5);
    d.vectorFlops = 0.03 * T;
    d.intraNodeLatency = 2 * us;
    d.interNodeLatency = 2 * us;
    d.kernelOverhead = 1 * us;
    d.hostBandwidth = 10 * G; // memcpy into the host pool
    d.fusesElementwise = false; // one kernel per instruction
    d.overlapsCommunication = false; // MPI's collectives block the rank
    d.matrixOverlapsMemory = false;  // OpenBLAS packs, then multiplies
    d.matrixEfficiency = d.memoryEfficiency = 1.0; // the peaks are measured
    return d;
  }
  return std::nullopt;
}

llvm::Expected<DeviceSpec> parseCluster(llvm::StringRef text,
                                        llvm::StringRef source) {
  auto parsed = llvm::json::parse(text);
  if (!parsed)
    return fail(source + ": not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *o = parsed->getAsObject();
  if (!o)
    return fail(source + ": expected a JSON object");
  DeviceSpec d;
  bool fromBase = false;
  if (auto base = o->getString("base")) {
    auto preset = deviceSpecPreset(*base);
    if (!preset)
      return fail(source + ": unknown base '" + *base + "'");
    d = *preset;
    fromBase = true;
  }
  if (auto name = o->getString("name"))
    d.name = name->str();
  else if (!fromBase)
    d.name = source.str();
  static const char *known[] = {"base",
                                "name",
                                "devices_per_node",
                                "memory_gb",
                                "peak_tflops",
                                "memory_gbps",
                                "intra_node_gbps",
                                "inter_node_gbps",
                                "intra_node_latency_us",
                                "inter_node_latency_us",
                                "kernel_overhead_us",
                                "host_gbps",
                                "matrix_efficiency",
                                "memory_efficiency",
                                "fuses_elementwise",
                                "overlaps_communication",
                                "matrix_overlaps_memory"};
  for (const auto &kv : *o) {
    bool ok = false;
    for (const char *k : known)
      ok |= kv.first == k;
    if (!ok)
      return fail(source + ": unknown key '" + kv.first.str() + "'");
  }
  auto number = [&](const llvm::json::Object &obj, llvm::StringRef key,
                    double scale, double &out, bool required) -> llvm::Error {
    const llvm::json::Value *v = obj.get(key);
    if (!v) {
      if (required)
        return fail(source + ": missing '" + key + "' (or give a \"base\")");
      return llvm::Error::success();
    }
    auto x = v->getAsNumber();
    if (!x || *x <= 0)
      return fail(source + ": '" + key + "' must be a positive number");
    out = *x * scale;
    return llvm::Error::success();
  };
  bool req = !fromBase;
  double perNode = d.devicesPerNode;
  if (auto err = number(*o, "devices_per_node", 1, perNode, req))
    return std::move(err);
  d.devicesPerNode = static_cast<int>(perNode);
  for (auto [key, scale, field] :
       {std::make_tuple("memory_gb", G, &d.memoryBytes),
        std::make_tuple("memory_gbps", G, &d.memoryBandwidth),
        std::make_tuple("intra_node_gbps", G, &d.intraNodeBandwidth),
        std::make_tuple("inter_node_gbps", G, &d.interNodeBandwidth)})
    if (auto err = number(*o, key, scale, *field, req))
      return std::move(err);
  for (auto [key, scale, field] :
       {std::make_tuple("intra_node_latency_us", us, &d.intraNodeLatency),
        std::make_tuple("inter_node_latency_us", us, &d.interNodeLatency),
        std::make_tuple("kernel_overhead_us", us, &d.kernelOverhead),
        std::make_tuple("host_gbps", G, &d.hostBandwidth),
        std::make_tuple("matrix_efficiency", 1.0, &d.matrixEfficiency),
        std::make_tuple("memory_efficiency", 1.0, &d.memoryEfficiency)})
    if (auto err = number(*o, key, scale, *field, false))
      return std::move(err);
  for (auto [key, field] :
       {std::make_pair("fuses_elementwise", &d.fusesElementwise),
        std::make_pair("overlaps_communication", &d.overlapsCommunication),
        std::make_pair("matrix_overlaps_memory", &d.matrixOverlapsMemory)})
    if (const llvm::json::Value *f = o->get(key)) {
      auto b = f->getAsBoolean();
      if (!b)
        return fail(source + ": '" + key + "' must be true or false");
      *field = *b;
    }
  if (d.matrixEfficiency > 1 || d.memoryEfficiency > 1)
    return fail(source + ": efficiencies must be at most 1");
  const llvm::json::Object *peak = o->getObject("peak_tflops");
  if (!peak && req)
    return fail(source + ": missing 'peak_tflops' (or give a \"base\")");
  if (peak) {
    for (const auto &kv : *peak)
      if (kv.first != "bf16" && kv.first != "fp16" && kv.first != "fp32" &&
          kv.first != "vector")
        return fail(source + ": unknown key 'peak_tflops." + kv.first.str() +
                    "' (bf16, fp16, fp32, vector)");
    double bf16 = d.matrixFlops16, fp16 = 0;
    if (auto err = number(*peak, "bf16", T, bf16, false))
      return std::move(err);
    if (auto err = number(*peak, "fp16", T, fp16, false))
      return std::move(err);
    d.matrixFlops16 = std::max(bf16, fp16);
    if (auto err = number(*peak, "fp32", T, d.matrixFlops32, req))
      return std::move(err);
    d.vectorFlops = d.matrixFlops32;
    if (auto err = number(*peak, "vector", T, d.vectorFlops, false))
      return std::move(err);
    if (d.matrixFlops16 <= 0)
      return fail(source + ": missing 'peak_tflops.bf16' (or fp16)");
  }
  return d;
}

llvm::Expected<DeviceSpec> loadDeviceSpec(llvm::StringRef nameOrPath) {
  if (auto preset = deviceSpecPreset(nameOrPath))
    return *preset;
  auto buffer = llvm::MemoryBuffer::getFile(nameOrPath);
  if (!buffer) {
    std::string names;
    for (const auto &n : deviceSpecPresets())
      names += (names.empty() ? "" : ", ") + n;
    return fail("unknown cluster '" + nameOrPath + "': not a preset (" + names +
                ") nor a readable JSON file");
  }
  return parseCluster((*buffer)->getBuffer(), nameOrPath);
}

} // namespace smp
