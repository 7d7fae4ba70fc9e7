// kvq-tune --budget 4.2 --tokens 1024 --base kivi-2bit --seed 0
// calibration KL 0.1440 on /usr/share/common-licenses/MPL-1.1
// code-bits = 1.5333, storage-bits = 2.5000
// bytes(tokens = 1024) = 6187832 (codes 1978368, params 1247232, full_precision 2960640, pools 0, metadata 1592) = 4.1964 bits per element
kvq.cache @tuned model <layers = 30, heads = 9, kv_heads = 3, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <recent = 1, flush = 128> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = sym, span = channels, group = 64, key_norm = true>
    kvq.layers 1 to 2 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 2 to 4 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 4 to 8 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 8 to 11 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 11 to 13 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 13 to 16 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 16 to 18 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 18 to 19 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 19 to 20 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 20 to 21 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 21 to 22 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 22 to 23 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 23 to 24 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 24 to 25 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 25 to 27 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 27 to 28 : #kvq.quant<bits = 2, mode = sym, span = channels, group = 64, key_norm = true>
    kvq.layers 28 to 29 : #kvq.quant<bits = 2, mode = asym, span = tokens, group = 32>
    kvq.layers 29 to 30 : #kvq.quant<bits = 1, mode = asym, span = tokens, group = 32>
  }
  kvq.values window <recent = 129, flush = 1> {
    kvq.layers 0 to 17 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
    kvq.layers 17 to 18 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 18 to 20 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
    kvq.layers 20 to 21 : #kvq.quant<bits = 2, mode = asym, span = channels, group = 32, rotate = hadamard, rotate_seed = 1>
    kvq.layers 21 to 30 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
  }
}
