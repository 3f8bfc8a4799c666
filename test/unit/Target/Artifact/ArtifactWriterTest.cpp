//===- ArtifactWriterTest.cpp - The artifact writer's protobuf, read back -===//
//
// A small smp module goes through the training pipeline (the same builder
// smpc calls) and the artifact writer; the test reads the manifest and the
// rank programs back as protobuf and checks them: the ranks and their ops,
// the buffers, each tensor-parallel rank's weight bytes against slices of
// the full weight cut here by plain index arithmetic, the parameters of
// each pipeline stage. Then every refusal of the writer that a module can
// reach, each with the message it must give.
//
//===----------------------------------------------------------------------===//

#include "smp/Target/Artifact/ArtifactWriter.h"
#include "MlirTest.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "smp/InitAll.h"
#include "smp/Pipelines/Pipelines.h"
#include "smp/base/FileFormat.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "artifact.pb.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

using namespace mlir;
namespace pb = smp::artifact;

namespace {

/// x -> matmul w1 -> relu -> matmul w2 -> matmul head -> logits: under tp=2
/// the MLP is split column- then row-parallel and the head by vocabulary.
constexpr const char *kMlp = R"(
func.func @main(%x: tensor<2x8xf32> {smp.input = "x"},
                %w1: tensor<8x4xf32> {smp.param = "w1"},
                %w2: tensor<4x8xf32> {smp.param = "w2"},
                %h: tensor<8x16xf32> {smp.param = "head"})
    -> (tensor<2x16xf32> {smp.output = "logits"}) {
  %0 = smp.matmul %x, %w1 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %1 = smp.relu %0 : tensor<2x4xf32>
  %2 = smp.matmul %1, %w2 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %3 = smp.matmul %2, %h : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  return %3 : tensor<2x16xf32>
}
)";

const std::map<std::string, std::vector<int64_t>> kParamShapes = {
    {"w1", {8, 4}}, {"w2", {4, 8}}, {"head", {8, 16}}};

/// The full value of parameter `name`: element e of the k-th parameter is
/// 1000 k + e (exact in f32), so a misplaced element shows.
std::vector<float> fullWeight(const std::string &name) {
  const std::vector<int64_t> &shape = kParamShapes.at(name);
  int64_t k = std::distance(kParamShapes.begin(), kParamShapes.find(name));
  std::vector<float> values(shape[0] * shape[1]);
  for (size_t e = 0; e < values.size(); ++e)
    values[e] = static_cast<float>(1000 * k + static_cast<int64_t>(e));
  return values;
}

/// The weights the writer asks for, counting the reads.
struct TestWeights : smp::WeightSource {
  std::map<std::string, int> reads;
  llvm::Expected<std::string> read(llvm::StringRef name,
                                   RankedTensorType type) override {
    ++reads[name.str()];
    std::vector<float> v = fullWeight(name.str());
    if (static_cast<int64_t>(v.size()) != type.getNumElements())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "wrong type for " + name.str());
    return std::string(reinterpret_cast<const char *>(v.data()),
                       v.size() * sizeof(float));
  }
};

/// A weight source whose bytes are one element short.
struct ShortWeights : smp::WeightSource {
  llvm::Expected<std::string> read(llvm::StringRef,
                                   RankedTensorType type) override {
    return std::string((type.getNumElements() - 1) * 4, '\0');
  }
};

/// How a buffer holds part of a global tensor along one dim: that dim
/// viewed as [blocks, parts, n], index `index` along parts. The only place
/// this test reads the artifact's Layout message's slicing fields.
struct TpSlice {
  bool sliced = false;
  int64_t dim = 0, blocks = 1, parts = 1, index = 0;
};
TpSlice tpSliceOf(const pb::Buffer &b) {
  TpSlice s;
  s.sliced = b.has_layout() && b.layout().tp_parts() > 0;
  if (s.sliced) {
    s.dim = b.layout().tp_dim();
    s.blocks = b.layout().tp_blocks();
    s.parts = b.layout().tp_parts();
    s.index = b.layout().tp_index();
  }
  return s;
}

