//===- StringOps.cpp - Python str operations -----------------------------===//
#include "StringOps.h"

#include "Error.h"
#include "Limits.h"
#include "Utf8.h"

#include <algorithm>

namespace moe::rt::chat {

std::string pyStrip(const std::string &s, const Value &chars, StripSide side, size_t offset) {
  std::u32string cps = decodeUtf8(s), set;
  bool spaces = chars.isNone() || chars.isUndefined();
  if (!spaces) {
    if (!chars.isString())
      fail(offset, std::string("strip arg must be None or str, not ") + chars.typeName());
    set = decodeUtf8(chars.str());
  }
  auto strip = [&](char32_t c) { return spaces ? isPySpace(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = cps.size();
  if (side != StripSide::Right)
    while (b < e && strip(cps[b]))
      ++b;
  if (side != StripSide::Left)
    while (e > b && strip(cps[e - 1]))
      --e;
  return encodeUtf8(std::u32string_view(cps).substr(b, e - b));
}

List pySplit(const std::string &s, const Value &sep, int64_t maxsplit, bool fromRight, size_t offset) {
  List parts;
  if (sep.isNone() || sep.isUndefined()) {
    // Runs of whitespace separate; leading and trailing whitespace yields nothing.
    std::u32string cps = decodeUtf8(s);
    std::vector<std::pair<size_t, size_t>> words;
    if (!fromRight) {
      size_t i = 0;
      while (true) {
        while (i < cps.size() && isPySpace(cps[i]))
          ++i;
        if (i == cps.size())
          break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(i, cps.size()); // The rest keeps its trailing whitespace.
          break;
        }
        size_t j = i;
        while (j < cps.size() && !isPySpace(cps[j]))
          ++j;
        words.emplace_back(i, j);
        i = j;
      }
    } else {
      size_t e = cps.size();
      while (true) {
        while (e > 0 && isPySpace(cps[e - 1]))
          --e;
        if (e == 0)
          break;
        if (maxsplit >= 0 && static_cast<int64_t>(words.size()) == maxsplit) {
          words.emplace_back(0, e); // The rest keeps its leading whitespace.
          break;
        }
        size_t b = e;
        while (b > 0 && !isPySpace(cps[b - 1]))
          --b;
        words.emplace_back(b, e);
        e = b;
      }
      std::reverse(words.begin(), words.end());
    }
    for (auto [b, e] : words)
      parts.push_back(Value(encodeUtf8(std::u32string_view(cps).substr(b, e - b))));
    return parts;
  }
  if (!sep.isString())
    fail(offset, std::string("must be str or None, not ") + sep.typeName());
  const std::string &d = sep.str();
  if (d.empty())
    fail(offset, "empty separator");
  std::vector<std::string> pieces;
  if (!fromRight) {
    size_t start = 0;
    while (true) {
      size_t at = s.find(d, start);
      if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) == maxsplit)) {
        pieces.push_back(s.substr(start));
        break;
      }
      pieces.push_back(s.substr(start, at - start));
      start = at + d.size();
    }
  } else {
    size_t end = s.size();
    while (true) {
      size_t at = end >= d.size() ? s.rfind(d, end - d.size()) : std::string::npos;
      if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(pieces.size()) == maxsplit)) {
        pieces.push_back(s.substr(0, end));
        break;
      }
      pieces.push_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
    }
    std::reverse(pieces.begin(), pieces.end());
  }
  for (auto &p : pieces)
    parts.push_back(Value(std::move(p)));
  return parts;
}

std::string pyReplace(const std::string &s, const std::string &from, const std::string &to, int64_t count,
                      size_t offset) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    std::u32string cps = decodeUtf8(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      appendUtf8(out, c);
      checkTextBytes(out.size(), offset); // Each character gains a copy of `to`.
    }
    if (count < 0 || done < count)
      out += to;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(from, start);
    if (at == std::string::npos)
      break;
    out.append(s, start, at - start);
    out += to;
    checkTextBytes(out.size(), offset);
    start = at + from.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

namespace {

/// Maps every character with `map`, refusing cased non-ASCII letters.
template <typename Map> std::string mapCase(const std::string &s, const char *what, size_t offset, Map map) {
  std::u32string cps = decodeUtf8(s);
  for (char32_t c : cps)
    if (hasNonAsciiCase(c))
      fail(offset, std::string(what) + " of text with non-ASCII letters is not supported");
  for (size_t i = 0; i < cps.size(); ++i)
    cps[i] = map(cps, i);
  return encodeUtf8(cps);
}

char32_t upper(char32_t c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
char32_t lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }
bool isLetter(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

} // namespace

std::string pyUpper(const std::string &s, const char *what, size_t offset) {
  return mapCase(s, what, offset, [](const std::u32string &c, size_t i) { return upper(c[i]); });
}

std::string pyLower(const std::string &s, const char *what, size_t offset) {
  return mapCase(s, what, offset, [](const std::u32string &c, size_t i) { return lower(c[i]); });
}

std::string pyTitle(const std::string &s, const char *what, size_t offset) {
  return mapCase(s, what, offset, [](const std::u32string &c, size_t i) {
    bool afterLetter = i > 0 && isLetter(c[i - 1]);
    return afterLetter ? lower(c[i]) : upper(c[i]);
  });
}

std::string pyCapitalize(const std::string &s, const char *what, size_t offset) {
  return mapCase(s, what, offset,
                 [](const std::u32string &c, size_t i) { return i == 0 ? upper(c[i]) : lower(c[i]); });
}

} // namespace moe::rt::chat
