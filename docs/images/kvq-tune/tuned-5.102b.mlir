// kvq-tune --budget 7346.3046875B --tokens 1024 --base kivi-2bit --seed 0
// calibration KL 0.0116 on /usr/share/common-licenses/MPL-1.1
// code-bits = 2.6167, storage-bits = 3.5333
// bytes(tokens = 1024) = 7520312 (codes 3376128, params 1182720, full_precision 2960640, pools 0, metadata 824) = 5.1000 bits per element
kvq.cache @tuned model <layers = 30, heads = 9, kv_heads = 3, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 1 to 2 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 2 to 3 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 3 to 4 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 4 to 5 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 5 to 6 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32>
    kvq.layers 6 to 7 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 7 to 8 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 8 to 9 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32>
    kvq.layers 9 to 11 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 11 to 12 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 12 to 14 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 14 to 15 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32>
    kvq.layers 15 to 16 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 16 to 17 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32>
    kvq.layers 17 to 18 : #kvq.quant<bits = 4, mode = asym, span = tokens, group = 32>
    kvq.layers 18 to 19 : #kvq.quant<bits = 4, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 19 to 20 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 20 to 21 : #kvq.quant<bits = 4, mode = asym, span = tokens, group = 32>
    kvq.layers 21 to 23 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32>
    kvq.layers 23 to 25 : #kvq.quant<bits = 4, mode = asym, span = tokens, group = 32>
    kvq.layers 25 to 26 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 26 to 27 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32>
    kvq.layers 27 to 28 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 28 to 29 : #kvq.quant<bits = 3, mode = asym, span = tokens, group = 32>
    kvq.layers 29 to 30 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 7 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 7 to 8 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
    kvq.layers 8 to 11 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 11 to 12 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
    kvq.layers 12 to 15 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 15 to 16 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 16 to 17 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 17 to 21 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 21 to 23 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 23 to 25 : #kvq.quant<bits = 3, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 25 to 28 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 28 to 29 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32>
    kvq.layers 29 to 30 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
  }
}