/// The slice `s` of a row-major 2-D tensor, cut by index arithmetic.
std::vector<float> sliceOf(const std::vector<float> &full,
                           const std::vector<int64_t> &shape, TpSlice s) {
  if (!s.sliced)
    return full;
  int64_t rows = shape[0], cols = shape[1];
  int64_t extent = shape[s.dim];
  EXPECT_EQ(extent % (s.blocks * s.parts), 0);
  int64_t n = extent / (s.blocks * s.parts);
  // Local index j along the dim -> global index.
  auto global = [&](int64_t j) {
    return (j / n * s.parts + s.index) * n + j % n;
  };
  std::vector<float> out;
  int64_t localRows = s.dim == 0 ? s.blocks * n : rows;
  int64_t localCols = s.dim == 1 ? s.blocks * n : cols;
  for (int64_t r = 0; r < localRows; ++r)
    for (int64_t c = 0; c < localCols; ++c) {
      int64_t gr = s.dim == 0 ? global(r) : r;
      int64_t gc = s.dim == 1 ? global(c) : c;
      out.push_back(full[gr * cols + gc]);
    }
  return out;
}

std::string readFile(const std::string &path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false);
  EXPECT_TRUE(bool(buf)) << path;
  return buf ? (*buf)->getBuffer().str() : std::string();
}

template <typename Message> Message readFramed(const std::string &path) {
  std::string payload;
  smp::base::Status s = smp::base::unframe(
      readFile(path), path, payload, smp::base::FileKind::Artifact);
  EXPECT_TRUE(s.ok()) << s.error;
  Message m;
  EXPECT_TRUE(m.ParseFromString(payload)) << path;
  return m;
}

/// What the writer wrote, read back.
struct Written {
  pb::Manifest manifest;
  std::vector<pb::RankProgram> programs;
  std::vector<std::string> weights; // each rank's weights file
};

class ArtifactWriterTest : public smp::test::MlirTest {
protected:
  ArtifactWriterTest() {
    llvm::SmallString<128> dir;
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("smp-writer", dir));
    tmp = dir.str().str();
  }
  ~ArtifactWriterTest() override { llvm::sys::fs::remove_directories(tmp); }

  /// kMlp through the training pipeline of `plan` (loss, SGD as smpc sets
  /// them up), written to a fresh directory and read back.
  Written compileAndWrite(smp::TrainingPipelineOptions plan) {
    auto module = parse(kMlp);
    plan.loss = "cross_entropy:logits:labels";
    plan.vocabParallel =
        smp::TrainingPipelineOptions::crossEntropyLogits(plan.loss);
    PassManager pm(ctx.get(), ModuleOp::getOperationName());
    smp::buildTrainingPipeline(pm, plan);
    EXPECT_TRUE(succeeded(pm.run(*module)));
    smp::ArtifactOptions options;
    options.outputDir = tmp + "/model.smpx";
    options.producer = "ArtifactWriterTest";
    options.training = smp::TrainingOptions{};
    options.training->loss = plan.loss;
    options.training->optimizer = "sgd";
    options.training->lr = 0.1;
    auto summary = smp::writeArtifact(*module, weights, options);
    EXPECT_TRUE(bool(summary)) << llvm::toString(summary.takeError());
    Written w;
    w.manifest = readFramed<pb::Manifest>(options.outputDir + "/manifest.pb");
    for (const pb::RankFile &r : w.manifest.ranks()) {
      w.programs.push_back(readFramed<pb::RankProgram>(options.outputDir + "/" +
                                                       r.program_file()));
      w.weights.push_back(readFile(options.outputDir + "/" + r.weights_file()));
      EXPECT_EQ(w.weights.back().size(), r.weights_bytes());
      EXPECT_EQ(smp::base::checksum64(w.weights.back().data(),
                                      w.weights.back().size()),
                r.weights_checksum());
    }
    return w;
  }

  /// The error writeArtifact gives for `text` (forward only), or "".
  std::string refusal(const char *text, smp::WeightSource *source = nullptr,
                      std::string outputDir = "") {
    auto module = parse(text);
    if (!module)
      return "parse failed";
    smp::ArtifactOptions options;
    options.outputDir = outputDir.empty() ? tmp + "/refused.smpx" : outputDir;
    auto summary =
        smp::writeArtifact(*module, source ? *source : weights, options);
    return summary ? std::string() : llvm::toString(summary.takeError());
  }

  std::string tmp;
  TestWeights weights;
};

/// The parameter buffers of a program, by name.
std::map<std::string, const pb::Buffer *> paramsOf(const pb::RankProgram &p) {
  std::map<std::string, const pb::Buffer *> params;
  for (const pb::Buffer &b : p.buffers())
    if (b.role() == "param")
      params[b.name()] = &b;
  return params;
}

