//===- OpSchema.h - The runtime's op schema ---------------------*- C++ -*-===//
//
// The instructions an artifact may hold (OpSchema.def), as constexpr tables:
// the compiler's artifact writer checks what it emits against them, the
// kernel tables decode through them. No MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_OPSCHEMA_H
#define SMP_BASE_OPSCHEMA_H

#include "smp/base/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace smp::base {

/// How an attribute is stored in the artifact (smp::artifact::Attribute).
enum class AttrKind : uint8_t { Int, Float, String, Ints };
const char *attrKindName(AttrKind kind);

/// Every attribute name of every op.
enum class OpAttr : uint8_t {
#define SMP_OP_ATTR(Id, Name, Kind) Id,
#include "smp/base/OpSchema.def"
  NumAttrs
};

/// Every instruction op.
enum class OpId : uint8_t {
#define SMP_OP(Id, ...) Id,
#include "smp/base/OpSchema.def"
  NumOps
};

constexpr int kNumOpAttrs = static_cast<int>(OpAttr::NumAttrs);
constexpr int kNumOps = static_cast<int>(OpId::NumOps);
static_assert(kNumOpAttrs <= 128, "attribute masks are 128 bits (AttrMask)");

/// numOutputs of an op with any number of results (split).
constexpr int kAnyCount = -1;
/// maxInputs of an op with any number of operands (concat).
constexpr int kManyInputs = 1 << 20;

/// A set of attributes, a bit each (128: room beyond the 64 the schema
/// outgrew once the attention ops took dropout's key attributes). 0 (the
/// OpSchema.def rows' "none") converts to the empty set.
class AttrMask {
public:
  constexpr AttrMask(uint64_t lo = 0, uint64_t hi = 0) : lo_(lo), hi_(hi) {}
  constexpr AttrMask operator|(AttrMask o) const {
    return {lo_ | o.lo_, hi_ | o.hi_};
  }
  constexpr AttrMask &operator|=(AttrMask o) {
    lo_ |= o.lo_, hi_ |= o.hi_;
    return *this;
  }
  constexpr bool has(OpAttr a) const {
    unsigned i = static_cast<unsigned>(a);
    return ((i < 64 ? lo_ >> i : hi_ >> (i - 64)) & 1) != 0;
  }

private:
  uint64_t lo_, hi_;
};

constexpr AttrMask attrBit(OpAttr a) {
  unsigned i = static_cast<unsigned>(a);
  return i < 64 ? AttrMask(uint64_t(1) << i, 0)
                : AttrMask(0, uint64_t(1) << (i - 64));
}

struct AttrSchema {
  const char *name;
  AttrKind kind;
};

struct OpSchema {
  OpId id;
  const char *name;
  int minInputs, maxInputs, numOutputs;
  AttrMask required, optional; // sets of attrBit
  constexpr bool allows(OpAttr a) const {
    return required.has(a) || optional.has(a);
  }
  constexpr bool needs(OpAttr a) const { return required.has(a); }
};

inline constexpr AttrSchema kOpAttrs[] = {
#define SMP_OP_ATTR(Id, Name, Kind) {Name, AttrKind::Kind},
#include "smp/base/OpSchema.def"
};

#define SMP_A(Id) ::smp::base::attrBit(::smp::base::OpAttr::Id)
inline constexpr OpSchema kOps[] = {
#define SMP_OP(Id, Name, MinIn, MaxIn, NumOut, Required, Optional)            \
  {OpId::Id, Name, MinIn, MaxIn, NumOut, Required, Optional},
#include "smp/base/OpSchema.def"
};
#undef SMP_A

constexpr const AttrSchema &attrSchema(OpAttr a) {
  return kOpAttrs[static_cast<int>(a)];
}
constexpr const OpSchema &opSchema(OpId id) {
  return kOps[static_cast<int>(id)];
}

/// Where a backend may run an op beside the compute work that does not
/// need it: collectives and pipeline messages on a communication stream,
/// copies between the device arena and the host pool on a copy stream
/// (runtime/exec's lanes, Backend.h). Defined once here: the compiler's
/// memory plan (lib/Target/Artifact, the side work's window) reads it too.
enum class OpLane : uint8_t { Compute, Comm, Copy };
constexpr OpLane opLane(OpId id) {
  switch (id) {
  case OpId::AllReduce:
  case OpId::ReduceScatter:
  case OpId::AllGather:
  case OpId::Send:
  case OpId::Recv:
    return OpLane::Comm;
  case OpId::Offload:
  case OpId::Prefetch:
    return OpLane::Copy;
  default:
    return OpLane::Compute;
  }
}

/// The op named `name` ("layer_norm"), or null.
const OpSchema *findOp(std::string_view name);
/// The attribute named `name`; false when no op has it.
bool findAttr(std::string_view name, OpAttr &out);

/// Checks an instruction against its op's schema: the operand and result
/// counts, that every attribute is one the op has with the right kind, and
/// that the required ones are present. `attrs` are (name, kind) pairs; names
/// starting with '@' (the compiler's annotations, e.g. "@flops") are not
/// part of the schema and pass. The failure names the op.
Status checkInstruction(
    const OpSchema &op, int numInputs, int numOutputs,
    const std::vector<std::pair<std::string, AttrKind>> &attrs);

/// "has N inputs and M outputs" unless the counts fit the op (empty).
std::string arityError(const OpSchema &op, int numInputs, int numOutputs);

} // namespace smp::base

#endif // SMP_BASE_OPSCHEMA_H
