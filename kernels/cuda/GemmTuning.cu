//===- GemmTuning.cu - cuBLASLt's algorithms timed and kept ---------------===//
//
// SMP_CUBLASLT_TUNE's timing and SMP_CUBLASLT_TUNE_FILE's file: reading,
// checking and writing it (GemmTuning.cuh). Host code only.
//
//===----------------------------------------------------------------------===//

#include "GemmTuning.cuh"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace smp::kernels::cuda::detail {
namespace {

constexpr const char *kDevicePrefix = "device: ";

/// "F: what" for the file's errors, with what to do.
Status fileError(const char *op, const std::string &path,
                 const std::string &what) {
  return fail(op, "SMP_CUBLASLT_TUNE_FILE " + path + ": " + what);
}

/// Parses a plan's line ("k0,k1,...,k20 ALGORITHM PRODUCT"); false if it
/// is not one.
bool parseEntry(const std::string &line, LtKey &key, GemmTuningFile::Entry &e) {
  std::istringstream in(line);
  std::string keyText;
  long long algorithm = 0;
  if (!(in >> keyText >> algorithm) || algorithm < 1 ||
      algorithm > kTuneCandidates)
    return false;
  std::getline(in >> std::ws, e.product);
  e.algorithm = static_cast<int>(algorithm - 1);
  size_t at = 0;
  for (size_t i = 0; i < key.size(); ++i) {
    size_t used = 0;
    try {
      key[i] = std::stoll(keyText.substr(at), &used);
    } catch (...) {
      return false;
    }
    at += used;
    char want = i + 1 < key.size() ? ',' : '\0';
    if (want ? at >= keyText.size() || keyText[at] != want
             : at != keyText.size())
      return false;
    ++at;
  }
  return true;
}

/// Reads `path` into `entries` (a missing file: `exists` false, no
/// error); refuses a file of another device, a malformed line and a plan
/// listed twice.
Status readFile(const char *op, const std::string &path,
                const std::string &device,
                std::map<LtKey, GemmTuningFile::Entry> &entries, bool &exists) {
  struct stat st;
  exists = stat(path.c_str(), &st) == 0;
  if (!exists && errno == ENOENT)
    return Status::success();
  std::ifstream in(path);
  if (!exists || !in || S_ISDIR(st.st_mode))
    return fileError(op, path,
                     S_ISDIR(st.st_mode) && exists
                         ? std::string("is a folder, not a file")
                         : std::string("cannot be read (") +
                               std::strerror(errno) + ")");
  std::string line, seenDevice;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string where = "line " + std::to_string(number) + ": ";
    if (line.empty() || line[0] == '#')
      continue;
    if (seenDevice.empty()) {
      if (line.rfind(kDevicePrefix, 0) != 0)
        return fileError(op, path,
                         where + "expected the device line (\"" +
                             kDevicePrefix + "...\") before the plans");
      seenDevice = line.substr(std::strlen(kDevicePrefix));
      if (seenDevice != device)
        return fileError(
            op, path,
            "was tuned on " + seenDevice + ", and this is " + device +
                ": its algorithms' numbers mean other algorithms here; tune "
                "for this device with SMP_CUBLASLT_TUNE=1 and another file");
      continue;
    }
    LtKey key;
    GemmTuningFile::Entry e;
    if (!parseEntry(line, key, e))
      return fileError(op, path,
                       where +
                           "not a plan's line (21 numbers joined by "
                           "commas, the algorithm's number from 1 to " +
                           std::to_string(kTuneCandidates) +
                           ", the product): '" + line + "'");
    if (!entries.emplace(key, e).second)
      return fileError(op, path, where + "a plan listed twice: '" + line + "'");
  }
  if (in.bad())
    return fileError(op, path, "cannot be read");
  return Status::success();
}