/// The bytes rank `program` loads into buffer `name` from its weights file.
std::vector<float> loadedWeight(const pb::RankProgram &program,
                                const std::string &file,
                                const std::string &name) {
  for (const pb::WeightRef &ref : program.weights()) {
    const pb::Buffer &b = program.buffers(ref.buffer());
    if (b.name() != name || ref.zero_init())
      continue;
    EXPECT_EQ(ref.bytes(), b.bytes());
    EXPECT_LE(ref.file_offset() + ref.bytes(), file.size());
    std::vector<float> v(ref.bytes() / sizeof(float));
    std::memcpy(v.data(), file.data() + ref.file_offset(), ref.bytes());
    return v;
  }
  ADD_FAILURE() << "no weight loads buffer '" << name << "'";
  return {};
}

std::vector<std::string> opsOf(const pb::RankProgram &p) {
  std::vector<std::string> ops;
  for (const pb::Instruction &inst : p.instructions())
    ops.push_back(inst.op());
  return ops;
}

size_t count(const std::vector<std::string> &ops, const std::string &op) {
  return std::count(ops.begin(), ops.end(), op);
}

TEST_F(ArtifactWriterTest, TensorParallelRanksHoldSlicesOfTheWeights) {
  smp::TrainingPipelineOptions plan;
  plan.tp = 2;
  Written w = compileAndWrite(plan);
  ASSERT_EQ(w.manifest.num_ranks(), 2u);
  EXPECT_EQ(w.manifest.dp(), 1u);
  EXPECT_EQ(w.manifest.tp(), 2u);
  EXPECT_EQ(w.manifest.pp(), 1u);
  ASSERT_EQ(w.programs.size(), 2u);
  // One weights file per tensor rank.
  EXPECT_NE(w.manifest.ranks(0).weights_file(),
            w.manifest.ranks(1).weights_file());
  // The same program on both ranks: forward and backward products, the
  // row-parallel sum and the input gradient's sum over tp, SGD updates.
  std::vector<std::string> ops = opsOf(w.programs[0]);
  EXPECT_EQ(ops, opsOf(w.programs[1]));
  EXPECT_GE(count(ops, "matmul"), 3u + 5u); // 3 forward, 5 backward products
  EXPECT_GE(count(ops, "all_reduce"), 2u);
  for (int t = 0; t < 2; ++t) {
    const pb::RankProgram &p = w.programs[t];
    EXPECT_EQ(p.rank(), static_cast<uint32_t>(t));
    EXPECT_EQ(p.tp_rank(), static_cast<uint32_t>(t));
    auto params = paramsOf(p);
    ASSERT_EQ(params.size(), 3u);
    // Megatron's split: w1 by columns, w2 by rows, the head by vocabulary
    // (columns); each rank keeps half.
    std::map<std::string, std::pair<int64_t, std::vector<int64_t>>> expected = {
        {"w1", {1, {8, 2}}}, {"w2", {0, {2, 8}}}, {"head", {1, {8, 8}}}};
    for (const auto &[name, dimAndShape] : expected) {
      SCOPED_TRACE("rank " + std::to_string(t) + ", " + name);
      ASSERT_TRUE(params.count(name));
      const pb::Buffer &b = *params[name];
      EXPECT_EQ(std::vector<int64_t>(b.shape().begin(), b.shape().end()),
                dimAndShape.second);
      ASSERT_TRUE(b.has_layout());
      EXPECT_EQ(std::vector<int64_t>(b.layout().full_shape().begin(),
                                     b.layout().full_shape().end()),
                kParamShapes.at(name));
      TpSlice s = tpSliceOf(b);
      ASSERT_TRUE(s.sliced);
      EXPECT_EQ(s.dim, dimAndShape.first);
      EXPECT_EQ(s.parts, 2);
      EXPECT_EQ(s.index, t);
      EXPECT_EQ(loadedWeight(p, w.weights[t], name),
                sliceOf(fullWeight(name), kParamShapes.at(name), s));
    }
    // The inputs: x whole, the labels.
    std::set<std::string> inputs;
    for (const pb::Binding &b : p.inputs())
      inputs.insert(b.name());
    EXPECT_TRUE(inputs.count("x"));
    EXPECT_TRUE(inputs.count("labels"));
  }
  // The two ranks' slices are different halves.
  EXPECT_NE(loadedWeight(w.programs[0], w.weights[0], "w1"),
            loadedWeight(w.programs[1], w.weights[1], "w1"));
}

