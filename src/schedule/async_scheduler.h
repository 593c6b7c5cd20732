// `dspark-async`: the production scheduler of the DSpark paper (5.2), in two parts.
//
// 1. Capacity. Zero-overhead scheduling needs the next step's size before the current step ends, so
//    the verification capacity K (draft tokens beyond the R anchors) comes from the confidences of
//    two steps earlier: an unconstrained global search over the SPS table, Theta(K) for every K
//    along that old batch's admission path, argmax, no early stop. It can cross the cliffs of a
//    jagged curve where Algorithm 1 would stop at the first local maximum.
// 2. Admission. This step's candidates, ranked by their current a_{r,j} (the admission path), top K.
//
// Lossless: K is fixed from old information before this step's tokens exist (a causal barrier), and
// a top-K cut of the path admits slot j of a request on a rank that later slots of the same request
// (the only ones that read x_{r,j}) cannot change, because they always rank after it.
//
// The engine keeps the history (see confidence_history.h) and passes the old batch in; requests
// need not match between the two steps, only the pooled values matter to the search.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "schedule/request_draft.h"
#include "schedule/sps_table.h"

namespace dspark::schedule {

// K in 0..min(path length, max_tokens - R) maximising Theta(K) = (R + sum of the K best a) * SPS(R + K)
// for this batch; the smallest K on ties. 0 for an empty batch or R > max_tokens. Validates the batch.
int64_t capacity_global_search(std::span<const RequestDraft> batch, const SpsTable& table);

// [n_requests] lengths admitting the first min(capacity, path length) extensions of the batch's
// admission path: the highest a_{r,j}, per-request prefixes, caps respected. capacity >= 0.
std::vector<int64_t> admit_top_k(std::span<const RequestDraft> batch, int64_t capacity);

// K from two_steps_back, clamped to max_tokens - R of this batch, then admit_top_k. Without history
// (the first two steps of a run) it falls back to schedule_sync, which is lossless on its own.
// capacity (optional, out): the K found, before the clamp; untouched without history.
std::vector<int64_t> schedule_async(std::span<const RequestDraft> batch,
                                    std::optional<std::span<const RequestDraft>> two_steps_back,
                                    const SpsTable& table, int64_t* capacity = nullptr);

// Whether drafting pays at all, judged on an old batch (the one two steps back): the best
// Theta over K with the drafting cost in the table (with_drafting, at that batch's R) against
// plain decoding, R * SPS(R) without drafting (without_drafting). Where drafting costs more than it
// saves (a small target, a busy CPU), dspark-async then skips the drafter for the step and never
// falls below plain decoding. Lossless for the same reason as the capacity: old information only.
// Old requests with nothing to verify (a cap of 0 near their max tokens) carry no information and
// are left out; with none left, drafting is assumed to pay.
bool drafting_pays(std::span<const RequestDraft> old_batch, const SpsTable& with_drafting,
                   const SpsTable& without_drafting);

// TEST ONLY, NOT LOSSLESS: the global search run on the current confidences, then top-K. It reads
// a_{r,j+1}, which depends on x_{r,j}, before deciding whether x_{r,j} is verified (Appendix A). It
// exists so the losslessness tests can show they fail; never offer it to users.
std::vector<int64_t> schedule_retrospective(std::span<const RequestDraft> batch, const SpsTable& table);

}  // namespace dspark::schedule
