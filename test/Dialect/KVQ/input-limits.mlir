// Bounds checked on the text before MLIR parses it
// (kvq/Dialect/KVQ/InputLimits.h): each hostile input fails fast with a
// located diagnostic instead of overflowing the stack or materializing it.

// 10,000 nested regions overflowed the parser's stack (ASan: deadly signal).
// RUN: %python -c "n = 10000; print('\"builtin.module\"() ({' * n + '}) : () -> ()' * n)" > %t.nested.mlir
// RUN: not kvq-opt %t.nested.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=NESTED
// NESTED: nested.mlir:1:{{[0-9]+}}: error: spec nests deeper than 256 brackets

// Nesting within the bound still parses; brackets in strings, comments and
// `->` do not count.
// RUN: %python -c "n = 60; print('// ((((((((((\n' + 'module attributes {kvq.s = \"{{((<<\"} {' * n + '}' * n)" > %t.deep.mlir
// RUN: kvq-opt %t.deep.mlir | FileCheck %s --check-prefix=DEEP
// DEEP-COUNT-60: module attributes {kvq.s = "{{[{][{]}}((<<"}

// A 50 MB spec is refused before it is read into the IR.
// RUN: %python -c "print('module {}' + ' ' * (50 << 20))" > %t.large.mlir
// RUN: not kvq-opt %t.large.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=LARGE
// LARGE: error: spec is 52428810 bytes; at most 16777216 are accepted

// A 5 MB line with an error is reported (stderr is buffered: quoting the line
// took one write per byte).
// RUN: %python -c "print('module { ' + ' ' * (5 << 20) + 'kvq.bogus }')" > %t.line.mlir
// RUN: not kvq-opt %t.line.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=LINE
// LINE: line.mlir:1:5242890: error: custom op 'kvq.bogus' is unknown

// A float literal of 50,000 digits overflowed a stack buffer in LLVM's
// decimal float parser (SIGSEGV); an integer of 100,000 digits took over a
// minute to parse. Numbers longer than 256 characters are refused where
// they start.
// RUN: %python -c "print('#a = 0.' + '9' * 50000 + ' : f64')" > %t.float.mlir
// RUN: not kvq-opt %t.float.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=FLOAT
// FLOAT: float.mlir:1:6: error: number of 50002 characters; at most 256 are accepted
// RUN: %python -c "print('module {\n' + '#a = ' + '9' * 100000 + ' : i64')" > %t.int.mlir
// RUN: not kvq-opt %t.int.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=INT
// INT: int.mlir:2:6: error: number of 100000 characters; at most 256 are accepted
// The same integer as a spec's window size (`recent = 99...`), in a spec
// that is otherwise valid: refused at the literal, in well under a second.
// RUN: %python -c "print('kvq.cache @c model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {\n  kvq.keys window <recent = ' + '9' * 100000 + ', flush = 32> {\n    kvq.layers 0 to 1 : #kvq.full_precision\n  }\n  kvq.values window <recent = 0, flush = 32> {\n    kvq.layers 0 to 1 : #kvq.full_precision\n  }\n}')" > %t.recent.mlir
// RUN: not kvq-opt %t.recent.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=RECENT
// RECENT: recent.mlir:2:29: error: number of 100000 characters; at most 256 are accepted
// RUN: %python -c "print('#a = 1.0e' + '9' * 300 + ' : f64')" > %t.exp.mlir
// RUN: not kvq-opt %t.exp.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXP
// EXP: exp.mlir:1:6: error: number of 304 characters; at most 256 are accepted
// RUN: %python -c "print('#a = 0x' + 'f' * 300 + ' : i64')" > %t.hex.mlir
// RUN: not kvq-opt %t.hex.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=HEX
// HEX: hex.mlir:1:6: error: number of 302 characters; at most 256 are accepted
// A digit run inside an identifier counts too (`x99...` in a dimension list
// is lexed as a number again).
// RUN: %python -c "print('#a = dense<0> : tensor<2x' + '9' * 300 + 'xi8>')" > %t.dim.mlir
// RUN: not kvq-opt %t.dim.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=DIM
// DIM: dim.mlir:1:26: error: number of 300 characters; at most 256 are accepted

// 256 characters still parse; digits in strings and comments do not count.
// RUN: %python -c "print('// ' + '1' * 1000 + '\nmodule attributes {kvq.f = 0.' + '5' * 254 + ' : f64, kvq.s = \"' + '7' * 1000 + '\"} {}')" > %t.long.mlir
// RUN: kvq-opt %t.long.mlir | FileCheck %s --check-prefix=LONG
// LONG: module attributes {kvq.f = 0.5555{{[0-9]*}} : f64, kvq.s = "7777

// At most 64 caches per spec, in the custom or the generic form; the 65th is
// located.
// RUN: %python -c "print(''.join('kvq.cache @c%%d model <layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 32 {\n  kvq.keys window <recent = 0, flush = 32> {\n    kvq.layers 0 to 1 : #kvq.full_precision\n  }\n  kvq.values window <recent = 0, flush = 32> {\n    kvq.layers 0 to 1 : #kvq.full_precision\n  }\n}\n' %% i for i in range(65)))" > %t.caches.mlir
// RUN: not kvq-opt %t.caches.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=CACHES
// CACHES: caches.mlir:513:1: error: spec declares more than 64 kvq.cache ops
// RUN: head -n 512 %t.caches.mlir | kvq-opt | FileCheck %s --check-prefix=CACHES64
// CACHES64-COUNT-64: kvq.cache @c
// RUN: %python -c "print('\"kvq.cache\"() ({}) : () -> ()\n' * 65)" > %t.generic.mlir
// RUN: not kvq-opt %t.generic.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=GENERIC
// GENERIC: generic.mlir:65:1: error: spec declares more than 64 kvq.cache ops
