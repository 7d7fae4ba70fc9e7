//===- Vectorizer.h - a kernel program's loop body over lanes ---*- C++ -*-===//
//
// Private to lib/Transforms: the analysis and rewrite that widen the body
// of a parallel loop over a vector of its iterations (the lanes), shared by
// kvq-vectorize-parallel's loop forms: which values vary between the lanes,
// the lane forms of the induction variable's integer arithmetic, and the
// body's ops cloned on vectors, chunk by chunk.
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_CODEGEN_LIB_TRANSFORMS_VECTORIZER_H
#define KVQ_CODEGEN_LIB_TRANSFORMS_VECTORIZER_H

#include "ExactIndex.h"

#include "kvq/Codegen/IntegerFactors.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace kvq {

/// How an operation of a vectorized loop's body is rewritten.
enum class Widening {
  /// Depends on nothing that varies across the lanes: cloned as is.
  Scalar,
  /// A load or store whose last index is the induction variable.
  Vector,
  /// Elementwise arithmetic on values that vary: the same op on vectors.
  Elementwise,
  /// An `scf.for` whose body depends on the lanes: its results carried as
  /// vectors. Where reductions run in order (serializeReductions()), an
  /// `scf.parallel` reduction too: an scf.for carrying its sums.
  Loop,
  /// An `scf.if` on a condition that varies whose body only stores, or adds
  /// as i32, lane-independent values at lane-independent places (a flag, a
  /// counter): run once if any lane takes it, each addition times the
  /// lanes that do.
  AnyLane,
  /// A RowStore's row (a `vector.from_elements` of values of one lane) or
  /// its index (the induction variable scaled): widened with the store.
  RowPart,
  /// A `vector.store` of a Row of n elements at n times the induction
  /// variable: the lanes' rows are adjacent, so their interleaved elements
  /// are one store.
  RowStore,
  /// Integer arithmetic of the induction variable whose value is the same
  /// in every lane (a channel's group, the word holding its code): computed
  /// once, from the first lane's.
  Uniform,
  /// Integer arithmetic of the induction variable that differs between
  /// lanes in a known way (a code's place in its word): the same op on
  /// vectors, the induction variable a vector of the lanes' own, and on the
  /// first lane's scalars for the Uniform ops that use it.
  LaneIndex,
  /// A `kvq.dequantize` of codes that vary: its expansion on vectors.
  Dequantize,
  /// A load whose last index has a lane form of stride s, 1 up to the
  /// Vectorizer's maxLoadStride (a channel's code word, s words a channel;
  /// a channel's group parameters): the elements from the first lane's
  /// index to the last lane's, one vector, every s-th of them.
  StridedLoad,
  /// A store whose last index has a lane form of stride 1 (a token's score
  /// in its head's row): one vector store from the first lane's index.
  LaneStore,
  /// A prefetch whose last index has a lane form (the next page's rows of
  /// the lanes' tokens): a prefetch of each cache line they lie in.
  LanePrefetch,
  Unsupported,
};

/// A body value across the lanes of one vector iteration, whose induction
/// variable is `first + l` (`first` a multiple of the lanes unless a value
/// is assumed aligned instead, l in [0, lanes)): `U + offset + stride * l`,
/// U an unknown multiple of `align`, or 0 where `align` is 0 (the value is
/// then exact).
struct LaneForm {
  int64_t align = 1, offset = 0, stride = 0;
};

/// One copy of a vectorized body: the lanes `first + l` of the induction
/// variable and its ops' values.
struct LaneChunk {
  explicit LaneChunk(mlir::Value first) : first(first) {}
  mlir::Value first;
  mlir::IRMapping mapping;
  /// The first lane's scalar of each LaneIndex value.
  mlir::IRMapping firstLanes;
};

/// The sums of a reduction in a loop body, taken as a Loop, that run on
/// the target's integer dots `dots` (`cpu_dot`): `sum a_r * x`, r < R, x a
/// `kvq.dequantize` of codes that vary with the lanes and parameters that
/// do not, the factors a_r the same in every lane, each sum from +0.
struct DotTerms {
  mlir::scf::ParallelOp reduction;
  mlir::Operation *dequantize;
  llvm::SmallVector<mlir::Value> factors;
  IntegerDots dots;
};

