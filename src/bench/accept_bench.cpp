#include "bench/accept_bench.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/engine.h"
#include "sampling/rng.h"
#include "tokenizer/chat_template.h"

namespace dspark::bench {

namespace {

// "turns" unless the file's first line has an "instruction" and no "turns".
std::string detect_format(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line.find("\"turns\"") == std::string::npos && line.find("\"instruction\"") != std::string::npos ? "instruction"
                                                                                                           : "turns";
}

}  // namespace

std::vector<std::string> read_prompts(const std::string& file, const std::string& format_flag, int64_t limit) {
  std::ifstream in(file);
  if (!in) throw Error(file + ": cannot open the prompt file");
  const std::string format = format_flag == "auto" ? detect_format(file) : format_flag;
  if (format != "turns" && format != "instruction")
    throw Error("--prompt-format must be auto, turns or instruction, not " + format);
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

std::vector<std::vector<int64_t>> chat_prompt_ids(const std::string& model_dir, const tokenizer::Tokenizer& tok,
                                                  const std::vector<std::string>& prompts) {
  const tokenizer::ChatTemplate chat = tokenizer::ChatTemplate::load(model_dir);
  std::vector<std::vector<int64_t>> ids;
  for (const std::string& prompt : prompts) {
    const std::vector<int32_t> encoded =
        tok.encode(chat.render({{"user", prompt}}, {.add_generation_prompt = true, .enable_thinking = false}));
    ids.emplace_back(encoded.begin(), encoded.end());
  }
  return ids;
}

AcceptResult run_accept(model::Transformer& target, draft::Drafter& drafter, const tokenizer::Tokenizer& tok,
                        const std::string& model_dir, const std::vector<std::string>& prompts, const AcceptOptions& o,
                        const std::function<void(int64_t)>& on_prompt_done) {
  const model::GenerationConfig generation = model::GenerationConfig::load_or_default(model_dir, target.config());
  std::vector<std::vector<int64_t>> prompt_ids = chat_prompt_ids(model_dir, tok, prompts);
  int64_t longest = 0;
  for (const auto& ids : prompt_ids) longest = std::max<int64_t>(longest, static_cast<int64_t>(ids.size()));
  engine::Engine engine(target, &drafter,
                        {.max_concurrency = 1, .max_context = longest + o.max_tokens, .gamma = o.gamma,
                         .schedule = schedule::ScheduleKind::kFixed, .record_rounds = true});
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    engine::EngineRequest request;
    request.prompt_ids = std::move(prompt_ids[i]);
    request.sampling = {.temperature = o.temperature, .seed = o.seed + i};
    request.max_tokens = o.max_tokens;
    request.stop_ids = generation.eos_token_ids;
    request.confidence_threshold = o.confidence_threshold;
    engine.submit(std::move(request));
  }
  AcceptResult result;
  int64_t done = 0;
  while (!engine.idle())
    for (engine::RequestOutcome& outcome : engine.step()) {
      result.stats.merge(outcome.stats);
      result.rounds.insert(result.rounds.end(), outcome.rounds.begin(), outcome.rounds.end());
      if (on_prompt_done) on_prompt_done(++done);
    }
  return result;
}

std::vector<calibrate::Round> calibration_rounds(std::span<const engine::DraftRound> steps) {
  std::vector<calibrate::Round> rounds;
  for (const engine::DraftRound& step : steps) {
    if (step.confidence.empty()) continue;
    calibrate::Round round;
    for (float c : step.confidence) {
      const double p = std::clamp(static_cast<double>(c), 1e-7, 1.0 - 1e-7);
      round.logits.push_back(std::log(p / (1.0 - p)));
    }
    round.accepted = static_cast<int>(step.accepted);
    round.exact.assign(step.exact_acceptance.begin(), step.exact_acceptance.end());
    rounds.push_back(std::move(round));
  }
  return rounds;
}

std::optional<ConfidenceMetrics> confidence_metrics(std::span<const engine::DraftRound> steps, int64_t gamma) {
  const std::vector<calibrate::Round> rounds = calibration_rounds(steps);
  if (rounds.empty()) return std::nullopt;
  // Temperature 1 everywhere: the confidences are scored as the drafter gave them.
  const std::vector<double> unscaled(static_cast<size_t>(gamma), 1.0);
  const calibrate::StsMeans means = calibrate::sts_means(calibrate::sts_report(rounds, unscaled));
  sampling::Rng rng(0);
  return ConfidenceMetrics{.rounds = static_cast<int64_t>(rounds.size()),
                           .ece = means.ece_before,
                           .ece_floor = calibrate::ece_floor(rounds, unscaled, calibrate::kEceFloorDraws, rng),
                           .auc = means.auc_after,
                           .auc_exact = means.auc_exact};
}

}  // namespace dspark::bench
