//===- smp-onnx-conformance.cpp - ONNX backend tests through smp ----------===//
//
// smp-onnx-conformance [--min-pass-rate R] [--verbose] DIR...
//
// For every ONNX backend test under DIR (a directory holding model.onnx and
// test_data_set_*/{input,output}_*.pb, the layout of Debian's
// libonnx-testdata) whose ops the importer supports: import it (integer
// inputs, which hold shapes and axes, are folded in as constants), compile it
// to an artifact, run it on the CPU runtime and compare every output with the
// expected one (|a - e| <= atol + rtol |e|, rtol 1e-3 (2^-7 for bfloat16:
// two of its ulps), atol 1e-5, NaNs in the same places). Prints each failure,
// the ops that made tests unsupported and a closing "N passed, M failed" line.
// Exits 1 when the pass rate among supported tests is below --min-pass-rate
// (default 0.95).
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/MLIRContext.h"
#include "smp/Frontend/ONNX/Importer.h"
#include "smp/InitAll.h"
#include "smp/Target/Artifact/ArtifactWriter.h"
#include "smp/kernels/cpu/Kernels.h"
#include "smprt/exec/Artifact.h"
#include "smprt/exec/Executor.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace fe = smp::onnx_frontend;

namespace {

/// ONNX TensorProto data type -> runtime dtype (same numbering as the
/// artifact writer's).
std::optional<smprt::DType> dtypeOf(int32_t onnxType) {
  using smprt::DType;
  switch (onnxType) {
  case 1: return DType::F32;
  case 2: return DType::U8;
  case 3: return DType::I8;
  case 4: return DType::U16;
  case 5: return DType::I16;
  case 6: return DType::I32;
  case 7: return DType::I64;
  case 9: return DType::Bool;
  case 10: return DType::F16;
  case 11: return DType::F64;
  case 12: return DType::U32;
  case 13: return DType::U64;
  case 16: return DType::BF16;
  default: return std::nullopt;
  }
}

bool isIntegerType(int32_t onnxType) {
  return onnxType == 2 || onnxType == 3 || onnxType == 4 || onnxType == 5 ||
         onnxType == 6 || onnxType == 7 || onnxType == 12 || onnxType == 13;
}

double elementAt(const void *data, smprt::DType t, int64_t k) {
  return smprt::elementAsDouble(
      smprt::TensorRef{const_cast<void *>(data), t, {}}, k);
}

/// Compares an output with its expected value; empty string when equal.
std::string compare(const smprt::TensorRef &actual, const fe::HostTensor &exp,
                    double rtol, double atol) {
  auto dtype = dtypeOf(exp.onnxType);
  // ONNX 1.12 test data stores bfloat16 tensors as uint16 bit patterns.
  if (dtype == smprt::DType::U16 && actual.dtype == smprt::DType::BF16)
    dtype = smprt::DType::BF16;
  // bfloat16 keeps 8 significant bits: two of its ulps (ONNX's reference
  // rounds intermediates to bfloat16 where smp computes in f32 and rounds
  // once; its Attention tests differ from exact by up to one ulp).
  if (dtype == smprt::DType::BF16)
    rtol = std::max(rtol, 1.0 / 128);
  if (!dtype || *dtype != actual.dtype || actual.shape != exp.dims)
    return "got " + smprt::describe(actual) + ", expected a tensor of ONNX type " +
           std::to_string(exp.onnxType) + " with " +
           std::to_string(exp.dims.size()) + " dims";
  for (int64_t k = 0, n = actual.numel(); k < n; ++k) {
    double a = elementAt(actual.data, actual.dtype, k);
    double e = elementAt(exp.bytes.data(), *dtype, k);
    if (std::isnan(a) || std::isnan(e)) {
      if (std::isnan(a) != std::isnan(e))
        return "element " + std::to_string(k) + ": " + std::to_string(a) +
               " vs " + std::to_string(e);
      continue;
    }
    if (a == e)
      continue;
    if (!(std::fabs(a - e) <= atol + rtol * std::fabs(e)))
      return "element " + std::to_string(k) + ": " + std::to_string(a) +
             " vs expected " + std::to_string(e);
  }
  return "";
}

std::vector<std::string> sortedFiles(const std::string &dir,
                                     const std::string &prefix) {
  std::vector<std::string> files;
  for (int i = 0;; ++i) {
    std::string path = dir + "/" + prefix + std::to_string(i) + ".pb";
    if (!llvm::sys::fs::exists(path))
      break;
    files.push_back(path);
  }
  return files;
}

enum class Outcome { Passed, Failed, Unsupported };

struct Runner {
  mlir::DialectRegistry registry;
  std::string scratch;
  double rtol = 1e-3, atol = 1e-5;

