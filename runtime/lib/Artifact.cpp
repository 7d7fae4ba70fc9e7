//===- Artifact.cpp - Manifest parsing and artifact files -----------------===//
//
// Part of kvq, libkvq_runtime.
//
//===----------------------------------------------------------------------===//
//
// Reads manifest.json (docs/KernelABI.md) into the typed Manifest and checks
// everything the cache relies on, so that a malformed artifact fails when it
// is opened with a message naming the field, never later in a kernel.
//
//===----------------------------------------------------------------------===//

#include "kvq/Runtime/Artifact.h"
#include "kvq/ABI/KernelABI.h"
#include "kvq/ABI/ManifestBinding.h"
#include "kvq/ABI/ManifestSchema.h"
#include "kvq/Support/PathCheck.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

using namespace kvq::runtime;
using Json = nlohmann::json;
namespace abi = kvq::abi;
namespace manifest = kvq::manifest;
namespace key = kvq::manifest::key;

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

const char *kvq::runtime::toString(DType Type) {
  switch (Type) {
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F32:
    return "f32";
  }
  return "?";
}

const char *kvq::runtime::toString(ChannelOrder Order) {
  switch (Order) {
  case ChannelOrder::Any:
    return manifest::channel_order::Any;
  case ChannelOrder::Half:
    return manifest::channel_order::Half;
  case ChannelOrder::Interleaved:
    return manifest::channel_order::Interleaved;
  }
  return "?";
}

unsigned kvq::runtime::byteSize(DType Type) {
  return Type == DType::F32 ? 4 : 2;
}

const char *kvq::runtime::toString(Tensor T) {
  return T == Tensor::Keys ? "keys" : "values";
}

const KernelInfo *Manifest::kernel(const std::string &Name) const {
  for (const KernelInfo &K : Kernels)
    if (K.Name == Name)
      return &K;
  return nullptr;
}

bool Manifest::hasKeyNorm() const {
  for (const LayerKernels &L : Layers)
    if (!L.KeyNorm.empty())
      return true;
  return false;
}

