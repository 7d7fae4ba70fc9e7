// RUN: kvq-opt %s --kvq-expand-schedule | FileCheck %s
// RUN: kvq-opt %s --kvq-expand-schedule --kvq-expand-schedule | FileCheck %s

// Ranges listed out of order come out one per layer, in layer order; sharing
// is resolved per layer and the `share` attribute is dropped.
// CHECK-LABEL: kvq.cache @schedule
// CHECK:      kvq.keys window <recent = 1, flush = 128> {
// CHECK-NEXT:   kvq.layer 0 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0.045>
// CHECK-NEXT:   kvq.layer 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0.045>
// CHECK-NEXT:   kvq.layer 2 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/6>
// CHECK-NEXT:   kvq.layer 3 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/6>
// CHECK-NEXT: }
// CHECK-NEXT: kvq.values window <recent = 129, flush = 1> {
// CHECK-NEXT:   kvq.layer 0 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>{{$}}
// CHECK-NEXT:   kvq.layer 1 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>{{$}}
// CHECK-NEXT:   kvq.layer 2 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>{{$}}
// CHECK-NEXT:   kvq.layer 3 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6> codes from 2
// CHECK-NEXT: }
kvq.cache @schedule model <layers = 4, heads = 4, kv_heads = 1, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 2 to 4 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32, eta = 1/6>
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0.045>
  }
  kvq.values window <recent = 129, flush = 1> share <from = 2> {
    kvq.layers 0 to 4 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
  }
}

// Generalised sharing: groups of 3 layers, codes stored at member 1.
// CHECK-LABEL: kvq.cache @triples
// CHECK:      kvq.values window <recent = 0, flush = 1> {
// CHECK-NEXT:   kvq.layer 0 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32> codes from 1
// CHECK-NEXT:   kvq.layer 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>{{$}}
// CHECK-NEXT:   kvq.layer 2 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32> codes from 1
// CHECK-NEXT:   kvq.layer 3 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32> codes from 4
// CHECK-NEXT:   kvq.layer 4 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>{{$}}
// CHECK-NEXT:   kvq.layer 5 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32> codes from 4
// CHECK-NEXT: }
kvq.cache @triples model <layers = 6, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16> page 64 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 6 : #kvq.full_precision
  }
  kvq.values window <recent = 0, flush = 1> share <from = 0, group = 3, owner = 1> {
    kvq.layers 0 to 6 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
