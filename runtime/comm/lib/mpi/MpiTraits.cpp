//===- MpiTraits.cpp - What the linked MPI can connect ranks through ------===//
//
// Open MPI 4 reaches PMI-1/PMI-2 (srun --mpi=pmi2, MPICH-style launchers)
// only through its s1/s2 components, which exist when it was built
// --with-pmi (Debian's is not: it talks PMIx); Open MPI 5 dropped them.
// Without them MPI_Init aborts with Open MPI's own long message, so
// detectLaunch refuses such a launch first and names what works.
//
//===----------------------------------------------------------------------===//

#include "smprt/comm/Launch.h"

#include <dlfcn.h>
#include <mpi.h>
#include <string>
#include <unistd.h>

namespace smprt {

MpiTraits mpiTraits() {
  MpiTraits t;
#if defined(OMPI_MAJOR_VERSION)
  t.name = "Open MPI " + std::to_string(OMPI_MAJOR_VERSION) + "." +
           std::to_string(OMPI_MINOR_VERSION) + "." +
           std::to_string(OMPI_RELEASE_VERSION);
  t.pmi = false;
  if (OMPI_MAJOR_VERSION >= 5)
    return t;
  // The components live beside libmpi: <libdir>/openmpi3 (Debian) or
  // <libdir>/openmpi (Open MPI's own layout).
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&MPI_Init), &info) || !info.dli_fname)
    return t;
  std::string lib = info.dli_fname;
  std::string dir = lib.substr(0, lib.rfind('/') + 1);
  for (const char *sub : {"openmpi3/", "openmpi/"})
    for (const char *component : {"mca_pmix_s1.so", "mca_pmix_s2.so"})
      if (::access((dir + sub + component).c_str(), F_OK) == 0)
        t.pmi = true;
#elif defined(MPICH_VERSION)
  t.name = std::string("MPICH ") + MPICH_VERSION;
#endif
  return t;
}

} // namespace smprt
