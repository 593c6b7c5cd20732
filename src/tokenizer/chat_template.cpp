#include "tokenizer/chat_template.h"

#include "common/error.h"
#include "tokenizer/tokenizer_gguf.h"

namespace dspark::tokenizer {
namespace {

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kToolResponseOpen = "<tool_response>";
constexpr std::string_view kToolResponseClose = "</tool_response>";

void append_turn(std::string& out, std::string_view role, std::string_view content) {
  out.append(kImStart).append(role).append("\n").append(content).append(kImEnd).append("\n");
}

std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// A system prompt the template writes when the conversation has none: a literal
// '<|im_start|>system\n...<|im_end|>' with no expression inside (Qwen2.5's "You are Qwen, ...").
std::optional<std::string> find_default_system_prompt(std::string_view source) {
  constexpr std::string_view kOpen = "<|im_start|>system\\n";
  for (size_t at = source.find(kOpen); at != std::string_view::npos; at = source.find(kOpen, at + 1)) {
    const size_t body = at + kOpen.size();
    const size_t end = source.find(kImEnd, body);
    if (end == std::string_view::npos) break;
    const std::string_view text = source.substr(body, end - body);
    if (text.empty() || text.find_first_of("'\"+{}") != std::string_view::npos) continue;
    std::string prompt;
    for (size_t i = 0; i < text.size(); ++i) {  // undo the Jinja string escapes it may use
      if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
        prompt += '\n';
        ++i;
      } else {
        prompt += text[i];
      }
    }
    return prompt;
  }
  return std::nullopt;
}

bool is_tool_response(std::string_view content) {
  return content.starts_with(kToolResponseOpen) && content.ends_with(kToolResponseClose);
}

// Index of the last user message that is a real query rather than wrapped tool output (Qwen3's
// ns.last_query_index); reasoning is only shown for assistant turns after it.
size_t last_query_index(const std::vector<ChatMessage>& messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user" && !is_tool_response(messages[i].content)) return i;
  }
  return messages.empty() ? 0 : messages.size() - 1;
}

}  // namespace

std::string render_chatml(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  std::string out;
  for (const ChatMessage& message : messages) append_turn(out, message.role, message.content);
  if (options.add_generation_prompt) {
    out.append(kImStart).append("assistant\n");
    if (!options.enable_thinking) out.append("<think>\n\n</think>\n\n");
  }
  return out;
}

bool is_chatml_template(std::string_view source) {
  return source.find(kImStart) != std::string_view::npos && source.find(kImEnd) != std::string_view::npos &&
         source.find("messages") != std::string_view::npos;
}

ChatTemplate ChatTemplate::from_config(const TokenizerConfig& config) {
  if (!config.chat_template) {
    const std::string where = config.path.empty() ? "the tokenizer directory" : config.path.string();
    throw Error(where + ": no chat_template (and no general Jinja engine yet to supply one)");
  }
  return from_source(*config.chat_template, config.chat_template_origin.string());
}

ChatTemplate ChatTemplate::load(const std::filesystem::path& path) {
  if (model::is_gguf_path(path.string()))
    return from_config(read_gguf_tokenizer_config(model::GgufFile::open(path.string())));
  const std::filesystem::path directory = std::filesystem::is_directory(path) ? path : path.parent_path();
  return from_config(TokenizerConfig::load_from_directory(directory));
}

ChatTemplate ChatTemplate::from_source(std::string_view source, const std::string& origin) {
  if (!is_chatml_template(source)) {
    throw Error(origin +
                ": chat_template is not ChatML-family (<|im_start|>/<|im_end|>); "
                "no general Jinja engine yet");
  }
  ChatTemplate result;
  result.origin_ = origin;
  result.thinking_switch_ = source.find("enable_thinking") != std::string_view::npos;
  result.strips_reasoning_ = source.find("reasoning_content") != std::string_view::npos;
  result.groups_tool_responses_ = source.find(kToolResponseOpen) != std::string_view::npos;
  result.default_system_ = find_default_system_prompt(source);
  return result;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  std::string out;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (!has_system && default_system_) append_turn(out, "system", *default_system_);
  const size_t last_query = last_query_index(messages);
  for (size_t i = 0; i < messages.size(); ++i) render_message(messages, i, last_query, out);
  if (options.add_generation_prompt) {
    out.append(kImStart).append("assistant\n");
    if (thinking_switch_ && !options.enable_thinking) out.append("<think>\n\n</think>\n\n");
  }
  return out;
}

void ChatTemplate::render_message(const std::vector<ChatMessage>& messages, size_t index, size_t last_query_index,
                                  std::string& out) const {
  const ChatMessage& message = messages[index];
  if (message.role == "assistant" && strips_reasoning_) {
    render_assistant(message, index > last_query_index, index + 1 == messages.size(), out);
  } else if (message.role == "tool" && groups_tool_responses_) {
    render_tool(messages, index, out);
  } else if (groups_tool_responses_ && message.role != "system" && message.role != "user" &&
             message.role != "assistant") {
    // Qwen templates dispatch on these four roles and would silently drop any other.
    throw Error(origin_ + ": chat template has no rendering for role '" + message.role + "'");
  } else {
    append_turn(out, message.role, message.content);
  }
}

// Qwen3: an assistant turn written as "<think>R</think>C" keeps R only after the last user query.
void ChatTemplate::render_assistant(const ChatMessage& message, bool after_last_query, bool is_last,
                                    std::string& out) const {
  std::string_view content = message.content;
  std::string_view reasoning;
  const size_t first_close = content.find("</think>");
  if (first_close != std::string_view::npos) {
    std::string_view before = rstrip_newlines(content.substr(0, first_close));
    const size_t open = before.rfind("<think>");
    if (open != std::string_view::npos) before.remove_prefix(open + 7);
    reasoning = lstrip_newlines(before);
    content = lstrip_newlines(content.substr(content.rfind("</think>") + 8));
  }
  out.append(kImStart).append("assistant\n");
  if (after_last_query && (is_last || !reasoning.empty())) {
    out.append("<think>\n").append(rstrip_newlines(lstrip_newlines(reasoning))).append("\n</think>\n\n");
    content = lstrip_newlines(content);
  }
  out.append(content).append(kImEnd).append("\n");
}

// Consecutive tool messages share one user turn, each wrapped in <tool_response>.
void ChatTemplate::render_tool(const std::vector<ChatMessage>& messages, size_t index, std::string& out) const {
  if (index == 0 || messages[index - 1].role != "tool") out.append(kImStart).append("user");
  out.append("\n").append(kToolResponseOpen).append("\n").append(messages[index].content);
  out.append("\n").append(kToolResponseClose);
  if (index + 1 == messages.size() || messages[index + 1].role != "tool") out.append(kImEnd).append("\n");
}

}  // namespace dspark::tokenizer
