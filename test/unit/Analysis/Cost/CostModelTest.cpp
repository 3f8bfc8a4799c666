//===- CostModelTest.cpp - Op costs, roofline, collectives, cluster files ===//

#include "smp/Analysis/Cost/CostModel.h"
#include "MlirTest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/InitAll.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;
using namespace smp;

namespace {

class CostModelTest : public smp::test::MlirTest {
protected:
  OwningOpRef<ModuleOp> parse(const std::string &body,
                              const std::string &args) {
    std::string src = "module {\n  shard.grid @dp(shape = 4)\n  func.func @main(" +
                      args + ") {\n" + body + "    return\n  }\n}\n";
    auto module = parseSourceString<ModuleOp>(src, ctx.get());
    EXPECT_TRUE(module) << src;
    return module;
  }

  template <typename OpT> OpCost cost(ModuleOp module) {
    OpCost c;
    module.walk([&](OpT op) { c = costOf(op); });
    return c;
  }
};

TEST_F(CostModelTest, MatMulCountsTwoFlopsPerMultiplyAdd) {
  auto m = parse("    %0 = smp.matmul %a, %b : (tensor<2x3x4xf32>, "
                 "tensor<4x5xf32>) -> tensor<2x3x5xf32>\n",
                 "%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>");
  OpCost c = cost<MatMulOp>(*m);
  EXPECT_EQ(c.flops, 2.0 * 2 * 3 * 5 * 4);
  EXPECT_TRUE(c.matrix);
  EXPECT_EQ(c.bytesRead, (24 + 20) * 4.0);
  EXPECT_EQ(c.bytesWritten, 30 * 4.0);
  // The transposed lhs contracts over its second-to-last dim.
  auto t = parse("    %0 = smp.matmul %a, %b {transpose_lhs = true} : "
                 "(tensor<7x3xf32>, tensor<7x5xf32>) -> tensor<3x5xf32>\n",
                 "%a: tensor<7x3xf32>, %b: tensor<7x5xf32>");
  EXPECT_EQ(cost<MatMulOp>(*t).flops, 2.0 * 3 * 5 * 7);
}

TEST_F(CostModelTest, ConvGatherReshapeAndOptimizer) {
  auto m = parse(
      "    %0 = smp.conv %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, "
      "pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : "
      "(tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x6x6xf32>\n"
      "    %1 = smp.gather %t, %i {axis = 0 : i64} : (tensor<1000x64xbf16>, "
      "tensor<2x5xi64>) -> tensor<2x5x64xbf16>\n"
      "    %2 = smp.reshape %x : tensor<1x3x8x8xf32> -> tensor<192xf32>\n",
      "%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, "
      "%t: tensor<1000x64xbf16>, %i: tensor<2x5xi64>");
  EXPECT_EQ(cost<ConvOp>(*m).flops, 2.0 * (16 * 6 * 6) * (3 * 3 * 3));
  OpCost g = cost<GatherOp>(*m);
  EXPECT_EQ(g.flops, 0);
  // The rows it returns and the ids, not the whole table.
  EXPECT_EQ(g.bytesRead, 2 * 5 * 64 * 2.0 + 10 * 8.0);
  EXPECT_EQ(cost<ReshapeOp>(*m).bytes(), 0);
}

TEST_F(CostModelTest, TileReadsItsInputAndWritesEveryCopy) {
  auto m = parse("    %0 = smp.tile %x {repeats = array<i64: 3, 1, 2>} : "
                 "tensor<2x5x4xf32> -> tensor<6x5x8xf32>\n",
                 "%x: tensor<2x5x4xf32>");
  OpCost c = cost<TileOp>(*m);
  EXPECT_EQ(c.flops, 0);
  EXPECT_FALSE(c.matrix);
  EXPECT_EQ(c.bytesRead, 40 * 4.0);
  EXPECT_EQ(c.bytesWritten, 240 * 4.0);
}

TEST_F(CostModelTest, AttentionCountsAttendedPairsAndNoScoreMatrix) {
  // B 2, 8 query heads over 2 key/value heads, S 5, Sk 7, D 16, Dv 32.
  std::string types = "(tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, "
                      "tensor<2x2x7x32xf32>)";
  std::string results = "(tensor<2x8x5x32xf32>, tensor<2x8x5x2xf32>)";
  auto full = parse("    %o, %l = smp.attention %q, %k, %v {scale = 0.25 : "
                    "f32} : " + types + " -> " + results + "\n",
                    "%q: tensor<2x8x5x16xf32>, %k: tensor<2x2x7x16xf32>, "
                    "%v: tensor<2x2x7x32xf32>");
  OpCost c = cost<AttentionOp>(*full);
  double heads = 2 * 8, pairs = 5 * 7;
  EXPECT_EQ(c.flops, heads * pairs * (2 * 16 + 2 * 32));
  EXPECT_TRUE(c.matrix);
  // q, k, v read; the output and the f32 log-sum-exp (two parts)
  // written: no S x Sk.
  EXPECT_EQ(c.bytesRead, (2 * 8 * 5 * 16 + 2 * 2 * 7 * 16 + 2 * 2 * 7 * 32) *
                             4.0);
  EXPECT_EQ(c.bytesWritten, (2 * 8 * 5 * 32 + 2 * 8 * 5 * 2) * 4.0);
  // Causal (top-left): query i attends keys 0..i, 1 + 2 + 3 + 4 + 5 pairs.
  auto causal = parse("    %o, %l = smp.attention %q, %k, %v {scale = 0.25 : "
                      "f32, causal = true} : " + types + " -> " + results +
                          "\n",
                      "%q: tensor<2x8x5x16xf32>, %k: tensor<2x2x7x16xf32>, "
                      "%v: tensor<2x2x7x32xf32>");
  EXPECT_EQ(cost<AttentionOp>(*causal).flops, heads * 15 * (2 * 16 + 2 * 32));
}

TEST_F(CostModelTest, RooflinePicksTheBindingLimit) {
  DeviceSpec a100 = *deviceSpecPreset("a100-sxm-80g");
  // The preset's achievable fractions (calibrated, docs/benchmarks.md).
  EXPECT_EQ(a100.matrixEfficiency, 0.8);
  EXPECT_EQ(a100.memoryEfficiency, 0.43);
  EXPECT_TRUE(a100.fusesElementwise);
  EXPECT_FALSE(deviceSpecPreset("cpu")->fusesElementwise);
  a100.matrixEfficiency = a100.memoryEfficiency = 1;
  // 1 GFLOP of bf16 matmul on 1 MB: compute-bound at 312 TFLOP/s.
  OpCost big{1e9, 5e5, 5e5, true};
  EXPECT_NEAR(rooflineTime(big, 16, a100), 1e9 / 312e12 + a100.kernelOverhead,
              1e-12);
  // The same work in f32 uses the f32 peak.
  EXPECT_NEAR(rooflineTime(big, 32, a100), 1e9 / 19.5e12 + a100.kernelOverhead,
              1e-12);
  // An elementwise op on 1 GB: bandwidth-bound.
  OpCost stream{2.5e8, 5e8, 5e8, false};
  EXPECT_NEAR(rooflineTime(stream, 32, a100), 1e9 / 2039e9 + a100.kernelOverhead,
              1e-9);
  EXPECT_EQ(rooflineTime(OpCost(), 32, a100), 0);
  a100.matrixEfficiency = 0.5;
  EXPECT_NEAR(rooflineTime(big, 16, a100), 2e9 / 312e12 + a100.kernelOverhead,
              1e-12);
}

TEST_F(CostModelTest, CpuProductsAddTheirReadsToTheirArithmetic) {
  // The cpu preset's products pack their operands before multiplying: a
  // 64-row product of a 1024 x 1024 f32 layer (0.13 GFLOP, 4.7 MB) takes
  // its arithmetic plus its reads; an elementwise op the larger of the two.
  DeviceSpec cpu = *deviceSpecPreset("cpu");
  EXPECT_FALSE(cpu.matrixOverlapsMemory);
  EXPECT_TRUE(deviceSpecPreset("h100-sxm-80g")->matrixOverlapsMemory);
  OpCost product{1.34e8, 4.7e6, 2.6e5, true};
  double arithmetic = 1.34e8 / 0.115e12, reads = 4.96e6 / 20e9;
  EXPECT_NEAR(rooflineTime(product, 32, cpu),
              arithmetic + reads + cpu.kernelOverhead, 1e-12);
  OpCost stream{1e6, 4e6, 4e6, false};
  EXPECT_NEAR(rooflineTime(stream, 32, cpu), 8e6 / 20e9 + cpu.kernelOverhead,
              1e-12);
  auto overlapping = parseCluster(
      R"({"base": "cpu", "matrix_overlaps_memory": true})", "o.json");
  ASSERT_TRUE(bool(overlapping));
  EXPECT_NEAR(rooflineTime(product, 32, *overlapping),
              arithmetic + overlapping->kernelOverhead, 1e-12);
  auto bad =
      parseCluster(R"({"base": "cpu", "matrix_overlaps_memory": 0})", "b.json");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "b.json: 'matrix_overlaps_memory' must be true or false");
}

