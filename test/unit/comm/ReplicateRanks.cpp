//===- ReplicateRanks.cpp - A multi-rank artifact from a single-rank one --===//
//
// smp-replicate-ranks SRC.smpx N DST.smpx
//
// Writes DST.smpx, an artifact of N ranks that each run rank 0's program of
// SRC.smpx (data parallelism without communication: every rank computes the
// same). Until the compiler partitions models, this is how the tests launch
// real multi-rank runs of smprun. Test-only; links no MLIR.
//
//===----------------------------------------------------------------------===//

#include "smprt/Artifact.h"
#include "smprt/FileFormat.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/stat.h>

namespace {

int fail(const std::string &msg) {
  std::cerr << "smp-replicate-ranks: error: " << msg << "\n";
  return 1;
}

bool readAll(const std::string &path, std::string &bytes) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  bytes = s.str();
  return static_cast<bool>(in);
}

bool writeAll(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  return static_cast<bool>(out);
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4)
    return fail("usage: smp-replicate-ranks SRC.smpx N DST.smpx");
  std::string src = argv[1], dst = argv[3];
  int n = std::atoi(argv[2]);
  if (n < 1)
    return fail("N must be a positive number of ranks");
  smprt::Artifact a;
  smprt::Status s = smprt::loadArtifact(src, 0, a);
  if (!s.ok())
    return fail(s.error);
  if (a.manifest.num_ranks() != 1)
    return fail(src + ": already has several ranks");
  std::string weights;
  if (!readAll(a.weightsPath, weights))
    return fail(a.weightsPath + ": cannot read");
  ::mkdir(dst.c_str(), 0755);
  smp::artifact::Manifest m = a.manifest;
  m.set_num_ranks(n);
  m.clear_ranks();
  for (int r = 0; r < n; ++r) {
    smp::artifact::RankProgram p = a.program;
    p.set_rank(r);
    std::string program = smprt::frame(p.SerializeAsString());
    std::string prefix = "rank" + std::to_string(r);
    if (!writeAll(dst + "/" + prefix + ".program.pb", program) ||
        !writeAll(dst + "/" + prefix + ".weights.bin", weights))
      return fail(dst + ": cannot write rank " + std::to_string(r));
    auto *f = m.add_ranks();
    f->set_rank(r);
    f->set_program_file(prefix + ".program.pb");
    f->set_program_bytes(program.size());
    f->set_weights_file(prefix + ".weights.bin");
    f->set_weights_bytes(weights.size());
    f->set_weights_checksum(a.weightsChecksum);
  }
  if (!writeAll(dst + "/manifest.pb", smprt::frame(m.SerializeAsString())))
    return fail(dst + "/manifest.pb: cannot write");
  std::printf("wrote %s: %d ranks\n", dst.c_str(), n);
  return 0;
}
