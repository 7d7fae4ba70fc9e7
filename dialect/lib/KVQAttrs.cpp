//===- KVQAttrs.cpp - kvq scheme attributes -------------------------------===//
//
// Verification and helpers of the scheme attributes, and the custom
// parameter syntax their generated parsers and printers call (KVQAttrs.td).
// Rules that need the model shape or the windows live in the op verifiers
// (KVQOps.cpp).
//
//===----------------------------------------------------------------------===//

#include "kvq/Dialect/KVQ/KVQAttrs.h"
#include "kvq/Dialect/KVQ/KVQDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <charconv>
#include <cmath>

using namespace mlir;
using namespace kvq;

/// The shortest decimal that reads back as `value`, always with a '.' in its
/// mantissa so that MLIR's lexer sees a float.
static std::string formatShortest(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, result.ptr);
  // MLIR's float literals need a '.' in the mantissa: `1e-07` would lex as
  // the integer 1 followed by an identifier.
  size_t mantissaEnd = std::min(text.find('e'), text.size());
  if (text.find('.') == std::string::npos)
    text.insert(mantissaEnd, ".0");
  return text;
}

//===----------------------------------------------------------------------===//
// Custom parameter syntax of #kvq.quant (used by the generated parser and
// printer, KVQAttrs.td)
//===----------------------------------------------------------------------===//

namespace kvq {
/// A value that is present because its key was written.
template <typename T>
static FailureOr<std::optional<T>> parsePresentValue(AsmParser &parser) {
  FailureOr<T> value = FieldParser<T>::parse(parser);
  if (failed(value))
    return failure();
  return std::optional<T>(*value);
}

/// Divides `value` by the `/ d` that may follow it.
static ParseResult parseOptionalDenominator(AsmParser &parser, double &value) {
  if (failed(parser.parseOptionalSlash()))
    return success();
  SMLoc loc = parser.getCurrentLocation();
  // Signed: an unsigned parse reads `-6` as 2^64 - 6.
  int64_t denominator;
  if (parser.parseInteger(denominator))
    return failure();
  if (denominator == 0)
    return parser.emitError(loc, "division by zero");
  if (denominator < 0)
    return parser.emitError(loc, "a denominator must be positive, got ")
           << denominator;
  value /= static_cast<double>(denominator);
  return success();
}

static FloatAttr getF64(AsmParser &parser, double value) {
  return FloatAttr::get(Float64Type::get(parser.getContext()), value);
}

/// Parses `n`, `n/d` or a decimal, optionally negative, into an f64.
static FailureOr<FloatAttr> parseRational(AsmParser &parser) {
  bool negative = succeeded(parser.parseOptionalMinus());
  SMLoc loc = parser.getCurrentLocation();
  double value;
  // Signed, as the denominator: a second `-` is an error, not 2^64 - n.
  int64_t numerator;
  OptionalParseResult integer = parser.parseOptionalInteger(numerator);
  if (integer.has_value() && failed(*integer))
    return failure();
  if (integer.has_value() && numerator < 0)
    return parser.emitError(loc, "expected one sign");
  if (integer.has_value())
    value = static_cast<double>(numerator);
  else if (parser.parseFloat(value))
    return failure();
  if (negative)
    value = -value;
  if (parseOptionalDenominator(parser, value))
    return failure();
  return getF64(parser, value);
}

/// Prints `value` as `n/d` when it is exactly such a small fraction (the
/// papers' eta values 1/6, 1/3), else as the shortest round-tripping decimal.
static void printRational(AsmPrinter &printer, double value) {
  for (int denominator = 2; denominator <= 16; ++denominator) {
    double numerator = std::round(value * denominator);
    if (numerator != 0 && numerator / denominator == value &&
        std::fmod(numerator, denominator) != 0) {
      printer << static_cast<int64_t>(numerator) << "/" << denominator;
      return;
    }
  }
  printer << formatShortest(value);
}

/// Parses a clipping factor (a decimal, an integer or a fraction `n/d`, kept
/// as an f64) or any other attribute, for the verifier to judge (a table).
static FailureOr<Attribute> parseClip(AsmParser &parser) {
  Attribute clip;
  if (parser.parseAttribute(clip))
    return failure();
  if (auto factor = dyn_cast<FloatAttr>(clip))
    return Attribute(getF64(parser, factor.getValueAsDouble()));
  // An integer starts `1` or a fraction `n/d` (as the printer writes exact
  // small fractions).
  auto numerator = dyn_cast<IntegerAttr>(clip);
  if (!numerator)
    return clip;
  double factor = static_cast<double>(numerator.getInt());
  if (parseOptionalDenominator(parser, factor))
    return failure();
  return Attribute(getF64(parser, factor));
}

static void printClip(AsmPrinter &printer, Attribute clip) {
  if (auto factor = dyn_cast<FloatAttr>(clip))
    return printRational(printer, factor.getValueAsDouble());
  printer.printAttribute(clip);
}
} // namespace kvq

