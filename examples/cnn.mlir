// A small ResNet-style CNN and its loss, written by hand in the memopt
// dialect.
//
// The equivalent PyTorch module (forward returns the loss):
//
//   class BasicBlock(nn.Module):
//       def __init__(self, c):
//           super().__init__()
//           self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
//           self.bn1 = nn.BatchNorm2d(c)
//           self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
//           self.bn2 = nn.BatchNorm2d(c)
//
//       def forward(self, x):
//           out = F.relu(self.bn1(self.conv1(x)))
//           out = self.bn2(self.conv2(out))
//           return F.relu(out + x)
//
//   class ResNetCNN(nn.Module):
//       def __init__(self):
//           super().__init__()
//           self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
//           self.bn1 = nn.BatchNorm2d(16)
//           self.layer1 = BasicBlock(16)
//           self.pool = nn.MaxPool2d(2)
//           self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
//           self.bn2 = nn.BatchNorm2d(32)
//           self.avgpool = nn.AvgPool2d(8)
//           self.fc = nn.Linear(32, 10)
//
//       def forward(self, x, y):
//           x = F.relu(self.bn1(self.conv1(x)))  # 8x16x16x16
//           x = self.pool(self.layer1(x))        # 8x16x8x8
//           x = F.relu(self.bn2(self.conv2(x)))  # 8x32x8x8
//           x = torch.flatten(self.avgpool(x), 1)  # 8x32
//           return F.cross_entropy(self.fc(x), y)
//
// in training mode, called with x: float32[8, 3, 16, 16] and y: int64[8].
// Batch norm (eps 1e-5, momentum 0.1) normalises with the batch's statistics
// and updates its running statistics: those are "state" arguments, and the
// function returns their new values after the loss, in argument order. The
// buffers' num_batches_tracked counters are not modelled (with a fixed
// momentum they do not affect the step).

