// RUN: kvq-opt %s -split-input-file -verify-diagnostics --kvq-plan-kernels -o /dev/null

// The kernels read a cache's page layout from its kvq.layout, which must be
// the layout its schemes give (kvq/ABI/CacheLayout.h): the rule the runtime
// holds a manifest to.

// The layout kvq-assign-layout attached reads back.
kvq.cache @c model <layers = 1, heads = 2, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.layout = #kvq.layout<page_tokens = 16, split_tokens = 512, split_granule = 16, dtype_bytes = 2, keys = <window_capacity = 15, page_bytes = 256, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 256, words_per_group = 1, groups_per_page = 32, param_bytes = 2, codes_bytes = 128, scales_offset = 128, zeros_offset = 192>]>, values = <window_capacity = 0, page_bytes = 192, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 192, words_per_group = 2, groups_per_token = 1, groups_per_page = 16, param_bytes = 2, codes_bytes = 128, scales_offset = 128, zeros_offset = 160>]>>} {
  kvq.keys window <recent = 0, flush = 16> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 16>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// -----

// A slice that obeys every rule of a slice but is not its scheme's: the
// kernels would address other pages than the runtime reads.
kvq.cache @c model <layers = 1, heads = 2, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.layout = #kvq.layout<page_tokens = 16, split_tokens = 512, split_granule = 16, dtype_bytes = 2, keys = <window_capacity = 15, page_bytes = 256, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 256, words_per_group = 1, groups_per_page = 32, param_bytes = 2, codes_bytes = 128, scales_offset = 128, zeros_offset = 192>]>, values = <window_capacity = 0, page_bytes = 192, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 192, words_per_group = 3, groups_per_token = 1, groups_per_page = 16, param_bytes = 2, codes_bytes = 128, scales_offset = 128, zeros_offset = 160>]>>} {
  kvq.keys window <recent = 0, flush = 16> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 16>
  }
  // expected-error @+1 {{'kvq.values' op kvq.layout is not the layout of layer 0's scheme: words_per_group is 3, the schemes give 2}}
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// -----

// Pages of another size.
kvq.cache @c model <layers = 1, heads = 2, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.layout = #kvq.layout<page_tokens = 16, split_tokens = 512, split_granule = 16, dtype_bytes = 2, keys = <window_capacity = 15, page_bytes = 512, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 256, words_per_group = 1, groups_per_page = 32, param_bytes = 2, codes_bytes = 128, scales_offset = 128, zeros_offset = 192>]>, values = <window_capacity = 0, page_bytes = 192, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 192, words_per_group = 2, groups_per_token = 1, groups_per_page = 16, param_bytes = 2, codes_bytes = 128, scales_offset = 128, zeros_offset = 160>]>>} {
  // expected-error @+1 {{'kvq.keys' op kvq.layout's page_bytes or window_capacity is not its schemes'}}
  kvq.keys window <recent = 0, flush = 16> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 16>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}

// -----

// Another element size.
// expected-error @+1 {{'kvq.cache' op kvq.layout is for another page size or model dtype}}
kvq.cache @c model <layers = 1, heads = 2, kv_heads = 1, head_dim = 32, dtype = f16> page 16 attributes {kvq.layout = #kvq.layout<page_tokens = 16, split_tokens = 512, split_granule = 16, dtype_bytes = 4, keys = <window_capacity = 15, page_bytes = 256, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 256, words_per_group = 1, groups_per_page = 32, param_bytes = 2, codes_bytes = 128, scales_offset = 128, zeros_offset = 192>]>, values = <window_capacity = 0, page_bytes = 192, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 192, words_per_group = 2, groups_per_token = 1, groups_per_page = 16, param_bytes = 2, codes_bytes = 128, scales_offset = 128, zeros_offset = 160>]>>} {
  kvq.keys window <recent = 0, flush = 16> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 16>
  }
  kvq.values window <recent = 0, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
  }
}
