func.func @f() {
  %0 = moe.weight "w.{e}" concat [] : tensor<4x4x4xbf16>
  return
}
