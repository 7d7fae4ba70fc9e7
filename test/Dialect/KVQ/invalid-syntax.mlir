// RUN: kvq-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{duplicate or unknown struct parameter name: bitz}}
#a = #kvq.quant<bitz = 2, mode = asym, span = tokens, group = 32>

// -----

// expected-error @+1 {{duplicate or unknown struct parameter name: bits}}
#a = #kvq.quant<bits = 2, bits = 3, mode = asym, span = tokens, group = 32>

// -----

// expected-error @+1 {{struct is missing required parameter: span}}
#a = #kvq.quant<bits = 2, mode = asym, group = 32>

// -----

// expected-error @+2 {{expected ::kvq::Mode to be one of: asym, sym, hybrid}}
// expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'mode'}}
#a = #kvq.quant<bits = 2, mode = linear, span = tokens, group = 32>

// -----

// expected-error @+1 {{params must be f32, f16, bf16 or f8E4M3FN, got 'i8'}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, params = i8>

// -----

// expected-error @+1 {{levels must be in [2, 4] for 2-bit codes, got 5}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, levels = 5>

// -----

// expected-error @+1 {{levels are only defined for 'asym' mode}}
#a = #kvq.quant<bits = 2, mode = sym, span = tokens, group = 32, levels = 3>

// -----

// expected-error @+1 {{eta calibration is only defined for 'asym' mode}}
#a = #kvq.quant<bits = 2, mode = sym, span = tokens, group = 32, eta = 0.045>

// -----

// expected-error @+1 {{clipping is only defined for 'asym' mode}}
#a = #kvq.quant<bits = 2, mode = hybrid, span = tokens, group = 32, clip = 0.9>

// -----

// expected-error @+1 {{group size must be in [1, 16384], got 0}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 0>

// -----

// expected-error @+2 {{division by zero}}
// expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'eta'}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 1/0>

// -----

// An unsigned parse read -6 as 2^64 - 6: eta = 1/-6 was 5.4e-20.
// expected-error @+2 {{a denominator must be positive, got -6}}
// expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'eta'}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 1/-6>

// -----

// And 1/-18446744073709551610 was 1/6.
// expected-error @+2 {{integer value too large}}
// expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'eta'}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 1/-18446744073709551610>

// -----

// expected-error @+2 {{a denominator must be positive, got -2}}
// expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'clip'}}
#a = #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, clip = 1/-2>

// -----

// expected-error @+2 {{expected one sign}}
// expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'eta'}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = --1/6>

// -----

// expected-error @+2 {{pre_rope dims must be even and positive, got 3}}
// expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'pre_rope'}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.rope<theta = 10000.0, dims = 3, style = half>>

// -----

// expected-error @+1 {{pre_rope dims must be even and positive, got 0}}
#a = #kvq.rope<theta = 10000.0, dims = 0, style = half>

// -----

// expected-error @+1 {{pre_rope theta must be finite and above 1, got 0.000000e+00 : f64}}
#a = #kvq.rope<theta = 0.0, dims = 64, style = half>

// -----

// expected-error @+2 {{expected ::kvq::RopeStyle to be one of: half, interleaved}}
// expected-error @+1 {{failed to parse KVQ_RopeAttr parameter 'style'}}
#a = #kvq.rope<theta = 10000.0, dims = 64, style = neox>

// -----

// expected-error @+1 {{rope scaling factor must be finite and positive, got -2.000000e+00 : f64}}
#a = #kvq.rope_scaling<kind = linear, factor = -2.0>

// -----

// expected-error @+1 {{linear rope scaling takes only a factor}}
#a = #kvq.rope_scaling<kind = linear, factor = 2.0, original_max_position = 8192>

// -----

// expected-error @+1 {{llama3 rope scaling needs positive low_freq_factor, high_freq_factor and original_max_position}}
#a = #kvq.rope_scaling<kind = llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0>

// -----

// expected-error @+1 {{llama3 rope scaling needs low_freq_factor below high_freq_factor}}
#a = #kvq.rope_scaling<kind = llama3, factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 4.0, original_max_position = 8192>

// -----

// expected-error @+1 {{flush unit must be positive}}
#w = #kvq.window<recent = 4, flush = 0>

// -----

// expected-error @+1 {{outlier pool capacity must be positive}}
#p = #kvq.pool<capacity = 0, extra = 32>

// -----

// expected-error @+1 {{a sharing group needs at least 2 layers, got 1}}
#s = #kvq.share<from = 0, group = 1>

// -----

// expected-error @+1 {{owner member 2 is outside a group of 2 layers}}
#s = #kvq.share<from = 0, owner = 2>

// -----

// expected-error @+1 {{dtype must be f16, bf16 or f32, got 'i8'}}
#m = #kvq.model<layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = i8>

// -----

// expected-error @+1 {{softmax scale must be positive}}
#m = #kvq.model<layers = 1, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16, scale = 0.0>

// -----

// expected-error @+1 {{model shape is out of range (at most 4096 layers, 4096 heads and head_dim 16384)}}
#m = #kvq.model<layers = 4000000000, heads = 1, kv_heads = 1, head_dim = 64, dtype = f16>

// -----

// An optional key that is written is checked: absent is leaving it out.
// expected-error @+1 {{levels must be in [2, 4] for 2-bit codes, got 0}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, levels = 0>

// -----

// expected-error @+1 {{eta = 0 is no calibration: leave eta out for plain asym}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, eta = 0>

// -----

// Every key takes a value: `key_norm = true`.
// expected-error @+1 {{expected '='}}
#a = #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm>

// -----

// expected-error @+2 {{invalid kind of attribute specified}}
// expected-error @+1 {{failed to parse KVQ_QuantAttr parameter 'pre_rope'}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, pre_rope = #kvq.window<recent = 4, flush = 1>>

// -----

// expected-error @+1 {{clip must be a float or an elements attribute}}
#a = #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, clip = "0.9">
