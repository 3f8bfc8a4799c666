//===- SideWorkTest.cpp - Collectives' operands in the memory plan --------===//
//
// The artifact writer's rules that let a collective run beside the compute
// after it (lib/Target/Artifact/SideWork.cpp, runtime/exec's lanes): the
// parts of a gradient bucket are views of the collective's result (no copy,
// nothing reads the result until the parts' first use), and an operand that
// dies at the collective keeps its bytes until the next collective, where
// that does not raise the step's most bytes live. Checked on the written
// rank programs: byte ranges of the buffers, not the writer's own figures.
//
//===----------------------------------------------------------------------===//

#include "MlirTest.h"
#include "mlir/Pass/PassManager.h"
#include "smp/Pipelines/Pipelines.h"
#include "smp/Target/Artifact/ArtifactWriter.h"
#include "smp/base/FileFormat.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include "artifact.pb.h"

#include <gtest/gtest.h>

#include <set>

using namespace mlir;
namespace pb = smp::artifact;

namespace {

/// Every parameter's bytes are zeros: only the memory plan is looked at.
struct ZeroWeights : smp::WeightSource {
  llvm::Expected<std::string> read(llvm::StringRef,
                                   RankedTensorType type) override {
    return std::string(type.getNumElements() * 4, '\0');
  }
};

struct Range {
  uint64_t begin, end;
  bool meets(const Range &o) const { return begin < o.end && o.begin < end; }
  bool within(const Range &o) const { return o.begin <= begin && end <= o.end; }
};

Range rangeOf(const pb::RankProgram &p, uint32_t buffer) {
  const pb::Buffer &b = p.buffers(static_cast<int>(buffer));
  return {b.offset(), b.offset() + b.bytes()};
}

bool isCollective(const std::string &op) {
  return op == "all_reduce" || op == "reduce_scatter" || op == "all_gather";
}

class SideWorkTest : public smp::test::MlirTest {
protected:
  SideWorkTest() {
    llvm::SmallString<128> dir;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("smp-side-work", dir));
    tmp = dir.str().str();
  }
  ~SideWorkTest() override { llvm::sys::fs::remove_directories(tmp); }

  /// Rank 0's program of `module` (through the training pipeline of `plan`
  /// first, when given).
  pb::RankProgram write(ModuleOp module,
                        const smp::TrainingPipelineOptions *plan = nullptr) {
    smp::ArtifactOptions options;
    options.outputDir = tmp + "/model.smpx";
    if (plan) {
      PassManager pm(ctx.get(), ModuleOp::getOperationName());
      smp::buildTrainingPipeline(pm, *plan);
      EXPECT_TRUE(succeeded(pm.run(module)));
      options.training = smp::TrainingOptions{};
      options.training->loss = plan->loss;
      options.training->optimizer = "sgd";
      options.training->lr = 0.1;
    }
    auto summary = smp::writeArtifact(module, weights, options);
    EXPECT_TRUE(bool(summary)) << llvm::toString(summary.takeError());
    std::string path = options.outputDir + "/rank0.program.pb";
    auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
    EXPECT_TRUE(bool(buffer)) << path;
    std::string payload;
    smp::base::Status s =
        smp::base::unframe(buffer ? (*buffer)->getBuffer().str() : "", path,
                           payload, smp::base::FileKind::Artifact);
    EXPECT_TRUE(s.ok()) << s.error;
    pb::RankProgram program;
    EXPECT_TRUE(program.ParseFromString(payload));
    return program;
  }

  /// For each collective of `p` whose input is not its output: the compute
  /// instructions after it, up to the next collective or the first that
  /// reads its result, that write into its input's bytes (each a failure
  /// where `expectNone`).
  static int writesIntoWindows(const pb::RankProgram &p, bool expectNone) {
    int writes = 0;
    for (int i = 0; i < p.instructions_size(); ++i) {
      const pb::Instruction &c = p.instructions(i);
      if (!isCollective(c.op()) || c.inputs(0) == c.outputs(0))
        continue;
      Range in = rangeOf(p, c.inputs(0)), out = rangeOf(p, c.outputs(0));
      for (int j = i + 1; j < p.instructions_size(); ++j) {
        const pb::Instruction &d = p.instructions(j);
        bool reads = isCollective(d.op());
        for (uint32_t x : d.inputs())
          reads = reads || rangeOf(p, x).meets(out);
        if (reads)
          break;
        for (uint32_t y : d.outputs())
          if (rangeOf(p, y).meets(in)) {
            ++writes;
            EXPECT_FALSE(expectNone)
                << "instruction " << j << " (" << d.op()
                << ") writes into the input of " << i << " (" << c.op() << ")";
          }
      }
    }
    return writes;
  }

