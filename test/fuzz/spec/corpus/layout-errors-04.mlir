// Pages are multiples of 16 bytes.
// expected-error @+1 {{page_bytes must be a multiple of 16}}
func.func private @f() attributes {l = #kvq.tensor_layout<window_capacity = 0, page_bytes = 40, slices = []>}
