//===- Module.cpp - the kvq Python extension (_kvq) -----------------------===//
//
// nanobind bindings over the compiler (Compiler.h) and the runtime's Cache.
// Arrays cross zero-copy as numpy/DLPack ndarrays; every failure raises
// kvq.Error (kvq.SpecError for specs, with MLIR's located diagnostics) and
// leaves the cache as it was (the runtime's guarantee).
//
// A Cache is safe to share between Python threads: each call releases the
// GIL, then takes the cache's own mutex, so calls on one cache run one at a
// time while calls on different caches run in parallel. A path with a NUL
// byte is an error before anything is opened (the runtime's C calls would
// take the prefix before it).
//
//===----------------------------------------------------------------------===//

#include "Compiler.h"
#include "SequenceId.h"

#include "kvq/Runtime/Cache.h"
#include "kvq/Support/PathCheck.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <mutex>
#include <optional>

namespace nb = nanobind;
using namespace kvq;

namespace {

/// Raised as kvq.Error.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
/// Raised as kvq.SpecError: a spec that does not parse, verify or compile.
struct SpecFailure : Failure {
  using Failure::Failure;
};

void check(const runtime::Status &S) {
  if (!S.ok())
    throw Failure(S.message());
}

template <typename T> T take(runtime::Expected<T> E) {
  check(E.status());
  return std::move(*E);
}

//===----------------------------------------------------------------------===//
// Compiler
//===----------------------------------------------------------------------===//

/// The value of a compiler call, or kvq.SpecError with its diagnostics.
template <typename T> T take(python::SpecResult<T> result) {
  if (!result.ok)
    throw SpecFailure(result.diagnostics);
  return std::move(result.value);
}

nb::list reportBits(const std::string &spec, uint64_t tokens,
                    const std::string &name) {
  nb::list caches;
  for (const python::CacheBits &bits :
       take(python::reportBits(spec, tokens, name))) {
    nb::dict d;
    d["name"] = bits.name;
    d["code_bits"] = bits.codeBits;
    d["storage_bits"] = bits.storageBits;
    d["tokens"] = tokens;
    d["bytes"] = bits.bytes;
    d["codes"] = bits.codes;
    d["params"] = bits.params;
    d["full_precision"] = bits.fullPrecision;
    d["pools"] = bits.pools;
    d["metadata"] = bits.metadata;
    caches.append(d);
  }
  return caches;
}

//===----------------------------------------------------------------------===//
// Runtime
//===----------------------------------------------------------------------===//

using Array = nb::ndarray<nb::ro, nb::device::cpu>;

/// What an array holds, as the runtime takes it.
enum class Elements { F32, Raw16 };

/// The numpy name of a DLPack dtype, for errors.
std::string dtypeName(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  std::string bits = std::to_string(t.bits);
  switch (Code(t.code)) {
  case Code::Float:
    return "float" + bits;
  case Code::Bfloat:
    return "bfloat" + bits;
  case Code::Int:
    return "int" + bits;
  case Code::UInt:
    return "uint" + bits;
  case Code::Bool:
    return "bool";
  case Code::Complex:
    return "complex" + bits;
  }
  return "dtype code " + std::to_string(t.code);
}

/// Checks that `a` is a C-contiguous [rows][dims...] array of the model dtype
/// or f32, and returns which. `bf16Bits`: a uint16 array holds bfloat16 bits
/// (the kvq package passes numpy's ml_dtypes.bfloat16 arrays so, which
/// numpy cannot export through DLPack).
Elements checkArray(const Array &a, const char *what,
                    std::initializer_list<size_t> shape,
                    runtime::DType modelType, bool bf16Bits) {
  std::string expected;
  for (size_t extent : shape)
    expected += (expected.empty() ? "" : ", ") + std::to_string(extent);
  bool shapeOk = a.ndim() == shape.size();
  for (size_t i = 0; shapeOk && i < shape.size(); ++i)
    shapeOk = a.shape(i) == *(shape.begin() + i);
  if (!shapeOk)
    throw Failure(std::string(what) + " must have shape [" + expected + "]");
  int64_t stride = 1;
  for (size_t i = a.ndim(); i-- > 0; stride *= int64_t(a.shape(i)))
    if (a.shape(i) > 1 && a.stride(i) != stride)
      throw Failure(std::string(what) + " must be C-contiguous");
  nb::dlpack::dtype t = a.dtype();
  if (bf16Bits && t == nb::dtype<uint16_t>())
    t = {uint8_t(nb::dlpack::dtype_code::Bfloat), 16, 1};
  if (t == nb::dtype<float>())
    return Elements::F32;
  bool f16 = t.code == uint8_t(nb::dlpack::dtype_code::Float) && t.bits == 16;
  bool bf16 = t.code == uint8_t(nb::dlpack::dtype_code::Bfloat) && t.bits == 16;
  if ((f16 && modelType == runtime::DType::F16) ||
      (bf16 && modelType == runtime::DType::BF16))
    return Elements::Raw16;
  std::string message = std::string(what) + " is " + dtypeName(t) +
                        ": the cache takes float32 or its own dtype (" +
                        runtime::toString(modelType) + ")";
  // A 16-bit float of the other kind: f16 and bf16 each hold values the
  // other cannot, while float32 holds both exactly.
  if (f16 || bf16)
    message += "; convert it to float32, which is exact";
  throw Failure(message);
}

/// A runtime Cache shared safely by Python threads. Every call that touches
/// the cache first releases the GIL, then takes `mutex`, and drops the
/// mutex before it takes the GIL back: a thread never holds one while it
/// waits for the other, so two threads cannot deadlock. Python objects are
/// read before and built after, with the GIL held.
class PyCache {
public:
  PyCache(const std::string &dir, const std::string &backend,
          unsigned maxSequences, unsigned pages, unsigned threads) {
    runtime::CacheOptions options;
    if (backend == "cpu")
      options.Backend = runtime::BackendKind::Cpu;
    else if (backend == "cuda")
      options.Backend = runtime::BackendKind::Cuda;
    else
      throw Failure("backend must be 'cpu' or 'cuda', got '" + backend + "'");
    options.MaxSequences = maxSequences;
    options.PagesPerTensor = pages;
    options.Threads = threads;
    cache = take(
        runtime::Cache::create(take(runtime::Artifact::open(dir)), options));
  }

