// Code sharing reads an earlier layer.
// expected-error @+1 {{layer 0 reuses the codes of a later layer}}
func.func private @f() attributes {l = #kvq.tensor_layout<window_capacity = 0, page_bytes = 64, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 32, codes_from = 1>, #kvq.slice_layout<offset = 32, slice_bytes = 32>]>}
