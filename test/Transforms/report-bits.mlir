// RUN: kvq-opt %s -split-input-file --kvq-report-bits="tokens=300" -o /dev/null | FileCheck %s

// SKVQ Table 4: K2V2 with FP8 E4M3 scale and zero-point, group 64 and 32.
// CHECK-LABEL: kvq.cache @skvq_g64
// CHECK-NEXT: code-bits = 2{{$}}
// CHECK-NEXT: storage-bits = 2.25{{$}}
kvq.cache @skvq_g64 model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 64, params = f8E4M3FN, clip = 0.92>
  }
  kvq.values window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 64, params = f8E4M3FN, clip = 0.92>
  }
}

// -----

// CHECK-LABEL: kvq.cache @skvq_g32
// CHECK-NEXT: code-bits = 2{{$}}
// CHECK-NEXT: storage-bits = 2.5{{$}}
kvq.cache @skvq_g32 model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, params = f8E4M3FN, clip = 0.92>
  }
  kvq.values window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, params = f8E4M3FN, clip = 0.92>
  }
}

// -----

// SKVQ's "1.5-bit" values are ternary codes stored in 2 bits: they cost 2.
// CHECK-LABEL: kvq.cache @skvq_ternary_values
// CHECK-NEXT: code-bits = 2{{$}}
// CHECK-NEXT: storage-bits = 2.125{{$}}
kvq.cache @skvq_ternary_values model <layers = 32, heads = 32, kv_heads = 32, head_dim = 128, dtype = f16> page 128 {
  kvq.keys window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128, params = f8E4M3FN, clip = 0.92>
  }
  kvq.values window <sink = 5, recent = 128, flush = 1> {
    kvq.layers 0 to 32 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 128, params = f8E4M3FN, levels = 3, clip = 0.92>
  }
}

// -----

// 3-bit codes in groups of 24 do not fill 32-bit words: 72 bits take 96.
// CHECK-LABEL: kvq.cache @padded_3bit
// CHECK-NEXT: code-bits = 4{{$}}
// CHECK-NEXT: storage-bits = 5.33333{{$}}
kvq.cache @padded_3bit model <layers = 1, heads = 1, kv_heads = 1, head_dim = 96, dtype = f16> page 24 {
  kvq.keys window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 24>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 24>
  }
}

// -----

// Exact bytes at T = 300 for a small cache, worked by hand (4 slices =
// 2 layers x 2 kv-heads per tensor):
//  keys: sink 4, recent 32, flush 64: of the 296 tokens past the sink,
//    (296 - 32) / 64 * 64 = 256 are quantized: 2 pages of 128 tokens. A page
//    of one slice holds 128/32 x 64 = 256 groups of 32 2-bit codes (8 bytes)
//    with 2 f16 params (4 bytes): codes 4 x 2 x 2048 = 16384, params 8192.
//  values: sym 4-bit, span = channels, groups of 16, recent 128, flush 64:
//    (296 - 128) / 64 * 64 = 128 quantized, 1 page; a page holds 128 x 4
//    groups of 8 bytes with one 2-byte scale. Layer 1 reuses layer 0's codes:
//    codes 2 x 1 x 4096 = 8192, params 4 x 1 x 1024 = 4096.
//  full precision, at capacity sink + recent + flush - 1: keys 99 and values
//    195 tokens x 64 channels x 2 bytes x 4 slices = 50688 + 99840.
//  pools: layer 1 only, 2 kv-heads x ((3 + 5) entries x 2 x 128 bytes of
//    key and value + (4 + 3 + 5) x 4 bytes of index) = 4192.
//  metadata: block tables (2 + 1 pages) x 4, key norms 2 x 2 x 64 x 4: 1036.
//  code bits: keys 2, 2; values 4, 0 (shared): 2. Storage: keys 2 + 32/32,
//  values 4 + 16/16 and 0 + 16/16: (3 + 3 + 5 + 1) / 4 = 3.
// CHECK-LABEL: kvq.cache @small
// CHECK-NEXT: code-bits = 2{{$}}
// CHECK-NEXT: storage-bits = 3{{$}}
// CHECK-NEXT: bytes(tokens = 300) = 192620
// CHECK-NEXT:   codes = 24576
// CHECK-NEXT:   params = 12288
// CHECK-NEXT:   full-precision = 150528
// CHECK-NEXT:   pools = 4192
// CHECK-NEXT:   metadata = 1036
// CHECK-NEXT: bits(tokens = 300) = 10.0323
kvq.cache @small model <layers = 2, heads = 4, kv_heads = 2, head_dim = 64, dtype = f16> page 128 pool <capacity = 3, extra = 5, first_layer = 1> {
  kvq.keys window <sink = 4, recent = 32, flush = 64> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, key_norm = true>
  }
  kvq.values window <sink = 4, recent = 128, flush = 64> share <from = 0> {
    kvq.layers 0 to 2 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 16>
  }
}
