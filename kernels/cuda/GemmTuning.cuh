//===- GemmTuning.cuh - cuBLASLt's algorithms timed and kept ---*- C++ -*-===//
//
// SMP_CUBLASLT_TUNE=1 times the first algorithms cuBLASLt's heuristic
// proposes for a product plan (MatMul.cu) and keeps the fastest.
//
// SMP_CUBLASLT_TUNE_FILE=F: the algorithm SMP_CUBLASLT_TUNE=1 timed fastest
// for each product plan, written to F, and read back by later runs, which
// then run that algorithm without timing anything: the speed of tuning
// with the same bits every run (tuning alone can pick another algorithm,
// which sums in another order, on every run). As PyTorch's TunableOp keeps
// its choices in PYTORCH_TUNABLEOP_FILENAME. Private to kernels/cuda.
//
// The file is text: comment lines (#), a line naming the device it was
// tuned on (its name, compute capability and SM count, and cuBLASLt's
// version), then a line a plan: its key (MatMul.cu's LtKey: 21 numbers
// joined by commas), the number of the heuristic's algorithm it runs (1 =
// the heuristic's first; of the first 8 it proposes) and the product in
// words. A file tuned on another device or cuBLASLt is refused (its numbers
// name other algorithms); so is a malformed line, with the file and line.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_GEMMTUNING_CUH
#define SMP_KERNELS_CUDA_GEMMTUNING_CUH

#include "Common.cuh"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace smp::kernels::cuda {

/// What a cuBLASLt plan depends on: types, transposes, matrix sizes, batch
/// count and strides, the pointers' alignments, TF32 and the epilogue (with
/// the bias and aux pointers' alignments, which the heuristic reads).
using LtKey = std::array<int64_t, 21>;

struct GemmTuningFile {
  /// A plan's line: the heuristic's algorithm (0 = its first) and the
  /// product in words.
  struct Entry {
    int algorithm = 0;
    std::string product;
  };
  std::string path;
  std::string device;  // this device's line (tuningDeviceLine)
  bool tuning = false; // SMP_CUBLASLT_TUNE=1: new plans are added
  std::map<LtKey, Entry> entries;
  /// For the run's note: plans that ran the file's algorithm (and of those,
  /// not the heuristic's first), plans not in the file, plans added to it.
  int used = 0, usedNotFirst = 0, absent = 0, added = 0;
};

namespace detail {

/// The algorithms a tuned plan chooses among: the heuristic's first 8,
/// each timed over kTuneRuns products (after one that is not).
constexpr int kTuneCandidates = 8, kTuneRuns = 3;

/// Enqueues a product (every call of it) with an algorithm: cuBLASLt's
/// status.
using EnqueueProduct =
    std::function<cublasStatus_t(const cublasLtMatmulAlgo_t &)>;

/// SMP_CUBLASLT_TUNE=1: times each candidate over kTuneRuns products
/// (after one: cuBLASLt's own first-call work; a candidate that fails to
/// launch, then or in a timed run, is passed over). `chosen`: the fastest's
/// index (-1: none ran; 0, untimed, for a single candidate); `line`: the
/// note for gemmTuning() ("" when nothing was timed). The products write
/// the product's outputs, which the product itself writes again after. The
/// host waits for each candidate: once a plan, on its first product.
Status timeAlgorithms(const char *op, cudaStream_t stream,
                      const std::vector<cublasLtMatmulAlgo_t> &candidates,
                      const std::string &what, double flops,
                      const EnqueueProduct &enqueue, int &chosen,
                      std::string &line);

/// SMP_CUBLASLT_TUNE_FILE: the index among the heuristic's `candidates`
/// the file names for a new plan `key` (`what`, in words), counted for the
/// note; -1 (counted as absent) when it is not in the file. Refused when
/// the number is past the candidates the heuristic proposes.
Status algorithmFromFile(const char *op, GemmTuningFile &file, const LtKey &key,
                         size_t candidates, const std::string &what,
                         int &index);

/// "NVIDIA H200 (sm_90, 132 SMs), cuBLASLt 130100": what the algorithms'
/// numbers depend on besides the plan.
Status tuningDeviceLine(const char *op, int device, std::string &out);

/// Reads SMP_CUBLASLT_TUNE_FILE (`path`) for `device`'s line. A missing
/// file is an error unless `tuning` (SMP_CUBLASLT_TUNE=1 creates it).
Status openGemmTuningFile(const char *op, const std::string &path,
                          const std::string &device, bool tuning,
                          GemmTuningFile *&out);

/// Adds a tuned plan to the file and writes it again (under a lock on its
/// folder, merged with what other processes, the other ranks, added since
/// it was read: a plan already in the file keeps its line).
Status recordGemmTuning(const char *op, GemmTuningFile &file, const LtKey &key,
                        int algorithm, const std::string &product);

/// The run's note on the file ("" without one).
std::string gemmTuningFileNote(const GemmTuningFile *file);

} // namespace detail
} // namespace smp::kernels::cuda

#endif // SMP_KERNELS_CUDA_GEMMTUNING_CUH