func.func @forward(
    %x: tensor<8x3x16x16xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %conv1_w: tensor<16x3x3x3xf32> {memopt.role = "param", memopt.name = "conv1.weight"},
    %bn1_w: tensor<16xf32> {memopt.role = "param", memopt.name = "bn1.weight"},
    %bn1_b: tensor<16xf32> {memopt.role = "param", memopt.name = "bn1.bias"},
    %l1_conv1_w: tensor<16x16x3x3xf32> {memopt.role = "param", memopt.name = "layer1.conv1.weight"},
    %l1_bn1_w: tensor<16xf32> {memopt.role = "param", memopt.name = "layer1.bn1.weight"},
    %l1_bn1_b: tensor<16xf32> {memopt.role = "param", memopt.name = "layer1.bn1.bias"},
    %l1_conv2_w: tensor<16x16x3x3xf32> {memopt.role = "param", memopt.name = "layer1.conv2.weight"},
    %l1_bn2_w: tensor<16xf32> {memopt.role = "param", memopt.name = "layer1.bn2.weight"},
    %l1_bn2_b: tensor<16xf32> {memopt.role = "param", memopt.name = "layer1.bn2.bias"},
    %conv2_w: tensor<32x16x3x3xf32> {memopt.role = "param", memopt.name = "conv2.weight"},
    %bn2_w: tensor<32xf32> {memopt.role = "param", memopt.name = "bn2.weight"},
    %bn2_b: tensor<32xf32> {memopt.role = "param", memopt.name = "bn2.bias"},
    %fc_w: tensor<10x32xf32> {memopt.role = "param", memopt.name = "fc.weight"},
    %fc_b: tensor<10xf32> {memopt.role = "param", memopt.name = "fc.bias"},
    %bn1_rm: tensor<16xf32> {memopt.role = "state", memopt.name = "bn1.running_mean"},
    %bn1_rv: tensor<16xf32> {memopt.role = "state", memopt.name = "bn1.running_var"},
    %l1_bn1_rm: tensor<16xf32> {memopt.role = "state", memopt.name = "layer1.bn1.running_mean"},
    %l1_bn1_rv: tensor<16xf32> {memopt.role = "state", memopt.name = "layer1.bn1.running_var"},
    %l1_bn2_rm: tensor<16xf32> {memopt.role = "state", memopt.name = "layer1.bn2.running_mean"},
    %l1_bn2_rv: tensor<16xf32> {memopt.role = "state", memopt.name = "layer1.bn2.running_var"},
    %bn2_rm: tensor<32xf32> {memopt.role = "state", memopt.name = "bn2.running_mean"},
    %bn2_rv: tensor<32xf32> {memopt.role = "state", memopt.name = "bn2.running_var"})
    -> (tensor<f32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>,
        tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<32xf32>,
        tensor<32xf32>) attributes {memopt.loss} {
  // Stem: conv1, bn1, relu.
  %0 = memopt.conv2d %x, %conv1_w padding [1, 1] {memopt.scope = "conv1"} : tensor<8x3x16x16xf32>, tensor<16x3x3x3xf32> -> tensor<8x16x16x16xf32>
  %1, %bn1_mean, %bn1_rstd, %bn1_rm2, %bn1_rv2 = memopt.batch_norm %0, %bn1_w, %bn1_b, %bn1_rm, %bn1_rv eps 1.0e-05 momentum 1.0e-01 {memopt.scope = "bn1"} : tensor<8x16x16x16xf32>, tensor<16xf32>
  %2 = memopt.relu %1 {memopt.scope = ""} : tensor<8x16x16x16xf32>

  // layer1: a basic residual block.
  %3 = memopt.conv2d %2, %l1_conv1_w padding [1, 1] {memopt.scope = "layer1.conv1"} : tensor<8x16x16x16xf32>, tensor<16x16x3x3xf32> -> tensor<8x16x16x16xf32>
  %4, %l1_bn1_mean, %l1_bn1_rstd, %l1_bn1_rm2, %l1_bn1_rv2 = memopt.batch_norm %3, %l1_bn1_w, %l1_bn1_b, %l1_bn1_rm, %l1_bn1_rv eps 1.0e-05 momentum 1.0e-01 {memopt.scope = "layer1.bn1"} : tensor<8x16x16x16xf32>, tensor<16xf32>
  %5 = memopt.relu %4 {memopt.scope = "layer1"} : tensor<8x16x16x16xf32>
  %6 = memopt.conv2d %5, %l1_conv2_w padding [1, 1] {memopt.scope = "layer1.conv2"} : tensor<8x16x16x16xf32>, tensor<16x16x3x3xf32> -> tensor<8x16x16x16xf32>
  %7, %l1_bn2_mean, %l1_bn2_rstd, %l1_bn2_rm2, %l1_bn2_rv2 = memopt.batch_norm %6, %l1_bn2_w, %l1_bn2_b, %l1_bn2_rm, %l1_bn2_rv eps 1.0e-05 momentum 1.0e-01 {memopt.scope = "layer1.bn2"} : tensor<8x16x16x16xf32>, tensor<16xf32>
  %8 = memopt.add %7, %2 {memopt.scope = "layer1"} : tensor<8x16x16x16xf32>
  %9 = memopt.relu %8 {memopt.scope = "layer1"} : tensor<8x16x16x16xf32>

  // pool: 2x2 max pooling.
  %10 = memopt.max_pool2d %9 kernel [2, 2] strides [2, 2] {memopt.scope = "pool"} : tensor<8x16x16x16xf32> to tensor<8x16x8x8xf32>

  // conv2, bn2, relu.
  %11 = memopt.conv2d %10, %conv2_w padding [1, 1] {memopt.scope = "conv2"} : tensor<8x16x8x8xf32>, tensor<32x16x3x3xf32> -> tensor<8x32x8x8xf32>
  %12, %bn2_mean, %bn2_rstd, %bn2_rm2, %bn2_rv2 = memopt.batch_norm %11, %bn2_w, %bn2_b, %bn2_rm, %bn2_rv eps 1.0e-05 momentum 1.0e-01 {memopt.scope = "bn2"} : tensor<8x32x8x8xf32>, tensor<32xf32>
  %13 = memopt.relu %12 {memopt.scope = ""} : tensor<8x32x8x8xf32>

  // Global average pooling and flatten.
  %14 = memopt.avg_pool2d %13 kernel [8, 8] strides [8, 8] {memopt.scope = "avgpool"} : tensor<8x32x8x8xf32> to tensor<8x32x1x1xf32>
  %15 = memopt.reshape %14 {memopt.scope = ""} : tensor<8x32x1x1xf32> to tensor<8x32xf32>

  // fc and the loss.
  %16 = memopt.matmul %15, %fc_w transpose_rhs {memopt.scope = "fc"} : tensor<8x32xf32>, tensor<10x32xf32> -> tensor<8x10xf32>
  %17 = memopt.broadcast %fc_b dims [1] {memopt.scope = "fc"} : tensor<10xf32> to tensor<8x10xf32>
  %logits = memopt.add %16, %17 {memopt.scope = "fc"} : tensor<8x10xf32>
  %loss = memopt.cross_entropy %logits, %y {memopt.scope = ""} : tensor<8x10xf32>, tensor<8xi64>
  return %loss, %bn1_rm2, %bn1_rv2, %l1_bn1_rm2, %l1_bn1_rv2, %l1_bn2_rm2, %l1_bn2_rv2, %bn2_rm2, %bn2_rv2
      : tensor<f32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<32xf32>, tensor<32xf32>
}
