
func.func @slice_grad(%g: tensor<4x4xf32>) {
  // expects type 'tensor<4x4xf
func.fu3nc