// `dspark data regenerate`: the target writes the responses its drafters learn from (DeepSpec's
// data step 2, deepspec-spec 4.4). Each training conversation is replayed turn by turn: every user
// turn is sent with the *regenerated* earlier turns, and the original assistant answers are
// discarded. Conversations decode together through the engine, `batch` at a time, each turn one
// request, each conversation on its own seeded random stream (continued from turn to turn).
//
// Output, one JSON line per finished conversation, appended and flushed as each one finishes, so
// an interrupted run resumes by skipping the ids already written:
//   {"id":..., "domain":..., "source":..., "input_ids":[...], "loss_mask":[0,1,...],
//    "turns":N, "finish":"stop"|"length"}
// input_ids is the whole rendered conversation (ChatML, non-thinking generation prompts, as
// train::render_record renders it); loss_mask is 1 on each generated answer and its <|im_end|>.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"
#include "sampling/sampling.h"
#include "tokenizer/tokenizer.h"

namespace dspark::train {

struct RegenerateOptions {
  std::filesystem::path corpus_file;  // train.jsonl of `dspark data corpus` (raw-text records skipped)
  std::filesystem::path out_file;     // appended; conversations already in it are skipped
  // DeepSpec's Qwen3 recipe. Conversation i (0-based, in file order) uses seed + i.
  sampling::SamplingParams sampling{.temperature = 0.7, .top_k = 20, .top_p = 0.8};
  int64_t max_new_tokens = 512;  // per assistant turn; an answer cut here ends the conversation
  int64_t max_length = 1024;     // tokens per conversation; a turn that would not fit is dropped
  int64_t batch = 16;            // conversations decoded together
  int64_t limit = 0;             // use the first `limit` conversations of the file (0: all)
};

struct RegenerateSummary {
  int64_t conversations = 0;  // written by this run
  int64_t skipped = 0;        // already in the output file
  int64_t dropped = 0;        // first prompt longer than max_length
  int64_t generated_tokens = 0;
  double seconds = 0;
};

RegenerateSummary regenerate(model::Transformer& target, const tokenizer::Tokenizer& tok,
                             const RegenerateOptions& options);

// One line of the output.
struct RegeneratedSample {
  std::string id, domain, source;
  std::vector<int32_t> input_ids;
  std::vector<uint8_t> loss_mask;  // [input_ids.size()]
  int64_t turns = 0;
  std::string finish;
};

std::vector<RegeneratedSample> read_regenerated(const std::filesystem::path& file);

}  // namespace dspark::train