/// The file's text.
std::string fileText(const GemmTuningFile &f) {
  std::ostringstream out;
  out << "# smp: cuBLASLt's algorithm a product plan runs, timed fastest under "
         "SMP_CUBLASLT_TUNE=1\n"
         "# (read by runs with SMP_CUBLASLT_TUNE_FILE naming this file; "
         "smprun --help, ENVIRONMENT).\n"
      << kDevicePrefix << f.device << "\n"
      << "# the plan (21 numbers), the heuristic's algorithm (1 = its "
         "first), the product\n";
  for (const auto &[key, e] : f.entries) {
    for (size_t i = 0; i < key.size(); ++i)
      out << (i ? "," : "") << key[i];
    out << " " << e.algorithm + 1 << " " << e.product << "\n";
  }
  return out.str();
}

/// Holds an exclusive flock on a folder while alive.
class FolderLock {
public:
  explicit FolderLock(const std::string &folder)
      : fd_(open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ >= 0 && flock(fd_, LOCK_EX) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  FolderLock(const FolderLock &) = delete;
  FolderLock &operator=(const FolderLock &) = delete;
  ~FolderLock() {
    if (fd_ >= 0) {
      flock(fd_, LOCK_UN);
      close(fd_);
    }
  }
  bool locked() const { return fd_ >= 0; }

private:
  int fd_;
};

std::string folderOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

Status timeAlgorithms(const char *op, cudaStream_t stream,
                      const std::vector<cublasLtMatmulAlgo_t> &candidates,
                      const std::string &what, double flops,
                      const EnqueueProduct &enqueue, int &chosen,
                      std::string &line) {
  chosen = candidates.size() == 1 ? 0 : -1;
  line.clear();
  if (candidates.size() < 2)
    return Status::success();
  cudaEvent_t start = nullptr, stop = nullptr;
  Status s = cudaStatus(op, cudaEventCreate(&start));
  if (s.ok())
    s = cudaStatus(op, cudaEventCreate(&stop));
  double first = -1, best = -1;
  size_t bestAt = 0, timed = 0;
  for (size_t i = 0; s.ok() && i < candidates.size(); ++i) {
    if (enqueue(candidates[i]) != CUBLAS_STATUS_SUCCESS)
      continue;
    s = cudaStatus(op, cudaEventRecord(start, stream));
    bool launched = true;
    for (int r = 0; s.ok() && launched && r < kTuneRuns; ++r)
      launched = enqueue(candidates[i]) == CUBLAS_STATUS_SUCCESS;
    if (!launched)
      continue;
    float ms = 0;
    if (s.ok())
      s = cudaStatus(op, cudaEventRecord(stop, stream));
    if (s.ok())
      s = cudaStatus(op, cudaEventSynchronize(stop));
    if (s.ok())
      s = cudaStatus(op, cudaEventElapsedTime(&ms, start, stop));
    if (!s.ok())
      break;
    double us = 1e3 * ms / kTuneRuns;
    ++timed;
    if (i == 0)
      first = us;
    if (best < 0 || us < best) {
      best = us;
      bestAt = i;
    }
  }
  for (cudaEvent_t ev : {start, stop})
    if (ev)
      cudaEventDestroy(ev);
  SMP_RETURN_IF_ERROR(s);
  if (timed == 0)
    return Status::success(); // none ran: the product reports its own
  chosen = static_cast<int>(bestAt);
  auto rate = [&](double us) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f us (%.0f TFLOP/s)", us,
                  us > 0 ? flops / us * 1e-6 : 0.0);
    return std::string(buf);
  };
  line = what + ": " + std::to_string(timed) + " of " +
         std::to_string(candidates.size()) +
         " algorithms timed; the heuristic's first " +
         (first < 0 ? std::string("failed") : rate(first)) +
         ", the fastest (#" + std::to_string(bestAt + 1) + ") " + rate(best);
  return Status::success();
}

