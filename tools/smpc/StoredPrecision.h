//===- StoredPrecision.h - Parameters a file stores in bf16 or fp16 -*- C++
//-*-//
//
// A model exported after `model.to(torch.bfloat16)` (or `.half()`, or
// loaded with `torch_dtype=`) stores its parameters in 16 bits, and its
// ops compute in them. PyTorch trains such a module as stored: the
// parameters, their gradients and the optimizer's states in that type, no
// fp32 master copy, whatever autocast does. smpc does the same, says so,
// and refuses the combinations PyTorch cannot train or that would train
// another model (StoredPrecision.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_STOREDPRECISION_H
#define SMPC_STOREDPRECISION_H

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

struct Options;

namespace smpc {

/// The trained float parameters of an imported model by stored type.
struct StoredPrecision {
  struct Count {
    int64_t tensors = 0, elements = 0;
    std::string example; // the first such parameter's name
  };
  Count f32, bf16, f16, other;
  int64_t tensors() const {
    return f32.tensors + bf16.tensors + f16.tensors + other.tensors;
  }
  int64_t elements() const {
    return f32.elements + bf16.elements + f16.elements + other.elements;
  }
  /// Some trained parameter is bf16 or fp16: the step computes in the
  /// file's types (no smp-mixed-precision), as compile and plan build it.
  bool any16Bit() const { return bf16.tensors + f16.tensors > 0; }
  /// Most parameter elements are bf16 or fp16: the products compute in 16
  /// bits (the peak smprun's MFU is a fraction of).
  bool mostly16Bit() const {
    return 2 * (bf16.elements + f16.elements) > elements();
  }
};

/// The float parameters `module`'s functions train (not buffers, not those
/// the --freeze regex `freeze` matches), by stored element type.
StoredPrecision storedPrecision(mlir::ModuleOp module, llvm::StringRef freeze);

/// Refuses a training request that stored 16-bit parameters contradict
/// (the message, or std::nullopt).
std::optional<std::string> checkStoredPrecision(const StoredPrecision &p,
                                                const Options &opts);

/// Where there are any: the warning that says how they are trained.
void warnStoredPrecision(const StoredPrecision &p, const Options &opts);

/// plan.txt's "parameters:" line ("" when every trained parameter is f32);
/// `masterWeights`: trained as fp32 master copies (--master-weights fp32).
std::string describeStoredPrecision(const StoredPrecision &p,
                                    bool masterWeights);

} // namespace smpc

#endif // SMPC_STOREDPRECISION_H