  std::string tmp;
  ZeroWeights weights;
};

/// The reduce-scatter's input `a` (256 bytes) dies at it; `b` and `c`
/// (`n` floats each) come before the next collective; with `tail`, a
/// product of the 4 KB input `z` kept to the end is the step's peak after
/// them.
std::string scatterModule(int n, bool tail) {
  std::string v = "tensor<" + std::to_string(n) + "xf32>";
  std::string z = tail ? R"(, %z: tensor<1024xf32> {smp.input = "z"})" : "";
  std::string w = tail ? R"(, tensor<1024xf32> {smp.output = "w"})" : "";
  return R"(
shard.grid @dp(shape = 2)
func.func @main(%x: tensor<64xf32> {smp.input = "x"},
                %y: )" +
         v + R"( {smp.input = "y"})" + z + R"()
    -> (tensor<32xf32> {smp.output = "rs"}, )" +
         v + R"( {smp.output = "s"})" + w + R"() {
  %a = smp.mul %x, %x : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %rs = shard.reduce_scatter %a on @dp grid_axes = [0] scatter_axis = 0 : tensor<64xf32> -> tensor<32xf32>
  %b = smp.add %y, %y : ()" +
         v + ", " + v + ") -> " + v + R"(
  %c = smp.mul %b, %b : ()" +
         v + ", " + v + ") -> " + v + R"(
  %s = shard.all_reduce %c on @dp grid_axes = [0] : )" +
         v + " -> " + v + "\n" +
         (tail ? "  %w = smp.mul %z, %z : (tensor<1024xf32>, "
                 "tensor<1024xf32>) -> tensor<1024xf32>\n"
               : "") +
         "  return %rs, %s" + (tail ? ", %w" : "") + " : tensor<32xf32>, " + v +
         (tail ? ", tensor<1024xf32>" : "") + "\n}\n";
}

// Where the step's peak allows (x, y, z, rs, s and w at the end: 8,704
// bytes; x, y, z, a, rs, b and c: 4,928), the scatter's input keeps its
// bytes until the all-reduce: b and c lie elsewhere, the arena is the
// peak.
TEST_F(SideWorkTest, AScatteredInputKeepsItsBytesUntilTheNextCollective) {
  auto module = parse(scatterModule(16, true));
  pb::RankProgram p = write(*module);
  EXPECT_EQ(writesIntoWindows(p, true), 0);
  EXPECT_EQ(p.arena_bytes(), 8704u);
}

// Where it would not (x, y, rs, b and c: 1,152 bytes at c, the peak; 1,408
// with a kept), the input's bytes go to what comes next, and the arena
// stays the most bytes live without the window.
TEST_F(SideWorkTest, NotWhereKeepingItWouldRaiseThePeak) {
  auto module = parse(scatterModule(64, false));
  pb::RankProgram p = write(*module);
  EXPECT_EQ(p.arena_bytes(), 1152u);
  EXPECT_GT(writesIntoWindows(p, false), 0);
}

/// An MLP whose gradients fall into several buckets, its activations at
/// batch 64 the step's peak.
constexpr const char *kMlp = R"(
func.func @main(%x: tensor<64x16xf32> {smp.input = "x"},
                %w1: tensor<16x32xf32> {smp.param = "w1"},
                %b1: tensor<32xf32> {smp.param = "b1"},
                %w2: tensor<32x16xf32> {smp.param = "w2"},
                %h: tensor<16x8xf32> {smp.param = "head"})
    -> (tensor<64x8xf32> {smp.output = "logits"}) {
  %0 = smp.matmul %x, %w1 : (tensor<64x16xf32>, tensor<16x32xf32>) -> tensor<64x32xf32>
  %1 = smp.add %0, %b1 : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<64x32xf32>
  %2 = smp.relu %1 : tensor<64x32xf32>
  %3 = smp.matmul %2, %w2 : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  %4 = smp.matmul %3, %h : (tensor<64x16xf32>, tensor<16x8xf32>) -> tensor<64x8xf32>
  return %4 : tensor<64x8xf32>
}
)";

smp::TrainingPipelineOptions dataParallel(int zeroStage) {
  smp::TrainingPipelineOptions plan;
  plan.loss = "cross_entropy:logits:labels";
  plan.vocabParallel =
      smp::TrainingPipelineOptions::crossEntropyLogits(plan.loss);
  plan.dp = 2;
  plan.zeroStage = zeroStage;
  plan.bucketMb = 0.0025f; // 2,621 bytes: head and w2 (2,560), b1 and w1
  return plan;
}

