#include "train/regenerate.h"

#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <fstream>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/progress.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"
#include "train/corpus.h"

namespace dspark::train {

namespace {

namespace fs = std::filesystem;

struct Conversation {
  const Record* record = nullptr;
  uint64_t seed = 0;
  uint64_t next_draw = 0;         // its random stream's position: every turn continues it
  size_t next_message = 0;        // first message not yet rendered
  std::vector<int32_t> ids;       // everything so far
  std::vector<uint8_t> loss_mask;
  int64_t turns = 0;
};

// The ids of the conversations already in `file`. A line cut short by an interruption is removed,
// so appending continues on a line boundary.
std::set<std::string> finished_ids(const fs::path& file) {
  std::set<std::string> ids;
  if (!fs::exists(file)) return ids;
  std::ifstream in(file, std::ios::binary);
  std::string line;
  uintmax_t good_bytes = 0;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: an interrupted write
    try {
      ids.insert(nlohmann::json::parse(line).at("id").get<std::string>());
    } catch (const std::exception&) {
      break;
    }
    good_bytes += line.size() + 1;
  }
  in.close();
  if (good_bytes < fs::file_size(file)) fs::resize_file(file, good_bytes);
  return ids;
}

// Text of the messages from `next_message` up to the next assistant turn, ending with the
// non-thinking generation prompt, exactly as render_record writes them ("\n" after the previous
// <|im_end|> first). Empty when no assistant turn follows.
std::string next_prompt_text(const Record& record, size_t& next_message) {
  std::string text = next_message > 0 ? "\n" : "";
  const tokenizer::ChatOptions turn_only{.add_generation_prompt = false};
  for (; next_message < record.messages.size(); ++next_message) {
    const Message& m = record.messages[next_message];
    if (m.role == "assistant") {
      ++next_message;
      return text + tokenizer::render_chatml({}, {.add_generation_prompt = true, .enable_thinking = false});
    }
    text += tokenizer::render_chatml({tokenizer::ChatMessage{m.role, m.content}}, turn_only);
  }
  return "";
}

// Queues the next turn's prompt; false when there is none or it would not fit in max_length.
bool start_turn(Conversation& c, const tokenizer::Tokenizer& tok, int64_t max_length) {
  const std::string text = next_prompt_text(*c.record, c.next_message);
  if (text.empty()) return false;
  const std::vector<int32_t> piece = tok.encode(text);
  // Room for the prompt and at least one answer token.
  if (static_cast<int64_t>(c.ids.size() + piece.size()) + 1 > max_length) return false;
  c.ids.insert(c.ids.end(), piece.begin(), piece.end());
  c.loss_mask.insert(c.loss_mask.end(), piece.size(), 0);
  return true;
}

std::string sample_to_json(const Conversation& c, const std::string& finish) {
  const Record& r = *c.record;
  nlohmann::json j = {{"id", r.id},       {"domain", std::string(domain_name(r.domain))},
                      {"source", r.source}, {"input_ids", c.ids},
                      {"loss_mask", c.loss_mask}, {"turns", c.turns},
                      {"finish", finish}};
  return j.dump();
}

}  // namespace

