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

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

template <typename T>
static void xent_rows_impl(T* z, const int64_t* y, const float* g, float* loss, int64_t n, int64_t V, bool grad) {
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> e(grad ? V : 0);                        // exp(z_j - m) of the row being done
    float* __restrict__ ep = e.data();
    for (int64_t r = begin; r < end; ++r) {
      T* __restrict__ zr = z + r * V;
      float m = -std::numeric_limits<float>::infinity();
      #pragma omp simd reduction(max:m)
      for (int64_t j = 0; j < V; ++j) m = std::max(m, static_cast<float>(zr[j]));
      float s = 0;
      if (grad) {
        #pragma omp simd reduction(+:s)
        for (int64_t j = 0; j < V; ++j) { const float v = std::exp(static_cast<float>(zr[j]) - m); ep[j] = v; s += v; }
      } else {
        #pragma omp simd reduction(+:s)
        for (int64_t j = 0; j < V; ++j) s += std::exp(static_cast<float>(zr[j]) - m);
      }
      const int64_t t = y[r];
      loss[r] = std::log(s) + m - static_cast<float>(zr[t]);
      if (!grad) continue;
      const float gr = g ? g[r] : 1.0f, scale = gr / s;
      #pragma omp simd
      for (int64_t j = 0; j < V; ++j) zr[j] = static_cast<T>(ep[j] * scale);
      zr[t] = static_cast<T>(ep[t] * scale - gr);
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
    xent_rows_impl<c10::BFloat16>(z.data_ptr<c10::BFloat16>(), y, gp, loss.data_ptr<float>(), n, V, grad);
  else
    xent_rows_impl<float>(z.data_ptr<float>(), y, gp, loss.data_ptr<float>(), n, V, grad);
  return loss;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("xent_rows_", &xent_rows_, "cross-entropy per row of logits; with grad, softmax - one-hot in place");
}
