// tinyjson: a header-only JSON writer, just enough for small API responses.
// SPDX-License-Identifier: MIT  (see LICENSE beside this file)
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace tinyjson {

// The body of a JSON string literal for text (UTF-8 passes through unchanged; control
// characters, quotes and backslashes are escaped as RFC 8259 asks).
inline std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else {
          out += c;
        }
    }
  }
  return out;
}

inline std::string quote(std::string_view text) { return "\"" + escape(text) + "\""; }

// Writes compact JSON; the caller nests begin/end calls correctly.
class Writer {
 public:
  Writer& begin_object() { open('{'); return *this; }
  Writer& end_object() { close('}'); return *this; }
  Writer& begin_array() { open('['); return *this; }
  Writer& end_array() { close(']'); return *this; }

  Writer& key(std::string_view name) {
    comma();
    out_ += quote(name);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  Writer& value(std::string_view text) { comma(); out_ += quote(text); return *this; }
  Writer& value(const char* text) { return value(std::string_view(text)); }
  Writer& value(std::int64_t number) { comma(); out_ += std::to_string(number); return *this; }
  Writer& value(int number) { return value(static_cast<std::int64_t>(number)); }
  Writer& value(bool flag) { comma(); out_ += flag ? "true" : "false"; return *this; }

  template <typename T>
  Writer& field(std::string_view name, const T& v) { key(name); return value(v); }

  const std::string& str() const { return out_; }

 private:
  void comma() {
    if (after_key_) {
      after_key_ = false;
    } else if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
  }
  void open(char bracket) {
    comma();
    out_ += bracket;
    first_.push_back(true);
  }
  void close(char bracket) {
    out_ += bracket;
    if (!first_.empty()) first_.pop_back();
  }

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace tinyjson
