// A two-layer perceptron and its loss, written by hand in the memopt dialect.
//
// The equivalent PyTorch module (forward returns the loss):
//
//   class MLP(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.fc1 = nn.Linear(64, 128)
//           self.fc2 = nn.Linear(128, 10)
//
//       def forward(self, x, y):
//           return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y)
//
// called with x: float32[32, 64] and y: int64[32] (class indices in [0, 10)).
// nn.Linear keeps its weight as [out, in]: y = x @ W^T + b is a matmul with
// `transpose_rhs` and the add of the bias broadcast over the batch.

func.func @forward(
    %x: tensor<32x64xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<32xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %fc1_w: tensor<128x64xf32> {memopt.role = "param", memopt.name = "fc1.weight"},
    %fc1_b: tensor<128xf32> {memopt.role = "param", memopt.name = "fc1.bias"},
    %fc2_w: tensor<10x128xf32> {memopt.role = "param", memopt.name = "fc2.weight"},
    %fc2_b: tensor<10xf32> {memopt.role = "param", memopt.name = "fc2.bias"})
    -> tensor<f32> attributes {memopt.loss} {
  // fc1
  %0 = memopt.matmul %x, %fc1_w transpose_rhs {memopt.scope = "fc1"} : tensor<32x64xf32>, tensor<128x64xf32> -> tensor<32x128xf32>
  %1 = memopt.broadcast %fc1_b dims [1] {memopt.scope = "fc1"} : tensor<128xf32> to tensor<32x128xf32>
  %2 = memopt.add %0, %1 {memopt.scope = "fc1"} : tensor<32x128xf32>
  %3 = memopt.relu %2 {memopt.scope = ""} : tensor<32x128xf32>
  // fc2
  %4 = memopt.matmul %3, %fc2_w transpose_rhs {memopt.scope = "fc2"} : tensor<32x128xf32>, tensor<10x128xf32> -> tensor<32x10xf32>
  %5 = memopt.broadcast %fc2_b dims [1] {memopt.scope = "fc2"} : tensor<10xf32> to tensor<32x10xf32>
  %logits = memopt.add %4, %5 {memopt.scope = "fc2"} : tensor<32x10xf32>
  %loss = memopt.cross_entropy %logits, %y {memopt.scope = ""} : tensor<32x10xf32>, tensor<32xi64>
  return %loss : tensor<f32>
}
