#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "common/allocator.h"
#include "common/error.h"
#include "model/device.h"
#include "model/threads.h"

int main(int argc, char** argv) {
  dspark::keep_freed_memory();
  CLI::App app{"dspark: lossless speculative decoding (DSpark) for Hugging Face Qwen3/Llama models"};
  app.require_subcommand(1);
  int n_threads = 0;
  app.add_option("--threads", n_threads, "threads for the kernels and libtorch (default: all cores)");
  std::string device = "cpu";
  app.add_option("--device", device, "where the models run: cpu, cuda or cuda:N (default: cpu)");
  app.parse_complete_callback([&] {
    dspark::model::set_num_threads(n_threads);
    dspark::model::set_default_device(dspark::model::parse_device(device));
  });
  dspark::cli::register_tokenize(app);
  dspark::cli::register_logits(app);
  dspark::cli::register_generate(app);
  dspark::cli::register_model(app);
  dspark::cli::register_bench(app);
  dspark::cli::register_train(app);
  dspark::cli::register_data(app);
  dspark::cli::register_eval(app);
  dspark::cli::register_draft(app);
  dspark::cli::register_calibrate(app);
  dspark::cli::register_profile(app);
  dspark::cli::register_serve(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const dspark::Error& e) {
    std::fprintf(stderr, "dspark: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dspark: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