TEST_F(ArtifactWriterTest, PipelineStagesOwnDisjointParameters) {
  smp::TrainingPipelineOptions plan;
  plan.pp = 2;
  plan.microbatches = 2;
  Written w = compileAndWrite(plan);
  ASSERT_EQ(w.manifest.num_ranks(), 2u);
  EXPECT_EQ(w.manifest.pp(), 2u);
  EXPECT_EQ(w.manifest.tp(), 1u);
  EXPECT_FALSE(w.manifest.schedule().empty());
  ASSERT_EQ(w.programs.size(), 2u);
  std::set<std::string> seen;
  for (int s = 0; s < 2; ++s) {
    const pb::RankProgram &p = w.programs[s];
    EXPECT_EQ(p.pp_rank(), static_cast<uint32_t>(s));
    std::vector<std::string> ops = opsOf(p);
    // The stages talk: the first sends activations and receives their
    // gradients, the last the reverse.
    EXPECT_GE(count(ops, "send"), 2u) << "stage " << s;
    EXPECT_GE(count(ops, "recv"), 2u) << "stage " << s;
    EXPECT_GE(count(ops, "matmul"), 1u) << "stage " << s;
    auto params = paramsOf(p);
    EXPECT_FALSE(params.empty()) << "stage " << s;
    for (const auto &[name, buffer] : params) {
      SCOPED_TRACE("stage " + std::to_string(s) + ", " + name);
      EXPECT_TRUE(seen.insert(name).second) << "owned by both stages";
      ASSERT_TRUE(kParamShapes.count(name));
      // Whole, not sliced.
      EXPECT_EQ(
          std::vector<int64_t>(buffer->shape().begin(), buffer->shape().end()),
          kParamShapes.at(name));
      EXPECT_FALSE(tpSliceOf(*buffer).sliced);
      EXPECT_EQ(loadedWeight(p, w.weights[s], name), fullWeight(name));
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"w1", "w2", "head"}));
  // Each parameter read once, by the stage that owns it.
  for (const auto &[name, shape] : kParamShapes)
    EXPECT_EQ(weights.reads[name], 1) << name;
  // The first stage reads x, the last the labels.
  EXPECT_EQ(w.programs[0].inputs(0).name(), "x");
}

/// A loss and its gradient of logits computed by the head; `after` reads
/// them again after the gradient (or nothing).
std::string lossModule(const std::string &after, bool logitsOut) {
  std::string outs = "tensor<f32> {smp.output = \"loss\"}, "
                     "tensor<2x8xf32> {smp.output = \"dx\"}";
  std::string rets = "%loss, %dx", types = "tensor<f32>, tensor<2x8xf32>";
  if (logitsOut) {
    outs += ", tensor<2x16xf32> {smp.output = \"logits\"}";
    rets += ", %l";
    types += ", tensor<2x16xf32>";
  }
  return R"(
func.func @main(%x: tensor<2x8xf32> {smp.input = "x"},
                %y: tensor<2xi64> {smp.input = "labels"},
                %h: tensor<8x16xf32> {smp.param = "head"}) -> ()" +
         outs + R"() {
  %one = smp.constant dense<1.0> : tensor<f32>
  %l = smp.matmul %x, %h : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %loss = smp.cross_entropy %l, %y : (tensor<2x16xf32>, tensor<2xi64>) -> tensor<f32>
  %g = smp.cross_entropy_grad %l, %y, %one : (tensor<2x16xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x16xf32>
  )" + after +
         R"(
  %dx = smp.matmul %g, %h {transpose_rhs = true} : (tensor<2x16xf32>, tensor<8x16xf32>) -> tensor<2x8xf32>
  return )" +
         rets + " : " + types + "\n}\n";
}

