// Slices lie inside the page.
// expected-error @+1 {{slice of layer 1 lies outside the 64-byte page}}
func.func private @f() attributes {l = #kvq.tensor_layout<window_capacity = 0, page_bytes = 64, slices = [#kvq.slice_layout<offset = 0, slice_bytes = 32>, #kvq.slice_layout<offset = 48, slice_bytes = 32>]>}
