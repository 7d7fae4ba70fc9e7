// kvq-tune --budget 6671.3046875B --tokens 1024 --base innerq-hybrid --seed 0
// calibration KL 0.1444 on /usr/share/common-licenses/MPL-1.1
// code-bits = 1.9833, storage-bits = 2.7125
// bytes(tokens = 1024) = 6829112 (codes 2558976, params 940800, full_precision 3306240, pools 0, metadata 23096) = 4.6313 bits per element
kvq.cache @tuned model <layers = 30, heads = 9, kv_heads = 3, head_dim = 64, dtype = f16> page 128 {
  kvq.keys window <sink = 32, recent = 96, flush = 1> {
    kvq.layers 0 to 1 : #kvq.quant<bits = 2, mode = sym, span = channels, group = 64, key_norm = true>
    kvq.layers 1 to 4 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 4 to 5 : #kvq.quant<bits = 2, mode = sym, span = channels, group = 64, key_norm = true>
    kvq.layers 5 to 9 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 9 to 10 : #kvq.quant<bits = 2, mode = sym, span = channels, group = 64, key_norm = true>
    kvq.layers 10 to 18 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 18 to 19 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 19 to 20 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 20 to 21 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 21 to 23 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 23 to 24 : #kvq.quant<bits = 4, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 24 to 27 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 27 to 28 : #kvq.quant<bits = 2, mode = sym, span = channels, group = 64, key_norm = true>
    kvq.layers 28 to 29 : #kvq.quant<bits = 3, mode = sym, span = channels, group = 32, key_norm = true>
    kvq.layers 29 to 30 : #kvq.quant<bits = 2, mode = sym, span = channels, group = 64, key_norm = true>
  }
  kvq.values window <sink = 32, recent = 96, flush = 32> {
    kvq.layers 0 to 20 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
    kvq.layers 20 to 21 : #kvq.quant<bits = 2, mode = hybrid, span = tokens, group = 32>
    kvq.layers 21 to 30 : #kvq.quant<bits = 1, mode = asym, span = channels, group = 32, eta = 1/6>
  }
}
