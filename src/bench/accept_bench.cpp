#include "bench/accept_bench.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/chat_template.h"

namespace dspark::bench {

std::vector<std::string> read_prompts(const std::string& file, const std::string& format, int64_t limit) {
  std::ifstream in(file);
  if (!in) throw Error(file + ": cannot open the prompt file");
  if (format != "turns" && format != "instruction")
    throw Error("--prompt-format must be turns or instruction, not " + format);
  std::vector<std::string> prompts;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line) && (limit <= 0 || static_cast<int64_t>(prompts.size()) < limit)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (format == "turns") {
        prompts.push_back(j.at("turns").at(0).get<std::string>());
      } else {
        std::string text = j.at("instruction").get<std::string>();
        if (j.contains("instances") && !j["instances"].empty()) {
          const std::string input = j["instances"][0].value("input", "");
          if (!input.empty()) text += "\n\n" + input;
        }
        prompts.push_back(text);
      }
    } catch (const std::exception& e) {
      throw Error(file + ":" + std::to_string(line_no) + ": not a " + format + " prompt line (" + e.what() + ")");
    }
  }
  if (prompts.empty()) throw Error(file + ": no prompts");
  return prompts;
}

engine::SpeculativeStats run_accept(model::Transformer& target, draft::Drafter& drafter,
                                    const tokenizer::Tokenizer& tok, const std::string& model_dir,
                                    const std::vector<std::string>& prompts, const AcceptOptions& o,
                                    const std::function<void(int64_t)>& on_prompt_done) {
  const tokenizer::ChatTemplate chat = tokenizer::ChatTemplate::load(model_dir);
  const model::GenerationConfig generation = model::GenerationConfig::load_or_default(model_dir, target.config());
  engine::SpeculativeStats pooled;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::GenerationRequest request;
    const std::vector<int32_t> ids =
        tok.encode(chat.render({{"user", prompts[i]}}, {.add_generation_prompt = true, .enable_thinking = false}));
    request.prompt_ids.assign(ids.begin(), ids.end());
    request.sampling = {.temperature = o.temperature, .seed = o.seed + i};
    request.max_tokens = o.max_tokens;
    request.stop_ids = generation.eos_token_ids;
    const engine::SpeculativeResult r = engine::generate_speculative(
        target, drafter, request, {.gamma = o.gamma, .confidence_threshold = o.confidence_threshold});
    pooled.merge(r.stats);
    if (on_prompt_done) on_prompt_done(static_cast<int64_t>(i) + 1);
  }
  return pooled;
}

}  // namespace dspark::bench