TEST_F(CostModelTest, CollectivesFollowAlphaBeta) {
  DeviceSpec h100 = *deviceSpecPreset("h100-sxm-80g");
  double n = 1e9, a = h100.intraNodeLatency, b = h100.intraNodeBandwidth;
  // Large buffers: the ring, 2 (p-1)/p n / beta.
  EXPECT_NEAR(collectiveTime(Collective::AllReduce, n, 8, false, h100),
              14 * a + 2 * 7.0 / 8 * n / b, 1e-9);
  // Tiny buffers over many ranks: the tree's 2 log2(p) alpha wins.
  double tiny = collectiveTime(Collective::AllReduce, 4, 1024, true, h100);
  EXPECT_NEAR(tiny, 2 * 10 * h100.interNodeLatency + 8 / h100.interNodeBandwidth,
              1e-12);
  EXPECT_NEAR(collectiveTime(Collective::AllGather, n, 4, true, h100),
              3 * h100.interNodeLatency + 0.75 * n / h100.interNodeBandwidth,
              1e-9);
  EXPECT_EQ(collectiveTime(Collective::AllReduce, n, 1, false, h100), 0);
  EXPECT_NEAR(collectiveTime(Collective::P2P, 1e6, 2, false, h100),
              a + 1e6 / b, 1e-12);
}