/// DotTerms over a row's channels c whose lanes are rows: `sum_c a_r(c) *
/// x(c)`, x a token's code of channel c, a_r(c) each head's query. It runs
/// as docs/Numerics.md's "Attention on integer dots": per vector of lanes,
/// a_r * slope rounded to the dots' integers against its largest
/// magnitude, k channels' codes a lane dotted with k rounded factors by one
/// dot (k = 2 for i16 factors, 4 for i8), and the factors' sum with the
/// offsets added after.
struct IntegerDotPlan : DotTerms {
  int64_t channels;
  /// Where a lane's code of a channel is `(word >> shift) & (2^bits - 1)`,
  /// the word read at one place by all the lanes of a chunk and the k
  /// channels' words of a step of every chunk all among the `words` from
  /// the first chunk's first channel's (k = 2, codes of up to 8 bits): the
  /// load of the word, and per chunk the bit of each lane's k codes in
  /// those words. A step's codes of every chunk are then one vector load
  /// and per chunk one byte shuffle, shift and mask (unpackHalves), not
  /// each channel's word broadcast, shifted, masked and ORed in.
  struct CodeWords {
    mlir::memref::LoadOp load;
    int64_t words;
    llvm::SmallVector<llvm::SmallVector<unsigned>> halfBits;
  };
  std::optional<CodeWords> codeWords;
  /// Scratch of the block: each factor times the slopes (f32, R x
  /// channels), and those rounded (the dots' integers, the same, and its
  /// packs of k as i32).
  mlir::Value folded, rounded, roundedPacks;
};

/// DotTerms over a run of tokens t whose lanes are channels: `sum_t p_r(t)
/// * x(t)`, x the token's code of the lanes' channels with parameters the
/// lanes share (a span=channels group's scale and zero-point), p_r(t) each
/// head's weight of the token. It runs as docs/Numerics.md's "Attention on
/// integer dots" (span=channels values): a block of kValueDotBlock tokens
/// at a time, per group each head's p times the token's slope rounded to
/// the dots' integers against the block's largest magnitude (tokens as
/// lanes), then per k tokens each lane's k codes dotted with k rounded
/// factors of its group by one dot; the tokens before the first block and
/// after the last run as f32 products (IntegerDotBlocks.cpp). 16-bit
/// factors only (i16 pair dots).
struct ValueDotPlan : DotTerms {
  /// The consecutive chunks of a vector iteration that share a group (its
  /// parameters): each block's factors are rounded once for them.
  unsigned groupChunks;
  /// The reduction body's ops that give the factors, the parameters and
  /// the prefetches, widened with the tokens as the lanes; `shifted`, if
  /// not null, the token's place that must be a multiple of the lanes in a
  /// vector's first lane (a page's token: the vector then lies in one page).
  llvm::SmallVector<mlir::Operation *> tokenOps;
  mlir::Value shifted;
  /// The body's ops that give a token's code: those that the tokens of a
  /// vector of the lanes share (the page's lookup, where a vector lies in
  /// one page) with those they read, run once at its first token, and the
  /// others, once a token. Each in the body's order.
  llvm::SmallVector<mlir::Operation *> codeOpsOfRun, codeOpsOfToken;
  /// Where a token's code is `(word >> shift) & (2^bits - 1)`, the word one
  /// the lanes share and the shift known in each lane (a code of up to 8
  /// bits in one word): the word, which codeOpsOfToken then give, and each
  /// lane's shift. A pair of tokens' codes of every chunk are then one byte
  /// shuffle of their words, a shift and a mask a chunk (unpackHalves), not
  /// each token's word broadcast, shifted and masked.
  mlir::Value codeWord;
  llvm::SmallVector<unsigned> codeShifts;
  /// Where the chunks' words of a token are consecutive elements of one
  /// memref (chunk c's at the first chunk's index + c): the load of the
  /// word. A token's words of every chunk are then one vector load.
  mlir::memref::LoadOp codeWordLoad;
  /// Scratch of a block: each group's and head's rounded factors (the
  /// dots' integers, groups x R x kValueDotBlock), and the same as packs of
  /// k (i32).
  mlir::Value rounded, roundedPacks;
};

/// The shift of `code` where it is `(word >> shift) & (2^bits - 1)` of an
/// i32 word, `bits` at most 8 (a code within its word); none otherwise.
mlir::arith::ShRUIOp matchShiftedWord(mlir::Value code, unsigned bits);

/// The tokens of a block of ValueDotPlan: two vectors of 16 lanes, a
/// number of rounded factors whose i32 sums cannot overflow for codes of
/// up to 8 bits (docs/Numerics.md).
constexpr int64_t kValueDotBlock = 32;