  /// The artifact's model shape: immutable, read without the mutex.
  const runtime::ModelShape &model() const { return cache->manifest().Model; }

  runtime::SequenceId addSequence() {
    return take(locked([&] { return cache->addSequence(); }));
  }
  void removeSequence(python::SequenceIdArg seq) {
    check(locked([&] { return cache->removeSequence(seq); }));
  }
  runtime::SequenceId forkSequence(python::SequenceIdArg source) {
    return take(locked([&] { return cache->forkSequence(source); }));
  }
  void save(const std::string &path, const python::SequenceIdsArg &seqs) {
    check(locked([&] { return cache->save(path, seqs); }));
  }
  std::vector<runtime::SequenceId> restore(const std::string &path) {
    return take(locked([&] { return cache->restore(path); }));
  }

  /// items: (sequence, k, v) with k, v of shape [n, kv_heads, head_dim].
  void append(
      unsigned layer,
      const std::vector<std::tuple<python::SequenceIdArg, Array, Array>> &items,
      bool bf16Bits) {
    const runtime::ModelShape &m = model();
    std::vector<runtime::AppendItem> raw;
    std::vector<runtime::AppendItemF32> wide;
    for (const auto &[seq, k, v] : items) {
      size_t n = k.ndim() ? k.shape(0) : 0;
      Elements ek =
          checkArray(k, "k", {n, m.KvHeads, m.HeadDim}, m.Type, bf16Bits);
      Elements ev =
          checkArray(v, "v", {n, m.KvHeads, m.HeadDim}, m.Type, bf16Bits);
      if (ek != ev)
        throw Failure("k is " + dtypeName(k.dtype()) + " and v is " +
                      dtypeName(v.dtype()) + ": they must have one dtype");
      if (n > UINT32_MAX)
        throw Failure("too many tokens in one append");
      if (ek == Elements::F32)
        wide.push_back({seq, unsigned(n), static_cast<const float *>(k.data()),
                        static_cast<const float *>(v.data()), k.size(),
                        v.size()});
      else
        raw.push_back(
            {seq, unsigned(n), k.data(), v.data(), k.nbytes(), v.nbytes()});
    }
    if (!raw.empty() && !wide.empty())
      throw Failure("one append takes float32 arrays or the cache's dtype, "
                    "not both");
    check(locked([&] {
      return wide.empty() ? cache->append(layer, raw)
                          : cache->append(layer, wide);
    }));
  }

