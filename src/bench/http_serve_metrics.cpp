#include "bench/http_serve_metrics.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "common/error.h"

namespace dspark::bench {

namespace {

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// strtod over the whole token: Prometheus values include NaN, +Inf and -Inf, which strtod reads.
std::optional<double> parse_number(const std::string& token) {
  if (token.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(token.c_str(), &end);
  if (end != token.c_str() + token.size()) return std::nullopt;
  return v;
}

LatencySummary latency_ms(const std::vector<double>& seconds) {
  if (seconds.empty()) return {};
  const double sum = std::accumulate(seconds.begin(), seconds.end(), 0.0);
  return {.mean_ms = 1e3 * sum / static_cast<double>(seconds.size()),
          .median_ms = 1e3 * percentile(seconds, 50),
          .p99_ms = 1e3 * percentile(seconds, 99)};
}

bool within_slo(const RequestRecord& r, const Slo& slo) {
  auto ok = [](const std::optional<double>& bound_ms, double value_s) {
    return !bound_ms || value_s * 1e3 <= *bound_ms;
  };
  return ok(slo.ttft_ms, r.ttft_s) && ok(slo.tpot_ms, request_tpot_s(r)) && ok(slo.e2el_ms, r.e2el_s);
}

void add_goodput_word(Slo& slo, const std::string& word) {
  const size_t colon = word.find(':');
  const std::string key = word.substr(0, colon);
  const std::optional<double> ms = colon == std::string::npos ? std::nullopt : parse_number(word.substr(colon + 1));
  std::optional<double>* field = key == "ttft"   ? &slo.ttft_ms
                                 : key == "tpot" ? &slo.tpot_ms
                                 : key == "e2el" ? &slo.e2el_ms
                                                 : nullptr;
  if (field == nullptr || !ms || !std::isfinite(*ms) || *ms < 0)
    throw Error("--goodput: '" + word + "' is not KEY:MS with KEY ttft, tpot or e2el and MS a number >= 0");
  *field = *ms;
}

// A cursor over one line of Prometheus text.
struct LineReader {
  std::string_view s;
  size_t i = 0;
  bool done() const { return i >= s.size(); }
  void skip_spaces() { while (!done() && (s[i] == ' ' || s[i] == '\t')) ++i; }
  bool eat(char c) {
    if (done() || s[i] != c) return false;
    ++i;
    return true;
  }
  // [a-zA-Z_:][a-zA-Z0-9_:]* (colons only in metric names, which is all a label name loses).
  std::string name(bool allow_colon) {
    const size_t start = i;
    auto ok = [&](char c, bool first) {
      return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (allow_colon && c == ':') ||
             (!first && std::isdigit(static_cast<unsigned char>(c)));
    };
    while (!done() && ok(s[i], i == start)) ++i;
    return std::string(s.substr(start, i - start));
  }
  // A double-quoted label value with the format's escapes \\, \" and \n.
  std::optional<std::string> quoted() {
    if (!eat('"')) return std::nullopt;
    std::string out;
    while (!done() && s[i] != '"') {
      char c = s[i++];
      if (c == '\\' && !done()) {
        c = s[i++];
        if (c == 'n') c = '\n';
      }
      out += c;
    }
    if (!eat('"')) return std::nullopt;
    return out;
  }
  std::string token() {
    const size_t start = i;
    while (!done() && s[i] != ' ' && s[i] != '\t') ++i;
    return std::string(s.substr(start, i - start));
  }
};

bool read_labels(LineReader& in, PromSample& sample) {
  in.skip_spaces();
  while (!in.eat('}')) {
    std::string key = in.name(false);
    in.skip_spaces();
    if (key.empty() || !in.eat('=')) return false;
    in.skip_spaces();
    std::optional<std::string> value = in.quoted();
    if (!value) return false;
    sample.labels.emplace_back(std::move(key), std::move(*value));
    in.skip_spaces();
    if (in.eat(',')) in.skip_spaces();
    else if (in.done() || in.s[in.i] != '}') return false;
  }
  return true;
}

std::optional<PromSample> parse_sample_line(std::string_view line) {
  LineReader in{line};
  in.skip_spaces();
  if (in.done() || line[in.i] == '#') return std::nullopt;
  PromSample sample;
  sample.name = in.name(true);
  if (sample.name.empty()) return std::nullopt;
  if (in.eat('{') && !read_labels(in, sample)) return std::nullopt;
  in.skip_spaces();
  const std::optional<double> value = parse_number(in.token());
  if (!value) return std::nullopt;
  sample.value = *value;
  return sample;
}

// Which counter of the family a sample is: "vllm:spec_decode_num_drafts" or "..._total" both name
// num_drafts (llama.cpp's counters have no _total suffix).
enum class SpecField { kNone, kDrafts, kDraftTokens, kAcceptedTokens, kAcceptedPerPos };

SpecField spec_field(const std::string& name, std::string_view family) {
  if (name.compare(0, family.size(), family) != 0) return SpecField::kNone;
  std::string_view base = std::string_view(name).substr(family.size());
  if (base.size() > 6 && base.substr(base.size() - 6) == "_total") base.remove_suffix(6);
  if (base == "spec_decode_num_drafts") return SpecField::kDrafts;
  if (base == "spec_decode_num_draft_tokens") return SpecField::kDraftTokens;
  if (base == "spec_decode_num_accepted_tokens") return SpecField::kAcceptedTokens;
  if (base == "spec_decode_num_accepted_tokens_per_pos") return SpecField::kAcceptedPerPos;
  return SpecField::kNone;
}

void add_per_pos(SpecCounters& c, const PromSample& s) {
  const std::string* pos = s.label("position");
  if (pos == nullptr) return;
  const std::optional<double> k = parse_number(*pos);
  // A position beyond any drafter's block is a garbled label, not a reason to allocate gigabytes.
  if (!k || *k < 0 || *k > 4096 || *k != std::floor(*k)) return;
  const size_t i = static_cast<size_t>(*k);
  if (c.accepted_per_pos.size() <= i) c.accepted_per_pos.resize(i + 1, 0.0);
  c.accepted_per_pos[i] += s.value;
}

std::optional<SpecCounters> counters_of_family(const std::vector<PromSample>& samples, std::string_view family) {
  SpecCounters c;
  bool found = false;
  for (const PromSample& s : samples) {
    const SpecField field = spec_field(s.name, family);
    found = found || field != SpecField::kNone;
    switch (field) {
      case SpecField::kDrafts: c.num_drafts += s.value; break;
      case SpecField::kDraftTokens: c.num_draft_tokens += s.value; break;
      case SpecField::kAcceptedTokens: c.num_accepted_tokens += s.value; break;
      case SpecField::kAcceptedPerPos: add_per_pos(c, s); break;
      case SpecField::kNone: break;
    }
  }
  if (!found) return std::nullopt;
  return c;
}

// The sample's value added to *field when its name is `name`; whether it was.
bool add_if_named(const PromSample& s, const char* name, double* field) {
  if (s.name != name) return false;
  *field += s.value;
  return true;
}

}  // namespace

Slo parse_goodput(const std::vector<std::string>& words) {
  Slo slo;
  for (const std::string& word : words) {
    std::istringstream parts(word);
    std::string part;
    while (parts >> part) add_goodput_word(slo, part);
  }
  return slo;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(values.size() - 1, lo + 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

double request_tpot_s(const RequestRecord& r) {
  if (r.output_tokens < 2) return 0.0;
  return (r.e2el_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
}

HttpSummary summarize(const std::vector<RequestRecord>& records, double seconds, const Slo& slo) {
  HttpSummary s;
  s.requests = static_cast<int64_t>(records.size());
  s.seconds = seconds;
  std::vector<double> ttft, tpot, itl, e2el, user_tps;
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    e2el.push_back(r.e2el_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.output_tokens > 1) tpot.push_back(request_tpot_s(r));
    if (!slo.empty() && within_slo(r, slo)) ++s.good_requests;
    if (r.output_tokens > 0 && r.last_token_s > 0)
      user_tps.push_back(static_cast<double>(r.output_tokens) / r.last_token_s);
  }
  s.failed = s.requests - s.completed;
  s.request_throughput = ratio(static_cast<double>(s.completed), seconds);
  s.output_throughput = ratio(static_cast<double>(s.output_tokens), seconds);
  s.total_token_throughput = ratio(static_cast<double>(s.input_tokens + s.output_tokens), seconds);
  s.request_goodput = ratio(static_cast<double>(s.good_requests), seconds);
  s.ttft = latency_ms(ttft);
  s.tpot = latency_ms(tpot);
  s.itl = latency_ms(itl);
  s.e2el = latency_ms(e2el);
  if (!user_tps.empty()) {
    const double sum = std::accumulate(user_tps.begin(), user_tps.end(), 0.0);
    s.user_tps_mean = sum / static_cast<double>(user_tps.size());
    s.user_tps_p50 = percentile(user_tps, 50);
    s.user_tps_p90 = percentile(user_tps, 90);
  }
  return s;
}

const std::string* PromSample::label(std::string_view key) const {
  for (const auto& [k, v] : labels)
    if (k == key) return &v;
  return nullptr;
}

std::vector<PromSample> parse_prometheus(std::string_view text) {
  std::vector<PromSample> samples;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (std::optional<PromSample> s = parse_sample_line(line)) samples.push_back(std::move(*s));
    start = end + 1;
  }
  return samples;
}

double SpecCounters::acceptance_rate() const { return ratio(num_accepted_tokens, num_draft_tokens); }

double SpecCounters::mean_acceptance_length() const { return 1.0 + ratio(num_accepted_tokens, num_drafts); }

std::vector<double> SpecCounters::acceptance_per_pos() const {
  std::vector<double> rates;
  for (double accepted : accepted_per_pos) rates.push_back(ratio(accepted, num_drafts));
  return rates;
}

std::optional<SpecCounters> find_spec_counters(const std::vector<PromSample>& samples) {
  if (std::optional<SpecCounters> c = counters_of_family(samples, "vllm:")) return c;
  return counters_of_family(samples, "llamacpp:");
}

SpecCounters counters_delta(const SpecCounters& after, const SpecCounters& before) {
  SpecCounters d{.num_drafts = after.num_drafts - before.num_drafts,
                 .num_draft_tokens = after.num_draft_tokens - before.num_draft_tokens,
                 .num_accepted_tokens = after.num_accepted_tokens - before.num_accepted_tokens,
                 .accepted_per_pos = after.accepted_per_pos};
  for (size_t k = 0; k < before.accepted_per_pos.size() && k < d.accepted_per_pos.size(); ++k)
    d.accepted_per_pos[k] -= before.accepted_per_pos[k];
  return d;
}

double EngineCounters::mean_budget() const { return ratio(verified_draft_tokens, decode_request_steps); }

std::optional<EngineCounters> find_engine_counters(const std::vector<PromSample>& samples) {
  EngineCounters c;
  bool found = false;
  for (const PromSample& s : samples) {
    found = add_if_named(s, "dspark:verified_draft_tokens_total", &c.verified_draft_tokens) || found;
    found = add_if_named(s, "dspark:decode_request_steps_total", &c.decode_request_steps) || found;
    found = add_if_named(s, "dspark:draft_seconds_total", &c.draft_seconds) || found;
  }
  if (!found) return std::nullopt;
  return c;
}

EngineCounters counters_delta(const EngineCounters& after, const EngineCounters& before) {
  return {.verified_draft_tokens = after.verified_draft_tokens - before.verified_draft_tokens,
          .decode_request_steps = after.decode_request_steps - before.decode_request_steps,
          .draft_seconds = after.draft_seconds - before.draft_seconds};
}

}  // namespace dspark::bench