/// Block-local memory at the start of `op`'s function for `elements`
/// factors rounded to `dots`' integers: the factors (IntegerDotPlan's and
/// ValueDotPlan's `rounded`) and the same as packs of k (`roundedPacks`).
std::pair<mlir::Value, mlir::Value> allocateRoundedFactors(mlir::OpBuilder &b,
                                                           mlir::Operation *op,
                                                           IntegerDots dots,
                                                           int64_t elements);

/// The widest lane stride of a StridedLoad. In a loop in general, 2 (a
/// span=tokens group's 2 words of 2-bit codes): the vector reads stride x
/// the lanes' elements, and a loop over rows of many words each is better
/// vectorized around (its rows' elements as the lanes). In a loop around a
/// reduction, which nothing around takes as lanes instead, 4 (a channel's
/// span=tokens group of words of codes of up to 4 bits).
constexpr int64_t kMaxLoadStride = 2;
constexpr int64_t kMaxLoadStrideAround = 4;

/// Classifies the ops of a loop body for vectorization over `lanes` of
/// induction variable `iv`, its strided loads at most `maxLoadStride`
/// elements a lane apart: `varying` holds the values that differ between
/// lanes.
class Vectorizer {
public:
  Vectorizer(mlir::Value iv, unsigned lanes,
             int64_t maxLoadStride = kMaxLoadStride)
      : iv(iv), lanes(lanes), maxLoadStride(maxLoadStride), ivAlign(lanes) {
    varying.insert(iv);
  }

  /// Assumes `value`, `iv + k` for a k the lanes share, a multiple of
  /// `alignment` (of the lanes) in the first lane (a loop peeled to make it
  /// so), in place of the induction variable.
  void assumeAligned(mlir::Value value, int64_t alignment) {
    aligned = value;
    alignedTo = alignment;
    ivAlign = 1;
  }
  /// Takes a 1-D `scf.parallel` reduction in the body as a Loop: its
  /// iterations in order, its sums carried as vectors.
  void serializeReductions() { serialReductions = true; }
  /// The plan of `reduction` (a Loop of the analyzed body) on `dots`,
  /// scratch not yet given; none where its sums are not such dots or their
  /// i32 sums could overflow.
  std::optional<IntegerDotPlan>
  matchIntegerDots(mlir::scf::ParallelOp reduction, IntegerDots dots) const;
  /// Widens `plan`'s reduction on its integer dots (16 lanes).
  void useIntegerDots(IntegerDotPlan plan) { integerDots = std::move(plan); }
  /// `plan`'s CodeWords for a vector iteration of `chunks` chunks of the
  /// lanes (after analyze()); none where its codes are not such.
  std::optional<IntegerDotPlan::CodeWords>
  matchCodeWords(const IntegerDotPlan &plan, unsigned chunks) const;
  /// The plan of `reduction` (a Loop of the analyzed body, over a run of
  /// tokens) on `dots`, a vector iteration `chunks` chunks of the lanes,
  /// scratch not yet given; none where its sums are not such dots, its
  /// factors and parameters cannot be the tokens' lanes, or their i32 sums
  /// could overflow.
  std::optional<ValueDotPlan> matchValueDots(mlir::scf::ParallelOp reduction,
                                             IntegerDots dots,
                                             unsigned chunks) const;
  /// Widens `plan`'s reduction on its integer dots (16 lanes).
  void useValueDots(ValueDotPlan plan) { valueDots = std::move(plan); }
  /// Analyzes `ops` (some of a block's, in its order) and returns those
  /// whose values every lane shares; none where they cannot be analyzed.
  llvm::SmallVector<mlir::Operation *>
  getUniformOps(llvm::ArrayRef<mlir::Operation *> ops);
  /// The values of the body, by op in order, whose lane forms are `iv + k`
  /// for a k the lanes share (after analyze()).
  llvm::SmallVector<mlir::Value> getShiftedInductions(mlir::Block &block) const;

