#include <cstdio>
#include <exception>
#include <string>
#include <vector>

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
  app.add_option("--threads", n_threads, "threads for the kernels and libtorch (default: all cores)")
      ->check(CLI::Range(0, 4096));
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
    // CLI11 reports an unknown command as "A subcommand is required": name it instead.
    const std::vector<std::string> rest = app.remaining();
    if (app.get_subcommands().empty() && !rest.empty() && rest.front().rfind("-", 0) != 0) {
      std::string commands;
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
        commands += (commands.empty() ? "" : ", ") + sub->get_name();
      std::fprintf(stderr, "dspark: error: unknown command '%s' (commands: %s)\n", rest.front().c_str(), commands.c_str());
      return 1;
    }
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // One line and exit 1, as every other error (not CLI11's two lines and codes 105-114).
    std::fprintf(stderr, "dspark: error: %s (see --help)\n", e.what());
    return 1;
  } catch (const dspark::Error& e) {
    std::fprintf(stderr, "dspark: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dspark: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
