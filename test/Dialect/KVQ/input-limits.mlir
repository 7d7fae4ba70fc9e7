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
