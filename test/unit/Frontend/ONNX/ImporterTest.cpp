//===- ImporterTest.cpp - ONNX importer on fixtures and bad input ---------===//

#include "smp/Frontend/ONNX/Importer.h"
#include "MlirTest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/InitAll.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <random>
#include <unistd.h>

using namespace mlir;
namespace fe = smp::onnx_frontend;

namespace {

std::string fixture(const std::string &name) {
  return std::string(SMP_SOURCE_DIR) + "/test/fixtures/" + name;
}
std::string bad(const std::string &name) {
  return std::string(SMP_SOURCE_DIR) + "/test/Frontend/ONNX/Inputs/bad/" + name;
}

class ImporterTest : public smp::test::MlirTest {
protected:
  llvm::Expected<OwningOpRef<ModuleOp>> import(const std::string &path,
                                                bool bindDims = true) {
    fe::ImportOptions opts;
    // The fixtures with symbolic dims (the others fix them in the file; a
    // --dim the model lacks is refused).
    bool symbolic = llvm::StringRef(path).contains("gpt_op") ||
                    llvm::StringRef(path).contains("llama") ||
                    llvm::StringRef(path).contains("bert");
    if (bindDims && symbolic) {
      opts.dims["batch"] = 2;
      opts.dims["seq"] = 16;
    }
    return fe::importONNXFile(*ctx, path, opts);
  }
  /// The error message of importing `path` (no dims bound), or "" if it
  /// imported.
  std::string importError(const std::string &path) {
    auto m = import(path, /*bindDims=*/false);
    if (m)
      return "";
    return llvm::toString(m.takeError());
  }
};

/// Shape from a .npy header ("'shape': (2, 16, 64)").
std::vector<int64_t> npyShape(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::string header(256, '\0');
  in.read(header.data(), header.size());
  auto pos = header.find("'shape': (");
  std::vector<int64_t> shape;
  if (pos == std::string::npos)
    return shape;
  const char *p = header.c_str() + pos + 10;
  while (*p && *p != ')') {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p) {
      ++p;
      continue;
    }
    shape.push_back(v);
    p = end;
  }
  return shape;
}

std::map<std::string, int> opHistogram(ModuleOp module) {
  std::map<std::string, int> h;
  module.walk([&](Operation *op) {
    if (op->getDialect() &&
        op->getDialect()->getNamespace() == smp::SmpDialect::getDialectNamespace() &&
        op->getName().getStringRef() != "smp.constant")
      ++h[op->getName().getStringRef().str()];
  });
  return h;
}

const char *kFixtures[] = {"mlp",  "cnn",   "cnn_bn", "gpt",
                           "llama", "bert"};

TEST_F(ImporterTest, FixturesImportWithStaticShapesAtOpset14And17) {
  for (const char *name : kFixtures) {
    for (const char *opset : {"14", "17"}) {
      std::string stem = std::string(name) + "_op" + opset;
      auto module = import(fixture(stem + ".onnx"));
      ASSERT_TRUE(bool(module)) << stem << ": "
                                << llvm::toString(module.takeError());
      auto func = *(*module)->getOps<func::FuncOp>().begin();
      for (Type t : func.getArgumentTypes())
        EXPECT_TRUE(cast<RankedTensorType>(t).hasStaticShape()) << stem;
      bool allStatic = true;
      (*module)->walk([&](Operation *op) {
        for (Type t : op->getResultTypes())
          if (auto rt = dyn_cast<RankedTensorType>(t))
            allStatic &= rt.hasStaticShape();
      });
      EXPECT_TRUE(allStatic) << stem;
      // The output shape agrees with the PyTorch reference output.
      auto ref = npyShape(fixture(stem + "/logits.npy"));
      auto out = cast<RankedTensorType>(func.getResultTypes()[0]);
      EXPECT_EQ(std::vector<int64_t>(out.getShape().begin(),
                                     out.getShape().end()),
                ref)
          << stem;
    }
  }
}

TEST_F(ImporterTest, Opset14And17RaiseToTheSameOps) {
  for (const char *name : kFixtures) {
    auto a = import(fixture(std::string(name) + "_op14.onnx"));
    auto b = import(fixture(std::string(name) + "_op17.onnx"));
    ASSERT_TRUE(a && b) << name;
    EXPECT_EQ(opHistogram(**a), opHistogram(**b)) << name;
  }
  auto llama = import(fixture("llama_op14.onnx"));
  ASSERT_TRUE(bool(llama));
  EXPECT_EQ(opHistogram(**llama)["smp.rms_norm"], 5);
  EXPECT_EQ(opHistogram(**llama)["smp.silu"], 2);
  auto gpt = import(fixture("gpt_op14.onnx"));
  ASSERT_TRUE(bool(gpt));
  EXPECT_EQ(opHistogram(**gpt)["smp.layer_norm"], 5);
  EXPECT_EQ(opHistogram(**gpt)["smp.gelu"], 2);
}

