// Runs the model-based tests on $DSPARK_TEST_DEVICE (test_util.h): before any test, that device
// becomes the default of every model::LoadOptions, as the CLI's --device does. A device this
// libtorch cannot use stops the run with a one-line message rather than failing every test.
#include <cstdio>
#include <cstdlib>

#include "common/error.h"
#include "model/device.h"
#include "test_util.h"

namespace {

const bool kTestDeviceSet = [] {
  try {
    dspark::model::set_default_device(dspark::model::parse_device(dspark::test::test_device_name(), "DSPARK_TEST_DEVICE"));
  } catch (const dspark::Error& e) {
    std::fprintf(stderr, "dspark_tests: %s\n", e.what());
    std::exit(2);
  }
  return true;
}();

}  // namespace