  /// q: [rows, heads, head_dim], a row a query: one per sequence, or
  /// `queries[i]` of sequence i; returns the f32 attention output.
  nb::ndarray<nb::numpy, float>
  attend(unsigned layer, const python::SequenceIdsArg &seqs, const Array &q,
         bool unrotated, bool bf16Bits,
         const std::optional<std::vector<unsigned>> &queries) {
    const runtime::ModelShape &m = model();
    std::vector<unsigned> counts = queries.value_or(std::vector<unsigned>());
    if (queries && counts.size() != seqs.size())
      throw Failure("queries has " + std::to_string(counts.size()) +
                    " counts for " + std::to_string(seqs.size()) +
                    " sequences");
    size_t rows = runtime::countQueryRows(seqs, counts);
    Elements e =
        checkArray(q, "q", {rows, m.Heads, m.HeadDim}, m.Type, bf16Bits);
    size_t count = rows * m.Heads * m.HeadDim;
    auto *out = new float[count];
    nb::capsule owner(out, [](void *p) noexcept { delete[](float *) p; });
    runtime::QueryRope rope =
        unrotated ? runtime::QueryRope::Unrotated : runtime::QueryRope::Rotated;
    const void *data = q.data();
    check(locked([&] {
      return e == Elements::F32
                 ? cache->attendF32(layer, seqs, counts,
                                    static_cast<const float *>(data), out, rope)
                 : cache->attend(layer, seqs, counts, data, out, rope);
    }));
    return nb::ndarray<nb::numpy, float>(out, {rows, m.Heads, m.HeadDim},
                                         owner);
  }

  nb::dict memoryStats() const {
    runtime::MemoryStats s = locked([&] { return cache->memoryStats(); });
    nb::dict d;
    d["key_pages_in_use"] = s.KeyPagesInUse;
    d["value_pages_in_use"] = s.ValuePagesInUse;
    d["page_bytes"] = s.PageBytes;
    d["window_bytes"] = s.WindowBytes;
    d["sink_bytes"] = s.SinkBytes;
    d["norm_bytes"] = s.NormBytes;
    d["table_bytes"] = s.TableBytes;
    d["pool_bytes"] = s.PoolBytes;
    d["bytes_used"] = s.BytesUsed;
    d["bytes_allocated"] = s.BytesAllocated;
    d["cached_elements"] = s.CachedElements;
    d["bits_per_element"] = s.BitsPerElement;
    return d;
  }

  nb::dict counts(python::SequenceIdArg seq, unsigned layer) const {
    runtime::SliceCounts c =
        take(locked([&] { return cache->counts(seq, layer); }));
    nb::dict d;
    for (auto [name, t] : {std::pair("keys", runtime::Tensor::Keys),
                           std::pair("values", runtime::Tensor::Values)}) {
      nb::dict r;
      r["sink"] = c[t].Sink;
      r["quantized"] = c[t].Quantized;
      r["window"] = c[t].Window;
      d[name] = r;
    }
    return d;
  }

  static runtime::Tensor tensor(const std::string &name) {
    if (name == "keys")
      return runtime::Tensor::Keys;
    if (name == "values")
      return runtime::Tensor::Values;
    throw Failure("tensor must be 'keys' or 'values', got '" + name + "'");
  }

  nb::bytes readSlicePage(const std::string &t, python::SequenceIdArg seq,
                          unsigned layer, unsigned kvHead, unsigned page) {
    runtime::Tensor which = tensor(t);
    return bytes(take(locked([&] {
      return cache->readSlicePage(which, seq, layer, kvHead, page);
    })));
  }
  nb::bytes readWindow(const std::string &t, python::SequenceIdArg seq,
                       unsigned layer) {
    runtime::Tensor which = tensor(t);
    return bytes(
        take(locked([&] { return cache->readWindow(which, seq, layer); })));
  }
  nb::bytes readSink(const std::string &t, python::SequenceIdArg seq,
                     unsigned layer) {
    runtime::Tensor which = tensor(t);
    return bytes(
        take(locked([&] { return cache->readSink(which, seq, layer); })));
  }
  std::vector<float> readKeyNorms(python::SequenceIdArg seq, unsigned layer) {
    return take(locked([&] { return cache->readKeyNorms(seq, layer); }));
  }
  std::vector<uint32_t> saturatedGroups(const std::string &t) const {
    runtime::Tensor which = tensor(t);
    return take(locked([&] { return cache->saturatedGroups(which); }));
  }

private:
  /// f() with the GIL released and this cache's mutex held; the mutex is
  /// dropped before the GIL is taken back.
  template <typename F> auto locked(F &&f) const -> decltype(f()) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex);
    return f();
  }

  static nb::bytes bytes(const std::vector<uint8_t> &b) {
    return nb::bytes(reinterpret_cast<const char *>(b.data()), b.size());
  }

  std::unique_ptr<runtime::Cache> cache;
  /// Serialises the calls on `cache`, whose C++ API is not thread-safe.
  mutable std::mutex mutex;
};

} // namespace