Status algorithmFromFile(const char *op, GemmTuningFile &file, const LtKey &key,
                         size_t candidates, const std::string &what,
                         int &index) {
  index = -1;
  auto it = file.entries.find(key);
  if (it == file.entries.end()) {
    ++file.absent;
    return Status::success();
  }
  int a = it->second.algorithm;
  if (a >= static_cast<int>(candidates))
    return fileError(
        op, file.path,
        what + " runs cuBLASLt's algorithm #" + std::to_string(a + 1) +
            ", and its heuristic proposes " + std::to_string(candidates) +
            " for it here: tune again with SMP_CUBLASLT_TUNE=1 "
            "and another file");
  index = a;
  ++file.used;
  if (a != 0)
    ++file.usedNotFirst;
  return Status::success();
}

Status tuningDeviceLine(const char *op, int device, std::string &out) {
  cudaDeviceProp p{};
  SMP_RETURN_IF_ERROR(cudaStatus(op, cudaGetDeviceProperties(&p, device)));
  out = std::string(p.name) + " (sm_" + std::to_string(p.major) +
        std::to_string(p.minor) + ", " + std::to_string(p.multiProcessorCount) +
        " SMs), cuBLASLt " + std::to_string(cublasLtGetVersion());
  return Status::success();
}

Status openGemmTuningFile(const char *op, const std::string &path,
                          const std::string &device, bool tuning,
                          GemmTuningFile *&out) {
  out = nullptr;
  auto file = std::make_unique<GemmTuningFile>();
  file->path = path;
  file->device = device;
  file->tuning = tuning;
  bool exists = false;
  SMP_RETURN_IF_ERROR(readFile(op, path, device, file->entries, exists));
  if (!exists && !tuning)
    return fileError(op, path,
                     "does not exist: make it with one run under "
                     "SMP_CUBLASLT_TUNE=1 and the same SMP_CUBLASLT_TUNE_FILE "
                     "(which times cuBLASLt's algorithms and writes the "
                     "fastest there)");
  // Tuning writes it (a new file beside it, renamed): refused now rather
  // than at the first product.
  std::string folder = folderOf(path);
  if (tuning && access(folder.c_str(), W_OK | X_OK) != 0)
    return fileError(op, path,
                     "cannot be written: its folder " + folder + " " +
                         (errno == ENOENT ? std::string("does not exist")
                                          : std::string("is not writable (") +
                                                std::strerror(errno) + ")"));
  out = file.release();
  return Status::success();
}

Status recordGemmTuning(const char *op, GemmTuningFile &file, const LtKey &key,
                        int algorithm, const std::string &product) {
  const std::string &path = file.path;
  FolderLock lock(folderOf(path));
  if (!lock.locked())
    return fileError(op, path,
                     "cannot lock its folder " + folderOf(path) + " (" +
                         std::strerror(errno) + ") to write it");
  // What other processes (ranks) wrote since: theirs stay as they are.
  bool exists = false;
  std::map<LtKey, GemmTuningFile::Entry> now;
  SMP_RETURN_IF_ERROR(readFile(op, path, file.device, now, exists));
  for (auto &[k, e] : now)
    file.entries.insert_or_assign(k, e);
  if (!file.entries.emplace(key, GemmTuningFile::Entry{algorithm, product})
           .second)
    return Status::success();
  ++file.added;
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream outFile(tmp, std::ios::trunc);
    outFile << fileText(file);
    outFile.close();
    if (!outFile) {
      std::remove(tmp.c_str());
      return fileError(op, path,
                       "cannot be written (" + tmp + ": " +
                           std::strerror(errno) + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    return fileError(
        op, path, std::string("cannot be replaced (") + std::strerror(e) + ")");
  }
  return Status::success();
}

std::string gemmTuningFileNote(const GemmTuningFile *file) {
  if (!file)
    return "";
  std::string s = file->path + ": " + std::to_string(file->used) +
                  " product plans ran its algorithm (" +
                  std::to_string(file->usedNotFirst) +
                  " not the heuristic's first)";
  if (file->tuning)
    s += ", " + std::to_string(file->added) + " tuned and added to it";
  else
    s += ", " + std::to_string(file->absent) +
         " not in it ran the heuristic's first";
  return s;
}

} // namespace smp::kernels::cuda::detail