  /// Whether every op of `block` but its terminator can be widened;
  /// records what varies.
  bool analyze(mlir::Block &block);
  /// The same for `ops`, some of a block's in its order.
  bool analyze(llvm::ArrayRef<mlir::Operation *> ops);
  /// Clones `block`'s ops but its terminator at `b` widened, once for each
  /// chunk of lanes. The chunks' copies of a loop are one loop carrying
  /// each chunk's values (unroll and jam): a pass over a loop's iterations
  /// serves them all.
  void widen(mlir::Block &block, mlir::OpBuilder &b,
             mlir::MutableArrayRef<LaneChunk> chunks);

private:
  Widening classify(mlir::Operation *op) const;
  /// Whether `op` computes the value assumed aligned.
  bool isAligned(mlir::Operation &op) const;
  /// The lane form of `value`, where its arithmetic is known.
  std::optional<LaneForm> getForm(mlir::Value value) const;
  /// The lane form of `op`'s result, from its operands'.
  std::optional<LaneForm> computeForm(mlir::Operation *op) const;
  /// The lane stride of `op`'s last index, where `op` is a load or store
  /// of a row (unit stride) at a last index with a lane form and other
  /// indices the lanes share.
  std::optional<int64_t> getAccessStride(mlir::Operation *op) const;
  /// Whether `value`, a LaneIndex op's, is read as the lanes' vector, not
  /// only at its first lane (by Uniform ops and as the last index of a
  /// lane access).
  bool needsLanes(mlir::Value value) const;
  /// `value`'s first lane, a scalar (after widen() has seen its op).
  mlir::Value firstLaneOf(LaneChunk &chunk, mlir::Value value) const;
  /// Whether `op`, a vector.store, is a RowStore.
  bool isRowStore(mlir::vector::StoreOp op) const;
  /// Whether `op` reads the same values in every chunk.
  bool isSharedByChunks(mlir::Operation &op,
                        llvm::ArrayRef<LaneChunk> chunks) const;
  /// Maps the induction variable in `chunk` to its lanes' own indices,
  /// `first + l` in lane l, once.
  void mapLaneIndices(mlir::OpBuilder &b, mlir::Location loc,
                      LaneChunk &chunk) const;
  void widenOp(mlir::Operation &op, mlir::OpBuilder &b, LaneChunk &chunk);
  /// An scf.for, or an scf.parallel reduction run in order.
  void widenLoop(mlir::Operation *loop, mlir::OpBuilder &b,
                 mlir::MutableArrayRef<LaneChunk> chunks);
  /// The same over [lower, upper) (mapped already), its sums carried from
  /// `inits` (vectors, each chunk's in turn), or, where empty, its own.
  void widenLoop(mlir::Operation *loop, mlir::OpBuilder &b,
                 mlir::MutableArrayRef<LaneChunk> chunks, mlir::Value lower,
                 mlir::Value upper, mlir::ValueRange inits);
  /// The most consecutive chunks of lanes, a divisor of `chunks`, that
  /// share `roots` (values of `reduction`'s body, which is in the
  /// analyzed one): the lanes of as many chunks compute them alike.
  unsigned getChunksSharing(mlir::scf::ParallelOp reduction,
                            mlir::ValueRange roots, unsigned chunks) const;
  /// The word and each lane's shift of `code`, where it is `(word >> shift)
  /// & (2^bits - 1)`, the word the same in every lane, the shift known in
  /// each and the code within the word, `bits` at most 8.
  std::optional<std::pair<mlir::Value, llvm::SmallVector<unsigned>>>
  matchCodeInWord(mlir::Value code, unsigned bits) const;
  /// The load of `word` where each of a vector iteration's `chunks` chunks
  /// loads its word from the same memref, chunk c at the first chunk's
  /// index + c (a token's row of code words, a word a chunk).
  mlir::memref::LoadOp matchWordsInRow(mlir::Value word, unsigned chunks) const;
  /// Lane `lane` of a vector iteration of `chunks` chunks of the lanes, as
  /// getExactIndex takes it: the value assumed aligned, or else the
  /// induction variable of a loop from 0 by 1, a multiple of the
  /// iteration's lanes in its first lane, plus `lane`.
  std::optional<ExactLane> getExactLane(unsigned chunks, int64_t lane) const;
  /// `reduction`'s sums as DotTerms on `dots`, where they are such.
  std::optional<DotTerms> matchDotTerms(mlir::scf::ParallelOp reduction,
                                        IntegerDots dots) const;
  void widenIntegerDots(mlir::OpBuilder &b,
                        mlir::MutableArrayRef<LaneChunk> chunks);
  /// IntegerDotPlan's k codes a lane of each chunk at the k channels from
  /// `channel`, from one vector load of its CodeWords.
  llvm::SmallVector<mlir::Value>
  packCodeWords(mlir::OpBuilder &b, mlir::MutableArrayRef<LaneChunk> chunks,
                mlir::Value channel);
  void widenValueDots(mlir::OpBuilder &b,
                      mlir::MutableArrayRef<LaneChunk> chunks);
  /// One block of widenValueDots: the chunks' sums `sums` (each chunk's R
  /// in turn) plus the block's from token `first`.
  void widenValueDotBlock(mlir::OpBuilder &b,
                          mlir::MutableArrayRef<LaneChunk> chunks,
                          mlir::Value first,
                          llvm::MutableArrayRef<mlir::Value> sums);
  /// One step of widenValueDotBlock's pass over its tokens: the chunks'
  /// dots `sums` (each chunk's R in turn) plus those of the k tokens from
  /// the block's `offset`-th, their vector's codeOpsOfRun mapped already.
  llvm::SmallVector<mlir::Value>
  widenValueDotStep(mlir::OpBuilder &b, mlir::MutableArrayRef<LaneChunk> chunks,
                    mlir::Value first, mlir::Value offset,
                    mlir::ValueRange sums);
  /// What ValueDotPlan reads of token `token` for `chunk`'s lanes: the word
  /// its codes share (`codeWord`) where it has one, else the codes.
  mlir::Value widenCodeSource(mlir::OpBuilder &b, LaneChunk &chunk,
                              mlir::Value token);
  /// The k codes a lane of each chunk, of the k tokens from `token`, from one
  /// byte vector of the tokens' and chunks' shared words (`codeWord`).
  llvm::SmallVector<mlir::Value>
  packCodesOfWords(mlir::OpBuilder &b, mlir::MutableArrayRef<LaneChunk> chunks,
                   mlir::Value token);
  /// The same, each token's codes shifted into their place.
  llvm::SmallVector<mlir::Value>
  packCodesByToken(mlir::OpBuilder &b, mlir::MutableArrayRef<LaneChunk> chunks,
                   mlir::Value token);
  void widenRowStore(mlir::vector::StoreOp op, mlir::OpBuilder &b,
                     LaneChunk &chunk);
  /// `value` (mapped) as a vector of `lanes`, broadcast if it is scalar.
  mlir::Value asVector(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value value) const;
  mlir::Type vectorOf(mlir::Type type) const {
    return mlir::VectorType::get({lanes}, type);
  }

