//===- Lexer.cpp - Jinja source to tokens --------------------------------===//
#include "Lexer.h"

#include "Error.h"
#include "Utf8.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace moe::rt::chat {

std::string normaliseSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n')
        ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n')
    out.pop_back(); // keep_trailing_newline=False
  return out;
}

namespace {

/// Byte length of the Python-whitespace code point at `i`, or 0.
size_t spaceAt(const std::string &s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80)
    return isPySpace(c) ? 1 : 0;
  size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  std::u32string cp = decodeUtf8(std::string_view(s).substr(i, n));
  return cp.size() == 1 && isPySpace(cp[0]) ? n : 0;
}

size_t skipSpaces(const std::string &s, size_t i) {
  while (i < s.size()) {
    size_t n = spaceAt(s, i);
    if (!n)
      break;
    i += n;
  }
  return i;
}

/// Python's str.rstrip() of `text`.
void rstripText(std::string &text) {
  std::u32string cps = decodeUtf8(text);
  while (!cps.empty() && isPySpace(cps.back()))
    cps.pop_back();
  text = encodeUtf8(cps);
}

bool isNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

int hexValue(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

class Lexer {
public:
  explicit Lexer(const std::string &s) : src_(s) {}

  std::vector<Token> run() {
    bool lineStarting = true;
    while (pos_ < src_.size()) {
      size_t tag = findTag(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      if (tag == src_.size()) {
        push(Token::Kind::Text, text, pos_);
        break;
      }
      char type = src_[tag + 1];
      char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (sign == '-') {
        rstripText(text);
      } else if (sign != '+' && type != '{') {
        // lstrip_blocks: drop spaces and tabs between the line start and the tag.
        size_t lineStart = text.rfind('\n');
        lineStart = lineStart == std::string::npos ? 0 : lineStart + 1;
        if ((lineStart > 0 || lineStarting) &&
            text.find_first_not_of(" \t", lineStart) == std::string::npos)
          text.resize(lineStart);
      }
      push(Token::Kind::Text, text, pos_);
      pos_ = tag + 2 + (sign == '-' || sign == '+' ? 1 : 0);
      size_t end = type == '#' ? comment(tag) : type == '{' ? tagTokens(tag, "}}") : tagTokens(tag, "%}");
      lineStarting = end > 0 && src_[end - 1] == '\n';
    }
    tokens_.push_back({Token::Kind::End, "", src_.size()});
    return std::move(tokens_);
  }

private:
  size_t findTag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return src_.size();
  }

  void push(Token::Kind kind, std::string text, size_t offset) {
    if (kind == Token::Kind::Text && text.empty())
      return;
    tokens_.push_back({kind, std::move(text), offset});
  }

  /// After a closing delimiter: `-` strips all whitespace, a block's plain
  /// `%}` (or `#}`) drops one newline, `+%}` keeps everything.
  size_t afterClose(size_t close, size_t delimEnd, bool isPrint) {
    char before = close > 0 ? src_[close - 1] : '\0';
    size_t next = delimEnd;
    if (before == '-')
      next = skipSpaces(src_, next);
    else if (!isPrint && before != '+' && next < src_.size() && src_[next] == '\n')
      ++next;
    pos_ = next;
    return next;
  }

  size_t comment(size_t open) {
    size_t close = src_.find("#}", pos_);
    if (close == std::string::npos)
      fail(open, "the comment is never closed");
    return afterClose(close, close + 2, false);
  }

  size_t tagTokens(size_t open, const char *closer) {
    bool isPrint = closer[0] == '}';
    push(isPrint ? Token::Kind::PrintBegin : Token::Kind::BlockBegin, "", open);
    size_t firstToken = tokens_.size();
    int depth = 0; // Brackets: `}}` inside `{...}` does not close the tag.
    while (true) {
      pos_ = skipSpaces(src_, pos_);
      if (pos_ >= src_.size())
        fail(open, std::string("the tag is never closed (expected \"") + closer + "\")");
      if (depth == 0) {
        size_t signLen = (src_[pos_] == '-' || (!isPrint && src_[pos_] == '+')) ? 1 : 0;
        if (src_.compare(pos_ + signLen, 2, closer) == 0) {
          push(isPrint ? Token::Kind::PrintEnd : Token::Kind::BlockEnd, "", pos_);
          return afterClose(pos_ + signLen, pos_ + signLen + 2, isPrint);
        }
      }
      char c = src_[pos_];
      if (isNameStart(c)) {
        size_t start = pos_;
        while (pos_ < src_.size() && isNameChar(src_[pos_]))
          ++pos_;
        push(Token::Kind::Name, src_.substr(start, pos_ - start), start);
        if (!isPrint && tokens_.size() == firstToken + 1 && tokens_.back().text == "raw")
          fail(start, "statement \"raw\" is not supported");
      } else if (isDigit(c)) {
        number();
      } else if (c == '\'' || c == '"') {
        string();
      } else {
        op(depth);
      }
    }
  }

  void number() {
    size_t start = pos_;
    std::string digits;
    bool isFloat = false;
    auto run = [&] {
      while (pos_ < src_.size() && (isDigit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && isDigit(src_[pos_ + 1])))) {
        if (src_[pos_] != '_')
          digits += src_[pos_];
        ++pos_;
      }
    };
    run();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && isDigit(src_[pos_ + 1])) {
      isFloat = true;
      digits += src_[pos_++];
      run();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t save = pos_;
      std::string exp = "e";
      ++pos_;
      if (pos_ < src_.size() && (src_[pos_] == '+' || src_[pos_] == '-'))
        exp += src_[pos_++];
      if (pos_ < src_.size() && isDigit(src_[pos_])) {
        isFloat = true;
        digits += exp;
        run();
      } else {
        pos_ = save;
      }
    }
    Token t{isFloat ? Token::Kind::Float : Token::Kind::Int, digits, start};
    errno = 0;
    if (isFloat) {
      t.floatValue = std::strtod(digits.c_str(), nullptr);
    } else {
      t.intValue = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE)
        fail(start, "integer literal " + digits + " does not fit in 64 bits");
    }
    tokens_.push_back(std::move(t));
  }

  /// A string literal, decoded as jinja2 does (Python's unicode-escape).
  void string() {
    size_t start = pos_;
    char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size())
        fail(start, "the string literal is never closed");
      char c = src_[pos_++];
      if (c == quote)
        break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size())
        fail(start, "the string literal is never closed");
      char e = src_[pos_++];
      switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\n': break; // A backslash-newline joins the lines.
      case 'x':
      case 'u':
      case 'U': {
        int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t cp = 0;
        for (int k = 0; k < n; ++k) {
          int h = pos_ < src_.size() ? hexValue(src_[pos_]) : -1;
          if (h < 0)
            fail(pos_, std::string("truncated \\") + e + " escape in a string literal");
          cp = cp * 16 + h;
          ++pos_;
        }
        if (cp > 0x10FFFF)
          fail(pos_, "the escape names no Unicode code point");
        appendUtf8(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          char32_t cp = e - '0';
          for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k)
            cp = cp * 8 + (src_[pos_++] - '0');
          appendUtf8(out, cp);
        } else {
          out += '\\'; // Python keeps unknown escapes as they are.
          out += e;
        }
      }
    }
    tokens_.push_back({Token::Kind::String, std::move(out), start});
  }

  void op(int &depth) {
    static const char *const ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                      "<",  ">",  "=",  ".",  ",",  ":",  "|", "(", ")", "[", "]", "{", "}"};
    for (const char *o : ops) {
      size_t n = std::char_traits<char>::length(o);
      if (src_.compare(pos_, n, o) == 0) {
        if (n == 1 && (o[0] == '(' || o[0] == '[' || o[0] == '{'))
          ++depth;
        if (n == 1 && (o[0] == ')' || o[0] == ']' || o[0] == '}'))
          --depth;
        tokens_.push_back({Token::Kind::Op, o, pos_});
        pos_ += n;
        return;
      }
    }
    std::u32string c = decodeUtf8(std::string_view(src_).substr(pos_, 4));
    fail(pos_, "unexpected character '" + encodeUtf8(c.substr(0, 1)) + "' in a tag");
  }

  const std::string &src_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

} // namespace

std::vector<Token> tokenize(const std::string &source) { return Lexer(source).run(); }

} // namespace moe::rt::chat