TEST_F(CostModelTest, CollectivesAcrossNodesAreHierarchical) {
  DeviceSpec a100 = *deviceSpecPreset("a100-sxm-80g");
  double n = 8e9;
  // 32 ranks, 8 per node: reduce-scatter in the node, all-reduce of each
  // device's eighth across 4 nodes, all-gather in the node.
  EXPECT_NEAR(groupCollectiveTime(Collective::AllReduce, n, 32, 8, a100),
              2 * collectiveTime(Collective::ReduceScatter, n, 8, false, a100) +
                  collectiveTime(Collective::AllReduce, n / 8, 4, true, a100),
              1e-12);
  // Far faster than a flat ring through every device's NIC.
  EXPECT_LT(groupCollectiveTime(Collective::AllReduce, n, 32, 8, a100),
            0.3 * collectiveTime(Collective::AllReduce, n, 32, true, a100));
  // Within a node: NVLink only; one per node: the network only.
  EXPECT_EQ(groupCollectiveTime(Collective::AllReduce, n, 8, 8, a100),
            collectiveTime(Collective::AllReduce, n, 8, false, a100));
  EXPECT_EQ(groupCollectiveTime(Collective::AllGather, n, 6, 1, a100),
            collectiveTime(Collective::AllGather, n, 6, true, a100));
  EXPECT_NEAR(groupCollectiveTime(Collective::ReduceScatter, n, 16, 4, a100),
              collectiveTime(Collective::ReduceScatter, n, 4, false, a100) +
                  collectiveTime(Collective::ReduceScatter, n / 4, 4, true,
                                 a100),
              1e-12);
}

