//===- StoredPrecision.cpp - Parameters a file stores in bf16 or fp16 -----===//
//
// What PyTorch does with a module whose parameters are bf16 or fp16, and
// what smpc does with its export:
//
// * bf16 parameters: PyTorch trains them as stored (gradients and AdamW's
//   states in bf16; torch.autocast, the Trainer's bf16=True, widens a few
//   ops to f32 on top). smp trains them as stored, computing in the types
//   the file has: smp-mixed-precision, which casts an fp32 export's f32
//   values down, does not run (--precision bf16 or fp32 change nothing;
//   plan.txt says so). --precision fp16 would compute them in fp16, which
//   does not hold bf16's range: refused; so is --precision bf16 on fp16
//   parameters.
// * fp16 parameters: torch's GradScaler refuses to unscale fp16 gradients
//   (--precision fp16 is its loss scaling: refused), and torch's Adam and
//   AdamW keep exp_avg_sq in fp16, where the squares of small gradients
//   are 0, round the states before using them, and add eps in fp16, where
//   the default 1e-8 is 0 (NaN). smp's optimizer kernels compute in f32:
//   with eps 1e-4 PyTorch's loss was 3.68 at step 3 where smp's was 4.02
//   (a 2-layer Llama). Refused. SGD trains as stored, without loss
//   scaling, as PyTorch's.
//
// Trained as stored, smp's numbers are PyTorch's within 16-bit rounding
// (test/smprun/stored-precision.test). The warning says so, and how to get
// fp32 master weights: --master-weights fp32 (smp-master-weights: f32
// copies cast to the stored type where the file computes, as DeepSpeed's
// bf16/fp16 optimizers keep them; it lifts the fp16 refusals but the
// cross-type ones), or an fp32 export with --precision bf16/fp16.
//
//===----------------------------------------------------------------------===//

#include "StoredPrecision.h"

#include "Options.h"

#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/TrainedParams.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

using namespace mlir;

smpc::StoredPrecision smpc::storedPrecision(ModuleOp module,
                                            llvm::StringRef freeze) {
  llvm::Regex frozen(freeze);
  StoredPrecision p;
  std::set<std::string> seen; // one parameter read by two functions
  for (auto func : module.getOps<func::FuncOp>()) {
    llvm::DenseSet<Value> running = smp::runningStatArgs(func);
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto name =
          func.getArgAttrOfType<StringAttr>(i, smp::SmpDialect::kParamAttr);
      if (!smp::isTrainedParam(func, i, freeze.empty() ? nullptr : &frozen,
                               running) ||
          !seen.insert(name.str()).second)
        continue;
      auto type = cast<RankedTensorType>(func.getArgument(i).getType());
      Type e = type.getElementType();
      StoredPrecision::Count &c = e.isF32()    ? p.f32
                                  : e.isBF16() ? p.bf16
                                  : e.isF16()  ? p.f16
                                               : p.other;
      ++c.tensors;
      c.elements += type.getNumElements();
      if (c.example.empty())
        c.example = name.str();
    }
  }
  return p;
}

namespace {

std::string some(const smpc::StoredPrecision &p,
                 const smpc::StoredPrecision::Count &c, const char *type) {
  return llvm::formatv("{0} of its {1} trained parameters in {2} ('{3}'{4})",
                       c.tensors, p.tensors(), type, c.example,
                       c.tensors > 1 ? ", ..." : "")
      .str();
}

} // namespace