#include "kvq/Dialect/KVQ/KVQEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "kvq/Dialect/KVQ/KVQAttrs.cpp.inc"

void KVQDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kvq/Dialect/KVQ/KVQAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Tables
//===----------------------------------------------------------------------===//

/// The elements of a `dense_resource` blob of element type `T`, if present.
template <typename T>
static std::optional<ArrayRef<T>> readBlob(ElementsAttr table) {
  auto blob = dyn_cast<mlir::detail::DenseResourceElementsAttrBase<T>>(table);
  if (!blob)
    return std::nullopt;
  return blob.tryGetAsArrayRef();
}

bool kvq::isTableTooLarge(ElementsAttr table) {
  return table.getShapedType().getNumElements() > int64_t(kMaxTableElements);
}

FailureOr<SmallVector<int64_t>> kvq::readIntegerTable(ElementsAttr table) {
  if (isTableTooLarge(table))
    return failure();
  if (auto dense = dyn_cast<DenseIntElementsAttr>(table))
    return llvm::map_to_vector(dense.getValues<APInt>(), [](APInt value) {
      return value.getSExtValue();
    });
  if (auto blob = readBlob<int32_t>(table))
    return SmallVector<int64_t>(blob->begin(), blob->end());
  if (auto blob = readBlob<int64_t>(table))
    return SmallVector<int64_t>(blob->begin(), blob->end());
  return failure();
}

FailureOr<SmallVector<double>> kvq::readFloatTable(ElementsAttr table) {
  if (isTableTooLarge(table))
    return failure();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(table))
    return llvm::map_to_vector(dense.getValues<APFloat>(), [](APFloat value) {
      bool losesInfo;
      value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                    &losesInfo);
      return value.convertToDouble();
    });
  if (auto blob = readBlob<float>(table))
    return SmallVector<double>(blob->begin(), blob->end());
  if (auto blob = readBlob<double>(table))
    return SmallVector<double>(blob->begin(), blob->end());
  return failure();
}

FailureOr<SmallVector<int64_t>> ReorderAttr::readPerm() const {
  return readIntegerTable(getPerm());
}

FailureOr<SmallVector<int64_t>> ReorderAttr::readSizes() const {
  return readIntegerTable(getSizes());
}

ElementsAttr QuantAttr::getClipTable() const {
  return dyn_cast_if_present<ElementsAttr>(getClip());
}

FailureOr<SmallVector<double>> QuantAttr::readClipTable() const {
  ElementsAttr table = getClipTable();
  if (!table)
    return failure();
  return readFloatTable(table);
}

//===----------------------------------------------------------------------===//
// ModelAttr
//===----------------------------------------------------------------------===//

LogicalResult ModelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                unsigned layers, unsigned heads,
                                unsigned kvHeads, unsigned headDim, Type dtype,
                                FloatAttr scale, ChannelOrder channelOrder) {
  if (layers == 0 || heads == 0 || kvHeads == 0 || headDim == 0)
    return emitError() << "layers, heads, kv_heads and head_dim must be "
                          "positive";
  // Bounds far above any model, so that verifiers and passes can size
  // per-layer tables without risk.
  if (layers > 4096 || heads > 4096 || headDim > 16384)
    return emitError() << "model shape is out of range (at most 4096 layers, "
                          "4096 heads and head_dim 16384)";
  if (heads % kvHeads != 0)
    return emitError() << "heads (" << heads
                       << ") must be a multiple of kv_heads (" << kvHeads
                       << ")";
  if (!dtype.isF16() && !dtype.isBF16() && !dtype.isF32())
    return emitError() << "dtype must be f16, bf16 or f32, got " << dtype;
  if (scale && !(scale.getValueAsDouble() > 0.0))
    return emitError() << "softmax scale must be positive";
  if (channelOrder != ChannelOrder::Any && headDim % 2 != 0)
    return emitError() << "channel_order pairs channels, head_dim " << headDim
                       << " is odd";
  return success();
}

