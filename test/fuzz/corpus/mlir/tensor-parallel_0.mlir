



module {
  func.func @main(%x: tensor<2x4x8xf32> {smp.input = "x"},
                  %wq: tensor<8x8xf32> {smp.param = "wq"},
                  %wk: tensor<8x8xf32> {smp.param = "wk"},
                  %wv: tensor<8x8xf32> {smp.param = "wv"},
                  %wo: tensor<8x8xf32> {smp.param = "wo"},
                  %w1: tensor<16x8xf32> {smp.param = "w1"},
                  %b1: tensor<16xf32> {smp.param = "b1"},
                  %w2: tensor<8x16xf32> {smp.param = "w2"}) -> (tensor<2x4x8xf32> {smp.output = "y"}) {
    %q = smp.matmul %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("q")
    %k = smp.matmul %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("k")
    %v = smp.matmul %x, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("v")
    %qh = smp.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %kh = smp.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %vh = smp.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %qt = smp.transpose %qh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %kt = smp.transpose %kh {perm = array<i64: 0, 2, 3, 1>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %vt = smp.transpose %vh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %s = smp.matmul %qt, %kt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %p = smp.softmax %s {axis = 3 : i64} : tensor<2x2x4x4xf32>
    %o = smp.matmul %p, %vt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %ot = smp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %om = smp.reshape %ot : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %a = smp.matmul %om, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("attn_out")
    %h = smp.add %x, %a : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %f = smp.matmul %h, %w1 {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32> loc("fc1")
    %fb = smp.add %f, %b1 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
    %g = smp.gelu %fb : tensor<2x4x16xf32>
    %m = smp.matmul %g, %w2 {transpose_rhs = true} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32> loc("fc2")
    %y = smp.add %h, %m : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}