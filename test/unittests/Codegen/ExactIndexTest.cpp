//===- ExactIndexTest.cpp - exact indices of a vector iteration's lanes ---===//
//
// getExactIndex of a token's place in its page, as a vector iteration
// aligned to 32 tokens reaches it at its chunks' offsets: the quotients and
// remainders by constants it may take exactly, those it may not, and
// isSameAt of a page's index and of a token's place.
//
//===----------------------------------------------------------------------===//

#include "ExactIndex.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace kvq;

namespace {

// %a is the token's place, assumed a multiple of 32 in the first lane; %b a
// value no lane changes.
constexpr const char *kIndices = R"mlir(
func.func @indices(%a: i32, %b: i32) -> (i32, i32, i32, i32, i32, i32, i32, i32) {
  %c32 = arith.constant 32 : i32
  %c48 = arith.constant 48 : i32
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %place = arith.remui %a, %c128 : i32
  %page = arith.divui %a, %c128 : i32
  %group = arith.divui %place, %c32 : i32
  %in_group = arith.remui %place, %c32 : i32
  %half_page = arith.divui %a, %c64 : i32
  %odd = arith.remui %a, %c48 : i32
  %shifted = arith.addi %a, %b : i32
  %shifted_place = arith.remui %shifted, %c128 : i32
  return %place, %page, %group, %in_group, %half_page, %odd, %shifted_place, %b : i32, i32, i32, i32, i32, i32, i32, i32
}
)mlir";

enum Result { Place, Page, Group, InGroup, HalfPage, Odd, ShiftedPlace, B };

class ExactIndexTest : public ::testing::Test {
protected:
  ExactIndexTest() {
    ctx.loadDialect<arith::ArithDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kIndices, &ctx);
    auto func = cast<func::FuncOp>(module->getBody()->front());
    ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    a = func.getArgument(0);
  }

  Value result(Result r) { return ret.getOperand(r); }
  /// The lane `lane` tokens after the aligned first one.
  ExactLane laneAt(int64_t lane) {
    return ExactLane{{{a, ExactIndex{32, lane, {}}}}, {a}};
  }
  std::optional<ExactIndex> at(Result r, int64_t lane) {
    return getExactIndex(result(r), laneAt(lane));
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  func::ReturnOp ret;
  Value a;
};

TEST_F(ExactIndexTest, RemainderByAMultipleOfTheAlignmentKeepsTheOffset) {
  // (32 U + o) mod 128 = ((32 U) mod 128) + o for o < 32: chunks 16 tokens
  // apart are 16 places apart in the page.
  std::optional<ExactIndex> first = at(Place, 0), second = at(Place, 16);
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(first->sameUnknowns(*second));
  EXPECT_EQ(first->offset, 0);
  EXPECT_EQ(second->offset, 16);
  ASSERT_EQ(first->terms.size(), 1u);
  EXPECT_EQ(first->terms[0].value, result(Place));
  EXPECT_EQ(first->terms[0].align, 32);
  // Past the alignment the offset may carry into the unknown part.
  EXPECT_FALSE(at(Place, 32));
}

TEST_F(ExactIndexTest, QuotientByAMultipleOfTheAlignmentIsTheSameAtEachChunk) {
  std::optional<ExactIndex> first = at(Page, 0), second = at(Page, 31);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(first->getAlign(), 1);
  std::optional<ExactIndex> half = at(HalfPage, 17);
  ASSERT_TRUE(half);
  EXPECT_EQ(*half, *at(HalfPage, 0));
}

TEST_F(ExactIndexTest, DivisorOfTheAlignmentSplitsTheOffset) {
  // The place is a multiple of 32 plus o: by 32 the quotient is the
  // multiple's (plus o / 32), the remainder o itself.
  std::optional<ExactIndex> group = at(Group, 16);
  ASSERT_TRUE(group);
  EXPECT_EQ(group->offset, 0);
  EXPECT_EQ(group->getAlign(), 1);
  std::optional<ExactIndex> inGroup = at(InGroup, 16);
  ASSERT_TRUE(inGroup);
  EXPECT_TRUE(inGroup->isConstant());
  EXPECT_EQ(inGroup->offset, 16);
}

TEST_F(ExactIndexTest, DivisorsThatNeitherDivideNorAreMultiplesFail) {
  EXPECT_FALSE(at(Odd, 0));
  // %b's alignment is 1: only the first lane's remainder is exact.
  EXPECT_TRUE(at(ShiftedPlace, 0));
  EXPECT_FALSE(at(ShiftedPlace, 16));
}

TEST_F(ExactIndexTest, ValuesNoLaneChangesAreTermsByIdentity) {
  std::optional<ExactIndex> b = at(B, 16);
  ASSERT_TRUE(b);
  ASSERT_EQ(b->terms.size(), 1u);
  EXPECT_EQ(b->terms[0].value, result(B));
  EXPECT_EQ(b->terms[0].coefficient, 1);
  EXPECT_EQ(b->offset, 0);
}

TEST_F(ExactIndexTest, SameAtEveryChunkOnlyWhereItsIndexIs) {
  SmallVector<ExactLane> chunks = {laneAt(0), laneAt(16)};
  EXPECT_TRUE(isSameAt(result(Page), chunks));
  EXPECT_TRUE(isSameAt(result(B), chunks));
  EXPECT_FALSE(isSameAt(result(Place), chunks));
  EXPECT_FALSE(isSameAt(result(InGroup), chunks));
}

} // namespace
