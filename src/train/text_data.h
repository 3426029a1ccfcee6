// Character-level text data: a byte vocabulary built from the text, a 90/10 train/val split,
// and random windows drawn from the counter-based RNG by (seed, stream, index).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "volta/runtime.h"

namespace volta::train {

class CharTokenizer {
 public:
  CharTokenizer() = default;
  explicit CharTokenizer(std::vector<int32_t> chars);  // sorted byte values
  static CharTokenizer from_text(std::string_view text);

  int64_t vocab_size() const { return static_cast<int64_t>(chars_.size()); }
  const std::vector<int32_t>& chars() const { return chars_; }
  // Fails naming the characters that are not in the vocabulary.
  Result<std::vector<int32_t>> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t>& ids) const;

  std::string to_json() const;  // {"type": "char", "chars": [byte values]}
  static Result<CharTokenizer> from_json(const std::string& text);

 private:
  std::vector<int32_t> chars_;
  std::array<int32_t, 256> id_of_{};  // byte -> id, -1 if absent
};

struct TextData {
  CharTokenizer tokenizer;
  std::vector<int32_t> train, val;
};

// Reads a text file and tokenizes it with `vocab` (a checkpoint's), or with a vocabulary built
// from the text when `vocab` is null. Fails when the file is missing, empty, holds characters
// outside `vocab`, or is too short for one window of `context` + 1 tokens in each split.
Result<TextData> load_text_data(const std::string& path, int64_t context, const CharTokenizer* vocab = nullptr);
// Tokenizes `text` with an existing vocabulary (for evaluating a checkpoint on other text).
Result<TextData> split_text(std::string_view text, const CharTokenizer& tok, int64_t context, const std::string& source);

// Window `index` of a stream: tokens and next-token targets, i32 [B, T].
Bindings lm_batch(const std::vector<int32_t>& data, int64_t batch, int64_t T, uint64_t seed, std::string_view stream,
                  uint64_t index);

}  // namespace volta::train
