// Codes and parameters stay inside the slice.
// expected-error @+1 {{codes or parameters lie outside the 32-byte slice}}
func.func private @f() attributes {l = #kvq.slice_layout<offset = 0, slice_bytes = 32, groups_per_page = 16, param_bytes = 2, codes_bytes = 16, scales_offset = 16>}
