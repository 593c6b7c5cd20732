// dspark draft: prefill the target on a prompt, run one drafting call, and print the proposed
// block: per slot the token, its draft probability, the top-5 of the drafter's logits (Z for
// DSpark) and the confidence. For debugging drafters and checking conformance.
#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "draft/first_block.h"
#include "draft/load_drafter.h"

namespace dspark::cli {

namespace {

struct DraftArgs {
  std::string target_dir, draft_dir, method, dtype = "auto", draft_dtype = "auto";
  PromptArgs prompt;
  SamplingArgs sampling;
  std::optional<int64_t> anchor, gamma;
  bool json = false;
};

void run_draft(const DraftArgs& args) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(args.target_dir, {parse_weight_dtype(args.dtype)});
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(args.target_dir);
  const std::vector<int64_t> prompt = args.prompt.resolve(tok, args.target_dir);
  sampling::SamplingParams params = args.sampling.resolve(model::GenerationConfig{});  // greedy unless flags say otherwise
  const int64_t n = static_cast<int64_t>(prompt.size());
  std::unique_ptr<draft::Drafter> drafter = draft::load_drafter(
      args.method, args.draft_dir, target,
      {.max_slots = 1, .capacity = n + 64, .weight_dtype = resolve_draft_dtype(args.draft_dtype, target)});
  const int64_t gamma = resolve_gamma(args.gamma, *drafter);

  const draft::FirstBlock first = draft::draft_first_block(target, *drafter, prompt, args.anchor, gamma, params);
  const draft::DraftBlock& block = first.block;
  const int64_t anchor = first.anchor;

  auto spell = [&](int64_t id) {
    return tok && tok->has_id(static_cast<int32_t>(id)) ? tok->decode(std::vector<int32_t>{static_cast<int32_t>(id)}) : "";
  };
  nlohmann::json slots = nlohmann::json::array();
  for (size_t k = 0; k < block.tokens.size(); ++k) {
    const int64_t token = block.tokens[k];
    // An n-gram drafter has no logits: its slots show no top-5.
    nlohmann::json top = nlohmann::json::array();
    if (block.logits.defined()) {
      auto [values, ids] = block.logits[k].topk(5);
      for (int64_t i = 0; i < ids.numel(); ++i)
        top.push_back({{"id", ids[i].item<int64_t>()}, {"logit", values[i].item<double>()}});
    }
    nlohmann::json s = {{"slot", k}, {"token", token}, {"text", spell(token)},
                        {"draft_prob", block.probs[k][token].item<double>()}, {"top5", top}};
    if (!block.confidence.empty()) s["confidence"] = block.confidence[k];
    slots.push_back(s);
  }
  if (args.json) {
    nlohmann::json result = {{"method", drafter->method()}, {"prompt_tokens", n}, {"anchor", anchor}, {"slots", slots}};
    std::cout << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::printf("%s drafter, %lld prompt tokens, anchor %lld %s\n", drafter->method().c_str(), static_cast<long long>(n),
              static_cast<long long>(anchor), nlohmann::json(spell(anchor)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  std::printf("%4s %8s %-16s %10s %10s  %s\n", "slot", "token", "text", "q(token)", "confidence", "top-5 logits (id:logit)");
  for (const nlohmann::json& s : slots) {
    std::string top;
    for (const nlohmann::json& t : s["top5"]) top += std::to_string(t["id"].get<int64_t>()) + ":" + std::to_string(t["logit"].get<double>()).substr(0, 7) + " ";
    std::printf("%4lld %8lld %-16s %10.4f %10s  %s\n", static_cast<long long>(s["slot"].get<int64_t>()),
                static_cast<long long>(s["token"].get<int64_t>()),
                s["text"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), s["draft_prob"].get<double>(),
                s.contains("confidence") ? std::to_string(s["confidence"].get<double>()).substr(0, 6).c_str() : "-", top.c_str());
  }
}

}  // namespace

void register_draft(CLI::App& app) {
  auto args = std::make_shared<DraftArgs>();
  CLI::App* cmd = app.add_subcommand("draft", "prefill a prompt and print one drafted block (debugging drafters)");
  cmd->add_option("--target", args->target_dir, "target model directory")->required();
  cmd->add_option("--draft", args->draft_dir, "drafter directory (DeepSpec layout)");
  cmd->add_option("--method", args->method, "dspark | dflash | eagle3 | ngram (default: from the drafter's config)");
  args->prompt.add_to(cmd);
  args->sampling.add_to(cmd, "greedy");
  cmd->add_option("--anchor", args->anchor, "anchor token (default: the target's greedy next token)");
  cmd->add_option("--gamma", args->gamma, "slots to draft (default: the block size, else 7)");
  add_dtype_option(cmd, args->dtype);
  add_draft_dtype_option(cmd, args->draft_dtype);
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->callback([args] { run_draft(*args); });
}

}  // namespace dspark::cli
