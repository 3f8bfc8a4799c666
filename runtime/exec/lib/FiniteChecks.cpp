//===- FiniteChecks.cpp - Where a NaN starts (smprun --check-finite) ------===//
//
// With Executor::enableFiniteChecks, every float output of every instruction
// is scanned as the step runs: the first NaN stops the run with the
// instruction and ONNX node that wrote it, where it came from (its inputs
// held none, a buffer that held one before the step, or another rank), and
// the first infinity written before it (the usual start: 1/0, then 0 * inf).
//
//===----------------------------------------------------------------------===//

#include "smprt/exec/Executor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace smprt {
namespace {

using smp::base::indexString;
using smp::base::NonFiniteScan;
using smp::base::scanNonFinite;

/// Ops whose output comes from other ranks.
bool receives(const std::string &op) {
  return op == "all_reduce" || op == "reduce_scatter" || op == "all_gather" ||
         op == "recv";
}

/// What a buffer that held a NaN before the step is, for the message.
std::string roleOf(const std::string &role) {
  if (role == "input")
    return "an input of the step: the data holds NaN";
  if (role == "param")
    return "a parameter: an earlier step made it NaN, or its initial value "
           "holds NaN";
  if (role == "state")
    return "optimizer or model state from an earlier step";
  if (role == "constant")
    return "a constant of the model file";
  return "written before this step";
}

/// The largest finite magnitude of a float tensor (0 for other dtypes).
double largestMagnitude(const TensorRef &t) {
  double m = 0;
  if (!smp::base::isFloat(t.dtype))
    return m;
  for (int64_t k = 0, n = t.numel(); k < n; ++k) {
    double v = std::fabs(smp::base::elementAsDouble(t, k));
    if (std::isfinite(v) && v > m)
      m = v;
  }
  return m;
}

/// " (largest magnitude 3.1e+38)": an overflow shows there.
std::string magnitudeNote(double m) {
  char text[64];
  std::snprintf(text, sizeof text, " (largest magnitude %.3g)", m);
  return text;
}

bool overlaps(const TensorRef &a, const TensorRef &b) {
  const char *pa = static_cast<const char *>(a.data);
  const char *pb = static_cast<const char *>(b.data);
  return pa < pb + b.bytes() && pb < pa + a.bytes();
}

} // namespace

Status Executor::hostView(uint32_t index, std::string &copy,
                          TensorRef &view) const {
  view = buffers_.at(index);
  if (backend_->hostAddressable() ||
      artifact_->program.buffers(static_cast<int>(index)).pool() == 1)
    return Status::success();
  copy.assign(view.bytes(), '\0');
  view.data = copy.data();
  return readBuffer(index, copy.data());
}

std::string Executor::describeInstruction(size_t i) const {
  const auto &inst = artifact_->program.instructions(static_cast<int>(i));
  return "instruction " + std::to_string(i + 1) + " of " +
         std::to_string(steps_.size()) + ", '" + inst.op() + "' (node '" +
         inst.loc() + "')";
}

Status Executor::checkFiniteOutputs(size_t i) {
  const auto &program = artifact_->program;
  const auto &inst = program.instructions(static_cast<int>(i));
  Status s = Status::success();
  // Device work may be queued on several streams (offload copies).
  if (!backend_->hostAddressable() &&
      !(s = backend_->synchronize("--check-finite")).ok())
    return s;
  for (uint32_t o : inst.outputs()) {
    std::string copy;
    TensorRef out;
    if (!(s = hostView(o, copy, out)).ok())
      return s;
    NonFiniteScan scan = scanNonFinite(out);
    if (!scan.nans && !scan.infs)
      continue;
    // The inputs as they are now (one the output overwrote is not read).
    std::string nanInput, nanRole, nonFiniteInput;
    double magnitude = 0;
    for (uint32_t in : inst.inputs()) {
      if (overlaps(buffers_.at(in), buffers_.at(o)))
        continue;
      std::string inCopy;
      TensorRef view;
      if (!(s = hostView(in, inCopy, view)).ok())
        return s;
      NonFiniteScan inScan = scanNonFinite(view);
      magnitude = std::max(magnitude, largestMagnitude(view));
      const auto &buffer = program.buffers(static_cast<int>(in));
      if (inScan.nans && nanInput.empty()) {
        nanInput = buffer.name();
        nanRole = buffer.role();
      }
      if ((inScan.nans || inScan.infs) && nonFiniteInput.empty())
        nonFiniteInput = buffer.name();
    }
    std::string where = "'" + program.buffers(static_cast<int>(o)).name() +
                        "' (" + describe(out) + ")";
    if (!scan.nans) {
      if (firstInfinity_.empty() && nonFiniteInput.empty())
        firstInfinity_ = describeInstruction(i) + " wrote inf to " + where +
                         " at " + indexString(out.shape, scan.firstInf) +
                         " from finite inputs" + magnitudeNote(magnitude);
      continue;
    }
    std::string msg = "--check-finite: " + describeInstruction(i) +
                      " wrote NaN to " + where + ": " +
                      std::to_string(scan.nans) + " of " +
                      std::to_string(out.numel()) + " elements, the first at " +
                      indexString(out.shape, scan.firstNan);
    if (!nanInput.empty())
      msg += "; it reads '" + nanInput + "', which held NaN before (" +
             roleOf(nanRole) + ")";
    else if (receives(inst.op()))
      msg += ", received from another rank (that rank's error names where "
             "its NaN began)";
    else
      msg += " from inputs without NaN" +
             (nonFiniteInput.empty()
                  ? magnitudeNote(magnitude)
                  : " (but with infinities, in '" + nonFiniteInput + "')");
    if (!firstInfinity_.empty())
      msg += "; the first infinity of this step: " + firstInfinity_;
    return Status::failure(msg);
  }
  return Status::success();
}

} // namespace smprt