double ModelAttr::getSoftmaxScale() const {
  if (FloatAttr scale = getScale())
    return scale.getValueAsDouble();
  return 1.0 / std::sqrt(static_cast<double>(getHeadDim()));
}

//===----------------------------------------------------------------------===//
// QuantAttr
//===----------------------------------------------------------------------===//

static bool isParamType(Type type) {
  return type.isF32() || type.isF16() || type.isBF16() ||
         isa<Float8E4M3FNType>(type);
}

/// What a rotation combines with. The Hadamard transform mixes every
/// channel of a token, so per-channel machinery written against the
/// unrotated channels does not apply to the rotated ones.
static LogicalResult
verifyRotation(function_ref<InFlightDiagnostic()> emitError, Rotation rotate,
               std::optional<unsigned> rotateSeed, ReorderAttr reorder,
               bool keyNorm, RopeAttr preRope) {
  if (rotate == Rotation::None) {
    if (rotateSeed)
      return emitError() << "rotate_seed needs rotate = hadamard";
    return success();
  }
  if (preRope)
    return emitError() << "rotate = hadamard cannot rotate pre_rope keys: "
                          "the attention kernel applies RoPE to dequantized "
                          "keys, and RoPE does not commute with the rotation";
  if (keyNorm)
    return emitError() << "rotate = hadamard cannot be combined with "
                          "key_norm: the norms are of unrotated channels";
  if (reorder)
    return emitError() << "rotate = hadamard cannot be combined with a "
                          "channel reorder: its tables order unrotated "
                          "channels";
  return success();
}

LogicalResult QuantAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                unsigned bits, Mode mode, Span span,
                                unsigned group, Type params,
                                std::optional<unsigned> levels, FloatAttr eta,
                                Attribute clip, ReorderAttr reorder,
                                bool keyNorm, RopeAttr preRope, Rotation rotate,
                                std::optional<unsigned> rotateSeed) {
  if (bits < 1 || bits > 8)
    return emitError() << "bits must be in [1, 8], got " << bits;
  if (mode != Mode::Asym && bits < 2)
    return emitError() << "'" << stringifyMode(mode)
                       << "' mode needs at least 2 bits: a 1-bit code has "
                          "no room for a sign";
  if (group == 0 || group > 16384)
    return emitError() << "group size must be in [1, 16384], got " << group;
  if (!params || !isParamType(params))
    return emitError() << "params must be f32, f16, bf16 or f8E4M3FN, got "
                       << params;
  if (levels && (*levels < 2 || *levels > (1u << bits)))
    return emitError() << "levels must be in [2, " << (1u << bits) << "] for "
                       << bits << "-bit codes, got " << *levels;
  if (levels && mode != Mode::Asym)
    return emitError() << "levels are only defined for 'asym' mode";
  // The parser reads constants as f64; other widths would not print back.
  if (eta && !eta.getType().isF64())
    return emitError() << "eta must be an f64 value, got " << eta;
  if (eta && !(eta.getValueAsDouble() >= 0.0 && eta.getValueAsDouble() < 0.5))
    return emitError() << "eta must be in [0, 0.5), got "
                       << formatShortest(eta.getValueAsDouble());
  if (eta && eta.getValueAsDouble() == 0.0)
    return emitError() << "eta = 0 is no calibration: leave eta out for "
                          "plain asym";
  if (eta && mode != Mode::Asym)
    return emitError() << "eta calibration is only defined for 'asym' mode";
  if (clip && mode != Mode::Asym)
    return emitError() << "clipping is only defined for 'asym' mode";
  auto inClipRange = [](double a) { return a > 0.0 && a <= 1.0; };
  if (auto factor = dyn_cast_if_present<FloatAttr>(clip)) {
    if (!factor.getType().isF64())
      return emitError() << "clipping factor must be an f64 value, got "
                         << factor;
    if (!inClipRange(factor.getValueAsDouble()))
      return emitError() << "clipping factor must be in (0, 1], got "
                         << formatShortest(factor.getValueAsDouble());
  } else if (auto table = dyn_cast_if_present<ElementsAttr>(clip)) {
    // Checked on the type, before any element is materialized.
    if (isTableTooLarge(table))
      return emitError() << "clip table has "
                         << table.getShapedType().getNumElements()
                         << " elements; at most " << kMaxTableElements;
    FailureOr<SmallVector<double>> factors = readFloatTable(table);
    if (failed(factors))
      return emitError() << "clip table must hold f32 or f64 values, with its "
                            "resource data present";
    for (double factor : *factors)
      if (!inClipRange(factor))
        return emitError() << "clipping factors must be in (0, 1], got "
                           << formatShortest(factor);
  } else if (clip) {
    return emitError() << "clip must be a float or an elements attribute";
  }
  return verifyRotation(emitError, rotate, rotateSeed, reorder, keyNorm,
                        preRope);
}

