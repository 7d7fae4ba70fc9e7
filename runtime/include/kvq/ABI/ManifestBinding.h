//===- ManifestBinding.h - bind manifest.json to its kernels ----*- C++ -*-===//
//
// Part of kvq. Plain header-only C++17, shared by the code generator, the
// runtime and test kernels.
//
//===----------------------------------------------------------------------===//
//
// The runtime trusts manifest.json for every size and offset it hands the
// kernels, and the kernels were compiled against the same layout: a manifest
// edited after compilation (head_dim, dtype, page or split tokens) would
// make them read out of bounds. The code generator therefore embeds a hash
// of the exact manifest bytes in the kernels it writes, in kernels.so as the
// uint64_t global `<cache name>_manifest_hash` (named per cache like the
// kernels, so that several caches' kernels.o link into one program) and in
// each PTX file as a `.global .u64` of that name; the runtime recomputes the
// hash of the
// manifest it read and refuses kernels carrying another (docs/KernelABI.md,
// "Trust"). The hash is FNV-1a 64: it catches edits and mismatched builds,
// not an adversary, who could as well replace the kernels' code.
//
// The manifest in turn records FNV-1a 64 of kernels.so
// (`files.host_shared_fnv1a`, 16 hex digits), which the runtime checks
// before loading it: a corrupted byte of code would otherwise kill the
// process (SIGILL, SIGSEGV) in the loader or the first launch. Each hash
// cannot cover the other, so the manifest hash reads those 16 digits as
// `0`: the writer hashes the manifest with zeros there, builds kernels.so
// around that hash, then fills in kernels.so's checksum.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_ABI_MANIFESTBINDING_H
#define KVQ_ABI_MANIFESTBINDING_H

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvq {

/// The symbol under which the kernels of cache `cacheName` carry the hash of
/// their manifest.
inline std::string getManifestHashSymbol(std::string_view cacheName) {
  return std::string(cacheName) + "_manifest_hash";
}

/// FNV-1a 64 of `bytes`, continuing from `hash`.
constexpr uint64_t fnv1a64(std::string_view bytes,
                           uint64_t hash = 0xcbf29ce484222325ull) {
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ull;
  }
  return hash;
}

/// How the writer formats the key of kernels.so's checksum and the quote
/// opening its value; the value is kHostSharedChecksumDigits hex digits.
inline constexpr std::string_view kHostSharedChecksumPrefix =
    "\"host_shared_fnv1a\": \"";
inline constexpr size_t kHostSharedChecksumDigits = 16;

/// The offset of the digits of kernels.so's checksum in a manifest's text:
/// after the first kHostSharedChecksumPrefix, when 16 characters follow.
constexpr size_t findHostSharedChecksum(std::string_view text) {
  size_t at = text.find(kHostSharedChecksumPrefix);
  if (at == std::string_view::npos)
    return at;
  at += kHostSharedChecksumPrefix.size();
  return text.size() - at >= kHostSharedChecksumDigits ? at
                                                       : std::string_view::npos;
}

/// FNV-1a 64 of the manifest's bytes, exactly as written, except the digits
/// of kernels.so's checksum (findHostSharedChecksum), read as `0`.
constexpr uint64_t hashManifest(std::string_view text) {
  size_t digits = findHostSharedChecksum(text);
  if (digits == std::string_view::npos)
    return fnv1a64(text);
  uint64_t hash = fnv1a64(text.substr(0, digits));
  for (size_t i = 0; i < kHostSharedChecksumDigits; ++i)
    hash = fnv1a64("0", hash);
  return fnv1a64(text.substr(digits + kHostSharedChecksumDigits), hash);
}

/// kernels.so's checksum as the manifest records it: 16 lowercase hex
/// digits.
inline std::string formatHostSharedChecksum(uint64_t checksum) {
  std::string digits(kHostSharedChecksumDigits, '0');
  for (size_t i = digits.size(); i-- > 0; checksum >>= 4)
    digits[i] = "0123456789abcdef"[checksum & 15];
  return digits;
}

/// The checksum `digits` records, if it is 16 lowercase hex digits.
inline std::optional<uint64_t>
parseHostSharedChecksum(std::string_view digits) {
  if (digits.size() != kHostSharedChecksumDigits)
    return std::nullopt;
  uint64_t value = 0;
  for (char c : digits) {
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
    if (digit < 0)
      return std::nullopt;
    value = value << 4 | uint64_t(digit);
  }
  return value;
}

/// The PTX text before the value: `.global .align 8 .u64 NAME = `.
inline std::string getPTXManifestHashPrefix(std::string_view cacheName) {
  return ".global .align 8 .u64 " + getManifestHashSymbol(cacheName) + " = ";
}

/// The PTX declaration that carries `hash` (appended to each PTX file).
inline std::string formatPTXManifestHash(std::string_view cacheName,
                                         uint64_t hash) {
  return getPTXManifestHashPrefix(cacheName) + std::to_string(hash) + ";\n";
}

/// The hash a PTX text carries for cache `cacheName`, if it declares exactly
/// one.
inline std::optional<uint64_t> findPTXManifestHash(std::string_view ptx,
                                                   std::string_view cacheName) {
  std::string prefix = getPTXManifestHashPrefix(cacheName);
  size_t at = ptx.find(prefix);
  if (at == std::string_view::npos ||
      ptx.find(prefix, at + 1) != std::string_view::npos)
    return std::nullopt;
  std::string_view rest = ptx.substr(at + prefix.size());
  uint64_t value = 0;
  auto [end, error] =
      std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (error != std::errc() || end == rest.data() ||
      end == rest.data() + rest.size() || *end != ';')
    return std::nullopt;
  return value;
}

} // namespace kvq

#endif // KVQ_ABI_MANIFESTBINDING_H
