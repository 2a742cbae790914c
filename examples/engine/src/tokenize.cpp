// A toy tokenizer: splits on whitespace and punctuation, maps each piece to a stable id.
#include <cctype>

#include "ninfer/ninfer.hpp"

namespace ninfer {

namespace {

constexpr std::int32_t kVocabulary = 32000;

// FNV-1a over the bytes: the same piece gives the same id on every machine.
std::int32_t piece_id(std::string_view piece) {
  std::uint32_t hash = 2166136261u;
  for (const char c : piece) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619u;
  }
  return static_cast<std::int32_t>(hash % (kVocabulary - 3)) + 3;  // 0..2 are special
}

}  // namespace

std::vector<std::int32_t> tokenize(std::string_view text) {
  std::vector<std::int32_t> ids{1};  // <bos>
  std::size_t start = 0;
  auto flush = [&](std::size_t end) {
    if (end > start) ids.push_back(piece_id(text.substr(start, end - start)));
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c)) {
      flush(i);
      start = i + 1;
    } else if (std::ispunct(c)) {
      flush(i);
      ids.push_back(piece_id(text.substr(i, 1)));
      start = i + 1;
    }
  }
  flush(text.size());
  return ids;
}

}  // namespace ninfer