unsigned QuantAttr::getNumLevels() const {
  return getLevels().value_or(1u << getBits());
}

unsigned QuantAttr::getParamsPerGroup() const {
  return getMode() == Mode::Sym ? 1 : 2;
}

unsigned QuantAttr::getParamBits() const {
  return getParams().getIntOrFloatBitWidth();
}

uint64_t QuantAttr::getGroupCodeBits(uint64_t size) const {
  return abi::getGroupCodeBits(getBits(), size);
}

std::optional<double> QuantAttr::getUniformClip() const {
  if (auto factor = dyn_cast_if_present<FloatAttr>(getClip()))
    return factor.getValueAsDouble();
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// RopeAttr, RopeScalingAttr
//===----------------------------------------------------------------------===//

static bool isPositiveFinite(FloatAttr value) {
  return value && value.getValueAsDouble() > 0.0 &&
         std::isfinite(value.getValueAsDouble());
}

LogicalResult RopeAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               FloatAttr theta, unsigned dims, RopeStyle style,
                               RopeScalingAttr scaling) {
  if (!isPositiveFinite(theta) || theta.getValueAsDouble() <= 1.0)
    return emitError() << "pre_rope theta must be finite and above 1, got "
                       << theta;
  if (dims == 0 || dims % 2 != 0)
    return emitError() << "pre_rope dims must be even and positive, got "
                       << dims;
  return success();
}

LogicalResult
RopeScalingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        RopeScalingKind kind, FloatAttr factor,
                        FloatAttr lowFreqFactor, FloatAttr highFreqFactor,
                        unsigned originalMaxPosition) {
  if (!isPositiveFinite(factor))
    return emitError() << "rope scaling factor must be finite and positive, "
                          "got "
                       << factor;
  bool hasLlama3Fields = lowFreqFactor || highFreqFactor || originalMaxPosition;
  if (kind == RopeScalingKind::Linear) {
    if (hasLlama3Fields)
      return emitError() << "linear rope scaling takes only a factor";
    return success();
  }
  if (!isPositiveFinite(lowFreqFactor) || !isPositiveFinite(highFreqFactor) ||
      originalMaxPosition == 0)
    return emitError() << "llama3 rope scaling needs positive "
                          "low_freq_factor, high_freq_factor and "
                          "original_max_position";
  if (lowFreqFactor.getValueAsDouble() >= highFreqFactor.getValueAsDouble())
    return emitError() << "llama3 rope scaling needs low_freq_factor below "
                          "high_freq_factor";
  return success();
}

