//===- OpSchemaTest.cpp - The runtime's op schema against ODS and the tables //
//
// smp/base/OpSchema.def is the runtime's list of instructions. These tests
// fail, naming the op, when the dialect and the schema disagree (an smp op
// the artifact writer would emit that the schema lacks, an ODS attribute
// the schema does not list) or when the CPU kernel table cannot decode an op
// of the schema (the CUDA table is the same KernelSteps.inc; a missing op is
// a compile error in both).
//
//===----------------------------------------------------------------------===//

#include "smp/base/OpSchema.h"
#include "MlirTest.h"
#include "cpu/CpuBackend.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "smp/InitAll.h"
#include "smprt/comm/Communicator.h"
#include "smprt/exec/Artifact.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

using namespace mlir;
namespace base = smp::base;

namespace {

/// smp ops the writer lowers without an instruction: constants and the
/// tensor-parallel rank become weights, reshape and tp_copy alias storage.
const std::set<std::string> kNotInstructions = {"constant", "tp_rank",
                                                "reshape", "tp_copy"};
/// smp ops the writer lowers as another op's instruction, with the
/// attributes it folds into others (all_slice_multi: an all_slice of N
/// tensors; its grid axes name the rank group, "grid", as a shard
/// collective's do).
const std::map<std::string, std::pair<std::string, std::string>> kLoweredAs = {
    {"all_slice_multi", {"all_slice", "grid_axes"}}};
/// Instructions that come from the shard dialect's collectives.
const std::set<std::string> kShardCollectives = {
    "all_reduce", "reduce_scatter", "all_gather", "all_slice"};

std::set<std::string> smpOpNames(MLIRContext &ctx) {
  std::set<std::string> names;
  for (RegisteredOperationName op : ctx.getRegisteredOperations())
    if (op.getDialectNamespace() == "smp")
      names.insert(op.stripDialect().str());
  return names;
}

/// The checks that need the dialects.
class OpSchemaTest : public smp::test::MlirTest {};

TEST_F(OpSchemaTest, EverySmpOpAndItsAttributesAreInTheSchema) {
  size_t checked = 0;
  for (RegisteredOperationName op : ctx->getRegisteredOperations()) {
    if (op.getDialectNamespace() != "smp")
      continue;
    std::string name = op.stripDialect().str();
    if (kNotInstructions.count(name))
      continue;
    std::string folded;
    if (auto it = kLoweredAs.find(name); it != kLoweredAs.end())
      std::tie(name, folded) = it->second;
    const base::OpSchema *schema = base::findOp(name);
    ASSERT_NE(schema, nullptr)
        << "smp." << name << " lowers to an instruction but is not in "
        << "smp/base/OpSchema.def";
    for (StringAttr attr : op.getAttributeNames()) {
      // A variadic op's operand and result groups: the writer drops them,
      // the schema gives them by the counts (InstructionEncoding.cpp).
      if (attr.getValue() == "operandSegmentSizes" ||
          attr.getValue() == "resultSegmentSizes")
        continue;
      // max/min's `strict` chose their gradient; the writer drops it too.
      if ((name == "max" || name == "min") && attr.getValue() == "strict")
        continue;
      if (attr.getValue() == folded)
        continue;
      base::OpAttr id;
      EXPECT_TRUE(base::findAttr(attr.getValue(), id) && schema->allows(id))
          << "attribute '" << attr.getValue().str() << "' of smp." << name
          << " is not in its schema entry (smp/base/OpSchema.def)";
    }
    ++checked;
  }
  EXPECT_GT(checked, 60u);
}

TEST_F(OpSchemaTest, EverySchemaOpComesFromTheCompiler) {
  std::set<std::string> smpOps = smpOpNames(*ctx);
  for (const base::OpSchema &op : base::kOps)
    EXPECT_TRUE(smpOps.count(op.name) || kShardCollectives.count(op.name))
        << "'" << op.name << "' is in OpSchema.def but no compiler op "
        << "lowers to it";
}

// Attribute sets hold attributes past the 64th (AttrMask's second word),
// each bit alone; the attention ops allow dropout's key attributes.
TEST_F(OpSchemaTest, AttributeMasksHoldMoreThan64) {
  auto a = [](int i) { return static_cast<base::OpAttr>(i); };
  for (int i : {0, 5, 63, 64, 70, 127}) {
    base::AttrMask m = base::attrBit(a(i)) | base::attrBit(a(i == 3 ? 4 : 3));
    EXPECT_TRUE(m.has(a(i))) << i;
    for (int j : {0, 1, 62, 63, 64, 65, 100, 127})
      if (j != i && j != 3)
        EXPECT_FALSE(m.has(a(j))) << i << " " << j;
  }
  const base::OpSchema *attn = base::findOp("packed_attention_grad");
  ASSERT_NE(attn, nullptr);
  for (base::OpAttr k : {base::OpAttr::Ratio, base::OpAttr::Stream,
                         base::OpAttr::TpIndex, base::OpAttr::KvHeads})
    EXPECT_TRUE(attn->allows(k));
  EXPECT_TRUE(attn->needs(base::OpAttr::KvHeads));
  EXPECT_FALSE(attn->needs(base::OpAttr::Ratio));
  EXPECT_FALSE(attn->allows(base::OpAttr::Bshd));
}

TEST_F(OpSchemaTest, CheckInstructionNamesTheOpAndTheProblem) {
  const base::OpSchema *ln = base::findOp("layer_norm");
  ASSERT_NE(ln, nullptr);
  using K = base::AttrKind;
  EXPECT_TRUE(base::checkInstruction(*ln, 3, 1,
                                     {{"axis", K::Int},
                                      {"epsilon", K::Float},
                                      {"@flops", K::Float}})
                  .ok());
  EXPECT_EQ(base::checkInstruction(*ln, 1, 1, {}).error,
            "op 'layer_norm' has 1 inputs and 1 outputs; the runtime's op "
            "schema expects 2 to 3 inputs and 1 outputs");
  EXPECT_EQ(base::checkInstruction(*ln, 2, 1, {{"epsilon", K::Float}}).error,
            "op 'layer_norm' misses attribute 'axis' that the runtime "
            "requires");
  EXPECT_EQ(base::checkInstruction(*ln, 2, 1,
                                   {{"axis", K::Int}, {"epsilion", K::Float}})
                .error,
            "op 'layer_norm' has attribute 'epsilion', which the runtime's op "
            "schema does not list for it (smp/base/OpSchema.def)");
  EXPECT_EQ(base::checkInstruction(*ln, 2, 1,
                                   {{"axis", K::Float}, {"epsilon", K::Float}})
                .error,
            "op 'layer_norm' has attribute 'axis' as a float; the schema says "
            "an integer");
}

/// The multi-tensor ops' groups, which the counts give (smp-multi-tensor).
TEST_F(OpSchemaTest, TheMultiTensorOpsGroupsAreChecked) {
  const base::OpSchema *cast = base::findOp("cast_multi");
  const base::OpSchema *adam = base::findOp("adam_update_multi");
  ASSERT_NE(cast, nullptr);
  ASSERT_NE(adam, nullptr);
  EXPECT_TRUE(base::checkInstruction(*cast, 3, 3, {}).ok());
  EXPECT_EQ(base::checkInstruction(*cast, 3, 2, {}).error,
            "op 'cast_multi' has 3 inputs and 2 outputs: cast_multi takes one "
            "output per input");
  const base::OpSchema *sum = base::findOp("add_multi");
  ASSERT_NE(sum, nullptr);
  EXPECT_TRUE(base::checkInstruction(*sum, 6, 3, {}).ok());
  EXPECT_EQ(base::checkInstruction(*sum, 5, 3, {}).error,
            "op 'add_multi' has 5 inputs and 3 outputs: add_multi takes two "
            "inputs an output");
  EXPECT_TRUE(base::checkInstruction(*adam, 4 * 5 + 2, 15, {}).ok());
  EXPECT_TRUE(base::checkInstruction(*adam, 4 * 5 + 3, 15, {}).ok());
  for (auto [in, out] : {std::pair{4 * 5 + 1, 15}, std::pair{4 * 5 + 4, 15},
                         std::pair{22, 14}, std::pair{6, 0}})
    EXPECT_EQ(base::checkInstruction(*adam, in, out, {}).error,
              "op 'adam_update_multi' has " + std::to_string(in) +
                  " inputs and " + std::to_string(out) +
                  " outputs: adam_update_multi of N tensors takes 4N + 2 "
                  "inputs (4N + 3 with a skip flag) and 3N outputs");
  // The runtime's decoder refuses them too.
  std::vector<float> data(16, 0.0f);
  std::vector<smprt::TensorRef> buffers(
      24, smprt::TensorRef{data.data(), smprt::DType::F32, {2, 2}});
  auto comm = smprt::makeLocalCommunicator();
  smprt::Step step;
  smp::artifact::Instruction inst;
  inst.set_op("adam_update_multi");
  for (int i = 0; i < 4 * 2 + 2; ++i)
    inst.add_inputs(i);
  for (int i = 0; i < 5; ++i)
    inst.add_outputs(10 + i);
  EXPECT_EQ(
      smprt::decodeInstruction(inst, buffers, *comm, smprt::RandomState(), step)
          .error,
      "has 10 inputs and 5 outputs: adam_update_multi of N tensors "
      "takes 4N + 2 inputs (4N + 3 with a skip flag) and 3N outputs");
  inst.add_outputs(15);
  EXPECT_TRUE(
      smprt::decodeInstruction(inst, buffers, *comm, smprt::RandomState(), step)
          .ok());
  // sgd_update_multi: 3N + 2 (or 3N + 3) inputs, 2N outputs.
  const base::OpSchema *sgd = base::findOp("sgd_update_multi");
  ASSERT_NE(sgd, nullptr);
  EXPECT_TRUE(base::checkInstruction(*sgd, 3 * 4 + 2, 8, {}).ok());
  EXPECT_TRUE(base::checkInstruction(*sgd, 3 * 4 + 3, 8, {}).ok());
  for (auto [in, out] :
       {std::pair{3 * 4 + 1, 8}, std::pair{3 * 4 + 4, 8}, std::pair{14, 7}})
    EXPECT_EQ(base::checkInstruction(*sgd, in, out, {}).error,
              "op 'sgd_update_multi' has " + std::to_string(in) +
                  " inputs and " + std::to_string(out) +
                  " outputs: sgd_update_multi of N tensors takes 3N + 2 "
                  "inputs (3N + 3 with a skip flag) and 2N outputs");
}

/// An instruction of `op` with the fewest operands and its required
/// attributes, over f32 [2, 2] buffers.
smp::artifact::Instruction minimalInstruction(const base::OpSchema &op) {
  smp::artifact::Instruction inst;
  inst.set_op(op.name);
  inst.set_loc("test");
  // Any number of outputs: the fewest the op's groups allow.
  int outputs = op.numOutputs;
  if (outputs == base::kAnyCount)
    for (outputs = 1; !base::arityError(op, op.minInputs, outputs).empty();)
      ++outputs;
  for (int i = 0; i < op.minInputs; ++i)
    inst.add_inputs(i);
  for (int i = 0; i < outputs; ++i)
    inst.add_outputs(op.minInputs + i);
  for (int a = 0; a < base::kNumOpAttrs; ++a) {
    base::OpAttr id = static_cast<base::OpAttr>(a);
    if (!op.needs(id))
      continue;
    smp::artifact::Attribute attr;
    switch (base::attrSchema(id).kind) {
    case base::AttrKind::Int:
      attr.set_i(0);
      break;
    case base::AttrKind::Float:
      attr.set_f(1e-5);
      break;
    case base::AttrKind::String: // a value each string attribute accepts
      attr.set_s(id == base::OpAttr::Mode ? "max" : "sum");
      break;
    case base::AttrKind::Ints:
      attr.mutable_ints()->add_values(0);
      break;
    }
    (*inst.mutable_attrs())[base::attrSchema(id).name] = attr;
  }
  return inst;
}

TEST_F(OpSchemaTest, TheCpuKernelTableDecodesEveryOp) {
  std::vector<float> data(2 * 4 * 8, 0.0f);
  std::vector<smprt::TensorRef> buffers;
  for (int i = 0; i < 16; ++i)
    buffers.push_back(smprt::TensorRef{data.data() + 4 * i,
                                       smprt::DType::F32,
                                       {2, 2}});
  auto comm = smprt::makeLocalCommunicator();
  for (const base::OpSchema &op : base::kOps) {
    smprt::Step step;
    smprt::Status s = smprt::decodeInstruction(
        minimalInstruction(op), buffers, *comm, smprt::RandomState(), step);
    EXPECT_TRUE(s.ok()) << "op '" << op.name << "': " << s.error;
    EXPECT_TRUE(static_cast<bool>(step.run)) << "op '" << op.name << "'";
  }
}

TEST_F(OpSchemaTest, TheKernelTableRefusesWhatTheSchemaRefuses) {
  std::vector<float> data(16, 0.0f);
  std::vector<smprt::TensorRef> buffers(
      4, smprt::TensorRef{data.data(), smprt::DType::F32, {2, 2}});
  auto comm = smprt::makeLocalCommunicator();
  smprt::Step step;
  smp::artifact::Instruction inst = minimalInstruction(*base::findOp("gather"));
  inst.mutable_attrs()->erase("axis");
  EXPECT_EQ(
      smprt::decodeInstruction(inst, buffers, *comm, smprt::RandomState(), step)
          .error,
      "misses attribute 'axis'");
  inst.set_op("no_such_op");
  EXPECT_EQ(
      smprt::decodeInstruction(inst, buffers, *comm, smprt::RandomState(), step)
          .error,
      "this smprun has no kernel for op 'no_such_op'");
}

} // namespace
