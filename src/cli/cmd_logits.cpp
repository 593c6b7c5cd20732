// dspark logits: every position's logits of a token sequence, raw little-endian f32 [n, vocab].
// A reference dump, so weights default to f32 (exact); --dtype bf16 measures the serving path.
#include <fstream>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"

namespace dspark::cli {

namespace {

struct LogitsArgs {
  std::string model_dir, ids, out, dtype = "auto", kv_cache_dtype = "f32";
};

void run_logits(const LogitsArgs& args) {
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> ids = parse_ids(args.ids, "--ids");
  model::Transformer model = model::Transformer::load(args.model_dir, {parse_weight_dtype(args.dtype), parse_kv_cache_dtype(args.kv_cache_dtype)});
  model::KvCache cache = model.make_cache(1, static_cast<int64_t>(ids.size()));
  model::ForwardBatch batch;
  batch.token_ids = ids;
  batch.seqs = {{*cache.allocate(), static_cast<int64_t>(ids.size())}};
  for (size_t i = 0; i < ids.size(); ++i) batch.logit_rows.push_back(static_cast<int64_t>(i));
  const torch::Tensor logits = model.forward(cache, batch).logits.cpu().contiguous();

  std::ofstream out(args.out, std::ios::binary);
  if (!out) throw Error(args.out + ": cannot open for writing");
  out.write(reinterpret_cast<const char*>(logits.data_ptr<float>()), logits.numel() * sizeof(float));
  out.flush();  // a full disk shows only at the flush
  if (!out) throw Error(args.out + ": write failed");
}

}  // namespace

void register_logits(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand("logits", "write the logits of every position as raw little-endian f32 [n, vocab]");
  cmd->add_option("--model", args->model_dir, "model directory (config.json + safetensors) or a .gguf file")->required();
  cmd->add_option("--ids", args->ids, "comma-separated token ids")->required();
  cmd->add_option("--out", args->out, "output file")->required()
      ->check(writable_file());
  add_dtype_option(cmd, args->dtype);
  add_kv_cache_dtype_option(cmd, args->kv_cache_dtype);
  cmd->callback([args] { run_logits(*args); });
}

}  // namespace dspark::cli
