// Slices start on 16 bytes.
// expected-error @+1 {{slice offsets and sizes must be multiples of 16 bytes}}
func.func private @f() attributes {l = #kvq.slice_layout<offset = 8, slice_bytes = 32>}
