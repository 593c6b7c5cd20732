#include "draft/load_drafter.h"

#include "common/error.h"
#include "draft/eagle3_drafter.h"
#include "draft/ngram_drafter.h"

namespace dspark::draft {

std::unique_ptr<Drafter> load_drafter(const std::string& method, const std::string& dir,
                                      const model::Transformer& target, const DrafterLoadOptions& options) {
  if (method == "ngram" && !dir.empty())
    throw Error("--method ngram drafts from the context itself; it takes no --draft directory (got " + dir + ")");
  if (method == "ngram") return std::make_unique<NgramDrafter>(options.max_slots, target.config().vocab_size);
  const bool known = method.empty() || method == "dspark" || method == "dflash" || method == "eagle3";
  if (!known) throw Error("--method: unknown drafter method '" + method + "' (expected dspark, dflash, eagle3 or ngram)");
  if (dir.empty())
    throw Error(method.empty() ? std::string("give a drafter: --draft DIR, or --method ngram (which drafts from the context)")
                               : "--draft DIR is needed for method '" + method + "'");
  const DraftConfig config = DraftConfig::load(dir);
  if (!method.empty() && parse_method(method) != config.method)
    throw Error(dir + ": a " + method_name(config.method) + " drafter, but --method " + method + " was asked for");
  if (config.method == DraftMethod::kEagle3) return Eagle3Drafter::load(dir, target, options);
  return DSparkDrafter::load(dir, target, options);
}

}  // namespace dspark::draft
