func.func @f() {
  %0 = moe.weight "w" : tensor<4xbf16
