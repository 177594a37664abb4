// Steps 4-6 of LEV fused into one pass on the CPU (lev.py: spline_product with kernel="cpp").
// Built on first use by torch.utils.cpp_extension (lev.py: _cpp_kernel). The PyTorch path in lev.py
// (bspline_basis_sparse, then _SparseLogProduct) computes the same thing; tests/test_fast.py compares them.
//
// Step 4, the <= 3 live knots: x = u (kappa-1), g0 = floor(x + 1/2), t = x - g0 in [-1/2, 1/2). The knots
// g0-1, g0, g0+1 lie at distances 1+t, |t|, 1-t, so K(d) of lev.py: bspline_kernel becomes
//     k_{-1} = (1/2 - t)^2 / 2,   k_0 = 3/4 - t^2,   k_{+1} = (1/2 + t)^2 / 2      (0 for a knot off the grid)
// and w_j = k_j / sum_i k_i when normalising (the sum is 1 inside the grid, 7/8 at its ends).
// Step 5: phi_m = sum_j w_j S[g0-1+j, m] (S of this head and seed dimension).
// Step 6: log|M|_{n,l,m} = sum_p log(|phi_{n,l,p,m}| + eps), sign = prod_p sign(phi); M = sign exp(log|M|).
//
// Neither the basis (N, h, d_s, 3) nor phi (N, h, d_s, r) is ever stored: the forward keeps r accumulators
// per (id, head), the backward recomputes both. Sums of logs are taken as logs of products of `group`
// factors |phi| + eps >= eps, which cannot underflow (lev.py: _log_group picks `group` from eps and dtype).
// Backward, with gm = dL/dM * M and q_m = dL/dphi_m = gm_m sgn(phi_m) / (|phi_m| + eps) (the log form):
//   dL/dw_j = sum_m q_m S[g_j, m]      dL/dS[g_j, m] += w_j q_m      dL/du = (kappa-1) sum_j dL/dw_j dw_j/dx
// It runs in parallel over (head, seed dimension): each task owns its rows of dL/dS, so there are no races.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <vector>

// Step 4 for one u. Rows off the grid point at `zero` (a row of zeros) with weight 0, so the three rows
// are always distinct memory. dw (may be null) receives dw_j/dx.
template <typename T>
static inline void basis(T u, int64_t kappa, bool normalize, const T* rows, int64_t R, const T* zero,
                         const T** Sj, T* w, T* dw, int64_t* g) {
  const T x = u * T(kappa - 1);
  const int64_t g0 = static_cast<int64_t>(std::floor(x + T(0.5)));
  const T t = x - T(g0);
  T k[3] = {T(0.5) * (T(0.5) - t) * (T(0.5) - t), T(0.75) - t * t, T(0.5) * (T(0.5) + t) * (T(0.5) + t)};
  T dk[3] = {t - T(0.5), T(-2) * t, T(0.5) + t};
  T s = 0, ds = 0;
  for (int j = 0; j < 3; ++j) {
    const int64_t gj = g0 - 1 + j;
    const bool valid = gj >= 0 && gj < kappa;
    g[j] = valid ? gj : -1;
    Sj[j] = valid ? rows + gj * R : zero;
    if (!valid) { k[j] = 0; dk[j] = 0; }
    s += k[j]; ds += dk[j];
  }
  const T inv = normalize ? T(1) / s : T(1);             // w_j = k_j / s;  dw_j/dx = (dk_j - w_j ds) / s
  for (int j = 0; j < 3; ++j) {
    w[j] = k[j] * inv;
    if (dw) dw[j] = normalize ? (dk[j] - w[j] * ds) * inv : dk[j];
  }
}

template <typename T>
static void spline_fwd_impl(const T* u, const T* S, T* M, int64_t N, int64_t H, int64_t P, int64_t K,
                            int64_t R, bool normalize, T eps, int64_t group) {
  const std::vector<T> zero(R, T(0));
  at::parallel_for(0, N * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> buf(3 * R);
    T* acc = buf.data(); T* prod = acc + R; T* sg = prod + R;
    const T* Sj[3]; T w[3]; int64_t g[3];
    for (int64_t nl = begin; nl < end; ++nl) {                 // one (id, head)
      const int64_t l = nl % H;
      for (int64_t m = 0; m < R; ++m) { acc[m] = 0; prod[m] = 1; sg[m] = 1; }
      for (int64_t p = 0; p < P; ++p) {
        basis(u[nl * P + p], K, normalize, S + (l * P + p) * K * R, R, zero.data(), Sj, w, (T*)nullptr, g);
        const T* __restrict__ S0 = Sj[0]; const T* __restrict__ S1 = Sj[1]; const T* __restrict__ S2 = Sj[2];
        const T w0 = w[0], w1 = w[1], w2 = w[2];
        #pragma omp simd
        for (int64_t m = 0; m < R; ++m) {
          const T phi = w0 * S0[m] + w1 * S1[m] + w2 * S2[m];   // step 5
          prod[m] *= std::abs(phi) + eps;                      // step 6, |phi| + eps >= eps
          sg[m] = phi < 0 ? -sg[m] : sg[m];
        }
        if ((p + 1) % group == 0 || p == P - 1) {
          #pragma omp simd
          for (int64_t m = 0; m < R; ++m) { acc[m] += std::log(prod[m]); prod[m] = 1; }
        }
      }
      #pragma omp simd
      for (int64_t m = 0; m < R; ++m) M[nl * R + m] = sg[m] * std::exp(acc[m]);
    }
  });
}

