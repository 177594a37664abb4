// Steps 4-6 of LEV fused into one pass on the CPU (lev_fast.py: spline_product with kernel="cpp").
// Built on first use by torch.utils.cpp_extension (lev_fast.py: cpp_kernel). The PyTorch path in lev_fast.py
// (lev.bspline_basis_sparse, then TorchLogProduct) computes the same thing; tests/test_fast.py compares them.
//
// Step 4, the <= 3 live knots: x = u (kappa-1), g0 = floor(x + 1/2), t = x - g0 in [-1/2, 1/2). The knots
// g0-1, g0, g0+1 lie at distances 1+t, |t|, 1-t, so K(d) of lev.py: bspline_kernel becomes
//     k_{-1} = (1/2 - t)^2 / 2,   k_0 = 3/4 - t^2,   k_{+1} = (1/2 + t)^2 / 2      (0 for a knot off the grid)
// and w_j = k_j / sum_i k_i when normalising (the sum is 1 inside the grid, 7/8 at its ends).
// Step 5: phi_m = sum_j w_j S[g0-1+j, m] (S of this head and seed dimension).
// Step 6: log|M|_{n,l,m} = sum_p log(|phi_{n,l,p,m}| + eps), sign = prod_p sign(phi); M = sign exp(log|M|).
//
// Neither phi (N, h, d_s, r) nor the basis is kept between forward and backward: the forward keeps r
// accumulators per (id, head), the backward recomputes both. Sums of logs are taken as logs of products of
// `group` factors sgn(phi) (|phi| + eps), |.| >= eps, which cannot underflow (lev_fast.py: log_group picks
// `group` from eps and dtype); the sign is read off each group's product.
// Backward, with gm = dL/dM * M and q_m = dL/dphi_m = gm_m sgn(phi_m) / (|phi_m| + eps) (the log form):
//   dL/dS[g_j, m] += w_j q_m      dL/du = (kappa-1) sum_m q_m dphi_m/dx,   dphi_m/dx = sum_j (dw_j/dx) S[g_j, m]
//
// Speed (python bench.py measures it): step 4 runs for a whole run of u's in one vectorised loop (Basis); the
// forward goes head by head, so a thread's head of S (d_s kappa r floats, 512 KB at the defaults) stays in its
// cache; the backward runs in parallel over (head, seed dimension), each task owning its rows of dL/dS (no races).
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

// Step 4 for a run of values u[0..n) at once (one vectorised loop): for each knot j = 0, 1, 2 (g0-1, g0, g0+1)
// the offset g_j R of its row of S, clamped onto the grid, and its weight w_j, 0 for a knot off the grid (so a
// clamped row adds nothing to phi); with grad, also dw_j/dx.
template <typename T>
struct Basis {
  std::vector<int32_t> off0, off1, off2;
  std::vector<T> w0, w1, w2, dw0, dw1, dw2;

  explicit Basis(int64_t n) : off0(n), off1(n), off2(n), w0(n), w1(n), w2(n), dw0(n), dw1(n), dw2(n) {}

  void compute(const T* u, int64_t n, int64_t K, int64_t R, bool normalize, bool grad) {
    const int32_t rr = static_cast<int32_t>(R);
    if (grad) {
      if (normalize) run<true, true>(u, n, T(K - 1), rr); else run<true, false>(u, n, T(K - 1), rr);
    } else {
      if (normalize) run<false, true>(u, n, T(K - 1), rr); else run<false, false>(u, n, T(K - 1), rr);
    }
  }

  template <bool GRAD, bool NORMALIZE>
  void run(const T* __restrict__ u, int64_t n, const T last, const int32_t rr) {
    int32_t* __restrict__ o0 = off0.data(); int32_t* __restrict__ o1 = off1.data(); int32_t* __restrict__ o2 = off2.data();
    T* __restrict__ v0 = w0.data(); T* __restrict__ v1 = w1.data(); T* __restrict__ v2 = w2.data();
    T* __restrict__ e0 = dw0.data(); T* __restrict__ e1 = dw1.data(); T* __restrict__ e2 = dw2.data();
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T x = u[i] * last;                                 // the knots are 0..last; g0 is kept as a T
      const T g0 = std::floor(x + T(0.5));
      const T t = x - g0;
      const T in0 = g0 >= T(1) && g0 <= last + T(1) ? T(1) : T(0);   // 1 if knot g0-1 is on the grid
      const T in1 = g0 >= T(0) && g0 <= last ? T(1) : T(0);
      const T in2 = g0 >= T(-1) && g0 <= last - T(1) ? T(1) : T(0);
      const T k0 = in0 * T(0.5) * (T(0.5) - t) * (T(0.5) - t);
      const T k1 = in1 * (T(0.75) - t * t);
      const T k2 = in2 * T(0.5) * (T(0.5) + t) * (T(0.5) + t);
      const T inv = NORMALIZE ? T(1) / (k0 + k1 + k2) : T(1);  // w_j = k_j / s;  dw_j/dx = (dk_j - w_j ds) / s
      const T a0 = k0 * inv, a1 = k1 * inv, a2 = k2 * inv;
      v0[i] = a0; v1[i] = a1; v2[i] = a2;
      if (GRAD) {
        const T d0 = in0 * (t - T(0.5)), d1 = in1 * T(-2) * t, d2 = in2 * (T(0.5) + t);
        const T ds = NORMALIZE ? d0 + d1 + d2 : T(0);
        e0[i] = (d0 - a0 * ds) * inv; e1[i] = (d1 - a1 * ds) * inv; e2[i] = (d2 - a2 * ds) * inv;
      }
      o0[i] = static_cast<int32_t>(std::min(std::max(g0 - T(1), T(0)), last)) * rr;
      o1[i] = static_cast<int32_t>(std::min(std::max(g0, T(0)), last)) * rr;
      o2[i] = static_cast<int32_t>(std::min(std::max(g0 + T(1), T(0)), last)) * rr;
    }
  }
};

