//===- smp-checkpoint.cpp - A checkpoint's tensors as .npy files ----------===//
//
// smp-checkpoint CKPT_DIR -o OUT_DIR [--state]
//
// Gathers every parameter (with --state also the optimizer state) of the
// newest checkpoint in CKPT_DIR whole from the shards of every rank that
// wrote it, and writes one .npy per tensor (names percent-encoded as smprun
// encodes them) plus OUT_DIR/index.json: {"tensor name": "file.npy", ...}.
// The Python package's smp.load_checkpoint reads them.
//
//===----------------------------------------------------------------------===//

#include "smprt/Base.h"
#include "smprt/train/Checkpoint.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>

namespace {

int fail(const std::string &msg) {
  std::fprintf(stderr, "smp-checkpoint: error: %s\n", msg.c_str());
  return 1;
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

} // namespace

int main(int argc, char **argv) {
  std::string dir, out;
  bool state = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("usage: smp-checkpoint CKPT_DIR -o OUT_DIR [--state]\n"
                  "  Writes the newest checkpoint's parameters (and with "
                  "--state the optimizer state), gathered whole from every "
                  "rank's shards, as one .npy each plus index.json.\n");
      return 0;
    }
    if (a == "-o" && i + 1 < argc)
      out = argv[++i];
    else if (a == "--state")
      state = true;
    else if (!a.empty() && a[0] == '-')
      return fail("unknown option '" + a + "' (see smp-checkpoint --help)");
    else if (dir.empty())
      dir = a;
    else
      return fail("unexpected argument '" + a + "'");
  }
  if (dir.empty() || out.empty())
    return fail("usage: smp-checkpoint CKPT_DIR -o OUT_DIR [--state]");
  if (::mkdir(out.c_str(), 0755) != 0 && errno != EEXIST)
    return fail(out + ": cannot create (" + std::strerror(errno) + ")");
  std::string index = "{";
  for (const char *role : {"param", "state"}) {
    if (std::strcmp(role, "state") == 0 && !state)
      continue;
    std::map<std::string, smprt::GlobalTensor> tensors;
    smprt::Status s = smprt::readGlobalTensors(dir, role, tensors);
    if (!s.ok())
      return fail(s.error);
    for (auto &[name, g] : tensors) {
      std::string file =
          std::string(role) + "." + smprt::fileNameFor(name) + ".npy";
      smprt::TensorRef ref;
      ref.data = g.bytes.data();
      ref.dtype = static_cast<smprt::DType>(g.dtype);
      ref.shape = g.shape;
      if (!(s = smprt::writeNpy(out + "/" + file, ref)).ok())
        return fail(s.error);
      index +=
          std::string(index.size() > 1 ? ",\n " : "\n ") +
          jsonString(std::string(role) == "param" ? name : "state:" + name) +
          ": " + jsonString(file);
    }
  }
  index += "\n}\n";
  FILE *f = std::fopen((out + "/index.json").c_str(), "w");
  if (!f || std::fputs(index.c_str(), f) < 0 || std::fclose(f) != 0)
    return fail(out + "/index.json: cannot write");
  return 0;
}
