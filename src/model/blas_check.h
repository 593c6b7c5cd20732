// Which BLAS libtorch is running on. Debian's libtorch links the generic libblas.so.3, which is the
// slow reference BLAS unless an optimised one (libopenblas0-openmp) is installed as the alternative;
// matmuls then run ~25x slower, so we check at start-up and warn loudly.
#pragma once
#include <string>

namespace dspark::model {

struct BlasInfo {
  std::string library;    // resolved path of the library that provides sgemm_ ("" if unknown)
  bool is_openblas = false;
  bool is_reference = false;  // the netlib reference BLAS
};

BlasInfo detect_blas();
// Prints a multi-line warning to stderr (once per process) if the reference BLAS is in use.
void warn_if_reference_blas();

}  // namespace dspark::model