TEST_F(CostModelTest, ClusterFiles) {
  auto d = parseCluster(R"({"base": "a100-sxm-40g", "name": "selene",
                            "inter_node_gbps": 25, "matrix_efficiency": 0.5})",
                        "selene.json");
  ASSERT_TRUE(bool(d)) << llvm::toString(d.takeError());
  EXPECT_EQ(d->name, "selene");
  EXPECT_EQ(d->memoryBytes, 40e9);
  EXPECT_EQ(d->matrixEfficiency, 0.5);
  auto full = parseCluster(
      R"({"devices_per_node": 4, "memory_gb": 16, "peak_tflops": {"fp16": 100,
          "fp32": 10}, "memory_gbps": 800, "intra_node_gbps": 100,
          "inter_node_gbps": 10})",
      "x.json");
  ASSERT_TRUE(bool(full)) << llvm::toString(full.takeError());
  EXPECT_EQ(full->matrixFlops16, 100e12);
  EXPECT_EQ(full->devicesPerNode, 4);
  auto error = [](const char *json) {
    auto r = parseCluster(json, "c.json");
    return r ? std::string("no error") : llvm::toString(r.takeError());
  };
  EXPECT_EQ(error("[1]"), "c.json: expected a JSON object");
  EXPECT_EQ(error(R"({"base": "tpu"})"), "c.json: unknown base 'tpu'");
  EXPECT_EQ(error(R"({"base": "cpu", "memroy_gb": 1})"),
            "c.json: unknown key 'memroy_gb'");
  EXPECT_EQ(error(R"({"base": "cpu", "memory_gb": -1})"),
            "c.json: 'memory_gb' must be a positive number");
  EXPECT_EQ(error(R"({"memory_gb": 1})"),
            "c.json: missing 'devices_per_node' (or give a \"base\")");
  EXPECT_EQ(error(R"({"base": "cpu", "peak_tflops": {"int8": 1}})"),
            "c.json: unknown key 'peak_tflops.int8' (bf16, fp16, fp32, vector)");
  EXPECT_EQ(error(R"({"base": "cpu", "matrix_efficiency": 2})"),
            "c.json: efficiencies must be at most 1");
  EXPECT_EQ(error(R"({"base": "cpu", "fuses_elementwise": 1})"),
            "c.json: 'fuses_elementwise' must be true or false");
  auto fusing = parseCluster(R"({"base": "cpu", "fuses_elementwise": true})",
                             "f.json");
  ASSERT_TRUE(bool(fusing));
  EXPECT_TRUE(fusing->fusesElementwise);
  EXPECT_FALSE(fusing->overlapsCommunication); // the cpu base's
  EXPECT_EQ(error(R"({"base": "cpu", "overlaps_communication": "yes"})"),
            "c.json: 'overlaps_communication' must be true or false");
  auto serial = parseCluster(
      R"({"base": "a100-sxm-80g", "overlaps_communication": false})", "s.json");
  ASSERT_TRUE(bool(serial));
  EXPECT_FALSE(serial->overlapsCommunication);
  EXPECT_TRUE(deviceSpecPreset("h100-sxm-80g")->overlapsCommunication);
  EXPECT_FALSE(deviceSpecPreset("cpu")->overlapsCommunication);
  for (const std::string &name : deviceSpecPresets())
    EXPECT_TRUE(deviceSpecPreset(name).has_value()) << name;
  auto missing = loadDeviceSpec("/nonexistent/cluster.json");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("not a preset"),
            std::string::npos);
}

TEST_F(CostModelTest, MeasuredTimesWinOverTheRoofline) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("profile", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << R"([{"op": "matmul", "node": "mm", "seconds": 0.5, "calls": 5},
              {"op": "relu", "node": "r", "seconds": 0.2}])";
  }
  ProfileDB db;
  ASSERT_FALSE(bool(db.addFile(path)));
  EXPECT_DOUBLE_EQ(*db.lookup("matmul", "mm"), 0.1);
  EXPECT_DOUBLE_EQ(*db.lookup("relu", "r"), 0.2); // no "calls": one
  EXPECT_FALSE(db.lookup("matmul", "other").has_value());

  auto m = parse(
      "    %0 = smp.matmul %a, %b : (tensor<64x64xf32>, tensor<64x64xf32>) "
      "-> tensor<64x64xf32> loc(\"mm\")\n"
      "    %1 = smp.relu %0 : tensor<64x64xf32> loc(\"r2\")\n"
      "    %2 = shard.all_reduce %1 on @dp grid_axes = [0] : "
      "tensor<64x64xf32> -> tensor<64x64xf32>\n",
      "%a: tensor<64x64xf32>, %b: tensor<64x64xf32>");
  DeviceSpec cpu = *deviceSpecPreset("cpu");
  auto f = *m->getOps<func::FuncOp>().begin();
  StepEstimate e = estimateFunction(f, cpu, &db);
  EXPECT_EQ(e.measuredOps, 1u); // the matmul
  EXPECT_EQ(e.modelledOps, 2u); // relu (no profile entry), all_reduce
  OpCost relu{64.0 * 64, 64 * 64 * 4.0, 64 * 64 * 4.0, false};
  EXPECT_NEAR(e.computeSeconds, 0.1 + rooflineTime(relu, 32, cpu), 1e-12);
  EXPECT_NEAR(e.communicationSeconds,
              collectiveTime(Collective::AllReduce, 64 * 64 * 4.0, 4, true, cpu),
              1e-15);
  llvm::sys::fs::remove(path);
}

} // namespace
