// Integer arguments whose values the ops that read them bound
// (index-bounds.test):
//  - ids indexes a 100-row table through a reshape and a 50-row one
//    directly: bound 50;
//  - pos indexes a table only through a slice, which reads some of its
//    elements: no bound;
//  - targets labels a cross-entropy over 30 classes through a reshape with
//    ignore_index -1: bound 30, and -1 is allowed;
//  - tags labels one whose ignore_index 3 is a class: bound 30 alone;
//  - mixed indexes a 40-row table and labels a cross-entropy over 30
//    classes: bound 30, and its ignore_index -100 is not allowed, since the
//    lookup does not skip it.
func.func @forward(
    %ids: tensor<2x8xi64> {memopt.role = "input", memopt.name = "ids"},
    %pos: tensor<16xi64> {memopt.role = "input", memopt.name = "pos"},
    %targets: tensor<2x8xi64> {memopt.role = "label", memopt.name = "targets"},
    %tags: tensor<16xi64> {memopt.role = "label", memopt.name = "tags"},
    %mixed: tensor<16xi64> {memopt.role = "label", memopt.name = "mixed"},
    %big: tensor<100x30xf32> {memopt.role = "param", memopt.name = "big"},
    %small: tensor<50x30xf32> {memopt.role = "param", memopt.name = "small"},
    %mid: tensor<40x30xf32> {memopt.role = "param", memopt.name = "mid"},
    %posw: tensor<8x30xf32> {memopt.role = "param", memopt.name = "posw"})
    -> tensor<f32> attributes {memopt.loss} {
  %flat = memopt.reshape %ids : tensor<2x8xi64> to tensor<16xi64>
  %a = memopt.embedding %big, %flat : tensor<100x30xf32>, tensor<16xi64> -> tensor<16x30xf32>
  %b = memopt.embedding %small, %ids : tensor<50x30xf32>, tensor<2x8xi64> -> tensor<2x8x30xf32>
  %b2 = memopt.reshape %b : tensor<2x8x30xf32> to tensor<16x30xf32>
  %p = memopt.slice %pos starts [0] limits [16] strides [2] : tensor<16xi64> to tensor<8xi64>
  %c = memopt.embedding %posw, %p : tensor<8x30xf32>, tensor<8xi64> -> tensor<8x30xf32>
  %c2 = memopt.broadcast %c dims [1, 2] : tensor<8x30xf32> to tensor<2x8x30xf32>
  %c3 = memopt.reshape %c2 : tensor<2x8x30xf32> to tensor<16x30xf32>
  %d = memopt.embedding %mid, %mixed : tensor<40x30xf32>, tensor<16xi64> -> tensor<16x30xf32>
  %s1 = memopt.add %a, %b2 : tensor<16x30xf32>
  %s2 = memopt.add %s1, %c3 : tensor<16x30xf32>
  %s3 = memopt.add %s2, %d : tensor<16x30xf32>
  %t = memopt.reshape %targets : tensor<2x8xi64> to tensor<16xi64>
  %l1 = memopt.cross_entropy %s3, %t ignore_index -1 : tensor<16x30xf32>, tensor<16xi64>
  %l2 = memopt.cross_entropy %s3, %tags ignore_index 3 : tensor<16x30xf32>, tensor<16xi64>
  %l3 = memopt.cross_entropy %s3, %mixed : tensor<16x30xf32>, tensor<16xi64>
  %l12 = memopt.add %l1, %l2 : tensor<f32>
  %loss = memopt.add %l12, %l3 : tensor<f32>
  return %loss : tensor<f32>
}
