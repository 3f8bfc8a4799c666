//===- FilesTest.cpp - Probing whether a file can be written
//---------------===//

#include "smp/base/Files.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace smp::base {
namespace {

std::string tempPath(const char *name) {
  return ::testing::TempDir() + name + std::to_string(::getpid());
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

TEST(Files, CanWriteANewFileAndLeavesNothingBehind) {
  std::string path = tempPath("files_new");
  ::unlink(path.c_str());
  std::string why;
  EXPECT_TRUE(canWriteFile(path, why)) << why;
  EXPECT_FALSE(exists(path));
}

TEST(Files, CanWriteAnExistingFileWithoutTruncatingIt) {
  std::string path = tempPath("files_existing");
  std::ofstream(path) << "kept";
  std::string why;
  EXPECT_TRUE(canWriteFile(path, why)) << why;
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_EQ(text.str(), "kept");
  ::unlink(path.c_str());
}

TEST(Files, AMissingDirectoryIsSaid) {
  std::string why;
  EXPECT_FALSE(canWriteFile(tempPath("no_such_dir") + "/model.onnx", why));
  EXPECT_EQ(why, "No such file or directory");
}

// Every rank of a run probes its --save-onnx file at start: one rank's
// probe file, made and removed, must not make another's probe fail (it had
// seen the file exist, then could not open it: "No such file or directory"
// from one of two ranks under srun).
TEST(Files, ProbesOfTheSamePathAtOnceAllSucceed) {
  std::string path = tempPath("files_race");
  ::unlink(path.c_str());
  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  auto probe = [&] {
    while (!go)
      std::this_thread::yield();
    std::string why;
    for (int i = 0; i < 20000; ++i)
      if (!canWriteFile(path, why))
        ++failures;
  };
  std::thread a(probe), b(probe);
  go = true;
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_FALSE(exists(path));
}

} // namespace
} // namespace smp::base
