//===- ArtifactTest.cpp - the artifact writer's own verification ----------===//
//
// The compile pipeline runs without the verifier between its passes
// (docs/Rationale.md, "Verification"): kvq::writeArtifact verifies the
// module it is given before it writes anything. An invalid module is an
// error with the verifier's diagnostic, and no file is written.
//
//===----------------------------------------------------------------------===//

#include "kvq/Codegen/Artifact.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

using namespace mlir;

namespace {

class ArtifactTest : public ::testing::Test {
protected:
  ArtifactTest() { ctx.loadDialect<arith::ArithDialect, func::FuncDialect>(); }

  void SetUp() override {
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("kvq-artifact-test", root));
    out = root;
    llvm::sys::path::append(out, "artifact");
  }
  void TearDown() override { llvm::sys::fs::remove_directories(root); }

  /// `text` parsed without the verifier, as a pass pipeline run without it
  /// could leave a module.
  OwningOpRef<ModuleOp> parseUnverified(StringRef text) {
    ParserConfig config(&ctx, /*verifyAfterParse=*/false);
    return parseSourceString<ModuleOp>(text, config);
  }

  /// writeArtifact's result on `module`, its diagnostics in `diagnostics`.
  LogicalResult write(ModuleOp module) {
    ScopedDiagnosticHandler capture(&ctx, [&](Diagnostic &d) {
      diagnostics += d.str();
      return success();
    });
    return kvq::writeArtifact(module, out);
  }

  MLIRContext ctx;
  llvm::SmallString<128> root, out;
  std::string diagnostics;
};

TEST_F(ArtifactTest, RejectsAnInvalidModuleAndWritesNothing) {
  OwningOpRef<ModuleOp> module = parseUnverified(R"mlir(
    func.func @f() -> i32 {
      func.return
    }
  )mlir");
  ASSERT_TRUE(module);
  EXPECT_TRUE(failed(write(*module)));
  EXPECT_NE(diagnostics.find("enclosing function"), std::string::npos)
      << diagnostics;
  EXPECT_FALSE(llvm::sys::fs::exists(out));
}

TEST_F(ArtifactTest, AcceptsTheSameModuleOnceValid) {
  // The same function, valid: no cache, so nothing to write, and no error.
  OwningOpRef<ModuleOp> module = parseUnverified(R"mlir(
    func.func @f() -> i32 {
      %c0 = arith.constant 0 : i32
      func.return %c0 : i32
    }
  )mlir");
  ASSERT_TRUE(module);
  EXPECT_TRUE(succeeded(write(*module))) << diagnostics;
  EXPECT_TRUE(diagnostics.empty()) << diagnostics;
}

} // namespace
