// moe-split-experts: each moe.experts becomes moe.dispatch, moe.expert_rows
// and moe.combine (P = top-k + always-on picks rows per token), keeping the
// stacks and `grouped`; moe-to-plan lowers them to the dispatch,
// expert_rows and combine kernels. The printed IR parses again. The plans
// it gives compute the fused kernel's bits: test/e2e/split-experts.test.
// RUN: moe-opt %s --moe-split-experts | FileCheck %s
// RUN: moe-opt %s --moe-split-experts | moe-opt | FileCheck %s
// RUN: moe-opt %s --moe-split-experts --moe-to-plan | FileCheck %s --check-prefix=PLAN

// A DeepSeek-shaped block: top-2 of 6 routed experts and one always-on
// expert folded in (shared 1): P = 3.
// CHECK-LABEL: func.func @forward
// CHECK: %[[W:.*]], %[[I:.*]] = moe.router
// CHECK-NOT: moe.experts
// CHECK: %[[ROWS:.*]], %[[SLOTS:.*]], %[[MAP:.*]] = moe.dispatch %[[X:.*]] routed(%[[I]]) experts 6 shared 1 : (tensor<?x32xf32>, tensor<?x2xi32>) -> (tensor<?x3x32xf32>, tensor<?x3xi32>, tensor<?x3xi32>)
// CHECK-NEXT: %[[Y:.*]] = moe.expert_rows %[[ROWS]] slots(%[[SLOTS]]) weights(%[[GU:.*]], %[[D:.*]]) {grouped} : (tensor<?x3x32xf32>, tensor<?x3xi32>, tensor<7x32x32xbf16>, tensor<7x32x16xbf16>) -> tensor<?x3x32xf32>
// CHECK-NEXT: %[[OUT:.*]] = moe.combine %[[Y]] map(%[[MAP]]) routed(%[[W]], %[[I]]) : (tensor<?x3x32xf32>, tensor<?x3xi32>, tensor<?x2xf32>, tensor<?x2xi32>) -> tensor<?x32xf32>
// Mixtral-shaped, unfused stacks, no always-on expert: P = top-k.
// CHECK: moe.dispatch %{{.*}} routed(%{{.*}}) experts 8 : (tensor<?x32xf32>, tensor<?x2xi32>) -> (tensor<?x2x32xf32>, tensor<?x2xi32>, tensor<?x2xi32>)
// CHECK-NEXT: moe.expert_rows %{{.*}} slots(%{{.*}}) weights(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<?x2x32xf32>, tensor<?x2xi32>, tensor<8x16x32xbf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<?x2x32xf32>
// CHECK-NEXT: %[[LAST:.*]] = moe.combine
// CHECK-NEXT: return %[[LAST]]

// PLAN: %[[ROWS:.*]] = plan.alloc : memref<?x3x32xf32>
// PLAN-NEXT: %[[SLOTS:.*]] = plan.alloc : memref<?x3xi32>
// PLAN-NEXT: %[[MAP:.*]] = plan.alloc : memref<?x3xi32>
// PLAN-NEXT: plan.launch dispatch ins(%{{.*}}, %[[I:.*]] : memref<?x32xf32>, memref<?x2xi32>) outs(%[[ROWS]], %[[SLOTS]], %[[MAP]] : memref<?x3x32xf32>, memref<?x3xi32>, memref<?x3xi32>) params #plan.dispatch<num_experts = 6, num_shared = 1>
// The rows' kernel counts every stacked expert as its own.
// PLAN: %[[Y:.*]] = plan.alloc : memref<?x3x32xf32>
// PLAN-NEXT: plan.launch expert_rows ins(%[[ROWS]], %[[SLOTS]], %{{.*}}, %{{.*}} : memref<?x3x32xf32>, memref<?x3xi32>, memref<7x32x32xbf16>, memref<7x32x16xbf16>) outs(%[[Y]] : memref<?x3x32xf32>) params #plan.experts<num_experts = 7, intermediate = 16, fused_gate_up = true, num_shared = 0, grouped = true>
// PLAN-NEXT: %[[OUT:.*]] = plan.alloc : memref<?x32xf32>
// PLAN-NEXT: plan.launch combine ins(%[[Y]], %[[MAP]], %{{.*}}, %[[I]] : memref<?x3x32xf32>, memref<?x3xi32>, memref<?x2xf32>, memref<?x2xi32>) outs(%[[OUT]] : memref<?x32xf32>)
// PLAN: plan.launch dispatch {{.*}} params #plan.dispatch<num_experts = 8, num_shared = 0>
// PLAN: plan.launch expert_rows {{.*}} params #plan.experts<num_experts = 8, intermediate = 16, fused_gate_up = false, num_shared = 0, grouped = false>
// PLAN: plan.launch combine
module {
func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>) -> tensor<?x32xf32> {
  %emb = moe.weight "embed" : tensor<96x32xbf16>
  %x = moe.embedding %tokens, %emb : (tensor<?xi32>, tensor<96x32xbf16>) -> tensor<?x32xf32>
  %g = moe.weight "mlp.gate.weight" : tensor<6x32xbf16>
  %rw, %ri = moe.router %x, %g softmax greedy top_k 2 norm false : (tensor<?x32xf32>, tensor<6x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %gu = moe.weight "mlp.experts.{e}.gate_proj.weight" concat ["mlp.experts.{e}.up_proj.weight"] append ["mlp.shared_experts.gate_proj.weight", "mlp.shared_experts.up_proj.weight"] : tensor<7x32x32xbf16>
  %d = moe.weight "mlp.experts.{e}.down_proj.weight" append ["mlp.shared_experts.down_proj.weight"] : tensor<7x32x16xbf16>
  %e = moe.experts %x routed(%rw, %ri) weights(%gu, %d) {shared = 1 : i64, grouped} : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<7x32x32xbf16>, tensor<7x32x16xbf16>) -> tensor<?x32xf32>
  %g2 = moe.weight "mlp2.gate.weight" : tensor<8x32xbf16>
  %sw, %si = moe.router %e, %g2 softmax greedy top_k 2 norm true : (tensor<?x32xf32>, tensor<8x32xbf16>) -> (tensor<?x2xf32>, tensor<?x2xi32>)
  %w1 = moe.weight "mlp2.experts.{e}.w1.weight" : tensor<8x16x32xbf16>
  %w3 = moe.weight "mlp2.experts.{e}.w3.weight" : tensor<8x16x32xbf16>
  %w2 = moe.weight "mlp2.experts.{e}.w2.weight" : tensor<8x32x16xbf16>
  %f = moe.experts %e routed(%sw, %si) weights(%w1, %w3, %w2) : (tensor<?x32xf32>, tensor<?x2xf32>, tensor<?x2xi32>, tensor<8x16x32xbf16>, tensor<8x16x32xbf16>, tensor<8x32x16xbf16>) -> tensor<?x32xf32>
  return %f : tensor<?x32xf32>
}
}