// cross_entropy_grad writes the logits' gradient over the logits when
// nothing reads them after it (a language model's two largest tensors in
// one buffer); not when they are an output or read again.
TEST_F(ArtifactWriterTest, TheLossGradientTakesTheLogitsStorage) {
  auto offsets = [&](const std::string &text) {
    EXPECT_EQ(refusal(text.c_str()), "");
    auto manifest = readFramed<pb::Manifest>(tmp + "/refused.smpx/manifest.pb");
    auto p = readFramed<pb::RankProgram>(tmp + "/refused.smpx/" +
                                         manifest.ranks(0).program_file());
    for (const pb::Instruction &inst : p.instructions())
      if (inst.op() == "cross_entropy_grad")
        return std::make_pair(p.buffers(inst.inputs(0)).offset(),
                              p.buffers(inst.outputs(0)).offset());
    ADD_FAILURE() << "no cross_entropy_grad";
    return std::make_pair(uint64_t(0), uint64_t(0));
  };
  auto shared = offsets(lossModule("", false));
  EXPECT_EQ(shared.first, shared.second);
  auto output = offsets(lossModule("", true));
  EXPECT_NE(output.first, output.second);
  auto readAgain = offsets(lossModule(
      "%e = smp.exp %l : tensor<2x16xf32>\n"
      "  %s = smp.add %g, %e : (tensor<2x16xf32>, tensor<2x16xf32>) -> "
      "tensor<2x16xf32>",
      false));
  EXPECT_NE(readAgain.first, readAgain.second);
}

// Each refusal a module can reach, with the words it must say. Not here:
// "update ... aliases another parameter" (an update whose storage is an
// argument's is refused first as "not computed by an op"), an op missing
// from the runtime's op schema (base/OpSchemaTest.cpp keeps every smp op
// in it), "constants ... over 2^32 bytes" (four 1 GiB constants would be
// built first), a failed write after the directory was made, and a bad
// tensor-parallel layout attribute (written by the tensor-parallel pass).
TEST_F(ArtifactWriterTest, RefusesModulesItCannotLower) {
  struct Case {
    const char *text, *error;
  };
  const Case cases[] = {
      {"module {}", "module has no function to compile"},
      {R"(module attributes {smp.placement = "XYZ"} {
            func.func @main(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> {
              return %x : tensor<2xf32>
            } })",
       "bad placement 'XYZ' (expected cluster, spread or an order of D, P, T)"},
      {R"(func.func @main(%x: tensor<?xf32> {smp.input = "x"}) -> tensor<?xf32> {
            return %x : tensor<?xf32>
          })",
       "value 'x' does not have a static tensor type"},
      {R"(func.func @main(%x: tensor<2xcomplex<f32>> {smp.input = "x"}) -> tensor<2xcomplex<f32>> {
            return %x : tensor<2xcomplex<f32>>
          })",
       "value 'x' has unsupported element type"},
      {R"(func.func @main(%x: tensor<1048576x1048576x1048576xf32> {smp.input = "x"}) -> tensor<1048576x1048576x1048576xf32> {
            return %x : tensor<1048576x1048576x1048576xf32>
          })",
       "value 'x' of shape 1048576x1048576x1048576 is over the limit of "
       "2^48 bytes for one tensor"},
      {R"(func.func @main(%x: tensor<1048576x1048576xf32> {smp.input = "x"}) -> tensor<1048576x1048576xf32> {
            return %x : tensor<1048576x1048576xf32>
          })",
       "pipeline stage 0, tensor rank 0 needs 4398046511104 bytes of arena "
       "(its largest tensor: 'x' of shape 1048576x1048576), over the "
       "limit of 2^40 bytes (1 TiB) per rank"},
      {R"(func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
            return %x : tensor<2xf32>
          })",
       "argument #0 is neither an smp.input, an smp.param nor an smp.state"},
      {R"(func.func @main(%a: tensor<8x4xf32> {smp.param = "w1"},
                          %b: tensor<8x4xf32> {smp.param = "w1"}) -> tensor<8x4xf32> {
            %0 = smp.add %a, %b : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
            return %0 : tensor<8x4xf32>
          })",
       "'w1' is two arguments of one rank's program"},
      {R"(func.func @main(%w: tensor<8x4xf32> {smp.param = "w1"}) -> (tensor<8x4xf32> {smp.update = "nope"}) {
            %0 = smp.neg %w : tensor<8x4xf32>
            return %0 : tensor<8x4xf32>
          })",
       "result updates 'nope', which is not a parameter or state"},
      {R"(func.func @main(%w: tensor<8x4xf32> {smp.param = "w1"}) -> (tensor<8x4xf32> {smp.update = "w1"}) {
            return %w : tensor<8x4xf32>
          })",
       "update of 'w1' is not computed by an op"},
      {R"(func.func @main(%w: tensor<8x4xf32> {smp.param = "w1"}) -> (tensor<8x4xf32> {smp.update = "w1"}, tensor<8x4xf32>) {
            %0 = smp.neg %w : tensor<8x4xf32>
            %1 = smp.relu %w : tensor<8x4xf32>
            return %0, %1 : tensor<8x4xf32>, tensor<8x4xf32>
          })",
       "'w1' is read after its update"},
      {R"(func.func @main(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> {
            %0 = arith.negf %x : tensor<2xf32>
            return %0 : tensor<2xf32>
          })",
       "cannot lower op 'arith.negf' (only smp ops and shard collectives run "
       "on a device)"},
      {R"(func.func @main() -> tensor<536870912xf32> {
            %0 = smp.constant dense<1.0> : tensor<536870912xf32>
            return %0 : tensor<536870912xf32>
          })",
       "over the limit of 2^30 bytes for one constant"},
      {R"(func.func @main(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> {
            %0 = smp.relu %x {note = [1, 2]} : tensor<2xf32>
            return %0 : tensor<2xf32>
          })",
       "cannot lower attribute 'note' of smp.relu"},
      {R"(func.func @main(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> {
            %0 = smp.relu %x {note = 1 : i64} : tensor<2xf32>
            return %0 : tensor<2xf32>
          })",
       "op 'relu' has attribute 'note', which the runtime's op schema does "
       "not list for it (smp/base/OpSchema.def) (at 'smp.relu')"},
      {R"(func.func @main() -> tensor<2xf32> {
            %0 = smp.constant dense_resource<blob> : tensor<2xf32>
            return %0 : tensor<2xf32>
          })",
       "constant 'smp.constant' is not dense"},
      {R"(shard.grid @tp(shape = 2)
          func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}) -> tensor<2x8xf32> {
            %0 = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 1 : tensor<2x4xf32> -> tensor<2x8xf32>
            return %0 : tensor<2x8xf32>
          })",
       "collectives along dims other than 0 are not supported"},
      {R"(shard.grid @ep(shape = 2)
          func.func @main(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> {
            %0 = shard.all_reduce %x on @ep grid_axes = [0] : tensor<2xf32> -> tensor<2xf32>
            return %0 : tensor<2xf32>
          })",
       "collective over unknown grid 'ep' (expected dp, dp_shard, dp_replica, tp or pp)"},
      {R"(func.func @a(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> attributes {smp.pp_rank = 0 : i64} {
            return %x : tensor<2xf32>
          }
          func.func @b(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> attributes {smp.pp_rank = 2 : i64} {
            return %x : tensor<2xf32>
          })",
       "the pipeline-rank functions are not numbered 0..1"},
      {R"(func.func @a(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> attributes {smp.pp_rank = 0 : i64} {
            smp.send %x to 5 tag 0 : tensor<2xf32>
            return %x : tensor<2xf32>
          }
          func.func @b(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> attributes {smp.pp_rank = 1 : i64} {
            return %x : tensor<2xf32>
          })",
       "send to pipeline rank 5 of 2"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.text);
    std::string error = refusal(c.text);
    EXPECT_NE(error.find(c.error), std::string::npos) << error;
  }
}

