//===- AttrRoundTripTest.cpp - every printed kvq attribute parses back ----===//
//
// A property test: kvq attributes built from generated field values (every
// mode, span, parameter dtype, level count, and eta and clip values that are
// small fractions, decimals and arbitrary doubles) print to text that parses
// back to the same attribute.
//
//===----------------------------------------------------------------------===//

#include "kvq/Dialect/KVQ/KVQAttrs.h"
#include "kvq/Dialect/KVQ/KVQDialect.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace mlir;
using namespace kvq;

namespace {

class AttrRoundTripTest : public ::testing::Test {
protected:
  AttrRoundTripTest() { ctx.loadDialect<KVQDialect>(); }

  /// Prints `attr`, parses the text back and expects the same attribute.
  void expectRoundTrip(Attribute attr) {
    std::string text;
    llvm::raw_string_ostream os(text);
    attr.print(os);
    std::string diagnostics;
    ScopedDiagnosticHandler capture(&ctx, [&](Diagnostic &d) {
      diagnostics += d.str();
      return success();
    });
    Attribute parsed = parseAttribute(text, &ctx);
    EXPECT_EQ(parsed, attr) << text << "\n" << diagnostics;
  }

  /// A value in (0, 1]: an exact small fraction, a short decimal, a tiny
  /// value printed with an exponent, or an arbitrary double.
  FloatAttr f64(double value) {
    return FloatAttr::get(Float64Type::get(&ctx), value);
  }

  /// None, linear or Llama 3 scaling with generated factors.
  RopeScalingAttr generateRopeScaling() {
    switch (rng() % 3) {
    case 0:
      return {};
    case 1:
      return RopeScalingAttr::get(&ctx, RopeScalingKind::Linear,
                                  f64(1.0 / generateFactor()), nullptr, nullptr,
                                  0);
    default: {
      double low = generateFactor();
      return RopeScalingAttr::get(
          &ctx, RopeScalingKind::Llama3, f64(1.0 / generateFactor()), f64(low),
          f64(low + 1.0 / generateFactor()),
          std::uniform_int_distribution<unsigned>(1, 1u << 20)(rng));
    }
    }
  }

  double generateFactor() {
    switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0: {
      int denominator = std::uniform_int_distribution<int>(1, 20)(rng);
      return double(std::uniform_int_distribution<int>(1, denominator)(rng)) /
             denominator;
    }
    case 1:
      return std::uniform_int_distribution<int>(1, 100)(rng) / 100.0;
    case 2:
      return std::uniform_int_distribution<int>(1, 9)(rng) *
             std::pow(10.0, -std::uniform_int_distribution<int>(5, 300)(rng));
    default:
      return 1.0 - std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    }
  }

  MLIRContext ctx;
  std::mt19937_64 rng{20261122};
};

TEST_F(AttrRoundTripTest, GeneratedQuantAttrs) {
  Type paramTypes[] = {Float16Type::get(&ctx), Float32Type::get(&ctx),
                       BFloat16Type::get(&ctx), Float8E4M3FNType::get(&ctx)};
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  auto emitError = [&] { return mlir::emitError(UnknownLoc::get(&ctx)); };
  unsigned built = 0;
  for (unsigned i = 0; i < 4000; ++i) {
    unsigned bits = std::uniform_int_distribution<unsigned>(1, 8)(rng);
    auto mode =
        static_cast<Mode>(std::uniform_int_distribution<int>(0, 2)(rng));
    auto span =
        static_cast<Span>(std::uniform_int_distribution<int>(0, 1)(rng));
    unsigned group = 1u << std::uniform_int_distribution<int>(0, 8)(rng);
    Type params = paramTypes[std::uniform_int_distribution<int>(0, 3)(rng)];
    bool asym = mode == Mode::Asym;
    std::optional<unsigned> levels;
    if (asym && rng() % 4 == 0)
      levels = std::uniform_int_distribution<unsigned>(2, 1u << bits)(rng);
    FloatAttr eta;
    if (asym && rng() % 2)
      eta = f64(generateFactor() * 0.499);
    if (asym && rng() % 3 == 0)
      eta = f64(double(std::uniform_int_distribution<int>(1, 4)(rng)) /
                std::uniform_int_distribution<int>(9, 16)(rng));
    Attribute clip;
    if (asym && rng() % 2)
      clip = FloatAttr::get(Float64Type::get(&ctx), generateFactor());
    bool keyNorm = rng() % 4 == 0;
    RopeAttr rope;
    if (rng() % 4 == 0)
      rope = RopeAttr::get(
          &ctx, f64(2.0 + generateFactor() * 1e6),
          2 * std::uniform_int_distribution<unsigned>(1, 64)(rng),
          static_cast<RopeStyle>(rng() % 2), generateRopeScaling());
    QuantAttr attr =
        QuantAttr::getChecked(emitError, &ctx, bits, mode, span, group, params,
                              levels, eta, clip, ReorderAttr(), keyNorm, rope);
    if (!attr)
      continue;
    ++built;
    expectRoundTrip(attr);
  }
  // The generator must exercise the printer, not only the verifier.
  EXPECT_GT(built, 2000u);
}

TEST_F(AttrRoundTripTest, ReportedClipFactors) {
  // clip = 0.5 printed as `clip = 1/2`, and 1e-07 as `1e-07` (an integer
  // and an identifier to MLIR's lexer), neither of which parsed.
  for (double clip :
       {0.5, 0.25, 0.75, 1.0 / 3, 2.0 / 3, 0.92, 1.0, 1e-07, 3e-12, 1e-300}) {
    auto attr = QuantAttr::get(
        &ctx, 2, Mode::Asym, Span::Tokens, 32, Float16Type::get(&ctx),
        std::nullopt, FloatAttr(), f64(clip), ReorderAttr(), false, RopeAttr());
    expectRoundTrip(attr);
  }
}