RegenerateSummary regenerate(model::Transformer& target, const tokenizer::Tokenizer& tok,
                             const RegenerateOptions& o) {
  sampling::check_sampling_params(o.sampling);
  if (o.batch < 1) throw Error("regenerate: --batch must be >= 1");
  if (o.max_new_tokens < 1 || o.max_length < 2) throw Error("regenerate: --max-new-tokens and --max-length must be positive");
  target.config().check_positions(o.max_length, "--max-length");  // before the output file is made
  const std::optional<int32_t> im_end = tok.token_to_id(kImEnd), end_of_text = tok.token_to_id(kEndOfText);
  if (!im_end) throw Error("regenerate: the tokenizer has no <|im_end|> token (a ChatML model is needed)");
  const auto start_time = std::chrono::steady_clock::now();

  std::vector<Record> records;
  for_each_record(o.corpus_file, [&](Record&& r) {
    if (!r.is_raw_text() && (o.limit == 0 || static_cast<int64_t>(records.size()) < o.limit)) records.push_back(std::move(r));
  });
  if (!o.out_file.parent_path().empty()) fs::create_directories(o.out_file.parent_path());
  const std::set<std::string> done = finished_ids(o.out_file);
  RegenerateSummary summary;
  std::deque<Conversation> queue;
  for (size_t i = 0; i < records.size(); ++i) {
    if (done.count(records[i].id)) {
      ++summary.skipped;
      continue;
    }
    Conversation c;
    c.record = &records[i];
    c.seed = o.sampling.seed + i;
    queue.push_back(std::move(c));
  }
  std::ofstream out(o.out_file, std::ios::app | std::ios::binary);
  if (!out) throw Error(o.out_file.string() + ": cannot open for appending");

  // Each turn is one engine request over the whole conversation so far (its earlier turns are
  // prefilled again: cheap beside decoding), continuing the conversation's random stream.
  engine::Engine engine(target, nullptr,
                        {.max_concurrency = o.batch, .max_context = o.max_length,
                         .schedule = schedule::ScheduleKind::kNone});
  std::map<int64_t, Conversation> running;  // by request id
  Progress progress("regenerate", static_cast<int64_t>(records.size()), "tok", summary.skipped);
  auto submit_turn = [&](Conversation c) {
    engine::EngineRequest r;
    r.prompt_ids.assign(c.ids.begin(), c.ids.end());
    r.sampling = o.sampling;
    r.sampling.seed = c.seed;
    r.first_draw = c.next_draw;
    r.max_tokens = std::min(o.max_new_tokens, o.max_length - static_cast<int64_t>(c.ids.size()));
    r.stop_ids = {*im_end};
    if (end_of_text) r.stop_ids.push_back(*end_of_text);
    r.on_token = [&summary](int64_t) { return ++summary.generated_tokens, true; };
    running.emplace(engine.submit(std::move(r)), std::move(c));
  };
  auto finish = [&](const Conversation& c, const std::string& reason) {
    out << sample_to_json(c, reason) << '\n';
    out.flush();
    if (!out) throw Error(o.out_file.string() + ": write failed");
    ++summary.conversations;
  };
  // Keeps `batch` conversations in flight; a conversation whose first turn does not fit is dropped.
  auto start_next_conversation = [&] {
    while (!queue.empty()) {
      Conversation c = std::move(queue.front());
      queue.pop_front();
      if (start_turn(c, tok, o.max_length)) return submit_turn(std::move(c));
      ++summary.dropped;
    }
  };
  for (int64_t i = 0; i < o.batch; ++i) start_next_conversation();

  while (!engine.idle()) {
    for (engine::RequestOutcome& outcome : engine.step()) {
      Conversation c = std::move(running.at(outcome.id));
      running.erase(outcome.id);
      c.next_draw = outcome.next_draw;
      c.ids.insert(c.ids.end(), outcome.ids.begin(), outcome.ids.end());
      c.loss_mask.insert(c.loss_mask.end(), outcome.ids.size(), 1);
      ++c.turns;
      if (outcome.finish_reason == "stop") {  // the answer ended with <|im_end|> or <|endoftext|>
        ++summary.generated_tokens;
        c.ids.push_back(*im_end);
        c.loss_mask.push_back(1);
        if (start_turn(c, tok, o.max_length)) {
          submit_turn(std::move(c));
          continue;
        }
        finish(c, "stop");
      } else {
        finish(c, "length");
      }
      start_next_conversation();
    }
    progress.update(summary.skipped + summary.conversations + summary.dropped,
                    "active " + std::to_string(engine.n_active()), summary.generated_tokens);
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  progress.finish("generated " + std::to_string(summary.generated_tokens) + " tokens");
  return summary;
}

std::vector<RegeneratedSample> read_regenerated(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open (make it with `dspark data regenerate`)");
  std::vector<RegeneratedSample> samples;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      RegeneratedSample s;
      s.id = j.at("id").get<std::string>();
      s.domain = j.at("domain").get<std::string>();
      s.source = j.value("source", "");
      s.input_ids = j.at("input_ids").get<std::vector<int32_t>>();
      s.loss_mask = j.at("loss_mask").get<std::vector<uint8_t>>();
      s.turns = j.value("turns", int64_t{0});
      s.finish = j.value("finish", "");
      if (s.loss_mask.size() != s.input_ids.size()) throw Error("loss_mask and input_ids differ in length");
      samples.push_back(std::move(s));
    } catch (const std::exception& e) {
      throw Error(file.string() + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  return samples;
}

}  // namespace dspark::train
