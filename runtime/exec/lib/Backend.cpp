//===- Backend.cpp - Choosing a backend by name ---------------------------===//

#include "smprt/exec/Backend.h"

#ifdef SMPRT_HAVE_CUDA
#include "cuda/CudaBackend.h"
#endif

#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

namespace smprt {

bool cudaBackendBuilt() {
#ifdef SMPRT_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Status makeBackend(const std::string &spec, int localRank,
                   std::unique_ptr<Backend> &out) {
  if (spec == "cpu") {
    out = makeCpuBackend();
    return Status::success();
  }
  int device = -1; // from the local rank
  if (spec.rfind("cuda", 0) == 0) {
    std::string rest = spec.substr(4);
    if (!rest.empty()) {
      char *end = nullptr;
      long d = rest[0] == ':' ? std::strtol(rest.c_str() + 1, &end, 10) : -1;
      if (rest.size() < 2 || !end || *end || d < 0 || d > 1024)
        return Status::failure("--device '" + spec +
                               "': expected cpu, cuda or cuda:N");
      device = static_cast<int>(d);
    }
#ifdef SMPRT_HAVE_CUDA
    return makeCudaBackend(device, localRank, out);
#else
    (void)localRank;
    return Status::failure("--device " + spec +
                           ": this smprun was built without the CUDA backend "
                           "(nvcc was not found when it was configured)");
#endif
  }
  return Status::failure("--device '" + spec +
                         "': expected cpu, cuda or cuda:N");
}

} // namespace smprt