namespace {

/// Thrown inside the parser only; parseManifest turns it into a Status.
struct ManifestError {
  std::string Message;
};

[[noreturn]] void fail(const std::string &Message) {
  throw ManifestError{"manifest: " + Message};
}

const Json &field(const Json &Obj, const char *Key, const std::string &Path) {
  if (!Obj.is_object())
    fail("'" + Path + "' is not an object");
  auto It = Obj.find(Key);
  if (It == Obj.end())
    fail("missing field '" + Path + "." + Key + "'");
  return *It;
}

std::string join(const std::string &Path, const char *Key) {
  return Path.empty() ? std::string(Key) : Path + "." + Key;
}

uint64_t getUInt(const Json &Obj, const char *Key, const std::string &Path) {
  const Json &V = field(Obj, Key, Path);
  if (!V.is_number_integer() ||
      (!V.is_number_unsigned() && V.get<int64_t>() < 0))
    fail("'" + join(Path, Key) + "' must be a non-negative integer");
  return V.get<uint64_t>();
}

/// A non-negative integer of at most `Max`.
uint64_t getBounded(const Json &Obj, const char *Key, const std::string &Path,
                    uint64_t Max) {
  uint64_t V = getUInt(Obj, Key, Path);
  if (V > Max)
    fail("'" + join(Path, Key) + "' is out of range (at most " +
         std::to_string(Max) + ")");
  return V;
}

int64_t getInt(const Json &Obj, const char *Key, const std::string &Path) {
  const Json &V = field(Obj, Key, Path);
  if (!V.is_number_integer())
    fail("'" + join(Path, Key) + "' must be an integer");
  // Unsigned JSON integers above INT64_MAX would wrap.
  if (V.is_number_unsigned() &&
      V.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    fail("'" + join(Path, Key) + "' is out of range");
  return V.get<int64_t>();
}

unsigned getU32(const Json &Obj, const char *Key, const std::string &Path) {
  uint64_t V = getUInt(Obj, Key, Path);
  if (V > 0xffffffffu)
    fail("'" + join(Path, Key) + "' is out of range");
  return unsigned(V);
}

double getNumber(const Json &Obj, const char *Key, const std::string &Path) {
  const Json &V = field(Obj, Key, Path);
  if (!V.is_number())
    fail("'" + join(Path, Key) + "' must be a number");
  return V.get<double>();
}

std::string getString(const Json &Obj, const char *Key,
                      const std::string &Path) {
  const Json &V = field(Obj, Key, Path);
  if (!V.is_string())
    fail("'" + join(Path, Key) + "' must be a string");
  return V.get<std::string>();
}

/// A file name of the artifact directory: a plain name, never a path.
std::string getFileName(const Json &Obj, const char *Key,
                        const std::string &Path) {
  std::string Name = getString(Obj, Key, Path);
  if (Name.empty() || Name == "." || Name == ".." ||
      Name.find('/') != std::string::npos ||
      Name.find('\0') != std::string::npos)
    fail("'" + join(Path, Key) +
         "' must be a file name inside the artifact "
         "directory, got '" +
         Name + "'");
  return Name;
}

bool getBool(const Json &Obj, const char *Key, const std::string &Path) {
  const Json &V = field(Obj, Key, Path);
  if (!V.is_boolean())
    fail("'" + join(Path, Key) + "' must be a boolean");
  return V.get<bool>();
}

void check(bool Cond, const std::string &Message) {
  if (!Cond)
    fail(Message);
}

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

DType parseDType(const std::string &Name, const std::string &Path) {
  if (Name == "f16")
    return DType::F16;
  if (Name == "bf16")
    return DType::BF16;
  if (Name == "f32")
    return DType::F32;
  fail("'" + Path + "' has unknown dtype '" + Name + "'");
}

ChannelOrder parseChannelOrder(const std::string &Name) {
  for (ChannelOrder Order :
       {ChannelOrder::Any, ChannelOrder::Half, ChannelOrder::Interleaved})
    if (Name == toString(Order))
      return Order;
  fail("'model.channel_order' must be any, half or interleaved, not '" + Name +
       "'");
}

ModelShape parseModel(const Json &J) {
  const std::string P = "model";
  ModelShape M;
  // The dialect's bounds (docs/Rationale.md): every size derived from them
  // fits in 64 bits.
  M.Layers = unsigned(getBounded(J, key::Layers, P, 4096));
  M.Heads = unsigned(getBounded(J, key::Heads, P, 4096));
  M.KvHeads = unsigned(getBounded(J, key::KvHeads, P, 4096));
  M.HeadDim = unsigned(getBounded(J, key::HeadDim, P, 16384));
  M.Type = parseDType(getString(J, key::Dtype, P), "model.dtype");
  M.Scale = getNumber(J, key::Scale, P);
  M.Channels = parseChannelOrder(getString(J, key::ChannelOrder, P));
  check(M.Layers > 0 && M.Heads > 0 && M.KvHeads > 0 && M.HeadDim > 0,
        "model dimensions must be positive");
  check(M.Heads % M.KvHeads == 0, "model.heads must be a multiple of kv_heads");
  check(getUInt(J, key::DtypeBytes, P) == byteSize(M.Type),
        "model.dtype_bytes does not match model.dtype");
  return M;
}

SchemeLayout parseScheme(const Json &J, const std::string &P) {
  SchemeLayout S;
  std::string Kind = getString(J, key::Kind, P);
  if (Kind == manifest::scheme_kind::FullPrecision)
    return S;
  check(Kind == manifest::scheme_kind::Quant,
        "'" + P + ".kind' must be quant or full_precision");
  S.Quantized = true;
  S.Bits = getU32(J, key::Bits, P);
  S.Mode = getString(J, key::Mode, P);
  check(S.Mode == "asym" || S.Mode == "sym" || S.Mode == "hybrid",
        "'" + P + ".mode' must be asym, sym or hybrid");
  std::string Span = getString(J, key::Span, P);
  check(Span == "tokens" || Span == "channels",
        "'" + P + ".span' must be tokens or channels");
  S.SpanTokens = Span == "tokens";
  S.Group = getU32(J, key::Group, P);
  S.Levels = getU32(J, key::Levels, P);
  S.Eta = getNumber(J, key::Eta, P);
  S.Clip = getNumber(J, key::Clip, P);
  S.Params = getString(J, key::Params, P);
  S.KeyNorm = getBool(J, key::KeyNorm, P);
  S.PreRope = getBool(J, key::PreRope, P);
  check(S.Bits >= 1 && S.Bits <= 16 && S.Group > 0,
        "'" + P + "' has invalid bits or group");
  return S;
}

void readField(const Json &J, const char *Key, const std::string &P,
               uint64_t &Value) {
  Value = getBounded(J, Key, P, kMaxPageBytes);
}
void readField(const Json &J, const char *Key, const std::string &P,
               unsigned &Value) {
  Value = getU32(J, Key, P);
}
void readField(const Json &J, const char *Key, const std::string &P,
               int64_t &Value) {
  Value = getInt(J, Key, P);
  check(Value >= -int64_t(kMaxPageBytes) && Value <= int64_t(kMaxPageBytes),
        "'" + join(P, Key) + "' is out of range");
}

/// A layer's page layout: every field of kvq/ABI/CacheLayout.h, obeying the
/// rules of any slice (findLayoutError).
abi::SliceLayout parseSlice(const Json &J, const std::string &P) {
  abi::SliceLayout S;
#define KVQ_SLICE_LAYOUT_READ(Type, Id, Default) readField(J, key::Id, P, S.Id);
  KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_READ)
#undef KVQ_SLICE_LAYOUT_READ
  const Json &Words = field(J, key::GroupWords, P);
  // At most a word per channel of every kv-head of the largest model.
  constexpr size_t kMaxGroupWords = size_t(4096) * 16384;
  check(Words.is_array() && Words.size() <= kMaxGroupWords,
        "'" + join(P, key::GroupWords) + "' must be an array of at most " +
            std::to_string(kMaxGroupWords) + " entries");
  for (const Json &W : Words) {
    check(W.is_number_integer(),
          "'" + join(P, key::GroupWords) + "' must hold integers");
    S.GroupWords.push_back(int32_t(std::clamp<int64_t>(
        W.get<int64_t>(), -1, std::numeric_limits<int32_t>::max())));
  }
  if (const char *Error = abi::findLayoutError(S))
    fail("'" + P + "': " + Error);
  return S;
}

/// `Rows` arrays (one per kv-head) of `Row` numbers each under `Key`.
template <typename T>
std::vector<std::vector<T>> getRows(const Json &Obj, const char *Key,
                                    const std::string &P, size_t Rows,
                                    size_t Row) {
  const Json &V = field(Obj, Key, P);
  std::string Where = "'" + join(P, Key) + "'";
  check(V.is_array() && V.size() == Rows,
        Where + " must have one row per kv-head");
  std::vector<std::vector<T>> Result;
  for (const Json &R : V) {
    check(R.is_array() && R.size() == Row,
          Where + " rows must have " + std::to_string(Row) + " entries");
    Result.emplace_back();
    for (const Json &E : R) {
      check(std::is_floating_point<T>::value ? E.is_number()
                                             : E.is_number_unsigned(),
            Where + " must hold " +
                (std::is_floating_point<T>::value ? "numbers"
                                                  : "non-negative integers"));
      Result.back().push_back(E.get<T>());
    }
  }
  return Result;
}

/// SKVQ's channel reorder and per-group clip tables of a scheme, if any:
/// each kv-head's permutation, group sizes summing to head_dim, group words
/// inside the token's codes, codes inside the slice, factors in (0, 1].
void parseTables(const Json &J, LayerLayout &L, const ModelShape &Model,
                 const std::string &P) {
  SchemeLayout &S = L.Scheme;
  if (!S.Quantized)
    return;
  unsigned D = Model.HeadDim, Groups = S.SpanTokens ? D : D / S.Group;
  if (J.contains(key::Reorder)) {
    const Json &R = J[key::Reorder];
    std::string RP = P + ".reorder";
    check(!S.SpanTokens, "'" + RP + "' needs span = channels");
    S.Perm = getRows<unsigned>(R, key::Perm, RP, Model.KvHeads, D);
    S.GroupSizes = getRows<unsigned>(R, key::Sizes, RP, Model.KvHeads, Groups);
    for (unsigned H = 0; H < Model.KvHeads; ++H) {
      std::vector<bool> Seen(D, false);
      for (unsigned C : S.Perm[H]) {
        check(C < D && !Seen[C],
              "'" + RP + ".perm' rows must be permutations of the channels");
        Seen[C] = true;
      }
      uint64_t Total = 0;
      for (unsigned G = 0; G < Groups; ++G) {
        check(S.GroupSizes[H][G] > 0, "'" + RP + "' has an empty group");
        Total += S.GroupSizes[H][G];
      }
      check(Total == D, "'" + RP + ".sizes' rows must sum to head_dim");
    }
  }
  if (J.contains(key::ClipTable)) {
    S.ClipTable = getRows<double>(J, key::ClipTable, P, Model.KvHeads, Groups);
    for (const std::vector<double> &Row : S.ClipTable)
      for (double A : Row)
        check(A > 0 && A <= 1,
              "'" + P + ".clip_table' factors must be in (0, 1]");
  }
}

/// The bytes of a scheme's parameter dtype (the dialect's four).
unsigned paramBytes(const std::string &Params, const std::string &P) {
  if (Params == "f32")
    return 4;
  if (Params == "f16" || Params == "bf16")
    return 2;
  if (Params != "f8E4M3FN")
    fail("'" + P + ".params' must be f32, f16, bf16 or f8E4M3FN, got '" +
         Params + "'");
  return 1;
}

/// What the page layout needs of a parsed scheme, after checking that its
/// group divides what it groups (so the layout is the compiler's).
abi::SliceScheme getSliceScheme(const LayerLayout &L, const ModelShape &Model,
                                unsigned PageTokens, const std::string &P) {
  const SchemeLayout &S = L.Scheme;
  abi::SliceScheme Scheme;
  Scheme.CodesFrom = L.Slice.CodesFrom;
  if (!S.Quantized)
    return Scheme;
  check(S.SpanTokens ? PageTokens % S.Group == 0 : Model.HeadDim % S.Group == 0,
        "'" + P + ".group' must divide " +
            (S.SpanTokens ? "page_tokens" : "head_dim"));
  Scheme.Quantized = true;
  Scheme.Bits = S.Bits;
  Scheme.Group = S.Group;
  Scheme.SpanTokens = S.SpanTokens;
  Scheme.Sym = S.Mode == "sym";
  Scheme.ParamBytes = paramBytes(S.Params, P);
  for (const std::vector<unsigned> &Row : S.GroupSizes)
    Scheme.ReorderSizes.insert(Scheme.ReorderSizes.end(), Row.begin(),
                               Row.end());
  return Scheme;
}

/// The page layout of `T` is the one its schemes give (kvq/ABI/CacheLayout.h,
/// the arithmetic the compiler laid the pages out by): the kernels write
/// and read the pages the manifest describes, and every region lies inside
/// its slice and every slice inside the page.
void checkPageLayout(const TensorLayout &T, const ModelShape &Model,
                     unsigned PageTokens, const std::string &P) {
  abi::PageShape Shape{PageTokens, Model.KvHeads, Model.HeadDim,
                       byteSize(Model.Type)};
  std::vector<abi::SliceLayout> Want;
  for (size_t I = 0; I < T.Layers.size(); ++I) {
    std::string LP = P + ".layers[" + std::to_string(I) + "]";
    Want.push_back(abi::computeSliceLayout(
        getSliceScheme(T.Layers[I], Model, PageTokens, LP + ".scheme"), Shape));
  }
  uint64_t PageBytes = abi::placeSlices(Want, Model.KvHeads);
  for (size_t I = 0; I < T.Layers.size(); ++I)
    if (T.Layers[I].Slice != Want[I])
      fail("'" + P + ".layers[" + std::to_string(I) + "].slice' does not " +
           "match its scheme: " +
           abi::describeDifference(T.Layers[I].Slice, Want[I]));
  check(T.PageBytes == PageBytes,
        "'" + P + ".page_bytes' is " + std::to_string(T.PageBytes) +
            ", the schemes give " + std::to_string(PageBytes));
}

TensorLayout parseTensor(const Json &J, const std::string &P,
                         const ModelShape &Model, unsigned PageTokens) {
  TensorLayout T;
  T.Sink = unsigned(getBounded(J, key::Sink, P, kMaxTokens));
  T.Recent = unsigned(getBounded(J, key::Recent, P, kMaxTokens));
  T.Flush = unsigned(getBounded(J, key::Flush, P, kMaxTokens));
  T.WindowCapacity =
      unsigned(getBounded(J, key::WindowCapacity, P, 2 * kMaxTokens));
  T.PageBytes = getBounded(J, key::PageBytes, P, kMaxPageBytes);
  check(T.Flush >= 1, "'" + P + ".flush' must be >= 1");
  check(T.WindowCapacity == abi::getWindowCapacity(T.Recent, T.Flush),
        "'" + P + ".window_capacity' must be recent + flush - 1");
  check(T.PageBytes % 16 == 0,
        "'" + P + ".page_bytes' must be a multiple of 16");
  const Json &Layers = field(J, key::Layers, P);
  check(Layers.is_array() && Layers.size() == Model.Layers,
        "'" + P + ".layers' must have one entry per model layer");
  for (size_t I = 0; I < Layers.size(); ++I) {
    std::string LP = P + ".layers[" + std::to_string(I) + "]";
    LayerLayout L;
    L.Slice = parseSlice(field(Layers[I], key::Slice, LP), LP + ".slice");
    check(L.Slice.CodesFrom < int64_t(I),
          "'" + LP + ".slice.codes_from' must be -1 or an earlier layer");
    L.FlushKernel = getString(Layers[I], key::FlushKernel, LP);
    L.Scheme = parseScheme(field(Layers[I], key::Scheme, LP), LP + ".scheme");
    parseTables(field(Layers[I], key::Scheme, LP), L, Model, LP + ".scheme");
    T.Layers.push_back(std::move(L));
  }
  checkPageLayout(T, Model, PageTokens, P);
  return T;
}

PoolLayout parsePool(const Json &J, const ModelShape &Model) {
  PoolLayout Pool;
  Pool.Capacity = unsigned(getBounded(J, key::Capacity, "pool", kMaxTokens));
  Pool.Extra = unsigned(getBounded(J, key::Extra, "pool", kMaxTokens));
  Pool.FirstLayer =
      unsigned(getBounded(J, key::FirstLayer, "pool", Model.Layers));
  Pool.Entries = unsigned(getBounded(J, key::Entries, "pool", 2 * kMaxTokens));
  Pool.IndexWords = unsigned(getBounded(
      J, key::IndexWords, "pool", 2 * kMaxTokens + abi::kPoolHeaderWords));
  check(Pool ==
            abi::computePoolLayout(Pool.Capacity, Pool.Extra, Pool.FirstLayer),
        "'pool' needs entries = capacity + extra and index_words = entries + " +
            std::to_string(abi::kPoolHeaderWords) + " (all 0 without pools)");
  return Pool;
}

KernelInfo parseKernel(const Json &J, const std::string &P) {
  KernelInfo K;
  K.Name = getString(J, key::Name, P);
  K.Kind = getString(J, key::Kind, P);
  const Json &Block = field(J, key::Block, P);
  check(Block.is_array() && Block.size() == 3,
        "'" + P + ".block' needs 3 ints");
  for (const Json &B : Block)
    check(B.is_number_integer() && B.get<int64_t>() > 0,
          "'" + P + ".block' entries must be positive integers");
  K.Block = Dim3{Block[0].get<unsigned>(), Block[1].get<unsigned>(),
                 Block[2].get<unsigned>()};
  K.SharedBytes = getU32(J, key::SharedBytes, P);
  K.DeviceUnits = unsigned(getBounded(J, key::DeviceUnits, P, 1u << 16));
  check(K.DeviceUnits >= 1, "'" + P + ".device_units' must be >= 1");
  const Json &Args = field(J, key::Args, P);
  check(Args.is_array(), "'" + P + ".args' must be an array");
  for (const Json &A : Args) {
    const char *I32 = abi::getManifestName(abi::ArgKind::I32);
    const char *Ptr = abi::getManifestName(abi::ArgKind::Ptr);
    check(A.is_string() && (A == Ptr || A == I32),
          "'" + P + ".args' entries must be ptr or i32");
    K.Args.push_back(A == Ptr ? ArgKind::Ptr : ArgKind::I32);
  }
  return K;
}

/// The argument list kvq/ABI/KernelABI.h fixes for each kernel kind.
std::vector<ArgKind> expectedArgs(const std::string &Kind) {
  const abi::KernelDesc *K = abi::findKernel(Kind.c_str());
  if (!K)
    fail("unknown kernel kind '" + Kind + "'");
  std::vector<ArgKind> Args;
  for (unsigned I = 0; I < K->NumArgs; ++I)
    Args.push_back(K->Args[I].Kind == abi::ArgKind::I32 ? ArgKind::I32
                                                        : ArgKind::Ptr);
  return Args;
}

std::string kindName(abi::KernelKind Kind) { return abi::getKernel(Kind).Name; }

void checkKernelRef(const Manifest &M, const std::string &Name,
                    const std::string &Kind, const std::string &Where) {
  const KernelInfo *K = M.kernel(Name);
  check(K, "'" + Where + "' names kernel '" + Name +
               "' missing from the kernel table");
  check(K->Kind == Kind,
        "kernel '" + Name + "' referenced as " + Kind + " has kind " + K->Kind);
}

/// A kernel the layer has exactly when `Present` (`Why` says when).
void checkOptionalKernelRef(const Manifest &M, const std::string &Name,
                            bool Present, abi::KernelKind Kind,
                            const std::string &Where, const std::string &Why) {
  check(Present != Name.empty(),
        "'" + Where + "' must be set exactly when " + Why);
  if (Present)
    checkKernelRef(M, Name, kindName(Kind), Where);
}

void checkConsistency(const Manifest &M) {
  for (const KernelInfo &K : M.Kernels)
    check(K.Args == expectedArgs(K.Kind),
          "kernel '" + K.Name + "' has the wrong argument list for a " +
              K.Kind + " kernel");
  for (Tensor T : {Tensor::Keys, Tensor::Values}) {
    const TensorLayout &TL = M.tensor(T);
    for (size_t L = 0; L < TL.Layers.size(); ++L)
      checkKernelRef(M, TL.Layers[L].FlushKernel,
                     kindName(abi::KernelKind::Flush),
                     std::string("tensors.") + toString(T) + ".layers[" +
                         std::to_string(L) + "].flush_kernel");
  }
  check(M.Layers.size() == M.Model.Layers,
        "'layers' must have one entry per model layer");
  for (size_t L = 0; L < M.Layers.size(); ++L) {
    std::string P = "layers[" + std::to_string(L) + "]";
    checkKernelRef(M, M.Layers[L].Attend, kindName(abi::KernelKind::Attend),
                   P + ".attend_kernel");
    checkOptionalKernelRef(M, M.Layers[L].KeyNorm,
                           M.Keys.Layers[L].Scheme.KeyNorm,
                           abi::KernelKind::KeyNorm, P + ".keynorm_kernel",
                           "the layer's keys use key_norm");
    checkOptionalKernelRef(M, M.Layers[L].Track, M.Pool.isTracked(unsigned(L)),
                           abi::KernelKind::Track, P + ".track_kernel",
                           "the layer has outlier pools");
  }
  // Tracking takes a token out of keys and values at the same flush.
  check(!M.Pool.Capacity ||
            (M.Keys.Sink == M.Values.Sink && M.Keys.Recent == M.Values.Recent &&
             M.Keys.Flush == M.Values.Flush),
        "outlier pools need keys and values with the same window");
}

Manifest parseTopLevel(const Json &J) {
  Manifest M;
  int64_t Version = getInt(J, key::Version, "");
  if (Version != kArtifactVersion)
    throw ManifestError{"artifact version " + std::to_string(Version) +
                        ", runtime expects " +
                        std::to_string(kArtifactVersion)};
  M.Version = kArtifactVersion;
  M.Name = getString(J, key::Name, "");
  M.Model = parseModel(field(J, key::Model, ""));
  M.PageTokens = unsigned(getBounded(J, key::PageTokens, "", kMaxTokens));
  M.SplitTokens = unsigned(getBounded(J, key::SplitTokens, "", kMaxTokens));
  M.SplitGranule = unsigned(getBounded(J, key::SplitGranule, "", kMaxTokens));
  check(M.PageTokens > 0 && M.SplitTokens > 0,
        "page_tokens and split_tokens must be positive");
  check(M.SplitGranule > 0 && M.SplitTokens % M.SplitGranule == 0,
        "split_granule must divide split_tokens");
  const Json &Bits = field(J, key::Bits, "");
  M.CodeBits = getNumber(Bits, key::CodeBits, "bits");
  M.StorageBits = getNumber(Bits, key::StorageBits, "bits");
  const Json &Tensors = field(J, key::Tensors, "");
  M.Keys = parseTensor(field(Tensors, key::Keys, "tensors"), "tensors.keys",
                       M.Model, M.PageTokens);
  M.Values = parseTensor(field(Tensors, key::Values, "tensors"),
                         "tensors.values", M.Model, M.PageTokens);
  const Json &Layers = field(J, key::Layers, "");
  check(Layers.is_array(), "'layers' must be an array");
  for (size_t I = 0; I < Layers.size(); ++I) {
    std::string P = "layers[" + std::to_string(I) + "]";
    M.Layers.push_back({getString(Layers[I], key::AttendKernel, P),
                        getString(Layers[I], key::KeynormKernel, P),
                        getString(Layers[I], key::TrackKernel, P)});
  }
  M.Pool = parsePool(field(J, key::Pool, ""), M.Model);
  const Json &Kernels = field(J, key::Kernels, "");
  check(Kernels.is_array(), "'kernels' must be an array");
  for (size_t I = 0; I < Kernels.size(); ++I)
    M.Kernels.push_back(
        parseKernel(Kernels[I], "kernels[" + std::to_string(I) + "]"));
  const Json &Files = field(J, key::Files, "");
  const Json &PTX = field(Files, key::Ptx, "files");
  check(PTX.is_object(), "'files.ptx' must be an object");
  for (auto It = PTX.begin(); It != PTX.end(); ++It) {
    check(It.value().is_string(), "'files.ptx' entries must be strings");
    M.PTX[It.key()] = getFileName(PTX, It.key().c_str(), "files.ptx");
  }
  M.HostObject = getFileName(Files, key::HostObject, "files");
  M.HostShared = getFileName(Files, key::HostShared, "files");
  std::optional<uint64_t> Checksum = kvq::parseHostSharedChecksum(
      getString(Files, key::HostSharedFnv1a, "files"));
  if (!Checksum)
    fail(std::string("'files.") + key::HostSharedFnv1a +
         "' must be 16 lowercase hexadecimal digits");
  M.HostSharedChecksum = *Checksum;
  const Json &Host = field(J, key::Host, "");
  M.HostCpu = getString(Host, key::Cpu, "host");
  const Json &Features = field(Host, key::Features, "host");
  check(Features.is_array(), "'host.features' must be an array");
  for (const Json &F : Features) {
    check(F.is_string(), "'host.features' entries must be strings");
    M.HostFeatures.push_back(F.get<std::string>());
  }
  M.HostSplitTokens =
      unsigned(getBounded(Host, key::SplitTokens, "host", kMaxTokens));
  check(M.HostSplitTokens > 0 && M.HostSplitTokens % M.SplitGranule == 0,
        "split_granule must divide a positive host.split_tokens");
  checkConsistency(M);
  // A layer's tableRow for a kernel: how many earlier layers name it
  // (docs/KernelABI.md, "Channel reorder and clip tables"). Kernel names
  // are unique, so one count serves every kind.
  std::map<std::string, unsigned> Earlier;
  for (Tensor T : {Tensor::Keys, Tensor::Values})
    for (LayerLayout &L : (T == Tensor::Keys ? M.Keys : M.Values).Layers) {
      L.FlushDeviceUnits = M.kernel(L.FlushKernel)->DeviceUnits;
      L.FlushTableRow = Earlier[L.FlushKernel]++;
    }
  for (LayerKernels &L : M.Layers)
    L.AttendTableRow = Earlier[L.Attend]++;
  return M;
}

/// The real path of file `Name` of directory `Dir` when it is a regular
/// file inside the directory (symbolic links resolved), else an error.
Expected<std::string> resolveInside(const std::string &Dir,
                                    const std::string &Name) {
  std::error_code EC;
  std::filesystem::path Root = std::filesystem::canonical(Dir, EC);
  if (EC)
    return Status::error(ErrorCode::Artifact, "cannot open '" + Dir + "'");
  std::filesystem::path File = std::filesystem::canonical(Root / Name, EC);
  if (EC)
    return Status::error(ErrorCode::Artifact,
                         "cannot open '" + Dir + "/" + Name + "'");
  if (File.parent_path() != Root)
    return Status::error(ErrorCode::Artifact,
                         "'" + Name + "' leaves the artifact directory");
  if (!std::filesystem::is_regular_file(File, EC))
    return Status::error(ErrorCode::Artifact,
                         "'" + Name + "' is not a regular file");
  return File.string();
}

/// File `Name` of directory `Dir`, at most `MaxBytes` long.
Expected<std::string> readFile(const std::string &Dir, const std::string &Name,
                               uint64_t MaxBytes) {
  Expected<std::string> Path = resolveInside(Dir, Name);
  if (!Path.ok())
    return Path.status();
  std::error_code EC;
  uint64_t Size = std::filesystem::file_size(*Path, EC);
  if (EC || Size > MaxBytes)
    return Status::error(ErrorCode::Artifact, "'" + Name + "' is larger than " +
                                                  std::to_string(MaxBytes) +
                                                  " bytes");
  std::ifstream In(*Path, std::ios::binary);
  if (!In)
    return Status::error(ErrorCode::Artifact, "cannot open '" + *Path + "'");
  std::string Text(Size, '\0');
  In.read(Text.data(), std::streamsize(Size));
  if (uint64_t(In.gcount()) != Size)
    return Status::error(ErrorCode::Artifact, "cannot read '" + *Path + "'");
  return Text;
}

/// The error for kernels compiled with another manifest than the one read.
Status mismatch(const std::string &Dir, const std::string &Kernels) {
  return Status::error(ErrorCode::Artifact,
                       "artifact '" + Dir + "': manifest.json is not the one " +
                           Kernels +
                           " was compiled with (edited, or from another "
                           "build): recompile the spec");
}

} // namespace

