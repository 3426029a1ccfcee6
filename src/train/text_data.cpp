#include "train/text_data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/file.h"
#include "volta/rng.h"

namespace volta::train {

CharTokenizer::CharTokenizer(std::vector<int32_t> chars) : chars_(std::move(chars)) {
  id_of_.fill(-1);
  for (size_t i = 0; i < chars_.size(); ++i) id_of_[static_cast<size_t>(chars_[i])] = static_cast<int32_t>(i);
}

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  std::array<bool, 256> seen{};
  for (char ch : text) seen[static_cast<unsigned char>(ch)] = true;
  std::vector<int32_t> chars;
  for (int32_t c = 0; c < 256; ++c)
    if (seen[static_cast<size_t>(c)]) chars.push_back(c);
  return CharTokenizer(std::move(chars));
}

namespace {
std::string show_byte(unsigned char c) {
  if (c >= 32 && c < 127 && c != '\'') return std::string("'") + static_cast<char>(c) + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
  return buf;
}
}  // namespace

Result<std::vector<int32_t>> CharTokenizer::encode(std::string_view text) const {
  // The bytes are checked before the ids are allocated: a large file of the wrong characters (1
  // GiB of NULs) is refused at its size, not after four times it in ids.
  std::array<bool, 256> reported{};
  std::string unknown;  // in the order they first appear
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (id_of_[c] >= 0 || reported[c]) continue;
    reported[c] = true;
    unknown += (unknown.empty() ? "" : ", ") + show_byte(c);
  }
  if (!unknown.empty()) return invalid_argument("characters not in the vocabulary: " + unknown);
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = id_of_[static_cast<unsigned char>(text[i])];
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids)
    if (id >= 0 && id < vocab_size()) s += static_cast<char>(chars_[static_cast<size_t>(id)]);
  return s;
}

std::string CharTokenizer::to_json() const { return nlohmann::json{{"type", "char"}, {"chars", chars_}}.dump(); }

Result<CharTokenizer> CharTokenizer::from_json(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || j["type"] != "char" || !j.contains("chars") ||
      !j["chars"].is_array())
    return parse_error("tokenizer is not a {\"type\": \"char\", \"chars\": [...]} object");
  std::vector<int32_t> chars;
  for (const auto& c : j["chars"]) {
    if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() > 255) return parse_error("tokenizer chars must be bytes 0..255");
    if (!chars.empty() && c.get<int32_t>() <= chars.back()) return parse_error("tokenizer chars must be sorted and distinct");
    chars.push_back(c.get<int32_t>());
  }
  if (chars.empty()) return parse_error("tokenizer has no characters");
  return CharTokenizer(std::move(chars));
}

Result<TextData> split_text(std::string_view text, const CharTokenizer& tok, int64_t context, const std::string& source) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(text));
  TextData d;
  d.tokenizer = tok;
  const size_t n = static_cast<size_t>(0.9 * static_cast<double>(ids.size())), total = ids.size();
  d.val.assign(ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end());
  ids.resize(n);
  d.train = std::move(ids);  // (not a copy: the split holds the ids once)
  const size_t need = static_cast<size_t>(context) + 1;
  if (d.train.size() < need || d.val.size() < need)
    return invalid_argument(source + ": " + std::to_string(total) + " characters are too few: the 90/10 split needs at least " +
                            std::to_string(need) + " in each part for one window of context " + std::to_string(context));
  return d;
}

Result<TextData> load_text_data(const std::string& path, int64_t context, const CharTokenizer* vocab) {
  VOLTA_ASSIGN_OR_RETURN(std::string text, io::read_file(path, {uint64_t{1} << 32, "--data"}));
  if (text.empty()) return invalid_argument("--data: '" + path + "' is empty");
  // Any bytes are a corpus, but a checkpoint or an array given here is a mixed-up flag (a
  // checkpoint trained as text with a 256-symbol vocabulary).
  if (const io::FileKind kind = io::detect_file_kind(std::string_view(text).substr(0, 4096));
      kind == io::FileKind::Checkpoint || kind == io::FileKind::Npy)
    return invalid_argument("--data: '" + path + "' is " + io::file_kind_name(kind) + ", not a text corpus");
  const std::string source = "--data '" + path + "'";
  if (vocab) return split_text(text, *vocab, context, source);
  return split_text(text, CharTokenizer::from_text(text), context, source);
}

Bindings lm_batch(const std::vector<int32_t>& data, int64_t batch, int64_t T, uint64_t seed, std::string_view stream,
                  uint64_t index) {
  Tensor tokens = Tensor::zeros(DType::i32, {batch, T});
  Tensor targets = Tensor::zeros(DType::i32, {batch, T});
  const uint64_t windows = data.size() - static_cast<size_t>(T);  // start offsets 0 .. len - T - 1
  const uint64_t s = stream_for(stream);
  for (int64_t b = 0; b < batch; ++b) {
    auto r = philox4x32(seed, s, index * static_cast<uint64_t>(batch) + static_cast<uint64_t>(b));
    const uint64_t start = ((static_cast<uint64_t>(r[0]) << 32) | r[1]) % windows;
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(start), T, tokens.data<int32_t>() + b * T);
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(start) + 1, T, targets.data<int32_t>() + b * T);
  }
  return {{"tokens", tokens}, {"targets", targets}};
}

}  // namespace volta::train