template <typename T>
static void spline_fwd_impl(const T* u, const T* S, T* M, int64_t N, int64_t H, int64_t P, int64_t K,
                            int64_t R, bool normalize, T eps, int64_t group) {
  at::parallel_for(0, H * N, 1, [=](int64_t begin, int64_t end) {
    std::vector<T> buf(3 * R);
    T* acc = buf.data(); T* prod = acc + R; T* sg = prod + R;
    Basis<T> b(P);
    for (int64_t ln = begin; ln < end; ++ln) {                 // one (head, id): head-major, so a task's
      const int64_t l = ln / N, nl = (ln % N) * H + l;         // S_l (d_s kappa r floats) stays in cache
      b.compute(u + nl * P, P, K, R, normalize, false);        // step 4 for every seed dimension p
      for (int64_t m = 0; m < R; ++m) { acc[m] = 0; prod[m] = 1; sg[m] = 1; }
      for (int64_t p = 0; p < P; ++p) {
        const T* rows = S + (l * P + p) * K * R;
        const T* __restrict__ S0 = rows + b.off0[p]; const T* __restrict__ S1 = rows + b.off1[p];
        const T* __restrict__ S2 = rows + b.off2[p];
        const T w0 = b.w0[p], w1 = b.w1[p], w2 = b.w2[p];
        #pragma omp simd
        for (int64_t m = 0; m < R; ++m) {
          const T phi = w0 * S0[m] + w1 * S1[m] + w2 * S2[m];   // step 5
          prod[m] *= phi + std::copysign(eps, phi);            // step 6, sgn(phi) (|phi| + eps)
        }
        if ((p + 1) % group == 0 || p == P - 1) {               // |prod| >= eps^group: no underflow
          #pragma omp simd
          for (int64_t m = 0; m < R; ++m) {
            acc[m] += std::log(std::abs(prod[m]));
            sg[m] = prod[m] < 0 ? -sg[m] : sg[m];
            prod[m] = 1;
          }
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
  constexpr int64_t BLOCK = 256;                               // ids per run of step 4
  at::parallel_for(0, H * P, 1, [=](int64_t begin, int64_t end) {
    std::vector<T> scratch(3 * R);                             // dL/dS of knots of weight 0 (discarded)
    Basis<T> b(BLOCK);
    for (int64_t lp = begin; lp < end; ++lp) {                 // one (head, seed dimension)
      const int64_t l = lp / P;
      const T* rows = S + lp * K * R;
      T* grows = grad_S + lp * K * R;
      std::fill(grows, grows + K * R, T(0));                   // this task's rows of dL/dS
      for (int64_t n0 = 0; n0 < N; n0 += BLOCK) {
        const int64_t nb = std::min(BLOCK, N - n0);
        b.compute(u + lp * N + n0, nb, K, R, normalize, true);
        for (int64_t i = 0; i < nb; ++i) {
          const T w0 = b.w0[i], w1 = b.w1[i], w2 = b.w2[i], dw0 = b.dw0[i], dw1 = b.dw1[i], dw2 = b.dw2[i];
          const T* __restrict__ S0 = rows + b.off0[i]; const T* __restrict__ S1 = rows + b.off1[i];
          const T* __restrict__ S2 = rows + b.off2[i];
          // a knot of weight 0 (off the grid, its row clamped onto it) sends its zero gradient to a row of
          // scratch of its own, so the three rows written are always distinct
          T* __restrict__ G0 = w0 != 0 ? grows + b.off0[i] : scratch.data();
          T* __restrict__ G1 = w1 != 0 ? grows + b.off1[i] : scratch.data() + R;
          T* __restrict__ G2 = w2 != 0 ? grows + b.off2[i] : scratch.data() + 2 * R;
          const T* __restrict__ gmr = gm + (l * N + n0 + i) * R;
          T du = 0;                                            // sum_m q_m dphi_m/dx, dphi/dx = sum_j dw_j S_j
          #pragma omp simd reduction(+:du)
          for (int64_t m = 0; m < R; ++m) {
            const T phi = w0 * S0[m] + w1 * S1[m] + w2 * S2[m];   // recomputed, never stored
            const T r = T(1) / (phi + std::copysign(eps, phi));   // sgn(phi) / (|phi| + eps) where phi != 0
            const T q = phi != 0 ? gmr[m] * r : T(0);             // dL/dphi
            du += q * (dw0 * S0[m] + dw1 * S1[m] + dw2 * S2[m]);
            G0[m] += w0 * q; G1[m] += w1 * q; G2[m] += w2 * q;
          }
          grad_u[lp * N + n0 + i] = T(K - 1) * du;
        }
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
