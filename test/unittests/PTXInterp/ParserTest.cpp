//===- ParserTest.cpp - PTX parsing and decoding --------------------------===//

#include "TestUtil.h"

using namespace kvq::ptx;
using namespace kvq::ptx::test;

namespace {

const char *const Sample = R"(
.version 7.8
.target sm_90
.address_size 64
.global .align 4 .u32 counter = 7;
.const .align 4 .f32 table[2] = {0f3F800000, 0f40000000};
.extern .shared .align 16 .b8 dyn[];
.visible .entry sample(
	.param .u64 .ptr .global .align 16 sample_param_0,
	.param .f32 sample_param_1
)
.maxntid 128, 1, 1
{
	.reg .pred 	%p<3>;
	.reg .b16 	%rs<3>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<4>;
	.shared .align 4 .b8 local_tile[32];

	ld.param.u64 	%rd1, [sample_param_0];
	mov.u32 	%r1, %tid.x;
	@!%p1 bra 	$L__BB0_2;
	mov.b32 	{%rs1, %rs2}, %r1;
	ld.global.nc.v4.f32 	{%r2, %r3, %r4, %r5}, [%rd1+-16];
$L__BB0_2:
	shfl.sync.down.b32 	%r6|%p2, %r1, 1, 31, -1;
	mov.f32 	%r7, 0f3F800000;
	mov.u64 	%rd2, dyn;
	ret;
}
)";

TEST(ParserTest, DecodesDeclarationsAndOperands) {
  auto M = parseModule(Sample);
  ASSERT_TRUE(M.ok()) << M.message();
  EXPECT_EQ(M->Version, "7.8");
  EXPECT_EQ(M->Target, "sm_90");
  ASSERT_EQ(M->Functions.size(), 1u);
  const Function &F = M->Functions[0];
  EXPECT_TRUE(F.IsEntry);
  ASSERT_EQ(F.Params.size(), 2u);
  EXPECT_EQ(F.Params[0].Size, 8u);
  EXPECT_EQ(F.Params[1].Offset, 8u);
  EXPECT_EQ(F.ParamBytes, 12u);
  // 3 + 3 + 10 + 4 declared registers after the special registers.
  EXPECT_EQ(F.Regs.size(), static_cast<size_t>(Special::Count) + 20);
  ASSERT_EQ(F.Code.size(), 9u);

  const Instruction &Bra = F.Code[2];
  EXPECT_EQ(Bra.Op, Opcode::Bra);
  EXPECT_TRUE(Bra.PredNegate);
  EXPECT_EQ(Bra.Ops[0].Value, 5); // $L__BB0_2 is instruction 5.

  const Instruction &Unpack = F.Code[3];
  EXPECT_EQ(Unpack.Ops[0].K, Operand::Vec);
  EXPECT_EQ(Unpack.Ops[0].VecCount, 2);

  const Instruction &Ld = F.Code[4];
  EXPECT_EQ(Ld.Op, Opcode::Ld);
  EXPECT_EQ(Ld.Sp, Space::Global);
  EXPECT_EQ(Ld.VecWidth, 4);
  EXPECT_EQ(Ld.Ty, Type::F32);
  EXPECT_EQ(Ld.Ops[1].Value, -16);
  EXPECT_EQ(Ld.Line, 24u);
  EXPECT_EQ(F.Text[4].rfind("ld.global.nc.v4.f32", 0), 0u) << F.Text[4];
  EXPECT_NE(F.Text[4].find("[%rd1+-16];"), std::string::npos) << F.Text[4];

  const Instruction &Shfl = F.Code[5];
  EXPECT_EQ(Shfl.Op, Opcode::Shfl);
  EXPECT_EQ(Shfl.Sub, sub::Down);
  EXPECT_GE(Shfl.Ops[0].Elems[0], 0); // The |%p2 predicate output.
  EXPECT_EQ(static_cast<uint32_t>(Shfl.Ops[4].Value), 0xffffffffu);

  EXPECT_EQ(F.Code[6].Ops[1].Value, 0x3f800000);
  // Dynamic shared memory starts after the 32 static bytes, 16-aligned.
  EXPECT_EQ(M->DynamicSharedOffset, 32u);
  EXPECT_EQ(F.Code[7].Ops[1].Value, 32);
  EXPECT_EQ(M->ConstData.size(), 8u);
  EXPECT_EQ(M->GlobalBytes, 4u);
}

TEST(ParserTest, UnknownOpcodesDecodeAsUnsupported) {
  auto M = parseModule(".version 7.0\n.target sm_80\n.address_size 64\n"
                       ".visible .entry k()\n{\n"
                       "  wgmma.fence.sync.aligned;\n  ret;\n}\n");
  ASSERT_TRUE(M.ok()) << M.message();
  EXPECT_EQ(M->Functions[0].Code[0].Op, Opcode::Unsupported);
  EXPECT_NE(M->Functions[0].Notes[0].find("wgmma"), std::string::npos);
}

TEST(ParserTest, MalformedTextIsAnError) {
  auto M = parseModule(".version 7.0\n.target sm_80\n.address_size 64\n"
                       ".visible .entry k()\n{\n  bra $L_nowhere;\n}\n");
  ASSERT_FALSE(M.ok());
  EXPECT_NE(M.message().find("unknown label '$L_nowhere'"), std::string::npos)
      << M.message();
  EXPECT_NE(M.message().find("line 6"), std::string::npos) << M.message();
}

TEST(ParserTest, WholeCorpusParses) {
  for (const char *Name :
       {"reduce.ptx", "transpose.ptx", "divergence.ptx", "atomics.ptx",
        "vecload.ptx", "convert.ptx", "convert_sm90.ptx", "decode_attn.ptx",
        "llvm_kernels.ptx", "calls.ptx"}) {
    auto M = parseModule(readCorpus(Name));
    ASSERT_TRUE(M.ok()) << Name << ": " << M.message();
    for (const Function &F : M->Functions) {
      if (!F.IsEntry)
        continue;
      for (size_t I = 0; I < F.Code.size(); ++I) {
        EXPECT_NE(F.Code[I].Op, Opcode::Unsupported)
            << Name << ": " << F.Text[I] << ": " << F.Notes[I];
      }
    }
  }
}

} // namespace
