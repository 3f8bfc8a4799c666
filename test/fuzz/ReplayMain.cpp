//===- ReplayMain.cpp - Run a fuzz target over files, without libFuzzer ---===//
//
// In a build without SMP_ENABLE_FUZZERS (gcc, Release) each fuzz target is
// linked with this main instead of libFuzzer's: it runs the target once on
// every file named on the command line (directories: every file in them,
// sorted) and ignores libFuzzer's "-flag=value" arguments, so that
// `smp-fuzz-X -runs=0 corpus/X` replays the committed corpus (seeds and
// crash reproducers) in both kinds of build. A crash fails the test.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc,
                                                           char ***argv);

static void collect(const std::string &path, std::vector<std::string> &out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "replay: %s: missing\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    out.push_back(path);
    return;
  }
  std::vector<std::string> names;
  if (DIR *d = ::opendir(path.c_str())) {
    while (dirent *e = ::readdir(d))
      if (e->d_name[0] != '.')
        names.push_back(path + "/" + e->d_name);
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const std::string &n : names)
    collect(n, out);
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-')
      collect(argv[i], files);
  for (const std::string &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()),
                           bytes.size());
  }
  std::printf("replay: %zu inputs, no crash\n", files.size());
  return 0;
}
