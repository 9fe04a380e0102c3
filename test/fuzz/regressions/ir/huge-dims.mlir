func.func @f(%x: tensor<?x9223372036854775807xf32>) {
  %w = moe.weight "w" : tensor<9223372036854775807xbf16>
  %n = moe.rms_norm %x, %w eps 1.0e-6 : (tensor<?x9223372036854775807xf32>, tensor<9223372036854775807xbf16>) -> tensor<?x9223372036854775807xf32>
  return
}