std::optional<std::string> smpc::checkStoredPrecision(const StoredPrecision &p,
                                                      const Options &opts) {
  const std::string &precision = opts.plan.precision;
  const std::string file = opts.input + ": the file stores ";
  const std::string exportFp32 =
      "export the model in fp32 (model.float() before torch.onnx.export)";
  const char *given = " (also set by fp16 or bf16 in --training-args or "
                      "--deepspeed)";
  if (p.bf16.tensors && precision == "fp16")
    return file + some(p, p.bf16, "bf16") + ": --precision fp16" + given +
           " would compute them in fp16, which does not hold bf16's range; "
           "train them as stored (leave --precision out), or " +
           exportFp32 + " for fp16 mixed precision";
  if (p.f16.tensors && precision == "bf16")
    return file + some(p, p.f16, "fp16") + ": --precision bf16" + given +
           " would compute them in bf16, which has 3 fewer bits of "
           "mantissa; train them as stored (leave --precision out), or " +
           exportFp32 + " for bf16 mixed precision";
  bool master = opts.plan.masterWeights;
  const char *orMaster = ", or compile with --master-weights fp32 (fp32 "
                         "master copies, as DeepSpeed's fp16 optimizer keeps)";
  if (p.f16.tensors && precision == "fp16" && !master)
    return file + some(p, p.f16, "fp16") + ": --precision fp16" + given +
           " scales the loss and unscales their fp16 gradients, which "
           "torch's GradScaler refuses (\"Attempting to unscale FP16 "
           "gradients\"); " +
           exportFp32 +
           " and compile it with --precision fp16 (PyTorch's automatic "
           "mixed precision: fp32 parameters, fp16 compute)" +
           orMaster;
  // torch's Adam keeps its states in fp16 and computes from them rounded.
  if (p.f16.tensors && !master &&
      (opts.plan.optimizer == "adam" || opts.plan.optimizer == "adamw"))
    return file + some(p, p.f16, "fp16") + ": PyTorch's " +
           opts.plan.optimizer +
           " on fp16 parameters keeps exp_avg_sq in fp16, where (1 - beta2) "
           "times the square of a gradient under 5.5e-3 (beta2 0.999) is 0, "
           "and adds eps "
           "in fp16 (the default 1e-8 is 0: NaN), while smp's optimizer "
           "computes in f32: the run would not be PyTorch's; " +
           exportFp32 +
           " and compile it with --precision fp16 (PyTorch's automatic mixed "
           "precision), or train the fp16 parameters with --optimizer sgd" +
           orMaster;
  return std::nullopt;
}

void smpc::warnStoredPrecision(const StoredPrecision &p, const Options &opts) {
  bool half = p.f16.tensors > 0;
  std::string what = p.bf16.tensors ? some(p, p.bf16, "bf16")
                     : half         ? some(p, p.f16, "fp16")
                                    : "";
  if (what.empty())
    return;
  const char *type = half ? "fp16" : "bf16";
  // A mixed file (from_pretrained(dtype=torch.float16) keeps a model's
  // _keep_in_fp32_modules, T5's `wo`, in float32): those train in float32,
  // as PyTorch trains them.
  std::string wide =
      p.f32.tensors
          ? llvm::formatv(". Its other {0} trained parameter(s) ('{1}'{2}) "
                          "are float32 (modules kept in float32, as "
                          "from_pretrained keeps _keep_in_fp32_modules) and "
                          "train in float32, as in PyTorch",
                          p.f32.tensors, p.f32.example,
                          p.f32.tensors > 1 ? ", ..." : "")
                .str()
          : "";
  if (opts.plan.masterWeights) {
    llvm::errs() << "smpc: note: " << opts.input << ": the file stores " << what
                 << ": --master-weights fp32 trains fp32 master copies of "
                    "them (read exactly from the file), cast to "
                 << type
                 << " where the file computes, their gradients and optimizer "
                    "states f32, as DeepSpeed's bf16 and fp16 optimizers "
                    "keep them; --save-onnx rounds them back to "
                 << type << wide << "\n";
    return;
  }
  llvm::errs() << "smpc: warning: " << opts.input << ": the file stores "
               << what
               << ": smp trains them as stored, their gradients and "
                  "optimizer states in that type with no fp32 master copy, "
                  "as PyTorch trains a module converted with .to(dtype)"
               << (half ? ", without loss scaling (a gradient below fp16's "
                          "range is 0, as in PyTorch)"
                        : "")
               << ", and computes in the types the file has (--precision "
               << opts.plan.precision
               << " changes none). For fp32 master weights compile with "
                  "--master-weights fp32 (DeepSpeed's "
               << type
               << " optimizer), or export the model in fp32 (model.float() "
                  "before torch.onnx.export) and compile it with --precision "
               << type << wide << "\n";
}

std::string smpc::describeStoredPrecision(const StoredPrecision &p,
                                          bool masterWeights) {
  std::string out;
  auto add = [&](const StoredPrecision::Count &c, const char *type) {
    if (!c.tensors)
      return;
    out +=
        (out.empty() ? "" : ", ") +
        llvm::formatv("{0} of {1} in {2}", c.tensors, p.tensors(), type).str();
  };
  add(p.bf16, "bf16");
  add(p.f16, "fp16");
  if (out.empty())
    return "";
  std::string wide = p.f32.tensors
                         ? llvm::formatv("; {0} of {1} in f32, trained in f32",
                                         p.f32.tensors, p.tensors())
                               .str()
                         : "";
  return out +
         (masterWeights
              ? " in the file: trained as fp32 master copies "
                "(--master-weights fp32), cast to that type where the "
                "file computes; computed in the file's types"
              : " as the file stores them: trained in that type, "
                "optimizer states too, no fp32 master copy; computed in "
                "the file's types (--precision changes none)") +
         wide;
}