  Outcome run(const std::string &testDir, std::string &why) {
    std::string model = testDir + "/model.onnx";
    auto unsupported = fe::unsupportedOpsIn(model);
    if (!unsupported) {
      why = llvm::toString(unsupported.takeError());
      return Outcome::Failed;
    }
    if (!unsupported->empty()) {
      why = (*unsupported)[0];
      for (size_t i = 1; i < unsupported->size(); ++i)
        why += "," + (*unsupported)[i];
      return Outcome::Unsupported;
    }
    std::string dataDir = testDir + "/test_data_set_0";
    std::vector<fe::HostTensor> inputs, outputs;
    for (const auto &path : sortedFiles(dataDir, "input_")) {
      auto t = fe::readTensorProtoFile(path);
      if (!t) {
        why = llvm::toString(t.takeError());
        return Outcome::Unsupported; // sequences, optionals, strings
      }
      inputs.push_back(std::move(*t));
    }
    for (const auto &path : sortedFiles(dataDir, "output_")) {
      auto t = fe::readTensorProtoFile(path);
      if (!t) {
        why = llvm::toString(t.takeError());
        return Outcome::Unsupported;
      }
      outputs.push_back(std::move(*t));
    }
    // Test data may leave tensor names empty: inputs then follow the
    // graph's input order.
    auto names = fe::graphInputNames(model);
    if (!names) {
      why = llvm::toString(names.takeError());
      return Outcome::Failed;
    }
    for (size_t i = 0; i < inputs.size() && i < names->size(); ++i)
      if (inputs[i].name.empty())
        inputs[i].name = (*names)[i];
    // Small integer and bool inputs (shapes, axes, flags), scalars and
    // Resize's and Upsample's float `scales` and `roi` (which decide the
    // output shape) become constants: smp compiles static shapes.
    fe::ImportOptions opts;
    for (const auto &in : inputs) {
      int64_t numel = 1;
      for (int64_t d : in.dims)
        numel *= d;
      if (((isIntegerType(in.onnxType) || in.onnxType == 9) && numel <= 8) ||
          numel == 1 ||
          (numel <= 8 && (in.name == "scales" || in.name == "roi")))
        opts.constantInputs[in.name] = in.serialized;
    }
    mlir::MLIRContext ctx(registry);
    auto module = fe::importONNXFile(ctx, model, opts);
    if (!module) {
      why = "import: " + llvm::toString(module.takeError());
      return Outcome::Failed;
    }
    auto weights = fe::openONNXWeights(model);
    if (!weights) {
      why = llvm::toString(weights.takeError());
      return Outcome::Failed;
    }
    smp::ArtifactOptions aopts;
    aopts.outputDir = scratch + "/" + llvm::sys::path::filename(testDir).str();
    aopts.producer = "smp-onnx-conformance";
    auto summary = smp::writeArtifact(**module, **weights, aopts);
    if (!summary) {
      why = "compile: " + llvm::toString(summary.takeError());
      return Outcome::Failed;
    }
    smprt::Artifact artifact;
    smprt::Status s = smprt::loadArtifact(aopts.outputDir, 0, artifact);
    std::set<std::string> bf16Inputs;
    for (const auto &spec : artifact.manifest.inputs())
      if (spec.dtype() == static_cast<uint32_t>(smprt::DType::BF16))
        bf16Inputs.insert(spec.name());
    smprt::Executor exec;
    if (s.ok())
      s = exec.init(artifact);
    for (const auto &in : inputs) {
      if (!s.ok() || opts.constantInputs.count(in.name))
        continue;
      auto dtype = dtypeOf(in.onnxType);
      // ONNX 1.12 test data stores bfloat16 tensors as uint16 bit patterns.
      if (dtype == smprt::DType::U16 && bf16Inputs.count(in.name))
        dtype = smprt::DType::BF16;
      smprt::TensorRef ref{const_cast<char *>(in.bytes.data()),
                           dtype.value_or(smprt::DType::F32), in.dims};
      s = exec.setInput(in.name, ref, "input");
    }
    if (s.ok())
      s = exec.run();
    llvm::sys::fs::remove_directories(aopts.outputDir);
    if (!s.ok()) {
      why = "run: " + s.error;
      return Outcome::Failed;
    }
    auto actual = exec.outputs();
    if (actual.size() != outputs.size()) {
      why = "got " + std::to_string(actual.size()) + " outputs, expected " +
            std::to_string(outputs.size());
      return Outcome::Failed;
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string diff = compare(actual[i].second, outputs[i], rtol, atol);
      if (!diff.empty()) {
        why = "output '" + actual[i].first + "': " + diff;
        return Outcome::Failed;
      }
    }
    return Outcome::Passed;
  }
};

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  double minPassRate = 0.95;
  bool verbose = false;
  std::vector<std::string> roots;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-pass-rate" && i + 1 < argc)
      minPassRate = std::atof(argv[++i]);
    else if (a == "--verbose")
      verbose = true;
    else if (a == "--help") {
      llvm::outs() << "usage: smp-onnx-conformance [--min-pass-rate R] "
                      "[--verbose] DIR...\n";
      return 0;
    } else
      roots.push_back(a);
  }
  std::vector<std::string> tests;
  for (const auto &root : roots) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(root, ec), end; it != end && !ec;
         it.increment(ec))
      if (llvm::sys::fs::exists(it->path() + "/model.onnx"))
        tests.push_back(it->path());
  }
  std::sort(tests.begin(), tests.end());
  Runner runner;
  smp::registerAllDialects(runner.registry);
  llvm::SmallString<128> scratch;
  if (llvm::sys::fs::createUniqueDirectory("smp-conformance", scratch)) {
    llvm::errs() << "cannot create a scratch directory\n";
    return 1;
  }
  runner.scratch = scratch.str().str();
  smp::kernels::cpu::setNumThreads(1);
  int passed = 0, failed = 0, unsupported = 0;
  std::map<std::string, int> missing;
  for (const auto &test : tests) {
    std::string why;
    Outcome o = runner.run(test, why);
    std::string name = llvm::sys::path::filename(test).str();
    if (o == Outcome::Passed) {
      ++passed;
      if (verbose)
        llvm::outs() << "PASS " << name << "\n";
    } else if (o == Outcome::Failed) {
      ++failed;
      llvm::outs() << "FAIL " << name << ": " << why << "\n";
    } else {
      ++unsupported;
      ++missing[why];
      if (verbose)
        llvm::outs() << "UNSUPPORTED " << name << ": " << why << "\n";
    }
  }
  llvm::sys::fs::remove_directories(runner.scratch);
  llvm::outs() << "unsupported tests (by missing ops or data kinds): "
               << unsupported << "\n";
  for (const auto &[ops, n] : missing)
    if (ops.size() < 80)
      llvm::outs() << "  " << ops << ": " << n << "\n";
  double rate = passed + failed ? double(passed) / (passed + failed) : 1.0;
  llvm::outs() << "pass rate among supported tests: "
               << llvm::format("%.1f%%", 100 * rate) << "\n";
  llvm::outs() << passed << " passed, " << failed << " failed\n";
  return rate >= minPassRate ? 0 : 1;
}