/// The collectives of `p` by op, the slice instructions that read their
/// results, and the parts of their results that other buffers are views of
/// (buffers no instruction writes, within a result's bytes).
struct Parts {
  int collectives = 0, slices = 0, views = 0;
};
Parts partsOf(const pb::RankProgram &p, const std::string &op) {
  Parts parts;
  std::set<uint32_t> results, written;
  for (const pb::Instruction &inst : p.instructions()) {
    written.insert(inst.outputs().begin(), inst.outputs().end());
    if (inst.op() == op)
      results.insert(inst.outputs(0));
  }
  for (const pb::Instruction &inst : p.instructions()) {
    parts.slices += inst.op() == "slice" && results.count(inst.inputs(0));
    if (inst.op() != op)
      continue;
    ++parts.collectives;
    Range out = rangeOf(p, inst.outputs(0));
    for (int b = 0; b < p.buffers_size(); ++b)
      if (!written.count(static_cast<uint32_t>(b)) &&
          rangeOf(p, b).within(out) &&
          p.buffers(b).bytes() < out.end - out.begin)
        ++parts.views;
  }
  return parts;
}

// ZeRO-2: each bucket's chunks are views of its reduce-scatter's result (no
// slice instruction), and the bucket packed for it keeps its bytes until
// the next collective or the chunks' first reader.
TEST_F(SideWorkTest, ZeroTwoChunksAreViewsOfTheScatter) {
  auto module = parse(kMlp);
  smp::TrainingPipelineOptions plan = dataParallel(2);
  pb::RankProgram p = write(*module, &plan);
  Parts parts = partsOf(p, "reduce_scatter");
  EXPECT_GE(parts.collectives, 2);
  EXPECT_EQ(parts.slices, 0);
  EXPECT_GE(parts.views, 4);
  EXPECT_EQ(writesIntoWindows(p, true), 0);
}

// Plain data parallelism: the all-reduce works in place and each bucket's
// gradients are views of it.
TEST_F(SideWorkTest, DataParallelGradientsAreViewsOfTheAllReduce) {
  auto module = parse(kMlp);
  smp::TrainingPipelineOptions plan = dataParallel(0);
  pb::RankProgram p = write(*module, &plan);
  Parts parts = partsOf(p, "all_reduce");
  EXPECT_GE(parts.collectives, 2);
  EXPECT_EQ(parts.slices, 0);
  EXPECT_GE(parts.views, 4);
}

/// A slice of `[4 x 32]` f32 `a` marked smp.view, read by an add.
std::string viewModule(const std::string &starts, const std::string &limits,
                       const std::string &type, bool returned) {
  return R"(
func.func @main(%x: tensor<4x32xf32> {smp.input = "x"})
    -> ()" +
         type +
         R"( {smp.output = "y"}) {
  %a = smp.mul %x, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %v = smp.slice %a {starts = array<i64: )" +
         starts + ">, limits = array<i64: " + limits +
         R"(>, steps = array<i64: 1, 1>, smp.view} : tensor<4x32xf32> -> )" +
         type + "\n" +
         (returned ? "  return %v : " + type + "\n}\n"
                   : "  %y = smp.add %v, %v : (" + type + ", " + type +
                         ") -> " + type + "\n  return %y : " + type + "\n}\n");
}

// Views only where the part is contiguous, at a multiple of 64 bytes (the
// kernels' vector loads rely on the arena's alignment), and not a result
// of the step; elsewhere a copy, as without the mark.
TEST_F(SideWorkTest, ViewsOnlyOfAlignedContiguousParts) {
  auto slices = [&](const std::string &text) {
    auto module = parse(text);
    pb::RankProgram p = write(*module);
    int n = 0;
    for (const pb::Instruction &inst : p.instructions())
      n += inst.op() == "slice" ? 1 : 0;
    return n;
  };
  // Rows 2..3: 256 bytes in.
  EXPECT_EQ(slices(viewModule("2, 0", "4, 32", "tensor<2x32xf32>", false)), 0);
  // Row 1 from column 16: contiguous, 192 bytes in.
  EXPECT_EQ(slices(viewModule("1, 16", "2, 32", "tensor<1x16xf32>", false)), 0);
  // Row 1 from column 1: 132 bytes in.
  EXPECT_EQ(slices(viewModule("1, 1", "2, 17", "tensor<1x16xf32>", false)), 1);
  // Columns 0..15 of every row: not contiguous.
  EXPECT_EQ(slices(viewModule("0, 0", "4, 16", "tensor<4x16xf32>", false)), 1);
  // An output of the step keeps its own bytes.
  EXPECT_EQ(slices(viewModule("2, 0", "4, 32", "tensor<2x32xf32>", true)), 1);
}

} // namespace