TEST_F(ImporterTest, TiedEmbeddingStaysOneParameter) {
  // gpt_tied was exported without constant folding; gpt_op17 with it, which
  // stored the LM head as a separate transposed copy that smp ties back.
  for (const char *file : {"gpt_tied_op17.onnx", "gpt_op17.onnx"}) {
  SCOPED_TRACE(file);
  auto module = import(fixture(file));
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  auto func = *(*module)->getOps<func::FuncOp>().begin();
  int found = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, "smp.param");
    if (!name || name.getValue() != "transformer.wte.weight")
      continue;
    ++found;
    // Used by the embedding gather and by the LM head (through transpose).
    std::set<std::string> users;
    for (Operation *user : func.getArgument(i).getUsers())
      users.insert(user->getName().getStringRef().str());
    EXPECT_TRUE(users.count("smp.gather"));
    EXPECT_TRUE(users.count("smp.transpose") || users.count("smp.matmul"));
  }
  EXPECT_EQ(found, 1);
  }
}

struct BadCase {
  const char *file;
  std::vector<const char *> expected;
};

TEST_F(ImporterTest, BadModelsGiveOneLineErrors) {
  const BadCase cases[] = {
      {"empty.onnx", {"empty.onnx", "empty"}},
      {"truncated.onnx", {"truncated.onnx", "not a valid ONNX model"}},
      {"random.onnx", {"random.onnx", "not a valid ONNX model"}},
      {"cycle.onnx", {"cycle"}},
      {"dangling.onnx", {"'nowhere'", "not a graph input"}},
      {"dup_output.onnx", {"'y'", "already produced"}},
      {"no_opset.onnx", {"no opset import"}},
      {"unsupported_op.onnx", {"NonMaxSuppression", "'nms_node'"}},
      {"negative_dim.onnx", {"negative dim -3", "'x'"}},
      {"huge_dim.onnx", {"'x'", "too many elements"}},
      {"raw_size.onnx", {"'w'", "raw_data holds 8 bytes", "needs 12"}},
      {"unbound_dim.onnx", {"unbound symbolic dim 'batch'", "--dim batch="}},
      {"ext_abs/model.onnx", {"'w'", "absolute paths are not allowed"}},
      {"ext_dotdot/model.onnx", {"'w'", "'..'"}},
      {"ext_symlink/model.onnx", {"'w'", "symbolic links"}},
      {"ext_range/model.onnx", {"'w'", "past the end"}},
      {"ext_missing/model.onnx", {"'w'", "not found"}},
  };
  for (const BadCase &c : cases) {
    std::string msg = importError(bad(c.file));
    ASSERT_FALSE(msg.empty()) << c.file << " imported";
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const char *e : c.expected)
      EXPECT_NE(msg.find(e), std::string::npos)
          << c.file << ": '" << e << "' not in: " << msg;
  }
  EXPECT_EQ(importError(bad("valid.onnx")), "");
  EXPECT_EQ(importError(bad("ext_ok/model.onnx")), "");
}

TEST_F(ImporterTest, HardlinkedExternalDataIsRefused) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("smp-hardlink", dir));
  std::string model = (dir + "/model.onnx").str();
  std::string weights = (dir + "/weights.bin").str();
  ASSERT_FALSE(llvm::sys::fs::copy_file(bad("ext_hardlink/model.onnx"), model));
  ASSERT_FALSE(llvm::sys::fs::copy_file(bad("ext_ok/weights.bin"), weights));
  EXPECT_EQ(importError(model), "");
  // A second name for the same inode (it could live anywhere).
  std::string other = (dir + "/other.bin").str();
  ASSERT_EQ(::link(weights.c_str(), other.c_str()), 0);
  std::string msg = importError(model);
  EXPECT_NE(msg.find("hard links"), std::string::npos) << msg;
  llvm::sys::fs::remove_directories(dir);
}

TEST_F(ImporterTest, MutatedModelsNeverCrash) {
  // Bit flips and truncations of real models either import or fail with a
  // one-line error; none may crash, hang or allocate wildly.
  std::mt19937 rng(1234);
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("smp-fuzz", dir));
  std::string path = (dir + "/m.onnx").str();
  int imported = 0, refused = 0;
  for (const std::string &src :
       {bad("valid.onnx"), fixture("mlp_op17.onnx"), fixture("gpt_op17.onnx")}) {
    auto buf = llvm::MemoryBuffer::getFile(src);
    ASSERT_TRUE(bool(buf));
    std::string original = (*buf)->getBuffer().str();
    for (int iter = 0; iter < 150; ++iter) {
      std::string bytes = original;
      std::uniform_int_distribution<size_t> pos(0, bytes.size() - 1);
      int flips = 1 + iter % 8;
      for (int f = 0; f < flips; ++f)
        bytes[pos(rng)] ^= static_cast<char>(1u << (rng() % 8));
      if (iter % 5 == 0)
        bytes.resize(pos(rng));
      {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), bytes.size());
      }
      std::string msg = importError(path);
      if (msg.empty()) {
        ++imported;
      } else {
        ++refused;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      }
    }
  }
  EXPECT_GT(refused, 0);
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