/// Llama 3.1's rescaling of one inverse frequency (transformers'
/// `_compute_llama3_parameters`, in fp64).
static double scaleLlama3(RopeScalingAttr scaling, double invFreq) {
  double factor = scaling.getFactor().getValueAsDouble();
  double low = scaling.getLowFreqFactor().getValueAsDouble();
  double high = scaling.getHighFreqFactor().getValueAsDouble();
  double original = scaling.getOriginalMaxPosition();
  double wavelength = 2.0 * M_PI / invFreq;
  if (wavelength < original / high)
    return invFreq;
  if (wavelength > original / low)
    return invFreq / factor;
  double smooth = (original / wavelength - low) / (high - low);
  return (1.0 - smooth) * invFreq / factor + smooth * invFreq;
}

SmallVector<double> RopeAttr::getInverseFrequencies() const {
  double theta = getTheta().getValueAsDouble();
  SmallVector<double> frequencies;
  for (unsigned i = 0; i < getDims() / 2; ++i) {
    double invFreq = std::pow(theta, -2.0 * i / getDims());
    if (RopeScalingAttr scaling = getScaling())
      invFreq = scaling.getKind() == RopeScalingKind::Linear
                    ? invFreq / scaling.getFactor().getValueAsDouble()
                    : scaleLlama3(scaling, invFreq);
    frequencies.push_back(invFreq);
  }
  return frequencies;
}

//===----------------------------------------------------------------------===//
// WindowAttr, PoolAttr, ShareAttr
//===----------------------------------------------------------------------===//

LogicalResult WindowAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 unsigned sink, unsigned recent,
                                 unsigned flush) {
  if (flush == 0)
    return emitError() << "flush unit must be positive";
  // Bounds far above any published window (SKVQ keeps 128 recent tokens),
  // so that the window capacity recent + flush - 1 and every buffer size
  // derived from it stay exact in 32-bit and 64-bit arithmetic.
  if (sink > kMaxWindowTokens || recent > kMaxWindowTokens ||
      flush > kMaxWindowTokens)
    return emitError() << "sink, recent and flush must be at most "
                       << kMaxWindowTokens << " tokens, got sink = " << sink
                       << ", recent = " << recent << ", flush = " << flush;
  return success();
}

LogicalResult PoolAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               unsigned capacity, unsigned extra,
                               unsigned firstLayer) {
  if (capacity == 0)
    return emitError() << "outlier pool capacity must be positive";
  if (capacity > kMaxWindowTokens || extra > kMaxWindowTokens)
    return emitError() << "outlier pool capacity and extra must be at most "
                       << kMaxWindowTokens << " tokens";
  return success();
}

LogicalResult ShareAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                unsigned from, unsigned group, unsigned owner) {
  if (group < 2)
    return emitError() << "a sharing group needs at least 2 layers, got "
                       << group;
  if (owner >= group)
    return emitError() << "owner member " << owner << " is outside a group of "
                       << group << " layers";
  return success();
}

std::optional<unsigned> ShareAttr::getCodeOwner(unsigned layer) const {
  if (layer < getFrom())
    return std::nullopt;
  unsigned owner = layer - layer % getGroup() + getOwner();
  if (owner == layer)
    return std::nullopt;
  return owner;
}

//===----------------------------------------------------------------------===//
// Physical layout
//===----------------------------------------------------------------------===//

/// Whether `bytes` bytes at `offset` lie inside `[0, size)`.
static bool isWithin(int64_t offset, uint64_t bytes, uint64_t size) {
  return offset >= 0 && uint64_t(offset) <= size &&
         bytes <= size - uint64_t(offset);
}

/// The numbers of #kvq.slice_layout's parameters, which are
/// kvq/ABI/CacheLayout.h's fields in its order.
static abi::SliceLayout makeSliceLayout(
#define KVQ_SLICE_LAYOUT_PARAM(Type, Id, Default) Type Id,
    KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_PARAM)
#undef KVQ_SLICE_LAYOUT_PARAM
        DenseI32ArrayAttr groupWords) {
  abi::SliceLayout slice;
#define KVQ_SLICE_LAYOUT_SET(Type, Id, Default) slice.Id = Id;
  KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_SET)
#undef KVQ_SLICE_LAYOUT_SET
  if (groupWords)
    slice.GroupWords.assign(groupWords.asArrayRef().begin(),
                            groupWords.asArrayRef().end());
  return slice;
}

