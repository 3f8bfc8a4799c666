//===- PipelineTimeTest.cpp - A pipeline's rank functions side by side ----===//

#include "smp/Analysis/Cost/PipelineTime.h"
#include "MlirTest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace smp;

namespace {

class PipelineTimeTest : public smp::test::MlirTest {
protected:
  void SetUp() override {
    ASSERT_FALSE(
        llvm::sys::fs::createTemporaryFile("pipeline-profile", "json", path));
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    // Each forward and backward its own measured time (s).
    os << R"([{"op": "relu", "node": "f0", "seconds": 1.0},
              {"op": "relu", "node": "b0", "seconds": 2.0},
              {"op": "relu", "node": "f1", "seconds": 3.0},
              {"op": "recv", "node": "smp.recv", "seconds": 9.0}])";
    os.close();
    ASSERT_FALSE(bool(db.addFile(path)));
    // A message takes half a second whatever its size.
    device = *deviceSpecPreset("cpu");
    device.intraNodeLatency = 0.5;
    device.intraNodeBandwidth = 1e30;
  }
  void TearDown() override { llvm::sys::fs::remove(path); }

  /// The module's functions in order (rank 0 first).
  SmallVector<func::FuncOp> ranks(ModuleOp m) {
    return llvm::to_vector(m.getOps<func::FuncOp>());
  }

  llvm::SmallString<128> path;
  ProfileDB db;
  DeviceSpec device;
};

// Rank 0 computes f0 and sends it; rank 1 receives it, computes f1 and
// sends it back; rank 0 receives it and computes b0. Rank 0: f0 in [0, 1],
// its send to 1.5 (arriving at 1 + 0.5); rank 1 waits to 1.5, f1 to 4.5,
// its send to 5 (arriving at 5); rank 0 waits from 1.5 to 5, b0 to 7.
constexpr const char *kTwoRanks = R"(
  func.func @train_step_pp0(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = smp.relu %x : tensor<4xf32> loc("f0")
    smp.send %0 to 1 tag 0 : tensor<4xf32>
    %1 = smp.recv from 1 tag 1 : tensor<4xf32>
    %2 = smp.relu %1 : tensor<4xf32> loc("b0")
    return %2 : tensor<4xf32>
  }
  func.func @train_step_pp1() {
    %0 = smp.recv from 0 tag 0 : tensor<4xf32>
    %1 = smp.relu %0 : tensor<4xf32> loc("f1")
    smp.send %1 to 0 tag 1 : tensor<4xf32>
    return
  }
)";

TEST_F(PipelineTimeTest, ReceivesWaitForTheirMessages) {
  auto m = parse(kTwoRanks);
  PipelineEstimate e = estimatePipeline(ranks(*m), device, &db);
  ASSERT_TRUE(e.error.empty()) << e.error;
  const double message = 0.5 + 16 / 1e30;
  EXPECT_NEAR(e.stepSeconds, 1 + message + 3 + message + 2, 1e-12);
  ASSERT_EQ(e.finishSeconds.size(), 2u);
  EXPECT_NEAR(e.finishSeconds[0], 7, 1e-12);
  EXPECT_NEAR(e.finishSeconds[1], 5, 1e-12);
  // The receives' measured 9 s (a wait, in a profile) are not used.
  EXPECT_NEAR(e.busySeconds[0], 1 + message + 2, 1e-12);
  EXPECT_NEAR(e.busySeconds[1], 3 + message, 1e-12);
  EXPECT_NEAR(e.waitSeconds[0], 5 - 1.5, 1e-12);
  EXPECT_NEAR(e.waitSeconds[1], 1.5, 1e-12);
  EXPECT_NEAR(e.bubble(), 1 - 7.0 / 14, 1e-12);
  EXPECT_EQ(e.measuredOps, 3u); // f0, b0, f1
  EXPECT_EQ(e.modelledOps, 4u); // two sends, two receives
}

TEST_F(PipelineTimeTest, ADeviceThatOverlapsCommunicationOnlyQueuesASend) {
  // The CUDA backend's pipes: the sender spends a launch, the message still
  // takes its half second.
  device.overlapsCommunication = true;
  device.kernelOverhead = 0.01;
  auto m = parse(kTwoRanks);
  PipelineEstimate e = estimatePipeline(ranks(*m), device, &db);
  ASSERT_TRUE(e.error.empty()) << e.error;
  EXPECT_NEAR(e.stepSeconds, 7, 1e-12);
  EXPECT_NEAR(e.busySeconds[0], 1 + 0.01 + 2, 1e-12);
  EXPECT_NEAR(e.busySeconds[1], 3 + 0.01, 1e-12);
  EXPECT_NEAR(e.finishSeconds[1], 4.51, 1e-12);
}

TEST_F(PipelineTimeTest, UnequalStagesAreNotPricedAsTheSlowestOne) {
  // Four micro-batches through the ranks above (forward only): rank 1's
  // 3 s each bound the step, rank 0's 1 s each fill it ahead: the step is
  // rank 0's first forward and message, then rank 1's four.
  std::string text = "func.func @train_step_pp0(%x: tensor<4xf32>) {\n";
  for (int k = 0; k < 4; ++k)
    text += "  %a" + std::to_string(k) +
            " = smp.relu %x : tensor<4xf32> loc(\"f0\")\n  smp.send %a" +
            std::to_string(k) + " to 1 tag " + std::to_string(k) +
            " : tensor<4xf32>\n";
  text += "  return\n}\nfunc.func @train_step_pp1() {\n";
  for (int k = 0; k < 4; ++k)
    text += "  %r" + std::to_string(k) + " = smp.recv from 0 tag " +
            std::to_string(k) + " : tensor<4xf32>\n  %b" + std::to_string(k) +
            " = smp.relu %r" + std::to_string(k) +
            " : tensor<4xf32> loc(\"f1\")\n";
  text += "  return\n}\n";
  auto m = parse(text);
  PipelineEstimate e = estimatePipeline(ranks(*m), device, &db);
  ASSERT_TRUE(e.error.empty()) << e.error;
  const double message = 0.5 + 16 / 1e30;
  EXPECT_NEAR(e.stepSeconds, 1 + message + 4 * 3, 1e-12);
  EXPECT_NEAR(e.finishSeconds[0], 4 * (1 + message), 1e-12);
}

TEST_F(PipelineTimeTest, RanksThatCannotFinishAreNamed) {
  auto m = parse(R"(
    func.func @train_step_pp0() {
      %0 = smp.recv from 1 tag 7 : tensor<4xf32>
      return
    }
    func.func @train_step_pp1() {
      %0 = smp.recv from 0 tag 8 : tensor<4xf32>
      return
    }
  )");
  PipelineEstimate e = estimatePipeline(ranks(*m), device, &db);
  EXPECT_EQ(e.error, "rank 0 waits for the message of rank 1 with tag 7; "
                     "rank 1 waits for the message of rank 0 with tag 8");
  EXPECT_EQ(e.stepSeconds, 0);
}

} // namespace
