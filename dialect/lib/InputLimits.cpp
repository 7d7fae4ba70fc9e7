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

std::optional<InputLimitViolation>
kvq::checkSpecInputLimits(llvm::StringRef text) {
  if (text.size() > kMaxSpecBytes)
    return InputLimitViolation{kMaxSpecBytes,
                               (llvm::Twine("spec is ") +
                                llvm::Twine(text.size()) + " bytes; at most " +
                                llvm::Twine(kMaxSpecBytes) + " are accepted")
                                   .str()};
  unsigned depth = 0;
  for (size_t pos = 0; pos < text.size();) {
    char c = text[pos];
    if (c == '"') {
      pos = skipString(text, pos);
      continue;
    }
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
