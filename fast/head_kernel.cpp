// The output head's cross-entropy on one block of logits, row by row, on the CPU (head.py: chunked_pass uses it
// when it builds; native.py compiles it on first use). For each row z (V logits of one position, float32 or
// bfloat16) with target y and upstream weight g (1 unless given):
//     m = max_j z_j,   s = sum_j exp(z_j - m),   loss = log s + m - z_y
//     dz_j = g (exp(z_j - m) / s - [j == y])              (= g dloss/dz_j, softmax minus one-hot)
// dz overwrites z in place, in z's dtype (rounded to nearest even, as PyTorch's .to(bfloat16)).
//
// Why: PyTorch does this in five passes over the block, each reading and writing all of it in float32 (upcast,
// log_softmax, exp, minus one-hot, downcast): at V = 50257 a block of 166 rows is 33 MB and every pass goes to
// memory. Here one row (V floats, 200 KB) stays in L2 for its three passes, and the block is read once and
// written once, in its own dtype (bench.py measures what it buys: its variant (e)).
//
// Also here: sum_into_, the bf16 block's slice of dL/dW added into the float32 sum in one pass.

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

// The logits' storage as plain numbers: float, or bfloat16 as its uint16_t bits. Plain loads and stores let the
// compiler vectorize the loops (c10::BFloat16's own conversions kept the writing loop scalar).
static inline float to_float(float v) { return v; }
static inline float to_float(uint16_t b) {                     // a bfloat16 is the top half of a float32: exact
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
template <typename R> static inline R from_float(float v);
template <> inline float from_float<float>(float v) { return v; }
template <> inline uint16_t from_float<uint16_t>(float v) {    // round to nearest even; NaN -> 0x7FC0, as c10's
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const uint16_t rounded = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? static_cast<uint16_t>(0x7FC0) : rounded;
}

template <typename R>
static void xent_rows_impl(R* z, const int64_t* y, const float* g, float* loss, int64_t n, int64_t V, bool grad) {
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> e(grad ? V : 0);                        // exp(z_j - m) of the row being done
    float* __restrict__ ep = e.data();
    for (int64_t r = begin; r < end; ++r) {
      R* __restrict__ zr = z + r * V;
      const int64_t t = y[r];
      const float zt = to_float(zr[t]);
      float m = to_float(zr[0]), s = 0;
      #pragma omp simd reduction(max:m)
      for (int64_t j = 0; j < V; ++j) m = std::max(m, to_float(zr[j]));
      if (grad) {
        #pragma omp simd reduction(+:s)
        for (int64_t j = 0; j < V; ++j) { const float v = std::exp(to_float(zr[j]) - m); ep[j] = v; s += v; }
      } else {
        #pragma omp simd reduction(+:s)
        for (int64_t j = 0; j < V; ++j) s += std::exp(to_float(zr[j]) - m);
      }
      loss[r] = std::log(s) + m - zt;
      if (!grad) continue;
      const float gr = g ? g[r] : 1.0f, scale = gr / s;
      #pragma omp simd
      for (int64_t j = 0; j < V; ++j) zr[j] = from_float<R>(ep[j] * scale);
      zr[t] = from_float<R>(ep[t] * scale - gr);
    }
  });
}

// z (n, V) float32 or bfloat16, targets (n,) int64, g (n,) float32 or empty -> loss (n,) float32;
// with grad, z becomes g (softmax(z) - onehot(targets)).
torch::Tensor xent_rows_(torch::Tensor z, torch::Tensor targets, torch::Tensor g, bool grad) {
  TORCH_CHECK(z.device().is_cpu() && z.dim() == 2 && z.is_contiguous(), "head_kernel: z must be a contiguous (n, V) CPU tensor");
  TORCH_CHECK(z.scalar_type() == torch::kFloat32 || z.scalar_type() == torch::kBFloat16,
              "head_kernel: z must be float32 or bfloat16, got ", z.scalar_type());
  const int64_t n = z.size(0), V = z.size(1);
  TORCH_CHECK(targets.scalar_type() == torch::kInt64 && targets.dim() == 1 && targets.size(0) == n &&
              targets.is_contiguous(), "head_kernel: targets must be (n,) int64, contiguous");
  TORCH_CHECK(!g.defined() || g.numel() == 0 || (g.scalar_type() == torch::kFloat32 && g.numel() == n && g.is_contiguous()),
              "head_kernel: g must be (n,) float32 or empty");
  TORCH_CHECK(V > 0, "head_kernel: no classes (V = 0)");
  const int64_t* y = targets.data_ptr<int64_t>();
  for (int64_t r = 0; r < n; ++r)
    TORCH_CHECK(y[r] >= 0 && y[r] < V, "target ", y[r], " is out of bounds: the head has ", V,
                " classes; the targets come from another tokenizer than the model's");
  auto loss = torch::empty({n}, z.options().dtype(torch::kFloat32));
  const float* gp = g.defined() && g.numel() ? g.data_ptr<float>() : nullptr;
  if (z.scalar_type() == torch::kBFloat16)
    xent_rows_impl(reinterpret_cast<uint16_t*>(z.data_ptr<c10::BFloat16>()), y, gp, loss.data_ptr<float>(), n, V, grad);
  else
    xent_rows_impl(z.data_ptr<float>(), y, gp, loss.data_ptr<float>(), n, V, grad);
  return loss;
}

// The bf16 block's slice of dL/dW into the float32 sum: dst (+)= src, converted element by element in one pass.
// Why: PyTorch's float32.add_(bfloat16) first makes a float32 copy of src (one more pass and a fresh buffer, for
// each of the ~100 slices a step at V = 200k).
void sum_into_(torch::Tensor dst, torch::Tensor src, bool add) {
  TORCH_CHECK(dst.device().is_cpu() && src.device().is_cpu() && dst.is_contiguous() && src.is_contiguous(),
              "head_kernel: sum_into_ takes contiguous CPU tensors");
  TORCH_CHECK(dst.scalar_type() == torch::kFloat32 && src.scalar_type() == torch::kBFloat16,
              "head_kernel: sum_into_ adds bfloat16 into float32, got ", src.scalar_type(), " into ", dst.scalar_type());
  TORCH_CHECK(dst.sizes() == src.sizes(), "head_kernel: sum_into_ needs equal shapes, got ", src.sizes(), " and ",
              dst.sizes());
  float* d = dst.data_ptr<float>();
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src.data_ptr<c10::BFloat16>());
  at::parallel_for(0, dst.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    float* __restrict__ dp = d;
    const uint16_t* __restrict__ sp = s;
    if (add) {
      #pragma omp simd
      for (int64_t i = begin; i < end; ++i) dp[i] += to_float(sp[i]);
    } else {
      #pragma omp simd
      for (int64_t i = begin; i < end; ++i) dp[i] = to_float(sp[i]);
    }
  });
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("xent_rows_", &xent_rows_, "cross-entropy per row of logits; with grad, softmax - one-hot in place");
  m.def("sum_into_", &sum_into_, "dst (float32) = or += src (bfloat16), one pass");
}
