//===- CudaTestUtil.h - Device tensors for the CUDA kernel tests ----------===//
//
// The CUDA kernels are checked against the CPU kernels: the same random host
// inputs (TestUtil.h's Host) run through smp::kernels::cpu on the host and
// smp::kernels::cuda on device copies, then the outputs are compared. Every
// test skips without a CUDA device; nothing here touches CUDA before a test
// body runs (ctest's discovery runs the binary with --gtest_list_tests).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_UNIT_KERNELS_CUDATESTUTIL_H
#define SMP_TEST_UNIT_KERNELS_CUDATESTUTIL_H

#include "TestUtil.h"

#include "smp/kernels/cpu/Kernels.h"
#include "smp/kernels/cpu/Training.h"
#include "smp/kernels/cuda/Kernels.h"
#include "smp/kernels/cuda/Training.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>

namespace smp_cuda_test {

namespace cpuk = smp::kernels::cpu;
namespace cuk = smp::kernels::cuda;
using smp::base::DType;
using smp::base::Status;
using smp::base::TensorRef;
using smp::kernels::cpu::test::expectNear;
using smp::kernels::cpu::test::Host;
using smp::kernels::cpu::test::make;
using smp::kernels::cpu::test::NormCase;
using smp::kernels::cpu::test::normCases;
using smp::kernels::cpu::test::random;

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    cudaError_t _e = (expr);                                                   \
    ASSERT_EQ(_e, cudaSuccess) << #expr << ": " << cudaGetErrorString(_e);     \
  } while (0)

/// A device tensor that owns its memory (cudaMalloc).
class Dev {
public:
  /// A device copy of h.
  explicit Dev(const Host &h) {
    ref_ = h.ref;
    allocate();
    if (ref_.bytes())
      cudaMemcpy(ptr_, h.ref.data, ref_.bytes(), cudaMemcpyHostToDevice);
    // The kernels run on a non-blocking stream, which does not wait for the
    // legacy stream's copies and memsets: finish them here.
    cudaDeviceSynchronize();
  }
  /// Uninitialised device memory of this type and shape (filled with 0xCD
  /// bytes so that elements a kernel forgets to write show up).
  Dev(DType t, std::vector<int64_t> shape) {
    ref_.dtype = t;
    ref_.shape = std::move(shape);
    allocate();
    cudaMemset(ptr_, 0xCD, std::max<size_t>(ref_.bytes(), 16));
    cudaDeviceSynchronize();
  }
  Dev(const Dev &) = delete;
  Dev &operator=(const Dev &) = delete;
  ~Dev() {
    if (ptr_) {
      cudaDeviceSynchronize(); // no kernel may still use it
      cudaFree(ptr_);
    }
  }
  operator const TensorRef &() const { return ref_; }
  const TensorRef &ref() const { return ref_; }
  const TensorRef *ptr() const { return &ref_; }

  /// The contents (synchronous copy; call after cuk::synchronize).
  Host download() const {
    Host h(ref_.dtype, ref_.shape);
    cudaDeviceSynchronize();
    if (ref_.bytes())
      cudaMemcpy(h.ref.data, ptr_, ref_.bytes(), cudaMemcpyDeviceToHost);
    return h;
  }

private:
  void allocate() {
    ptr_ = nullptr;
    if (cudaMalloc(&ptr_, std::max<size_t>(ref_.bytes(), 16)) != cudaSuccess)
      ptr_ = nullptr;
    ref_.data = ptr_;
  }
  void *ptr_ = nullptr;
  TensorRef ref_;
};

/// One context for the whole binary, created by the first test that runs on
/// a GPU and destroyed by the global environment's TearDown.
inline cuk::Context *&sharedContext() {
  static cuk::Context *ctx = nullptr;
  return ctx;
}

class CudaEnvironment : public ::testing::Environment {
public:
  void TearDown() override {
    if (sharedContext()) {
      cuk::destroyContext(sharedContext());
      sharedContext() = nullptr;
    }
  }
};

/// The fixture of every CUDA test: skips without a device, otherwise makes
/// the shared context current.
class Cuda : public ::testing::Test {
protected:
  void SetUp() override {
    if (!cuk::deviceAvailable())
      GTEST_SKIP() << "no CUDA device";
    if (!sharedContext()) {
      Status s = cuk::createContext(0, sharedContext());
      ASSERT_TRUE(s.ok()) << s.error;
    }
    cuk::setCurrentContext(sharedContext());
  }
  void TearDown() override {
    if (sharedContext()) {
      Status s = sync();
      EXPECT_TRUE(s.ok()) << "pending device error: " << s.error;
    }
  }
  static Status sync() { return cuk::synchronize(*sharedContext()); }
};

