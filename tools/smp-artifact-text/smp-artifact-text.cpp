//===- smp-artifact-text.cpp - Artifact files as protobuf text ------------===//
//
// A test helper: shows a framed artifact file (manifest.pb,
// rank<N>.program.pb, a checkpoint's index.pb) as protobuf text, writes text
// back as a framed, checksummed file, and reseals an artifact (its manifest's
// file sizes and weights checksums recomputed from the files). Tests use it
// to craft artifacts that pass every checksum, so that only the runtime's
// semantic checks can refuse them.
//
//   smp-artifact-text decode FILE.pb          protobuf text on stdout
//   smp-artifact-text encode TEXT FILE.pb     TEXT -> framed FILE.pb
//   smp-artifact-text reseal DIR              fix DIR/manifest.pb's sizes
//
//===----------------------------------------------------------------------===//

#include "smp/base/FileFormat.h"

#include "artifact.pb.h"
#include "checkpoint.pb.h"

#include <google/protobuf/text_format.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

namespace {

int fail(const std::string &msg) {
  std::cerr << "smp-artifact-text: error: " << msg << "\n";
  return 1;
}

bool readAll(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

bool writeAll(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

/// The message type a file holds, from its name.
std::unique_ptr<google::protobuf::Message> messageFor(const std::string &path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  auto endsWith = [&](const char *s) {
    std::string t = s;
    return base.size() >= t.size() &&
           base.compare(base.size() - t.size(), t.size(), t) == 0;
  };
  if (base == "manifest.pb")
    return std::make_unique<smp::artifact::Manifest>();
  if (endsWith(".program.pb"))
    return std::make_unique<smp::artifact::RankProgram>();
  if (endsWith("index.pb"))
    return std::make_unique<smp::artifact::Checkpoint>();
  return nullptr;
}

/// The format (version) a file is framed with, from its name.
smp::base::FileKind kindOf(const std::string &path) {
  return path.size() >= 8 && path.compare(path.size() - 8, 8, "index.pb") == 0
             ? smp::base::FileKind::Checkpoint
             : smp::base::FileKind::Artifact;
}

/// Reads the framed file `path` into `msg`: "" or what is wrong.
std::string readMessage(const std::string &path,
                        google::protobuf::Message &msg,
                        smp::base::FileKind kind) {
  std::string bytes, payload;
  if (!readAll(path, bytes))
    return path + ": cannot read";
  smp::base::Status s = smp::base::unframe(bytes, path, payload, kind);
  if (!s.ok())
    return s.error;
  if (!msg.ParseFromString(payload))
    return path + ": corrupt payload";
  return "";
}

} // namespace

int main(int argc, char **argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "decode" && argc == 3) {
    auto msg = messageFor(argv[2]);
    if (!msg)
      return fail(std::string(argv[2]) + ": unknown kind of file");
    std::string error = readMessage(argv[2], *msg, kindOf(argv[2]));
    if (!error.empty())
      return fail(error);
    std::string text;
    google::protobuf::TextFormat::PrintToString(*msg, &text);
    std::cout << text;
    return 0;
  }
  if (cmd == "encode" && argc == 4) {
    auto msg = messageFor(argv[3]);
    std::string text, payload;
    if (!msg)
      return fail(std::string(argv[3]) + ": unknown kind of file");
    if (!readAll(argv[2], text))
      return fail(std::string(argv[2]) + ": cannot read");
    if (!google::protobuf::TextFormat::ParseFromString(text, msg.get()))
      return fail(std::string(argv[2]) + ": not protobuf text of " +
                  msg->GetTypeName());
    msg->SerializeToString(&payload);
    if (!writeAll(argv[3], smp::base::frame(payload, kindOf(argv[3]))))
      return fail(std::string(argv[3]) + ": cannot write");
    return 0;
  }
  if (cmd == "reseal" && argc == 3) {
    std::string dir = argv[2];
    smp::artifact::Manifest m;
    std::string error =
        readMessage(dir + "/manifest.pb", m, smp::base::FileKind::Artifact);
    if (!error.empty())
      return fail(error);
    for (auto &r : *m.mutable_ranks()) {
      std::string program, weights;
      if (readAll(dir + "/" + r.program_file(), program))
        r.set_program_bytes(program.size());
      if (readAll(dir + "/" + r.weights_file(), weights)) {
        r.set_weights_bytes(weights.size());
        r.set_weights_checksum(
            smp::base::checksum64(weights.data(), weights.size()));
      }
    }
    std::string payload;
    m.SerializeToString(&payload);
    if (!writeAll(dir + "/manifest.pb",
                  smp::base::frame(payload, smp::base::FileKind::Artifact)))
      return fail(dir + "/manifest.pb: cannot write");
    return 0;
  }
  std::cerr << "usage: smp-artifact-text decode FILE.pb | encode TEXT FILE.pb "
               "| reseal DIR\n";
  return 1;
}