//===----------------------------------------------------------------------===//
// Public entry points
//===----------------------------------------------------------------------===//

Expected<Manifest> kvq::runtime::parseManifest(const std::string &Text) {
  Json J = Json::parse(Text, nullptr, /*allow_exceptions=*/false);
  if (J.is_discarded())
    return Status::error(ErrorCode::Artifact, "manifest: not valid JSON");
  try {
    return parseTopLevel(J);
  } catch (const ManifestError &E) {
    return Status::error(ErrorCode::Artifact, E.Message);
  } catch (const std::exception &E) {
    return Status::error(ErrorCode::Artifact,
                         std::string("manifest: ") + E.what());
  }
}

Expected<std::shared_ptr<const Artifact>>
Artifact::open(const std::string &Dir) {
  if (Status S = checkPathHasNoNul(Dir, "artifact directory"); !S.ok())
    return S;
  Expected<std::string> Text =
      readFile(Dir, manifest::kFileName, kMaxManifestBytes);
  if (!Text.ok())
    return Text.status().withContext("artifact '" + Dir + "': ");
  Expected<Manifest> M = parseManifest(*Text);
  if (!M.ok())
    return M.status().withContext("artifact '" + Dir + "': ");
  return std::shared_ptr<const Artifact>(
      new Artifact(Dir, std::move(*M), hashManifest(*Text)));
}