/// The GPU's result of `d` against the CPU's `h`: |gpu - cpu| <= atol +
/// rtol |cpu| (NaN matches NaN).
inline void expectClose(const Dev &d, const Host &h, double rtol,
                        double atol) {
  Status s = cuk::synchronize(*sharedContext());
  ASSERT_TRUE(s.ok()) << s.error;
  Host got = d.download();
  ASSERT_EQ(got.ref.shape, h.ref.shape);
  ASSERT_EQ(got.ref.dtype, h.ref.dtype);
  expectNear(got.values(), h.values(), rtol, atol);
}

/// Bit-for-bit equality of the raw bytes (data movement, integer ops).
inline void expectSameBytes(const Dev &d, const Host &h) {
  Status s = cuk::synchronize(*sharedContext());
  ASSERT_TRUE(s.ok()) << s.error;
  Host got = d.download();
  ASSERT_EQ(got.ref.shape, h.ref.shape);
  ASSERT_EQ(got.ref.bytes(), h.ref.bytes());
  size_t n = h.ref.bytes(), bad = 0;
  const auto *a = static_cast<const uint8_t *>(got.ref.data);
  const auto *b = static_cast<const uint8_t *>(h.ref.data);
  for (size_t i = 0; i < n && bad < 5; ++i)
    if (a[i] != b[i]) {
      size_t e = i / smp::base::dtypeSize(h.ref.dtype);
      ADD_FAILURE() << "element " << e << ": got " << got.get(e) << ", want "
                    << h.get(e);
      ++bad;
      i = (e + 1) * smp::base::dtypeSize(h.ref.dtype) - 1;
    }
}

/// Tolerances (relative, absolute) for results stored in t: plain
/// elementwise math, or `heavy` (sums: GEMMs, reductions, norms, losses).
struct Tol {
  double rtol, atol;
};
inline Tol tolFor(DType t, bool heavy = false) {
  switch (t) {
  case DType::F64:
    return heavy ? Tol{1e-9, 1e-10} : Tol{1e-12, 1e-13};
  case DType::F32:
    return heavy ? Tol{1e-4, 1e-5} : Tol{1e-5, 1e-6};
  case DType::F16:
    return heavy ? Tol{5e-3, 2e-3} : Tol{2e-3, 1e-3};
  case DType::BF16:
    return heavy ? Tol{3e-2, 1e-2} : Tol{2e-2, 1e-2};
  default:
    return {0, 0};
  }
}

inline void expectTol(const Dev &d, const Host &h, bool heavy = false) {
  Tol t = tolFor(h.ref.dtype, heavy);
  expectClose(d, h, t.rtol, t.atol);
}

/// The synchronize() error after a kernel that must record a data error.
inline void expectDeviceError(const std::string &contains) {
  Status s = cuk::synchronize(*sharedContext());
  ASSERT_FALSE(s.ok()) << "expected a device error containing '" << contains
                       << "'";
  EXPECT_NE(s.error.find(contains), std::string::npos) << s.error;
}

inline const char *name(DType t) { return smp::base::dtypeName(t); }

/// [x[0], channels, spatial...] of a conv / pool output by the ONNX formula
/// (floor, or ceil with ceilMode), each spatial size less `less`. Empty
/// strides / dilations are 1, empty pads 0.
inline std::vector<int64_t> windowOutShape(
    const std::vector<int64_t> &x, int64_t channels,
    const std::vector<int64_t> &kernel, const std::vector<int64_t> &strides,
    const std::vector<int64_t> &pads, const std::vector<int64_t> &dil,
    bool ceilMode = false, int64_t less = 0) {
  std::vector<int64_t> out{x[0], channels};
  size_t sp = x.size() - 2;
  for (size_t d = 0; d < sp; ++d) {
    int64_t s = strides.empty() ? 1 : strides[d];
    int64_t dl = dil.empty() ? 1 : dil[d];
    int64_t pb = pads.empty() ? 0 : pads[d];
    int64_t pe = pads.empty() ? 0 : pads[sp + d];
    int64_t span = x[d + 2] + pb + pe - dl * (kernel[d] - 1) - 1;
    out.push_back((ceilMode ? (span + s - 1) / s : span / s) + 1 - less);
  }
  return out;
}

} // namespace smp_cuda_test

#endif // SMP_TEST_UNIT_KERNELS_CUDATESTUTIL_H