NB_MODULE(_kvq, m) {
  m.doc() = "kvq's compiler and runtime (use the kvq package, not _kvq)";
  nb::exception<Failure> error(m, "Error");
  nb::exception<SpecFailure>(m, "SpecError", error);

  m.def(
      "compile",
      [](const std::string &spec, const std::string &dir,
         const std::string &hostCpu, const std::string &name,
         unsigned dotFactorBits, bool quantizedAttendPrograms) {
        check(checkPathHasNoNul(dir, "out_dir"));
        nb::gil_scoped_release release;
        python::CompileOptions options{hostCpu, dotFactorBits,
                                       quantizedAttendPrograms};
        take(python::compile(spec, dir, options, name));
      },
      nb::arg("spec"), nb::arg("dir"), nb::arg("host_cpu"), nb::arg("name"),
      nb::arg("dot_factor_bits"), nb::arg("quantized_attend_programs"),
      "Compiles spec text into artifact directory `dir` (kvq.compile).");
  m.def(
      "set_model",
      [](const std::string &spec, unsigned layers, unsigned heads,
         unsigned kvHeads, unsigned headDim, const std::string &dtype,
         bool clampGroups, const std::string &name) {
        return take(python::setModel(
            spec, {layers, heads, kvHeads, headDim, dtype, clampGroups}, name));
      },
      nb::arg("spec"), nb::arg("layers"), nb::arg("heads"), nb::arg("kv_heads"),
      nb::arg("head_dim"), nb::arg("dtype"), nb::arg("clamp_groups"),
      nb::arg("name"), "The spec restated for a model shape (kvq.set_model).");
  m.def("report_bits", &reportBits, nb::arg("spec"), nb::arg("tokens"),
        nb::arg("name"),
        "Bit accounting of every cache of a spec (kvq.report_bits).");

  nb::class_<PyCache>(m, "Cache",
                      "A runtime cache on an artifact (wrapped by kvq.Cache)")
      .def(nb::init<const std::string &, const std::string &, unsigned,
                    unsigned, unsigned>(),
           nb::arg("dir"), nb::arg("backend"), nb::arg("max_sequences"),
           nb::arg("pages"), nb::arg("threads"))
      .def_prop_ro("layers", [](PyCache &c) { return c.model().Layers; })
      .def_prop_ro("heads", [](PyCache &c) { return c.model().Heads; })
      .def_prop_ro("kv_heads", [](PyCache &c) { return c.model().KvHeads; })
      .def_prop_ro("head_dim", [](PyCache &c) { return c.model().HeadDim; })
      .def_prop_ro("dtype",
                   [](PyCache &c) {
                     return std::string(runtime::toString(c.model().Type));
                   })
      .def_prop_ro("channel_order",
                   [](PyCache &c) {
                     return std::string(runtime::toString(c.model().Channels));
                   })
      .def("add_sequence", &PyCache::addSequence)
      .def("remove_sequence", &PyCache::removeSequence)
      .def("fork_sequence", &PyCache::forkSequence, nb::arg("source"))
      .def("save", &PyCache::save, nb::arg("path"),
           nb::arg("sequences") = python::SequenceIdsArg())
      .def("restore", &PyCache::restore, nb::arg("path"))
      .def("append", &PyCache::append, nb::arg("layer"), nb::arg("items"),
           nb::arg("bf16_bits") = false)
      .def("attend", &PyCache::attend, nb::arg("layer"), nb::arg("seqs"),
           nb::arg("q"), nb::arg("unrotated") = false,
           nb::arg("bf16_bits") = false, nb::arg("queries") = nb::none())
      .def("memory_stats", &PyCache::memoryStats)
      .def("counts", &PyCache::counts)
      .def("read_slice_page", &PyCache::readSlicePage)
      .def("read_window", &PyCache::readWindow)
      .def("read_sink", &PyCache::readSink)
      .def("read_key_norms", &PyCache::readKeyNorms)
      .def("saturated_groups", &PyCache::saturatedGroups);
}
