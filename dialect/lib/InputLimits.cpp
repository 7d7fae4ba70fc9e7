//===- InputLimits.cpp - bounds on a spec's text before parsing -----------===//

#include "kvq/Dialect/KVQ/InputLimits.h"

#include "llvm/ADT/Twine.h"

using namespace kvq;

/// Offset just past the string literal opening at `pos` (MLIR strings: `"`
/// with backslash escapes), or the end of `text` if it never closes.
static size_t skipString(llvm::StringRef text, size_t pos) {
  for (++pos; pos < text.size(); ++pos) {
    if (text[pos] == '\\')
      ++pos;
    else if (text[pos] == '"')
      return pos + 1;
  }
  return text.size();
}

static bool isDigit(char c) { return c >= '0' && c <= '9'; }

static bool isHexDigit(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool isIdentifierChar(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c == '_' || c == '$' || c == '.';
}

/// Offset just past the number starting with the digit at `pos`, lexed as
/// MLIR's lexer lexes one (`0x` and hex digits, or digits with an optional
/// fraction and exponent). Every run of digits counts, also one inside an
/// identifier (`x99` in a dimension list is lexed as a number again).
static size_t skipNumber(llvm::StringRef text, size_t pos) {
  auto at = [&](size_t i) { return i < text.size() ? text[i] : '\0'; };
  if (at(pos) == '0' && at(pos + 1) == 'x' && isHexDigit(at(pos + 2))) {
    for (pos += 2; isHexDigit(at(pos)); ++pos)
      ;
    return pos;
  }
  while (isDigit(at(pos)))
    ++pos;
  if (at(pos) != '.')
    return pos;
  for (++pos; isDigit(at(pos)); ++pos)
    ;
  if ((at(pos) == 'e' || at(pos) == 'E') &&
      (isDigit(at(pos + 1)) ||
       ((at(pos + 1) == '-' || at(pos + 1) == '+') && isDigit(at(pos + 2)))))
    for (pos += 2; isDigit(at(pos)); ++pos)
      ;
  return pos;
}

/// Whether the keyword `kvq.cache` (an op in the custom form) starts at
/// `pos`.
static bool isCacheKeyword(llvm::StringRef text, size_t pos) {
  constexpr llvm::StringLiteral keyword = "kvq.cache";
  return text.substr(pos).starts_with(keyword) &&
         (pos == 0 || !isIdentifierChar(text[pos - 1])) &&
         (pos + keyword.size() == text.size() ||
          !isIdentifierChar(text[pos + keyword.size()]));
}

std::optional<InputLimitViolation>
kvq::checkSpecInputLimits(llvm::StringRef text) {
  if (text.size() > kMaxSpecBytes)
    return InputLimitViolation{kMaxSpecBytes,
                               (llvm::Twine("spec is ") +
                                llvm::Twine(text.size()) + " bytes; at most " +
                                llvm::Twine(kMaxSpecBytes) + " are accepted")
                                   .str()};
  unsigned depth = 0, caches = 0;
  auto countCache = [&](size_t pos) -> std::optional<InputLimitViolation> {
    if (++caches <= kMaxSpecCaches)
      return std::nullopt;
    return InputLimitViolation{pos,
                               (llvm::Twine("spec declares more than ") +
                                llvm::Twine(kMaxSpecCaches) + " kvq.cache ops")
                                   .str()};
  };
  for (size_t pos = 0; pos < text.size();) {
    char c = text[pos];
    if (c == '"') {
      size_t end = skipString(text, pos);
      // The generic form names the op in a string.
      if (text.slice(pos, end) == "\"kvq.cache\"")
        if (auto violation = countCache(pos))
          return violation;
      pos = end;
      continue;
    }
    if (isDigit(c)) {
      size_t end = skipNumber(text, pos);
      if (end - pos > kMaxNumericLiteralChars)
        return InputLimitViolation{
            pos, (llvm::Twine("number of ") + llvm::Twine(end - pos) +
                  " characters; at most " +
                  llvm::Twine(kMaxNumericLiteralChars) + " are accepted")
                     .str()};
      pos = end;
      continue;
    }
    if (c == 'k' && isCacheKeyword(text, pos))
      if (auto violation = countCache(pos))
        return violation;
    if (text.substr(pos).starts_with("//")) {
      pos = std::min(text.find('\n', pos), text.size());
      continue;
    }
    if (c == '{' || c == '(' || c == '[' || c == '<') {
      if (++depth > kMaxSpecNesting)
        return InputLimitViolation{pos,
                                   (llvm::Twine("spec nests deeper than ") +
                                    llvm::Twine(kMaxSpecNesting) + " brackets")
                                       .str()};
    } else if ((c == '}' || c == ')' || c == ']' ||
                (c == '>' && (pos == 0 || text[pos - 1] != '-'))) &&
               depth > 0) {
      // `->` in function types closes nothing; unbalanced text is the
      // parser's to diagnose.
      --depth;
    }
    ++pos;
  }
  return std::nullopt;
}