  mlir::Value iv;
  unsigned lanes;
  int64_t maxLoadStride;
  /// The alignment of the induction variable's first lane.
  int64_t ivAlign;
  /// The value assumed a multiple of `alignedTo` in the first lane, if any.
  mlir::Value aligned;
  int64_t alignedTo = 0;
  bool serialReductions = false;
  std::optional<IntegerDotPlan> integerDots;
  std::optional<ValueDotPlan> valueDots;
  llvm::DenseSet<mlir::Value> varying;
  /// The lane forms of the body's integer arithmetic of `iv`.
  llvm::DenseMap<mlir::Value, LaneForm> forms;
};

/// scf.parallel over [0, N) with step 1, one dimension, as an scf.for over
/// vectors of `lanes`, N a multiple of them or, `withRest`, any: the last
/// N mod lanes iterations then run one by one. Its reductions (each a
/// combiner with an identity) are carried as vectors of each lane's share,
/// from the identity, whose lanes are then combined with the loop's initial
/// value (and the rest's). Each vector iteration runs `chunks` chunks of
/// lanes, their loops jammed (Vectorizer::widen), its strided loads at
/// most `maxLoadStride` elements a lane apart. Fails, changing nothing,
/// where the body is not elementwise.
/// `configure`, if given, is called with the Vectorizer before it analyzes
/// the body (to widen a loop in it in a form of its own).
mlir::LogicalResult
vectorizeLoop(mlir::PatternRewriter &rewriter, mlir::scf::ParallelOp loop,
              unsigned lanes, bool withRest = false, unsigned chunks = 1,
              int64_t maxLoadStride = kMaxLoadStride,
              llvm::function_ref<void(Vectorizer &)> configure = nullptr);

/// Whether the 1-D `loop` is over [0, N) in steps of 1, N known only at run
/// time.
bool isRunTimeLoop(mlir::scf::ParallelOp loop);

} // namespace kvq

#endif // KVQ_CODEGEN_LIB_TRANSFORMS_VECTORIZER_H
