// A GPT-style decoder and its language-modelling loss, written by hand in the
// memopt dialect.
//
// The equivalent PyTorch module is nanoGPT's GPT (its names are the names of
// the parameters below) with
//
//   GPTConfig(block_size=16, vocab_size=128, n_layer=2, n_head=4, n_embd=64,
//             dropout=0.1, bias=True)
//
// and the MLP's activation nn.GELU(approximate="tanh") (GPT-2's), in training
// mode, called as model(idx, targets) with idx, targets: int64[4, 16]; its
// loss is
//
//   F.cross_entropy(logits.view(-1, 128), targets.view(-1), ignore_index=-1)
//
// with ignore_index -100 here (PyTorch's default). Each block is
//
//   x = x + attn(ln_1(x))     # causal self-attention, 4 heads of 16
//   x = x + mlp(ln_2(x))      # c_fc 64->256, gelu, c_proj 256->64
//
// The LM head is tied to the token embedding: lm_head.weight is
// transformer.wte.weight, so named_parameters() lists it once and the logits
// are a matmul with the same parameter, transposed. Every dropout (p 0.1) has
// its own random stream. The causal mask (nanoGPT's `bias` buffer, which is
// not a parameter) is a constant in each attention layer.

func.func @forward(
    %idx: tensor<4x16xi64> {memopt.role = "input", memopt.name = "idx", memopt.batch_dim = 0 : i64},
    %targets: tensor<4x16xi64> {memopt.role = "label", memopt.name = "targets", memopt.batch_dim = 0 : i64},
    %wte: tensor<128x64xf32> {memopt.role = "param", memopt.name = "transformer.wte.weight"},
    %wpe: tensor<16x64xf32> {memopt.role = "param", memopt.name = "transformer.wpe.weight"},
    %h0_ln1_w: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.ln_1.weight"},
    %h0_ln1_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.ln_1.bias"},
    %h0_attn_w: tensor<192x64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.attn.c_attn.weight"},
    %h0_attn_b: tensor<192xf32> {memopt.role = "param", memopt.name = "transformer.h.0.attn.c_attn.bias"},
    %h0_aproj_w: tensor<64x64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.attn.c_proj.weight"},
    %h0_aproj_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.attn.c_proj.bias"},
    %h0_ln2_w: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.ln_2.weight"},
    %h0_ln2_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.ln_2.bias"},
    %h0_fc_w: tensor<256x64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.mlp.c_fc.weight"},
    %h0_fc_b: tensor<256xf32> {memopt.role = "param", memopt.name = "transformer.h.0.mlp.c_fc.bias"},
    %h0_mproj_w: tensor<64x256xf32> {memopt.role = "param", memopt.name = "transformer.h.0.mlp.c_proj.weight"},
    %h0_mproj_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.0.mlp.c_proj.bias"},
    %h1_ln1_w: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.ln_1.weight"},
    %h1_ln1_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.ln_1.bias"},
    %h1_attn_w: tensor<192x64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.attn.c_attn.weight"},
    %h1_attn_b: tensor<192xf32> {memopt.role = "param", memopt.name = "transformer.h.1.attn.c_attn.bias"},
    %h1_aproj_w: tensor<64x64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.attn.c_proj.weight"},
    %h1_aproj_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.attn.c_proj.bias"},
    %h1_ln2_w: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.ln_2.weight"},
    %h1_ln2_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.ln_2.bias"},
    %h1_fc_w: tensor<256x64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.mlp.c_fc.weight"},
    %h1_fc_b: tensor<256xf32> {memopt.role = "param", memopt.name = "transformer.h.1.mlp.c_fc.bias"},
    %h1_mproj_w: tensor<64x256xf32> {memopt.role = "param", memopt.name = "transformer.h.1.mlp.c_proj.weight"},
    %h1_mproj_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.h.1.mlp.c_proj.bias"},
    %lnf_w: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.ln_f.weight"},
    %lnf_b: tensor<64xf32> {memopt.role = "param", memopt.name = "transformer.ln_f.bias"})
    -> tensor<f32> attributes {memopt.loss} {
  // Embeddings: token + position, then dropout.
  %tok_emb = memopt.embedding %wte, %idx {memopt.scope = "transformer.wte"} : tensor<128x64xf32>, tensor<4x16xi64> -> tensor<4x16x64xf32>
  %pos = memopt.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64> {memopt.scope = ""}
  %pos_emb = memopt.embedding %wpe, %pos {memopt.scope = "transformer.wpe"} : tensor<16x64xf32>, tensor<16xi64> -> tensor<16x64xf32>
  %pos_emb_b = memopt.broadcast %pos_emb dims [1, 2] {memopt.scope = ""} : tensor<16x64xf32> to tensor<4x16x64xf32>
  %emb = memopt.add %tok_emb, %pos_emb_b {memopt.scope = ""} : tensor<4x16x64xf32>
  %x0 = memopt.dropout %emb p 1.0e-01 seed 0 stream 0 {memopt.scope = "transformer.drop"} : tensor<4x16x64xf32>

  // transformer.h.0: x = x + attn(ln_1(x))
  %h0_ln1, %h0_ln1_mean, %h0_ln1_rstd = memopt.layer_norm %x0, %h0_ln1_w, %h0_ln1_b eps 1.0e-05 {memopt.scope = "transformer.h.0.ln_1"} : tensor<4x16x64xf32>, tensor<64xf32> -> tensor<4x16xf32>
  %h0_qkv_mm = memopt.matmul %h0_ln1, %h0_attn_w transpose_rhs {memopt.scope = "transformer.h.0.attn.c_attn"} : tensor<4x16x64xf32>, tensor<192x64xf32> -> tensor<4x16x192xf32>
  %h0_qkv_bias = memopt.broadcast %h0_attn_b dims [2] {memopt.scope = "transformer.h.0.attn.c_attn"} : tensor<192xf32> to tensor<4x16x192xf32>
  %h0_qkv = memopt.add %h0_qkv_mm, %h0_qkv_bias {memopt.scope = "transformer.h.0.attn.c_attn"} : tensor<4x16x192xf32>
  %h0_q = memopt.slice %h0_qkv starts [0, 0, 0] limits [4, 16, 64] strides [1, 1, 1] {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x192xf32> to tensor<4x16x64xf32>
  %h0_q_s = memopt.reshape %h0_q {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x64xf32> to tensor<4x16x4x16xf32>
  %h0_q_h = memopt.transpose %h0_q_s perm [0, 2, 1, 3] {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x4x16xf32> to tensor<4x4x16x16xf32>
  %h0_k = memopt.slice %h0_qkv starts [0, 0, 64] limits [4, 16, 128] strides [1, 1, 1] {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x192xf32> to tensor<4x16x64xf32>
  %h0_k_s = memopt.reshape %h0_k {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x64xf32> to tensor<4x16x4x16xf32>
  %h0_k_h = memopt.transpose %h0_k_s perm [0, 2, 1, 3] {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x4x16xf32> to tensor<4x4x16x16xf32>
  %h0_v = memopt.slice %h0_qkv starts [0, 0, 128] limits [4, 16, 192] strides [1, 1, 1] {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x192xf32> to tensor<4x16x64xf32>
  %h0_v_s = memopt.reshape %h0_v {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x64xf32> to tensor<4x16x4x16xf32>
  %h0_v_h = memopt.transpose %h0_v_s perm [0, 2, 1, 3] {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x4x16xf32> to tensor<4x4x16x16xf32>
  %h0_scores = memopt.matmul %h0_q_h, %h0_k_h transpose_rhs {memopt.scope = "transformer.h.0.attn"} : tensor<4x4x16x16xf32>, tensor<4x4x16x16xf32> -> tensor<4x4x16x16xf32>
  %h0_scaled = memopt.mul_scalar %h0_scores, 2.500000e-01 {memopt.scope = "transformer.h.0.attn"} : tensor<4x4x16x16xf32>
  // The causal mask: true where a query would see a later key.
  %h0_causal = memopt.constant dense<[
      [false, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, true, true, true, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, true, true, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, true, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, false, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, false, false, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false]]> : tensor<16x16xi1> {memopt.scope = "transformer.h.0.attn"}
  %h0_mask = memopt.broadcast %h0_causal dims [2, 3] {memopt.scope = "transformer.h.0.attn"} : tensor<16x16xi1> to tensor<4x4x16x16xi1>
  %h0_masked = memopt.masked_fill %h0_scaled, %h0_mask, 0xFFF0000000000000 {memopt.scope = "transformer.h.0.attn"} : tensor<4x4x16x16xf32>, tensor<4x4x16x16xi1>
  %h0_probs = memopt.softmax %h0_masked dim 3 {memopt.scope = "transformer.h.0.attn"} : tensor<4x4x16x16xf32>
  %h0_probs_d = memopt.dropout %h0_probs p 1.0e-01 seed 0 stream 1 {memopt.scope = "transformer.h.0.attn.attn_dropout"} : tensor<4x4x16x16xf32>
  %h0_y_h = memopt.matmul %h0_probs_d, %h0_v_h {memopt.scope = "transformer.h.0.attn"} : tensor<4x4x16x16xf32>, tensor<4x4x16x16xf32> -> tensor<4x4x16x16xf32>
  %h0_y_t = memopt.transpose %h0_y_h perm [0, 2, 1, 3] {memopt.scope = "transformer.h.0.attn"} : tensor<4x4x16x16xf32> to tensor<4x16x4x16xf32>
  %h0_y = memopt.reshape %h0_y_t {memopt.scope = "transformer.h.0.attn"} : tensor<4x16x4x16xf32> to tensor<4x16x64xf32>
  %h0_attn_out_mm = memopt.matmul %h0_y, %h0_aproj_w transpose_rhs {memopt.scope = "transformer.h.0.attn.c_proj"} : tensor<4x16x64xf32>, tensor<64x64xf32> -> tensor<4x16x64xf32>
  %h0_attn_out_bias = memopt.broadcast %h0_aproj_b dims [2] {memopt.scope = "transformer.h.0.attn.c_proj"} : tensor<64xf32> to tensor<4x16x64xf32>
  %h0_attn_out = memopt.add %h0_attn_out_mm, %h0_attn_out_bias {memopt.scope = "transformer.h.0.attn.c_proj"} : tensor<4x16x64xf32>
  %h0_attn_out_d = memopt.dropout %h0_attn_out p 1.0e-01 seed 0 stream 2 {memopt.scope = "transformer.h.0.attn.resid_dropout"} : tensor<4x16x64xf32>
  %h0_x1 = memopt.add %x0, %h0_attn_out_d {memopt.scope = "transformer.h.0"} : tensor<4x16x64xf32>
  // transformer.h.0: x = x + mlp(ln_2(x))
  %h0_ln2, %h0_ln2_mean, %h0_ln2_rstd = memopt.layer_norm %h0_x1, %h0_ln2_w, %h0_ln2_b eps 1.0e-05 {memopt.scope = "transformer.h.0.ln_2"} : tensor<4x16x64xf32>, tensor<64xf32> -> tensor<4x16xf32>
  %h0_fc_mm = memopt.matmul %h0_ln2, %h0_fc_w transpose_rhs {memopt.scope = "transformer.h.0.mlp.c_fc"} : tensor<4x16x64xf32>, tensor<256x64xf32> -> tensor<4x16x256xf32>
  %h0_fc_bias = memopt.broadcast %h0_fc_b dims [2] {memopt.scope = "transformer.h.0.mlp.c_fc"} : tensor<256xf32> to tensor<4x16x256xf32>
  %h0_fc = memopt.add %h0_fc_mm, %h0_fc_bias {memopt.scope = "transformer.h.0.mlp.c_fc"} : tensor<4x16x256xf32>
  %h0_act = memopt.gelu %h0_fc approximate<tanh> {memopt.scope = "transformer.h.0.mlp.gelu"} : tensor<4x16x256xf32>
  %h0_mlp_out_mm = memopt.matmul %h0_act, %h0_mproj_w transpose_rhs {memopt.scope = "transformer.h.0.mlp.c_proj"} : tensor<4x16x256xf32>, tensor<64x256xf32> -> tensor<4x16x64xf32>
  %h0_mlp_out_bias = memopt.broadcast %h0_mproj_b dims [2] {memopt.scope = "transformer.h.0.mlp.c_proj"} : tensor<64xf32> to tensor<4x16x64xf32>
  %h0_mlp_out = memopt.add %h0_mlp_out_mm, %h0_mlp_out_bias {memopt.scope = "transformer.h.0.mlp.c_proj"} : tensor<4x16x64xf32>
  %h0_mlp_out_d = memopt.dropout %h0_mlp_out p 1.0e-01 seed 0 stream 3 {memopt.scope = "transformer.h.0.mlp.dropout"} : tensor<4x16x64xf32>
  %h0_x2 = memopt.add %h0_x1, %h0_mlp_out_d {memopt.scope = "transformer.h.0"} : tensor<4x16x64xf32>

  // transformer.h.1: x = x + attn(ln_1(x))
  %h1_ln1, %h1_ln1_mean, %h1_ln1_rstd = memopt.layer_norm %h0_x2, %h1_ln1_w, %h1_ln1_b eps 1.0e-05 {memopt.scope = "transformer.h.1.ln_1"} : tensor<4x16x64xf32>, tensor<64xf32> -> tensor<4x16xf32>
  %h1_qkv_mm = memopt.matmul %h1_ln1, %h1_attn_w transpose_rhs {memopt.scope = "transformer.h.1.attn.c_attn"} : tensor<4x16x64xf32>, tensor<192x64xf32> -> tensor<4x16x192xf32>
  %h1_qkv_bias = memopt.broadcast %h1_attn_b dims [2] {memopt.scope = "transformer.h.1.attn.c_attn"} : tensor<192xf32> to tensor<4x16x192xf32>
  %h1_qkv = memopt.add %h1_qkv_mm, %h1_qkv_bias {memopt.scope = "transformer.h.1.attn.c_attn"} : tensor<4x16x192xf32>
  %h1_q = memopt.slice %h1_qkv starts [0, 0, 0] limits [4, 16, 64] strides [1, 1, 1] {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x192xf32> to tensor<4x16x64xf32>
  %h1_q_s = memopt.reshape %h1_q {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x64xf32> to tensor<4x16x4x16xf32>
  %h1_q_h = memopt.transpose %h1_q_s perm [0, 2, 1, 3] {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x4x16xf32> to tensor<4x4x16x16xf32>
  %h1_k = memopt.slice %h1_qkv starts [0, 0, 64] limits [4, 16, 128] strides [1, 1, 1] {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x192xf32> to tensor<4x16x64xf32>
  %h1_k_s = memopt.reshape %h1_k {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x64xf32> to tensor<4x16x4x16xf32>
  %h1_k_h = memopt.transpose %h1_k_s perm [0, 2, 1, 3] {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x4x16xf32> to tensor<4x4x16x16xf32>
  %h1_v = memopt.slice %h1_qkv starts [0, 0, 128] limits [4, 16, 192] strides [1, 1, 1] {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x192xf32> to tensor<4x16x64xf32>
  %h1_v_s = memopt.reshape %h1_v {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x64xf32> to tensor<4x16x4x16xf32>
  %h1_v_h = memopt.transpose %h1_v_s perm [0, 2, 1, 3] {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x4x16xf32> to tensor<4x4x16x16xf32>
  %h1_scores = memopt.matmul %h1_q_h, %h1_k_h transpose_rhs {memopt.scope = "transformer.h.1.attn"} : tensor<4x4x16x16xf32>, tensor<4x4x16x16xf32> -> tensor<4x4x16x16xf32>
  %h1_scaled = memopt.mul_scalar %h1_scores, 2.500000e-01 {memopt.scope = "transformer.h.1.attn"} : tensor<4x4x16x16xf32>
  // The causal mask: true where a query would see a later key.
  %h1_causal = memopt.constant dense<[
      [false, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, true, true, true, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, true, true, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, true, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, true, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, true, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, true, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, true, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, true, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, true, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, true, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, true, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, false, true, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, false, false, true, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, true],
      [false, false, false, false, false, false, false, false, false, false, false, false, false, false, false, false]]> : tensor<16x16xi1> {memopt.scope = "transformer.h.1.attn"}
  %h1_mask = memopt.broadcast %h1_causal dims [2, 3] {memopt.scope = "transformer.h.1.attn"} : tensor<16x16xi1> to tensor<4x4x16x16xi1>
  %h1_masked = memopt.masked_fill %h1_scaled, %h1_mask, 0xFFF0000000000000 {memopt.scope = "transformer.h.1.attn"} : tensor<4x4x16x16xf32>, tensor<4x4x16x16xi1>
  %h1_probs = memopt.softmax %h1_masked dim 3 {memopt.scope = "transformer.h.1.attn"} : tensor<4x4x16x16xf32>
  %h1_probs_d = memopt.dropout %h1_probs p 1.0e-01 seed 0 stream 4 {memopt.scope = "transformer.h.1.attn.attn_dropout"} : tensor<4x4x16x16xf32>
  %h1_y_h = memopt.matmul %h1_probs_d, %h1_v_h {memopt.scope = "transformer.h.1.attn"} : tensor<4x4x16x16xf32>, tensor<4x4x16x16xf32> -> tensor<4x4x16x16xf32>
  %h1_y_t = memopt.transpose %h1_y_h perm [0, 2, 1, 3] {memopt.scope = "transformer.h.1.attn"} : tensor<4x4x16x16xf32> to tensor<4x16x4x16xf32>
  %h1_y = memopt.reshape %h1_y_t {memopt.scope = "transformer.h.1.attn"} : tensor<4x16x4x16xf32> to tensor<4x16x64xf32>
  %h1_attn_out_mm = memopt.matmul %h1_y, %h1_aproj_w transpose_rhs {memopt.scope = "transformer.h.1.attn.c_proj"} : tensor<4x16x64xf32>, tensor<64x64xf32> -> tensor<4x16x64xf32>
  %h1_attn_out_bias = memopt.broadcast %h1_aproj_b dims [2] {memopt.scope = "transformer.h.1.attn.c_proj"} : tensor<64xf32> to tensor<4x16x64xf32>
  %h1_attn_out = memopt.add %h1_attn_out_mm, %h1_attn_out_bias {memopt.scope = "transformer.h.1.attn.c_proj"} : tensor<4x16x64xf32>
  %h1_attn_out_d = memopt.dropout %h1_attn_out p 1.0e-01 seed 0 stream 5 {memopt.scope = "transformer.h.1.attn.resid_dropout"} : tensor<4x16x64xf32>
  %h1_x1 = memopt.add %h0_x2, %h1_attn_out_d {memopt.scope = "transformer.h.1"} : tensor<4x16x64xf32>
  // transformer.h.1: x = x + mlp(ln_2(x))
  %h1_ln2, %h1_ln2_mean, %h1_ln2_rstd = memopt.layer_norm %h1_x1, %h1_ln2_w, %h1_ln2_b eps 1.0e-05 {memopt.scope = "transformer.h.1.ln_2"} : tensor<4x16x64xf32>, tensor<64xf32> -> tensor<4x16xf32>
  %h1_fc_mm = memopt.matmul %h1_ln2, %h1_fc_w transpose_rhs {memopt.scope = "transformer.h.1.mlp.c_fc"} : tensor<4x16x64xf32>, tensor<256x64xf32> -> tensor<4x16x256xf32>
  %h1_fc_bias = memopt.broadcast %h1_fc_b dims [2] {memopt.scope = "transformer.h.1.mlp.c_fc"} : tensor<256xf32> to tensor<4x16x256xf32>
  %h1_fc = memopt.add %h1_fc_mm, %h1_fc_bias {memopt.scope = "transformer.h.1.mlp.c_fc"} : tensor<4x16x256xf32>
  %h1_act = memopt.gelu %h1_fc approximate<tanh> {memopt.scope = "transformer.h.1.mlp.gelu"} : tensor<4x16x256xf32>
  %h1_mlp_out_mm = memopt.matmul %h1_act, %h1_mproj_w transpose_rhs {memopt.scope = "transformer.h.1.mlp.c_proj"} : tensor<4x16x256xf32>, tensor<64x256xf32> -> tensor<4x16x64xf32>
  %h1_mlp_out_bias = memopt.broadcast %h1_mproj_b dims [2] {memopt.scope = "transformer.h.1.mlp.c_proj"} : tensor<64xf32> to tensor<4x16x64xf32>
  %h1_mlp_out = memopt.add %h1_mlp_out_mm, %h1_mlp_out_bias {memopt.scope = "transformer.h.1.mlp.c_proj"} : tensor<4x16x64xf32>
  %h1_mlp_out_d = memopt.dropout %h1_mlp_out p 1.0e-01 seed 0 stream 6 {memopt.scope = "transformer.h.1.mlp.dropout"} : tensor<4x16x64xf32>
  %h1_x2 = memopt.add %h1_x1, %h1_mlp_out_d {memopt.scope = "transformer.h.1"} : tensor<4x16x64xf32>

  // Final layer norm, LM head tied to wte, loss.
  %lnf, %lnf_mean, %lnf_rstd = memopt.layer_norm %h1_x2, %lnf_w, %lnf_b eps 1.0e-05 {memopt.scope = "transformer.ln_f"} : tensor<4x16x64xf32>, tensor<64xf32> -> tensor<4x16xf32>
  %logits = memopt.matmul %lnf, %wte transpose_rhs {memopt.scope = "lm_head"} : tensor<4x16x64xf32>, tensor<128x64xf32> -> tensor<4x16x128xf32>
  %loss = memopt.cross_entropy %logits, %targets ignore_index -100 {memopt.scope = ""} : tensor<4x16x128xf32>, tensor<4x16xi64>
  return %loss : tensor<f32>
}