TEST_F(AttrRoundTripTest, AbsentIsNotZero) {
  // An optional field left out is std::nullopt or a null attribute; a given
  // zero is rejected, not read as "not given", and factors are f64 so that
  // they print back.
  std::string diagnostics;
  ScopedDiagnosticHandler capture(&ctx, [&](Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return success();
  });
  auto emitError = [&] { return mlir::emitError(UnknownLoc::get(&ctx)); };
  auto build = [&](std::optional<unsigned> levels, FloatAttr eta,
                   Attribute clip) {
    Type params = Float16Type::get(&ctx);
    return QuantAttr::getChecked(emitError, &ctx, /*bits=*/2u, Mode::Asym,
                                 Span::Tokens, /*group=*/32u, params, levels,
                                 eta, clip, ReorderAttr(), false, RopeAttr());
  };
  QuantAttr plain = build(std::nullopt, FloatAttr(), Attribute());
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain.getNumLevels(), 4u);
  EXPECT_FALSE(plain.getEtaValue());
  EXPECT_FALSE(plain.getUniformClip());
  EXPECT_FALSE(plain.getClipTable());
  expectRoundTrip(plain);
  std::string text;
  llvm::raw_string_ostream(text) << plain;
  EXPECT_EQ(text, "#kvq.quant<bits = 2, mode = asym, span = tokens, "
                  "group = 32>");

  EXPECT_FALSE(build(0u, FloatAttr(), Attribute()));
  EXPECT_FALSE(build(std::nullopt, f64(0.0), Attribute()));
  FloatAttr f32Eta = FloatAttr::get(Float32Type::get(&ctx), 0.125);
  EXPECT_FALSE(build(std::nullopt, f32Eta, Attribute()));
  FloatAttr f32Clip = FloatAttr::get(Float32Type::get(&ctx), 0.5);
  EXPECT_FALSE(build(std::nullopt, FloatAttr(), f32Clip));
  for (const char *expected :
       {"levels must be in [2, 4] for 2-bit codes, got 0",
        "eta = 0 is no calibration: leave eta out for plain asym",
        "eta must be an f64 value", "clipping factor must be an f64 value"})
    EXPECT_NE(diagnostics.find(expected), std::string::npos) << expected << "\n"
                                                             << diagnostics;

  QuantAttr given = build(4u, f64(0.125), f64(0.5));
  ASSERT_TRUE(given);
  EXPECT_EQ(given.getLevels(), std::optional<unsigned>(4));
  EXPECT_EQ(given.getEtaValue(), std::optional<double>(0.125));
  EXPECT_EQ(given.getUniformClip(), std::optional<double>(0.5));
  expectRoundTrip(given);
}

TEST_F(AttrRoundTripTest, GeneratedWindowAndModelAttrs) {
  for (unsigned i = 0; i < 200; ++i) {
    unsigned flush = 1u << std::uniform_int_distribution<int>(0, 8)(rng);
    expectRoundTrip(WindowAttr::get(
        &ctx, std::uniform_int_distribution<unsigned>(0, 64)(rng),
        std::uniform_int_distribution<unsigned>(0, 4096)(rng), flush));
    unsigned kvHeads = std::uniform_int_distribution<unsigned>(1, 16)(rng);
    FloatAttr scale;
    if (rng() % 2)
      scale = FloatAttr::get(Float64Type::get(&ctx), generateFactor());
    expectRoundTrip(ModelAttr::get(
        &ctx, std::uniform_int_distribution<unsigned>(1, 128)(rng),
        kvHeads * std::uniform_int_distribution<unsigned>(1, 8)(rng), kvHeads,
        64, Float16Type::get(&ctx), scale,
        static_cast<ChannelOrder>(rng() % 3)));
  }
}

/// #kvq.slice_layout spells every field of kvq/ABI/CacheLayout.h's
/// SliceLayout in its place: distinct values for each field come back from
/// the attribute and from its printed text.
TEST_F(AttrRoundTripTest, SliceLayoutHoldsEveryCacheLayoutField) {
  kvq::abi::SliceLayout layout;
  layout.Offset = 16 * 1;
  layout.SliceBytes = 16 * 40;
  layout.WordsPerGroup = 0;
  layout.GroupsPerToken = 3;
  layout.GroupsPerPage = 4;
  layout.ParamBytes = 5;
  layout.CodesBytes = 16 * 6;
  layout.ScalesOffset = 16 * 7;
  layout.ZerosOffset = 16 * 8;
  layout.CodesFrom = 9;
  layout.CodesLayerDelta = -10;
  layout.CodesHeadDelta = 11;
  layout.WordsPerToken = 12;
  layout.GroupWords = {0, 11, 5, 6, 7, 2};
  ASSERT_EQ(kvq::abi::findLayoutError(layout), nullptr);
  auto attr = SliceLayoutAttr::get(&ctx, layout);
  EXPECT_EQ(attr.getLayout(), layout);
  // Each field is its own parameter, read back through its own accessor.
  EXPECT_EQ(attr.getCodesHeadDelta(), 11);
  EXPECT_EQ(attr.getWordsPerToken(), 12u);
  expectRoundTrip(attr);
  // Defaults are elided and come back.
  expectRoundTrip(SliceLayoutAttr::get(&ctx, kvq::abi::SliceLayout()));
  EXPECT_EQ(SliceLayoutAttr::get(&ctx, kvq::abi::SliceLayout()).getLayout(),
            kvq::abi::SliceLayout());
}

} // namespace