SliceLayoutAttr SliceLayoutAttr::get(MLIRContext *ctx,
                                     const abi::SliceLayout &layout) {
#define KVQ_SLICE_LAYOUT_ARG(Type, Id, Default) layout.Id,
  return Base::get(ctx, KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_ARG)
                                layout.hasReorder()
                            ? DenseI32ArrayAttr::get(ctx, layout.GroupWords)
                            : DenseI32ArrayAttr());
#undef KVQ_SLICE_LAYOUT_ARG
}

abi::SliceLayout SliceLayoutAttr::getLayout() const {
#define KVQ_SLICE_LAYOUT_GET(Type, Id, Default) get##Id(),
  return makeSliceLayout(KVQ_SLICE_LAYOUT_FIELDS(KVQ_SLICE_LAYOUT_GET)
                             getGroupWords());
#undef KVQ_SLICE_LAYOUT_GET
}

LogicalResult SliceLayoutAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, uint64_t offset,
    uint64_t sliceBytes, unsigned wordsPerGroup, unsigned groupsPerToken,
    unsigned groupsPerPage, unsigned paramBytes, uint64_t codesBytes,
    uint64_t scalesOffset, int64_t zerosOffset, int64_t codesFrom,
    int64_t codesLayerDelta, int64_t codesHeadDelta, unsigned wordsPerToken,
    DenseI32ArrayAttr groupWords) {
  abi::SliceLayout slice = makeSliceLayout(
      offset, sliceBytes, wordsPerGroup, groupsPerToken, groupsPerPage,
      paramBytes, codesBytes, scalesOffset, zerosOffset, codesFrom,
      codesLayerDelta, codesHeadDelta, wordsPerToken, groupWords);
  if (const char *error = abi::findLayoutError(slice))
    return emitError() << error;
  return success();
}

LogicalResult
TensorLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         unsigned windowCapacity, uint64_t pageBytes,
                         ArrayAttr slices) {
  if (pageBytes % kLayoutAlignment)
    return emitError() << "page_bytes must be a multiple of "
                       << kLayoutAlignment;
  for (auto [layer, attr] : llvm::enumerate(slices)) {
    auto slice = dyn_cast<SliceLayoutAttr>(attr);
    if (!slice)
      return emitError() << "slices must be #kvq.slice_layout attributes";
    if (!isWithin(slice.getOffset(), slice.getSliceBytes(), pageBytes))
      return emitError() << "slice of layer " << layer << " lies outside the "
                         << pageBytes << "-byte page";
    if (slice.getCodesFrom() >= int64_t(layer))
      return emitError() << "layer " << layer
                         << " reuses the codes of a later layer";
  }
  return success();
}

LogicalResult
PoolLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       unsigned capacity, unsigned extra, unsigned firstLayer,
                       unsigned entries, unsigned indexWords) {
  if (!capacity || uint64_t(capacity) + extra != entries ||
      uint64_t(entries) + kHeaderWords != indexWords)
    return emitError() << "pool_layout needs capacity > 0, entries = "
                          "capacity + extra and index_words = entries + "
                       << kHeaderWords;
  return success();
}

LogicalResult LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 unsigned pageTokens, unsigned splitTokens,
                                 unsigned hostSplitTokens,
                                 unsigned splitGranule, unsigned dtypeBytes,
                                 TensorLayoutAttr keys, TensorLayoutAttr values,
                                 PoolLayoutAttr pool) {
  if (!pageTokens || !splitTokens || !hostSplitTokens)
    return emitError()
           << "page_tokens, split_tokens and host_split_tokens must be "
              "positive";
  if (!splitGranule || splitTokens % splitGranule ||
      hostSplitTokens % splitGranule)
    return emitError()
           << "split_granule must divide split_tokens and host_split_tokens";
  if (dtypeBytes != 2 && dtypeBytes != 4)
    return emitError() << "dtype_bytes must be 2 or 4";
  if (keys.getSlices().size() != values.getSlices().size())
    return emitError() << "keys and values must have the same layers";
  if (pool && pool.getFirstLayer() >= keys.getSlices().size())
    return emitError() << "pool first_layer is past the last layer";
  return success();
}