// u, grad_u here are (h, d_s, N) and gm is (h, N, r): each task reads and writes contiguous runs.
template <typename T>
static void spline_bwd_impl(const T* u, const T* S, const T* gm, T* grad_u, T* grad_S, int64_t N, int64_t H,
                            int64_t P, int64_t K, int64_t R, bool normalize, T eps) {
  const std::vector<T> zero(R, T(0));
  at::parallel_for(0, H * P, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> scratch(R);                                 // dL/dS of a row off the grid (discarded)
    const T* Sj[3]; T w[3], dw[3]; int64_t g[3];
    for (int64_t lp = begin; lp < end; ++lp) {                 // one (head, seed dimension)
      const int64_t l = lp / P;
      const T* rows = S + lp * K * R;
      T* grows = grad_S + lp * K * R;
      std::fill(grows, grows + K * R, T(0));                   // this task's rows of dL/dS
      for (int64_t n = 0; n < N; ++n) {
        const int64_t o = lp * N + n;                          // u[l, p, n]
        basis(u[o], K, normalize, rows, R, zero.data(), Sj, w, dw, g);
        const T* __restrict__ S0 = Sj[0]; const T* __restrict__ S1 = Sj[1]; const T* __restrict__ S2 = Sj[2];
        T* __restrict__ G0 = g[0] >= 0 ? grows + g[0] * R : scratch.data();
        T* __restrict__ G1 = g[1] >= 0 ? grows + g[1] * R : scratch.data();   // on the grid unless u is not in [0, 1]
        T* __restrict__ G2 = g[2] >= 0 ? grows + g[2] * R : scratch.data();
        const T* __restrict__ gmr = gm + (l * N + n) * R;
        const T w0 = w[0], w1 = w[1], w2 = w[2];
        T d0 = 0, d1 = 0, d2 = 0;
        #pragma omp simd reduction(+:d0, d1, d2)
        for (int64_t m = 0; m < R; ++m) {
          const T phi = w0 * S0[m] + w1 * S1[m] + w2 * S2[m];   // recomputed, never stored
          const T sgn = phi > 0 ? T(1) : (phi < 0 ? T(-1) : T(0));
          const T q = gmr[m] * sgn / (std::abs(phi) + eps);     // dL/dphi
          d0 += q * S0[m]; d1 += q * S1[m]; d2 += q * S2[m];
          G0[m] += w0 * q; G1[m] += w1 * q; G2[m] += w2 * q;
        }
        grad_u[o] = T(K - 1) * (d0 * dw[0] + d1 * dw[1] + d2 * dw[2]);
      }
    }
  });
}

static void check(const torch::Tensor& u, const torch::Tensor& S) {
  TORCH_CHECK(u.device().is_cpu() && S.device().is_cpu(), "lev_kernel: CPU tensors only");
  TORCH_CHECK(u.is_contiguous() && S.is_contiguous(), "lev_kernel: contiguous tensors only");
  TORCH_CHECK(u.scalar_type() == S.scalar_type(), "lev_kernel: u and S must have the same dtype");
  TORCH_CHECK(u.dim() == 3 && S.dim() == 4 && u.size(1) == S.size(0) && u.size(2) == S.size(1),
              "lev_kernel: expected u (N, h, d_s) and S (h, d_s, kappa, r)");
}

// u (N, h, d_s); S (h, d_s, kappa, r) -> M (N, h, r)
torch::Tensor spline_fwd(torch::Tensor u, torch::Tensor S, bool normalize, double eps, int64_t group) {
  check(u, S);
  const int64_t N = u.size(0), H = u.size(1), P = u.size(2), K = S.size(2), R = S.size(3);
  auto M = torch::empty({N, H, R}, S.options());
  AT_DISPATCH_FLOATING_TYPES(S.scalar_type(), "spline_fwd", [&] {
    spline_fwd_impl<scalar_t>(u.data_ptr<scalar_t>(), S.data_ptr<scalar_t>(), M.data_ptr<scalar_t>(), N, H, P, K,
                              R, normalize, static_cast<scalar_t>(eps), std::max<int64_t>(group, 1));
  });
  return M;
}

// dL/dM, M (N, h, r) -> dL/du (N, h, d_s), dL/dS (h, d_s, kappa, r)
std::vector<torch::Tensor> spline_bwd(torch::Tensor u, torch::Tensor S, torch::Tensor grad_M, torch::Tensor M,
                                      bool normalize, double eps) {
  check(u, S);
  TORCH_CHECK(grad_M.dim() == 3 && grad_M.sizes() == M.sizes(), "lev_kernel: grad_M and M must be (N, h, r)");
  const int64_t N = u.size(0), H = u.size(1), P = u.size(2), K = S.size(2), R = S.size(3);
  auto gm = (grad_M * M).permute({1, 0, 2}).contiguous();       // dL/dlog|M|, (h, N, r)
  auto u_t = u.permute({1, 2, 0}).contiguous();                  // (h, d_s, N)
  auto grad_u_t = torch::empty_like(u_t);
  auto grad_S = torch::empty_like(S);                            // zeroed row by row in spline_bwd_impl
  AT_DISPATCH_FLOATING_TYPES(S.scalar_type(), "spline_bwd", [&] {
    spline_bwd_impl<scalar_t>(u_t.data_ptr<scalar_t>(), S.data_ptr<scalar_t>(), gm.data_ptr<scalar_t>(),
                              grad_u_t.data_ptr<scalar_t>(), grad_S.data_ptr<scalar_t>(), N, H, P, K, R, normalize,
                              static_cast<scalar_t>(eps));
  });
  return {grad_u_t.permute({2, 0, 1}).contiguous(), grad_S};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("spline_fwd", &spline_fwd, "LEV steps 4-6 forward: M");
  m.def("spline_bwd", &spline_bwd, "LEV steps 4-6 backward: (dL/du, dL/dS)");
}
