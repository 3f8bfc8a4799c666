//===- BackendRegistry.h - Backends by name ---------------------*- C++ -*-===//
//
// `smprun --device cpu|cuda|cuda:N` names a backend. Each backend registers
// itself under its name (registerCpuBackend in exec/lib/cpu,
// registerCudaBackend in exec/lib/cuda); availableBackends() is the
// registry of this build, filled by a file CMake generates from the
// backends it configured (AvailableBackends.cpp.in), as IREE registers its
// HAL drivers. A backend that was not built is recorded as missing with
// the reason, so that asking for it says why and which backends exist.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_EXEC_BACKENDREGISTRY_H
#define SMPRT_EXEC_BACKENDREGISTRY_H

#include "smprt/Base.h"
#include "smprt/exec/Backend.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smprt {

/// Makes a backend on `device` (-1: the one the rank's local rank picks;
/// always -1 for a backend that takes no device index).
using BackendFactory = std::function<Status(int device, int localRank,
                                            std::unique_ptr<Backend> &out)>;

class BackendRegistry {
public:
  /// Registers the backend `name`; with `takesDevice`, "name:N" picks
  /// device N. A name registered twice keeps its first factory.
  void add(const std::string &name, bool takesDevice, BackendFactory factory);
  /// Records a backend this build does not have: asking for it fails with
  /// "this smprun was built without <title> (<why>)".
  void addMissing(const std::string &name, const std::string &title,
                  bool takesDevice, const std::string &why);

  /// The backends built, in registration order.
  std::vector<std::string> names() const;
  bool has(const std::string &name) const;

  /// Makes the backend `spec` names ("cpu", "cuda", "cuda:N"). Fails with
  /// one line for an unknown name or a bad device index (listing what may
  /// be asked for), for a missing backend (why, and the backends built),
  /// or with the backend's own error (no device usable, ...).
  Status create(const std::string &spec, int localRank,
                std::unique_ptr<Backend> &out) const;

private:
  struct Entry {
    std::string name;
    bool takesDevice = false;
    BackendFactory factory; // empty: missing
    std::string title, why; // of a missing backend
  };
  const Entry *find(const std::string &name) const;
  /// "cpu, cuda or cuda:N": what --device accepts.
  std::string accepted() const;
  std::vector<Entry> entries_;
};

/// The backends of this build: cpu, and cuda where nvcc was found
/// (generated AvailableBackends.cpp, library smprt_backends).
const BackendRegistry &availableBackends();

/// availableBackends().create(spec, localRank, out).
Status makeBackend(const std::string &spec, int localRank,
                   std::unique_ptr<Backend> &out);

/// The registrations each backend provides (called by availableBackends).
void registerCpuBackend(BackendRegistry &registry);
void registerCudaBackend(BackendRegistry &registry);

} // namespace smprt

#endif // SMPRT_EXEC_BACKENDREGISTRY_H
