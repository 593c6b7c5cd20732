#include "model/blas_check.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <mutex>

namespace dspark::model {

BlasInfo detect_blas() {
  BlasInfo info;
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (sgemm != nullptr && dladdr(sgemm, &where) != 0 && where.dli_fname != nullptr) {
    char resolved[PATH_MAX];
    info.library = realpath(where.dli_fname, resolved) != nullptr ? resolved : where.dli_fname;
  }
  info.is_openblas = dlsym(RTLD_DEFAULT, "openblas_get_config") != nullptr ||
                     info.library.find("openblas") != std::string::npos;
  info.is_reference = !info.is_openblas && !info.library.empty() &&
                      (info.library.find("/blas/") != std::string::npos ||
                       info.library.find("netlib") != std::string::npos);
  return info;
}

void warn_if_reference_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    const BlasInfo info = detect_blas();
    if (!info.is_reference) return;
    std::fprintf(stderr,
                 "\n!!! dspark WARNING: libtorch is using the REFERENCE BLAS (%s).\n"
                 "!!! Matrix multiplies will run about 25x slower. Install the optimised one:\n"
                 "!!!     apt-get install libopenblas0-openmp\n\n",
                 info.library.c_str());
  });
}

}  // namespace dspark::model