TEST_F(ArtifactWriterTest, RefusesWeightsOfTheWrongSize) {
  ShortWeights shortWeights;
  EXPECT_EQ(
      refusal(
          R"(func.func @main(%w: tensor<8x4xf32> {smp.param = "w1"}) -> tensor<8x4xf32> {
                         %0 = smp.neg %w : tensor<8x4xf32>
                         return %0 : tensor<8x4xf32>
                       })",
          &shortWeights),
      "parameter 'w1' has 124 bytes, expected 128");
  // The weight source's own error, passed on.
  EXPECT_EQ(
      refusal(
          R"(func.func @main(%w: tensor<3xf32> {smp.param = "w1"}) -> tensor<3xf32> {
                         %0 = smp.neg %w : tensor<3xf32>
                         return %0 : tensor<3xf32>
                       })"),
      "wrong type for w1");
}

TEST_F(ArtifactWriterTest, RefusesAnOutputDirectoryItCannotCreate) {
  std::string file = tmp + "/a-file";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(file, ec);
    ASSERT_FALSE(ec);
  }
  std::string error = refusal(
      R"(func.func @main(%x: tensor<2xf32> {smp.input = "x"}) -> tensor<2xf32> {
                   return %x : tensor<2xf32>
                 })",
      nullptr, file + "/model.smpx");
  EXPECT_EQ(error.rfind(file + "/model.smpx: ", 0), 0u) << error;
}

} // namespace
