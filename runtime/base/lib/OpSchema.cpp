//===- OpSchema.cpp - The runtime's op schema -----------------------------===//

#include "smp/base/OpSchema.h"

namespace smp::base {

// The tables follow the enums' order (both come from OpSchema.def).
static_assert(sizeof(kOpAttrs) / sizeof(kOpAttrs[0]) == kNumOpAttrs);
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOps);

const char *attrKindName(AttrKind kind) {
  static const char *const names[] = {"an integer", "a float", "a string",
                                      "a list of integers"};
  return names[static_cast<int>(kind)];
}

const OpSchema *findOp(std::string_view name) {
  for (const OpSchema &op : kOps)
    if (name == op.name)
      return &op;
  return nullptr;
}

bool findAttr(std::string_view name, OpAttr &out) {
  for (int a = 0; a < kNumOpAttrs; ++a)
    if (name == kOpAttrs[a].name) {
      out = static_cast<OpAttr>(a);
      return true;
    }
  return false;
}

/// The multi-tensor ops' operand groups, which the counts give: cast_multi
/// and all_slice have an output per input, add_multi two inputs an output;
/// adam_update_multi has N params, grads, exp_avgs and exp_avg_sqs, then lr,
/// step and an optional skip, and N new params, exp_avgs and exp_avg_sqs;
/// sgd_update_multi N params, grads and momentum buffers, lr, step and an
/// optional skip, and N new params and momentum buffers.
static std::string groupError(const OpSchema &op, int numInputs,
                              int numOutputs) {
  std::string counts = "has " + std::to_string(numInputs) + " inputs and " +
                       std::to_string(numOutputs) + " outputs";
  if (op.id == OpId::CastMulti && numInputs != numOutputs)
    return counts + ": cast_multi takes one output per input";
  if (op.id == OpId::AddMulti && numInputs != 2 * numOutputs)
    return counts + ": add_multi takes two inputs an output";
  if (op.id == OpId::AllSlice && numInputs != numOutputs)
    return counts + ": all_slice takes one output per input";
  // Per tensor: `in` inputs and `out` outputs, then lr, step (, skip).
  auto update = [&](int in, int out) -> std::string {
    int n = numOutputs / out;
    if (n >= 1 && numOutputs % out == 0 &&
        (numInputs == in * n + 2 || numInputs == in * n + 3))
      return "";
    std::string i = std::to_string(in), o = std::to_string(out);
    return counts + ": " + op.name + " of N tensors takes " + i +
           "N + 2 inputs (" + i + "N + 3 with a skip flag) and " + o +
           "N outputs";
  };
  if (op.id == OpId::AdamUpdateMulti)
    return update(4, 3);
  if (op.id == OpId::SgdUpdateMulti)
    return update(3, 2);
  return "";
}

/// Whether the counts are within the op's schema (its groups aside).
static bool countsInRange(const OpSchema &op, int numInputs, int numOutputs) {
  return numInputs >= op.minInputs && numInputs <= op.maxInputs &&
         (op.numOutputs == kAnyCount || numOutputs == op.numOutputs);
}

std::string arityError(const OpSchema &op, int numInputs, int numOutputs) {
  if (countsInRange(op, numInputs, numOutputs))
    return groupError(op, numInputs, numOutputs);
  return "has " + std::to_string(numInputs) + " inputs and " +
         std::to_string(numOutputs) + " outputs";
}

Status checkInstruction(
    const OpSchema &op, int numInputs, int numOutputs,
    const std::vector<std::pair<std::string, AttrKind>> &attrs) {
  std::string what = std::string("op '") + op.name + "' ";
  if (std::string e = arityError(op, numInputs, numOutputs); !e.empty()) {
    if (countsInRange(op, numInputs, numOutputs)) // its groups' error
      return Status::failure(what + e);
    std::string expected =
        op.minInputs == op.maxInputs ? std::to_string(op.minInputs)
        : op.maxInputs == kManyInputs
            ? std::to_string(op.minInputs) + " or more"
            : std::to_string(op.minInputs) + " to " +
                  std::to_string(op.maxInputs);
    return Status::failure(
        what + e + "; the runtime's op schema expects " + expected +
        " inputs and " +
        (op.numOutputs == kAnyCount ? std::string("any number of")
                                    : std::to_string(op.numOutputs)) +
        " outputs");
  }
  AttrMask seen;
  for (const auto &[name, kind] : attrs) {
    if (!name.empty() && name[0] == '@')
      continue;
    OpAttr a;
    if (!findAttr(name, a) || !op.allows(a))
      return Status::failure(what + "has attribute '" + name +
                             "', which the runtime's op schema does not list "
                             "for it (smp/base/OpSchema.def)");
    if (attrSchema(a).kind != kind)
      return Status::failure(what + "has attribute '" + name + "' as " +
                             attrKindName(kind) + "; the schema says " +
                             attrKindName(attrSchema(a).kind));
    seen |= attrBit(a);
  }
  for (int a = 0; a < kNumOpAttrs; ++a)
    if (op.needs(static_cast<OpAttr>(a)) && !seen.has(OpAttr(a)))
      return Status::failure(what + "misses attribute '" + kOpAttrs[a].name +
                             "' that the runtime requires");
  return Status::success();
}

} // namespace smp::base