std::vector<std::string> Artifact::ptxTargets() const {
  std::vector<std::string> Targets;
  for (const auto &[Target, File] : M.PTX)
    Targets.push_back(Target);
  return Targets;
}

Expected<std::string> Artifact::loadPTX(const std::string &Target) const {
  auto It = M.PTX.find(Target);
  if (It == M.PTX.end())
    return Status::error(ErrorCode::Unsupported,
                         "artifact '" + Dir + "' has no PTX for " + Target);
  Expected<std::string> PTX = readFile(Dir, It->second, kMaxPTXBytes);
  if (!PTX.ok())
    return PTX;
  if (findPTXManifestHash(*PTX, M.Name) != ManifestHash)
    return mismatch(Dir, It->second);
  return PTX;
}

Expected<std::string> Artifact::hostSharedPath() const {
  return resolveInside(Dir, M.HostShared);
}

Expected<std::string> Artifact::hostObjectPath() const {
  return resolveInside(Dir, M.HostObject);
}

Status Artifact::checkHostSharedChecksum(const std::string &Path) const {
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    return Status::error(ErrorCode::Artifact, "cannot open '" + Path + "'");
  uint64_t Checksum = kvq::fnv1a64({});
  char Chunk[1 << 16];
  while (In.read(Chunk, sizeof Chunk) || In.gcount() > 0)
    Checksum =
        kvq::fnv1a64(std::string_view(Chunk, size_t(In.gcount())), Checksum);
  if (In.bad())
    return Status::error(ErrorCode::Artifact, "cannot read '" + Path + "'");
  if (Checksum != M.HostSharedChecksum)
    return Status::error(
        ErrorCode::Artifact,
        "artifact '" + Dir + "': " + M.HostShared + " is corrupt: its FNV-1a " +
            kvq::formatHostSharedChecksum(Checksum) + " is not the " +
            kvq::formatHostSharedChecksum(M.HostSharedChecksum) +
            " manifest.json records (recompile the spec)");
  return Status::success();
}

Status Artifact::checkHostBinding(const void *HashSymbol) const {
  uint64_t Hash;
  if (HashSymbol)
    std::memcpy(&Hash, HashSymbol, sizeof(Hash));
  if (!HashSymbol || Hash != ManifestHash)
    return mismatch(Dir, "the host code (" + M.HostObject + ", " +
                             M.HostShared + ")");
  return Status::success();
}
