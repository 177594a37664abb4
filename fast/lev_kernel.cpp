// Steps 4-6 of LEV fused into one pass on the CPU (lev_fast.py: spline_product with kernel="cpp").
// Built on first use by torch.utils.cpp_extension (lev_fast.py: cpp_kernel). The PyTorch path in lev_fast.py
// (lev.bspline_basis_sparse, then TorchLogProduct) computes the same thing; tests/test_fast.py compares them.
//
// Step 4, the <= 3 live knots: x = u (kappa-1), g0 = floor(x + 1/2), t = x - g0 in [-1/2, 1/2). The knots
// g0-1, g0, g0+1 lie at distances 1+t, |t|, 1-t, so K(d) of lev.py: bspline_kernel becomes
//     k_{-1} = (1/2 - t)^2 / 2,   k_0 = 3/4 - t^2,   k_{+1} = (1/2 + t)^2 / 2      (0 for a knot off the grid)
// and w_j = k_j / sum_i k_i when normalising (the sum is 1 inside the grid, 7/8 at its ends).
// Step 5: phi_m = sum_j w_j S[g0-1+j, m] (S of this head and seed dimension). The kernel takes Delta, not
// S = 1 + Delta (S is never formed): phi_m = sum_j w_j + sum_j w_j Delta[g0-1+j, m], and dL/dDelta = dL/dS.
// Step 6: log|M|_{n,l,m} = sum_p log(|phi_{n,l,p,m}| + eps), sign = prod_p sign(phi); M = sign exp(log|M|).
//
// Neither phi (N, h, d_s, r) nor the basis is kept between forward and backward: the forward keeps r running
// products per (id, head), the backward recomputes both. The product of `group` factors sgn(phi) (|phi| + eps),
// |.| >= eps, cannot underflow (lev_fast.py: log_group picks `group` from eps and dtype); after each group the
// product is split into its exponent (summed as an integer) and a mantissa in [1, 2), so one log per (id, head,
// mode) gives log|M| (where eps is no normal number, each group's product goes into a log instead).
// Backward, with gm = dL/dM * M and q_m = dL/dphi_m = gm_m sgn(phi_m) / (|phi_m| + eps) (the log form):
//   dL/dS[g_j, m] += w_j q_m      dL/du = (kappa-1) sum_m q_m dphi_m/dx,   dphi_m/dx = sum_j (dw_j/dx) S[g_j, m]
//
// Speed (python bench.py measures it): both passes sort ids by their middle knot g0 (a counting sort), so that a
// bucket of ids shares the three rows of Delta it reads, kept in registers: inside the grid (nearly every id)
// phi and dphi/dx are one quadratic in t per bucket (A + t (B + t C), B + 2 t C) and where the bucket's S are
// all well above 0 the eps nudge is skipped (safe_bucket; bit-identical). The forward takes a head and a block of
// 64 ids, seed dimension by seed dimension; their running products stay in L1. The backward runs in parallel
// over (head, 64 bytes of seed dimensions), each task owning its rows of dL/dS (no races), with its block of u
// copied into a (block, N) buffer (ids are 4 KB apart in u); the bucket's three sums for dL/dS stay in
// registers. 1/(phi + eps) is a reciprocal estimate refined by one Newton step (AVX-512 or AVX2 + FMA, float32).
// Vector width and modes per pass follow the target (-march=native): with AVX-512, 512-bit vectors and 4 of them
// per pass in both directions (r = 64 float32 modes in one pass; 32 vector registers); otherwise 256-bit vectors,
// 4 per forward pass and 2 per backward pass (16 registers; the backward holds 6 arrays of NV vectors: more would
// spill; docs/performance.md has the measurements behind these choices).

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#if defined(__AVX512F__) || (defined(__AVX__) && defined(__FMA__))
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
constexpr int VEC_BYTES = 64, NV_FWD = 4, NV_BWD = 4;        // 512-bit vectors, 32 registers
#else
constexpr int VEC_BYTES = 32, NV_FWD = 4, NV_BWD = 2;        // 256-bit vectors (AVX2; two halves elsewhere), 16
#endif

// Step 4 for a run of values u[0..n) at once (one vectorised loop): each u's bucket key = g0 clamped to [-1, K],
// plus 1 (the ids of a bucket share their knots g0-1, g0, g0+1 and so their rows of Delta), t = x - g0, and the
// weights w_j of the knots j = 0, 1, 2 (g0-1, g0, g0+1), 0 for a knot off the grid (whose clamped row then adds
// nothing to phi); with grad, also dw_j/dx.
template <typename T>
struct Basis {
  std::vector<int32_t> key;
  std::vector<T> w0, w1, w2, dw0, dw1, dw2, tt;

  explicit Basis(int64_t n) : key(n), w0(n), w1(n), w2(n), dw0(n), dw1(n), dw2(n), tt(n) {}

  void compute(const T* u, int64_t n, int64_t K, bool normalize, bool grad) {
    if (grad) {
      if (normalize) run<true, true>(u, n, T(K - 1)); else run<true, false>(u, n, T(K - 1));
    } else {
      if (normalize) run<false, true>(u, n, T(K - 1)); else run<false, false>(u, n, T(K - 1));
    }
  }

  template <bool GRAD, bool NORMALIZE>
  void run(const T* __restrict__ u, int64_t n, const T last) {
    int32_t* __restrict__ kk = key.data();
    T* __restrict__ v0 = w0.data(); T* __restrict__ v1 = w1.data(); T* __restrict__ v2 = w2.data();
    T* __restrict__ e0 = dw0.data(); T* __restrict__ e1 = dw1.data(); T* __restrict__ e2 = dw2.data();
    T* __restrict__ ts = tt.data();
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T x = u[i] * last;                                          // the knots are 0..last; g0 is kept as a T
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
      kk[i] = static_cast<int32_t>(std::min(std::max(g0, T(-1)), last + T(1))) + 1;
      ts[i] = t;
      if (GRAD) {
        const T d0 = in0 * (t - T(0.5)), d1 = in1 * T(-2) * t, d2 = in2 * (T(0.5) + t);
        const T ds = NORMALIZE ? d0 + d1 + d2 : T(0);
        e0[i] = (d0 - a0 * ds) * inv; e1[i] = (d1 - a1 * ds) * inv; e2[i] = (d2 - a2 * ds) * inv;
      }
    }
  }
};

// Sorting a run of ids by bucket: start[k] .. start[k+1] are bucket k's positions in order (a counting sort).
template <typename T>
static inline void sort_by_bucket(const Basis<T>& b, int64_t n, int64_t NB, std::vector<int32_t>& order,
                                  std::vector<int32_t>& start, std::vector<int32_t>& fill) {
  std::fill(start.begin(), start.end(), 0);
  for (int64_t i = 0; i < n; ++i) ++start[b.key[i] + 1];
  for (int64_t k = 0; k < NB; ++k) start[k + 1] += start[k];
  std::copy(start.begin(), start.end() - 1, fill.begin());
  for (int64_t i = 0; i < n; ++i) order[fill[b.key[i]]++] = static_cast<int32_t>(i);
}

// The bits of an IEEE float: a product x = 2^e m, m in [1, 2), has e + BIAS in its EXP bits above MANT bits of
// mantissa. Where eps is not a normal number (0, say), a product could reach 0 or a subnormal, which has no
// such split: the forward then takes each group's log instead (RENORM = false).
template <typename T> struct FloatBits;
template <> struct FloatBits<float> { using U = uint32_t; using I = int32_t; static constexpr int MANT = 23; static constexpr U EXP = 0xffu; };
template <> struct FloatBits<double> { using U = uint64_t; using I = int64_t; static constexpr int MANT = 52; static constexpr U EXP = 0x7ffu; };

// One vector register of T (VEC_BYTES) with GCC's vector extensions (GCC and Clang): loads, the eps nudge, a
// reciprocal.
template <typename T> struct Vec {
  typedef T V __attribute__((vector_size(VEC_BYTES)));
  typedef typename FloatBits<T>::U VU __attribute__((vector_size(VEC_BYTES)));
  static constexpr int L = VEC_BYTES / sizeof(T);              // lanes
  template <bool FULL>
  static V load(const T* p, int k, int64_t len) {              // modes kL .. kL+L-1 (0 past len)
    V v;
    if (FULL || (k + 1) * L <= len) { std::memcpy(&v, p + k * L, sizeof v); return v; }
    for (int j = 0; j < L; ++j) v[j] = k * L + j < len ? p[k * L + j] : T(0);
    return v;
  }
  static V nudge(V phi, T eps) {                               // phi + copysign(eps, phi): sgn(phi) (|phi| + eps)
    const VU sign = VU{} + (typename FloatBits<T>::U(1) << (8 * sizeof(T) - 1));
    return phi + (V)(((VU)phi & sign) | (VU)(V{} + eps));
  }
  static V recip(V d) { return T(1) / d; }
  static V at(const T* p) { V v; std::memcpy(&v, p, sizeof v); return v; }
  static void put(T* p, V v) { std::memcpy(p, &v, sizeof v); }
  static void add_to(T* p, V v) { put(p, at(p) + v); }
  static T sum(V v) { T s = 0; for (int j = 0; j < L; ++j) s += v[j]; return s; }
};
#if defined(__AVX512F__)
template <> inline float Vec<float>::sum(V v) { return _mm512_reduce_add_ps((__m512)v); }
template <> inline Vec<float>::V Vec<float>::recip(V d) {      // 1/d to ~1 ulp: rcp14, then one Newton step
  const __m512 x = (__m512)d, r = _mm512_rcp14_ps(x);         // r + r (1 - x r)
  return (V)_mm512_fmadd_ps(r, _mm512_fnmadd_ps(x, r, _mm512_set1_ps(1.0f)), r);
}
#elif defined(__AVX__) && defined(__FMA__)
template <> inline Vec<float>::V Vec<float>::recip(V d) {      // 1/d to ~2 ulp: rcp (12 bits), one Newton step
  const __m256 x = (__m256)d, r = _mm256_rcp_ps(x);
  return (V)_mm256_fmadd_ps(r, _mm256_fnmadd_ps(x, r, _mm256_set1_ps(1.0f)), r);
}
#endif

// Where the three rows of S = 1 + Delta of a bucket are positive enough, the eps of step 6 is lost in rounding:
// phi is a weighted sum of three S's with weights summing to 7/8 .. 1, so |phi| >= minS 7/8, and when that is
// >= eps 2^(MANT + 2), phi + copysign(eps, phi) == phi exactly (eps is under half an ulp of phi), phi != 0 and
// 1 / (|phi| + eps) == 1 / |phi|: forward and backward skip the nudge and the phi = 0 test there (SAFE), with
// bit-identical results. S = 1 + Delta starts near 1 (Delta ~ N(0, 0.1^2)); a bucket with any S below the bound
// takes the general path. (A partial vector's padding zeros count as S = 1: harmless.)
template <typename T, int NV, bool FULL>
static inline bool safe_bucket(const T* D0, const T* D1, const T* D2, int64_t len, T eps) {
  using X = Vec<T>; using V = typename X::V; constexpr int L = X::L;
  const T bound = T(2) * eps * T(int64_t(1) << (FloatBits<T>::MANT + 2));   // 2 > 1 / (7/8): margin
  if (!(bound < T(1))) return false;                           // (double: never)
  V lo = V{} + std::numeric_limits<T>::max();
  for (int k = 0; k < NV; ++k)
    for (const T* row : {D0, D1, D2}) {
      const V x = FULL || (k + 1) * L <= len ? X::at(row + k * L) : X::template load<false>(row, k, len);
      lo = x < lo ? x : lo;                                    // (a partial vector's padding 0s: S = 1, safe)
    }
  T m = lo[0];
  for (int j = 1; j < L; ++j) m = std::min(m, lo[j]);
  return T(1) + m > bound;
}

// The forward on a bucket of a block's ids that share their middle knot g0,
// on `len` <= NV L modes: each id's running products (pr, rows of R) times sgn(phi) (|phi| + eps) (phi where
// SAFE). Inside the grid phi_m(t) = A_m + t (B_m + t C_m), with A, B, C from the bucket's three rows of Delta
// kept in registers (bwd_bucket has the algebra); at an end the Basis' weights and the clamped rows.
template <typename T, int NV, bool FULL, bool SAFE, bool INSIDE>
static inline void fwd_bucket(const int32_t* order, const Basis<T>& b, int64_t count, const T* D0, const T* D1,
                              const T* D2, T* pr, int64_t R, int64_t len, T eps) {
  using X = Vec<T>; using V = typename X::V; constexpr int L = X::L;
  V A[NV], B[NV], C[NV];
  #pragma GCC unroll 8
  for (int k = 0; k < NV; ++k) {
    const V dl0 = X::template load<FULL>(D0, k, len), dl1 = X::template load<FULL>(D1, k, len);
    const V dl2 = X::template load<FULL>(D2, k, len);
    if (INSIDE) {
      A[k] = T(1) + (dl0 + dl2) * T(0.125) + dl1 * T(0.75); B[k] = (dl2 - dl0) * T(0.5); C[k] = (dl0 + dl2) * T(0.5) - dl1;
    } else {
      A[k] = dl0; B[k] = dl1; C[k] = dl2;                      // the rows themselves
    }
  }
  for (int64_t t = 0; t < count; ++t) {
    const int32_t i = order[t];
    const T x = b.tt[i], w0 = b.w0[i], w1 = b.w1[i], w2 = b.w2[i], ws = w0 + w1 + w2;
    T* __restrict__ p = pr + int64_t(i) * R;
    #pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) {
      const V phi = INSIDE ? (C[k] * x + B[k]) * x + A[k] : ws + w0 * A[k] + w1 * B[k] + w2 * C[k];
      const V f = SAFE ? phi : X::nudge(phi, eps);
      if (FULL || (k + 1) * L <= len) X::put(p + k * L, X::at(p + k * L) * f);
      else for (int j = 0; j < L && k * L + j < len; ++j) p[k * L + j] *= f[j];
    }
  }
}

template <typename T, bool RENORM>
static void spline_fwd_impl(const T* u, const T* D, T* M, int64_t N, int64_t H, int64_t P, int64_t K,
                            int64_t R, bool normalize, T eps, int64_t group) {
  using U = typename FloatBits<T>::U; using I = typename FloatBits<T>::I;
  constexpr int MANT = FloatBits<T>::MANT; constexpr U EXP = FloatBits<T>::EXP; constexpr I BIAS = I(EXP >> 1);
  constexpr int64_t BLOCK = 64;                                // ids per task: their products, 16 KB, stay in L1
  constexpr int NV = NV_FWD, W = NV * Vec<T>::L;               // modes per pass (AVX-512, float32: 64)
  const int64_t NB = K + 2;                                    // buckets: g0 = -1 .. K (clamped)
  const T ln2 = T(0.693147180559945309417232121458);
  const int64_t blocks = (N + BLOCK - 1) / BLOCK;
  at::parallel_for(0, H * blocks, 1, [=](int64_t begin, int64_t end) {
    std::vector<T> prod(BLOCK * R), acc(RENORM ? 0 : BLOCK * R), sg(RENORM ? 0 : BLOCK * R);
    std::vector<I> ex(RENORM ? BLOCK * R : 0);
    Basis<T> b(BLOCK);
    std::vector<T> ub(P * BLOCK);                              // the block's u, (d_s, BLOCK)
    std::vector<int32_t> order(BLOCK), start(NB + 1), fill(NB);
    const T ep = eps;                                          // a local: stores to prod cannot alias it
    for (int64_t task = begin; task < end; ++task) {           // one head, a block of ids, p by p: the rows of
      const int64_t l = task / blocks, n0 = (task % blocks) * BLOCK, nb = std::min(BLOCK, N - n0);  // D(l, p)
      const int64_t len = nb * R;                              // (kappa r floats) stay in L1 while used
      std::fill(prod.begin(), prod.begin() + len, T(1));
      if (RENORM) std::fill(ex.begin(), ex.begin() + len, I(0));
      else { std::fill(acc.begin(), acc.begin() + len, T(0)); std::fill(sg.begin(), sg.begin() + len, T(1)); }
      for (int64_t i = 0; i < nb; ++i)                         // the block's u, (d_s, nb): ids are 4 KB apart
        for (int64_t p = 0; p < P; ++p) ub[p * BLOCK + i] = u[((n0 + i) * H + l) * P + p];
      for (int64_t p = 0; p < P; ++p) {
        b.compute(ub.data() + p * BLOCK, nb, K, normalize, false);   // step 4 for the block's ids
        sort_by_bucket(b, nb, NB, order, start, fill);
        const T* rows = D + (l * P + p) * K * R;
        auto row = [&](int64_t g) { return rows + std::min(std::max<int64_t>(g, 0), K - 1) * R; };
        for (int64_t k = 0; k < NB; ++k) {                     // steps 5-6, bucket by bucket
          const int64_t s = start[k], count = start[k + 1] - s, g0 = k - 1;
          if (!count) continue;
          const bool inside = g0 >= 1 && g0 + 1 < K;
          for (int64_t m0 = 0; m0 < R; m0 += W) {
            const int64_t len = std::min<int64_t>(W, R - m0);
            const T *D0 = row(g0 - 1) + m0, *D1 = row(g0) + m0, *D2 = row(g0 + 1) + m0;
            const int32_t* o = order.data() + s;
            T* pr = prod.data() + m0;
#define LEV_FWD(FU, SA, IN) fwd_bucket<T, NV, FU, SA, IN>(o, b, count, D0, D1, D2, pr, R, len, ep)
            if (len == W) {
              const bool sa = safe_bucket<T, NV, true>(D0, D1, D2, len, ep);
              if (inside) { if (sa) LEV_FWD(true, true, true); else LEV_FWD(true, false, true); }
              else { if (sa) LEV_FWD(true, true, false); else LEV_FWD(true, false, false); }
            } else {
              const bool sa = safe_bucket<T, NV, false>(D0, D1, D2, len, ep);
              if (inside) { if (sa) LEV_FWD(false, true, true); else LEV_FWD(false, false, true); }
              else { if (sa) LEV_FWD(false, true, false); else LEV_FWD(false, false, false); }
            }
#undef LEV_FWD
          }
        }
        if ((p + 1) % group == 0 || p == P - 1) {               // |prod| >= eps^group: no underflow
          T* __restrict__ pr = prod.data();
          if (RENORM) {
            I* __restrict__ e = ex.data();
            #pragma omp simd
            for (int64_t m = 0; m < len; ++m) {                // prod = 2^k x, x in [1, 2): e += k, prod = x
              U bits; T x = pr[m];
              std::memcpy(&bits, &x, sizeof x);
              e[m] += I((bits >> MANT) & EXP) - BIAS;
              bits = (bits & ~(EXP << MANT)) | (U(BIAS) << MANT);
              std::memcpy(&x, &bits, sizeof x);
              pr[m] = x;
            }
          } else {
            T* __restrict__ a = acc.data(); T* __restrict__ s = sg.data();
            #pragma omp simd
            for (int64_t m = 0; m < len; ++m) {
              a[m] += std::log(std::abs(pr[m]));
              s[m] = pr[m] < 0 ? -s[m] : s[m];
              pr[m] = 1;
            }
          }
        }
      }
      for (int64_t i = 0; i < nb; ++i) {
        T* __restrict__ out = M + ((n0 + i) * H + l) * R;
        const T* __restrict__ pr = prod.data() + i * R;
        if (RENORM) {                                          // log|M| = e ln 2 + log|prod|, sign of prod
          const I* __restrict__ e = ex.data() + i * R;
          #pragma omp simd
          for (int64_t m = 0; m < R; ++m) out[m] = std::copysign(std::exp(T(e[m]) * ln2 + std::log(std::abs(pr[m]))), pr[m]);
        } else {
          const T* __restrict__ a = acc.data() + i * R; const T* __restrict__ s = sg.data() + i * R;
          #pragma omp simd
          for (int64_t m = 0; m < R; ++m) out[m] = s[m] * std::exp(a[m]);
        }
      }
    }
  });
}

// The backward works on buckets of ids that share their middle knot g0 (so the same rows D0, D1, D2 of Delta and
// rows G0, G1, G2 of dL/dS), on `len` <= NV L modes at a time; the bucket's ids come in `order` (indices into
// the Basis and into gm) and each adds its part of sum_m q_m dphi_m/dx to its L slots of du (du is in bucket
// order; where all r modes fit in one pass, each id's dL/du is written at once instead). The sums for dL/dS
// stay in registers (a0, a1, a2) over the bucket's ids. Written with GCC's vector
// extensions (GCC and Clang): with plain arrays, a0-a2 stayed in memory. FULL: len == NV L.

// INSIDE, a bucket inside the grid (1 <= g0 <= kappa-2), nearly every id in practice: all three knots are live
// and the weights are the plain quadratic B-spline of t (normalising changes nothing: they sum to 1), so
//   phi_m(t) = A_m + t (B_m + t C_m),   dphi_m/dx = B_m + 2 t C_m,
//   A = 1 + (D0 + D2)/8 + 3/4 D1,  B = (D2 - D0)/2,  C = (D0 + D2)/2 - D1   (D_j: the rows of Delta; S = 1 + Delta)
// (w0 = (1/2 - t)^2/2 = 1/8 - t/2 + t^2/2, w1 = 3/4 - t^2, w2 = 1/8 + t/2 + t^2/2): per mode two multiply-adds
// for phi and one for dphi/dx, instead of three and three. At an end of the grid (g0 = -1, 0, kappa-1 or kappa)
// some knots are off the grid (weight 0, G == nullptr) and, when normalising, the weights are k_j / sum_i k_i:
// there A, B, C are the rows themselves and phi, dphi/dx come from the Basis' weights and their derivatives.
template <typename T, int NV, bool FULL, bool SAFE, bool INSIDE>
static inline void bwd_bucket(const int32_t* order, const Basis<T>& b, int64_t count, const T* D0, const T* D1,
                              const T* D2, const T* gm, int64_t R, int64_t len, T eps, T* G0, T* G1, T* G2,
                              T* du, T* gu, T scale) {
  using X = Vec<T>; using V = typename X::V; constexpr int L = X::L;
  V A[NV], B[NV], C[NV], a0[NV], a1[NV], a2[NV];
  const V zero = V{};
  #pragma GCC unroll 8
  for (int k = 0; k < NV; ++k) {
    const V dl0 = X::template load<FULL>(D0, k, len), dl1 = X::template load<FULL>(D1, k, len);
    const V dl2 = X::template load<FULL>(D2, k, len);
    if (INSIDE) {
      A[k] = T(1) + (dl0 + dl2) * T(0.125) + dl1 * T(0.75); B[k] = (dl2 - dl0) * T(0.5); C[k] = (dl0 + dl2) * T(0.5) - dl1;
    } else {
      A[k] = dl0; B[k] = dl1; C[k] = dl2;                      // the rows themselves
    }
    a0[k] = a1[k] = a2[k] = zero;
  }
  for (int64_t t = 0; t < count; ++t) {
    const int32_t i = order[t];
    const T x = b.tt[i], x2 = x + x, w0 = b.w0[i], w1 = b.w1[i], w2 = b.w2[i];
    const T dw0 = INSIDE ? T(0) : b.dw0[i], dw1 = INSIDE ? T(0) : b.dw1[i], dw2 = INSIDE ? T(0) : b.dw2[i];
    const T ws = w0 + w1 + w2, dws = dw0 + dw1 + dw2;         // S = 1 + Delta: phi = ws + sum_j w_j Delta_j
    const T* gmr = gm + int64_t(i) * R;
    V dv = zero;
    #pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) {                             // phi recomputed, never stored
      const V phi = INSIDE ? (C[k] * x + B[k]) * x + A[k] : ws + w0 * A[k] + w1 * B[k] + w2 * C[k];
      const V dphi = INSIDE ? C[k] * x2 + B[k] : dws + dw0 * A[k] + dw1 * B[k] + dw2 * C[k];
      const V r = X::recip(SAFE ? phi : X::nudge(phi, eps));   // sgn(phi) / (|phi| + eps)
      const V g = X::template load<FULL>(gmr, k, len);
      const V q = SAFE ? g * r : (phi != 0 ? g * r : zero);     // dL/dphi (0 where phi = 0)
      dv += q * dphi;
      a0[k] += w0 * q; a1[k] += w1 * q; a2[k] += w2 * q;
    }
    if (gu) gu[i] = scale * X::sum(dv);                        // one pass over the modes: dL/du at once
    else X::add_to(du + t * L, dv);
  }
  for (int k = 0; k < NV; ++k)
    for (int j = 0; j < L && k * L + j < len; ++j) {
      if (G0) G0[k * L + j] += a0[k][j];
      if (G1) G1[k * L + j] += a1[k][j];
      if (G2) G2[k * L + j] += a2[k][j];
    }
}

// u, grad_u (N, h, d_s); gm (h, N, r). A task is a head and a block of PB seed dimensions: it copies the block's
// u into a (PB, N) buffer (each id's PB values are one cache line) and writes dL/du back the same way.
template <typename T>
static void spline_bwd_impl(const T* u, const T* D, const T* gm, T* grad_u, T* grad_D, int64_t N, int64_t H,
                            int64_t P, int64_t K, int64_t R, bool normalize, T eps) {
  constexpr int NV = NV_BWD, L = Vec<T>::L, W = NV * L;       // modes per pass (AVX-512, float32: r = 64 in one)
  constexpr int64_t PB = 64 / sizeof(T);                      // seed dimensions per task
  const int64_t NB = K + 2;                                    // buckets: g0 = -1 .. K (clamped)
  const int64_t blocks = (P + PB - 1) / PB;
  const bool one_pass = R <= W;                                // then each id's dL/du is written at once
  at::parallel_for(0, H * blocks, 1, [=](int64_t begin, int64_t end) {
    Basis<T> b(N);
    std::vector<int32_t> order(N), start(NB + 1), fill(NB);
    std::vector<T> du(N * L);                                  // du slots in bucket order
    std::vector<T> ub(PB * N), gub(PB * N);                    // the block's u and dL/du, (PB, N)
    for (int64_t task = begin; task < end; ++task) {
      const int64_t l = task / blocks, p0 = (task % blocks) * PB, pn = std::min(PB, P - p0);
      for (int64_t i = 0; i < N; ++i)
        for (int64_t q = 0; q < pn; ++q) ub[q * N + i] = u[(i * H + l) * P + p0 + q];
      for (int64_t q = 0; q < pn; ++q) {                       // one (head, seed dimension)
        const int64_t lp = l * P + p0 + q;
        const T* rows = D + lp * K * R;
        T* grows = grad_D + lp * K * R;
        std::fill(grows, grows + K * R, T(0));                 // this task's rows of dL/dS
        if (!one_pass) std::fill(du.begin(), du.end(), T(0));
        b.compute(ub.data() + q * N, N, K, normalize, true);
        sort_by_bucket(b, N, NB, order, start, fill);          // so that each bucket's knots and rows are fixed
        auto row = [&](int64_t g) { return std::min(std::max<int64_t>(g, 0), K - 1) * R; };
        const T* gml = gm + l * N * R;
        for (int64_t k = 0; k < NB; ++k) {
          const int64_t s = start[k], count = start[k + 1] - s, g0 = k - 1;   // the knots g0-1, g0, g0+1
          if (!count) continue;
          const T *D0 = rows + row(g0 - 1), *D1 = rows + row(g0), *D2 = rows + row(g0 + 1);
          T* G0 = g0 - 1 >= 0 && g0 - 1 < K ? grows + row(g0 - 1) : nullptr;   // off the grid: no gradient
          T* G1 = g0 >= 0 && g0 < K ? grows + row(g0) : nullptr;
          T* G2 = g0 + 1 >= 0 && g0 + 1 < K ? grows + row(g0 + 1) : nullptr;
          const bool inside = g0 >= 1 && g0 + 1 < K;
          for (int64_t m0 = 0; m0 < R; m0 += W) {
            const int32_t* o = order.data() + s;
            T* g[3] = {G0 ? G0 + m0 : nullptr, G1 ? G1 + m0 : nullptr, G2 ? G2 + m0 : nullptr};
            T* d = du.data() + s * L;
            const int64_t len = std::min<int64_t>(W, R - m0);
#define LEV_BUCKET(FU, SA, IN) bwd_bucket<T, NV, FU, SA, IN>(o, b, count, D0 + m0, D1 + m0, D2 + m0, gml + m0, R, \
                                 len, eps, g[0], g[1], g[2], d, one_pass ? gub.data() + q * N : nullptr, T(K - 1))
            if (len == W) {
              const bool sa = safe_bucket<T, NV, true>(D0 + m0, D1 + m0, D2 + m0, len, eps);
              if (inside) { if (sa) LEV_BUCKET(true, true, true); else LEV_BUCKET(true, false, true); }
              else { if (sa) LEV_BUCKET(true, true, false); else LEV_BUCKET(true, false, false); }
            } else {
              const bool sa = safe_bucket<T, NV, false>(D0 + m0, D1 + m0, D2 + m0, len, eps);
              if (inside) { if (sa) LEV_BUCKET(false, true, true); else LEV_BUCKET(false, false, true); }
              else { if (sa) LEV_BUCKET(false, true, false); else LEV_BUCKET(false, false, false); }
            }
#undef LEV_BUCKET
          }
        }
        for (int64_t t = 0; t < N && !one_pass; ++t) {        // dL/du = (kappa - 1) sum_m q_m dphi_m/dx
          T sum = 0;
          for (int64_t j = 0; j < L; ++j) sum += du[t * L + j];
          gub[q * N + order[t]] = T(K - 1) * sum;
        }
      }
      for (int64_t i = 0; i < N; ++i)
        for (int64_t q = 0; q < pn; ++q) grad_u[(i * H + l) * P + p0 + q] = gub[q * N + i];
    }
  });
}

static void check(const torch::Tensor& u, const torch::Tensor& D) {
  TORCH_CHECK(u.device().is_cpu() && D.device().is_cpu(), "lev_kernel: CPU tensors only");
  TORCH_CHECK(u.is_contiguous() && D.is_contiguous(), "lev_kernel: contiguous tensors only");
  TORCH_CHECK(u.scalar_type() == D.scalar_type(), "lev_kernel: u and delta must have the same dtype");
  TORCH_CHECK(u.dim() == 3 && D.dim() == 4 && u.size(1) == D.size(0) && u.size(2) == D.size(1),
              "lev_kernel: expected u (N, h, d_s) and delta (h, d_s, kappa, r)");
}

// u (N, h, d_s); Delta (h, d_s, kappa, r), S = 1 + Delta -> M (N, h, r)
torch::Tensor spline_fwd(torch::Tensor u, torch::Tensor D, bool normalize, double eps, int64_t group) {
  check(u, D);
  const int64_t N = u.size(0), H = u.size(1), P = u.size(2), K = D.size(2), R = D.size(3);
  auto M = torch::empty({N, H, R}, D.options());
  AT_DISPATCH_FLOATING_TYPES(D.scalar_type(), "spline_fwd", [&] {
    const auto e = static_cast<scalar_t>(eps);
    const int64_t g = std::max<int64_t>(group, 1);
    if (e >= std::numeric_limits<scalar_t>::min())            // a normal eps: every |factor| >= eps is normal
      spline_fwd_impl<scalar_t, true>(u.data_ptr<scalar_t>(), D.data_ptr<scalar_t>(), M.data_ptr<scalar_t>(), N, H,
                                      P, K, R, normalize, e, g);
    else
      spline_fwd_impl<scalar_t, false>(u.data_ptr<scalar_t>(), D.data_ptr<scalar_t>(), M.data_ptr<scalar_t>(), N, H,
                                       P, K, R, normalize, e, g);
  });
  return M;
}

// dL/dM, M (N, h, r) -> dL/du (N, h, d_s), dL/dS (h, d_s, kappa, r)
std::vector<torch::Tensor> spline_bwd(torch::Tensor u, torch::Tensor D, torch::Tensor grad_M, torch::Tensor M,
                                      bool normalize, double eps) {
  check(u, D);
  TORCH_CHECK(grad_M.dim() == 3 && grad_M.sizes() == M.sizes(), "lev_kernel: grad_M and M must be (N, h, r)");
  const int64_t N = u.size(0), H = u.size(1), P = u.size(2), K = D.size(2), R = D.size(3);
  auto gm = (grad_M * M).permute({1, 0, 2}).contiguous();       // dL/dlog|M|, (h, N, r)
  auto grad_u = torch::empty_like(u);
  auto grad_D = torch::empty_like(D);                            // zeroed row by row in spline_bwd_impl
  AT_DISPATCH_FLOATING_TYPES(D.scalar_type(), "spline_bwd", [&] {
    spline_bwd_impl<scalar_t>(u.data_ptr<scalar_t>(), D.data_ptr<scalar_t>(), gm.data_ptr<scalar_t>(),
                              grad_u.data_ptr<scalar_t>(), grad_D.data_ptr<scalar_t>(), N, H, P, K, R, normalize,
                              static_cast<scalar_t>(eps));
  });
  return {grad_u, grad_D};
}

// Step 3 after the matmul (lev.py: squash), fused: per (id, head) row of d_s values x,
//   xhat = (x - mean) rstd,  rstd = 1 / sqrt(var + ln_eps)  (LayerNorm, biased variance, as F.layer_norm),
//   u = sigmoid((xhat w_l + b_l) / T).
// Backward, with dy = dL/du u (1 - u) / T and g = dy w_l (one row):
//   dL/db_l = sum_rows dy,  dL/dw_l = sum_rows dy xhat,  dL/dx = rstd (g - mean(g) - xhat mean(g xhat)).
// One pass over the row where PyTorch makes five (normalise, scale, shift, divide, sigmoid) and as many back;
// the backward recomputes mean and rstd (two sums per row) rather than keep them.
// Sums over a row with whole vectors (GCC's "omp simd reduction" went through memory here), then the tail.
template <typename T>
static inline void row_stats(const T* __restrict__ xr, int64_t P, T ln_eps, T& mu, T& rs) {
  using X = Vec<T>; using V = typename X::V; constexpr int L = X::L;
  V s = V{};
  int64_t p = 0;
  for (; p + L <= P; p += L) s += X::at(xr + p);
  T sum = X::sum(s);
  for (int64_t q = p; q < P; ++q) sum += xr[q];
  mu = sum / T(P);
  V v = V{};
  for (p = 0; p + L <= P; p += L) { const V d = X::at(xr + p) - mu; v += d * d; }
  T var = X::sum(v);
  for (int64_t q = p; q < P; ++q) var += (xr[q] - mu) * (xr[q] - mu);
  rs = T(1) / std::sqrt(var / T(P) + ln_eps);
}

template <typename T>
static void squash_fwd_impl(const T* x, const T* w, const T* b, T* u, int64_t N, int64_t H, int64_t P, T inv_t,
                            T ln_eps) {
  at::parallel_for(0, N * H, 64, [=](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const T* __restrict__ xr = x + row * P;
      const T* __restrict__ wl = w + (row % H) * P; const T* __restrict__ bl = b + (row % H) * P;
      T* __restrict__ ur = u + row * P;
      T mu, rs;
      row_stats(xr, P, ln_eps, mu, rs);
      #pragma omp simd
      for (int64_t p = 0; p < P; ++p) {                        // |z| <= 80: exp stays finite (sigmoid(80) = 1 - 2e-35)
        const T z = std::min(std::max(-((xr[p] - mu) * rs * wl[p] + bl[p]) * inv_t, T(-80)), T(80));
        ur[p] = T(1) / (T(1) + std::exp(z));
      }
    }
  });
}

// A task is a head: it owns dL/dw_l and dL/db_l (no races) and walks the head's rows of every id.
template <typename T>
static void squash_bwd_impl(const T* gu, const T* x, const T* u, const T* w, T* gx, T* gw, T* gb, int64_t N,
                            int64_t H, int64_t P, T inv_t, T ln_eps) {
  using X = Vec<T>; using V = typename X::V; constexpr int L = X::L;
  at::parallel_for(0, H, 1, [=](int64_t begin, int64_t end) {
    std::vector<T> xh(P), g(P);
    for (int64_t l = begin; l < end; ++l) {
      const T* __restrict__ wl = w + l * P;
      T* __restrict__ gwl = gw + l * P; T* __restrict__ gbl = gb + l * P;
      std::fill(gwl, gwl + P, T(0)); std::fill(gbl, gbl + P, T(0));
      T* __restrict__ xhp = xh.data(); T* __restrict__ gp = g.data();
      for (int64_t n = 0; n < N; ++n) {
        const int64_t row = n * H + l;
        const T* __restrict__ xr = x + row * P; const T* __restrict__ ur = u + row * P;
        const T* __restrict__ gr = gu + row * P;
        T mu, rs;
        row_stats(xr, P, ln_eps, mu, rs);
        V sgv = V{}, sgxv = V{};
        int64_t p = 0;
        for (; p + L <= P; p += L) {
          const V xhat = (X::at(xr + p) - mu) * rs, uu = X::at(ur + p);
          const V dy = X::at(gr + p) * uu * (T(1) - uu) * inv_t, gg = dy * X::at(wl + p);
          X::add_to(gbl + p, dy); X::add_to(gwl + p, dy * xhat);
          X::put(xhp + p, xhat); X::put(gp + p, gg);
          sgv += gg; sgxv += gg * xhat;
        }
        T sg = X::sum(sgv), sgx = X::sum(sgxv);
        for (; p < P; ++p) {                                   // the tail, the same in scalars
          const T xhat = (xr[p] - mu) * rs, dy = gr[p] * ur[p] * (T(1) - ur[p]) * inv_t;
          gbl[p] += dy; gwl[p] += dy * xhat;
          xhp[p] = xhat; gp[p] = dy * wl[p];
          sg += gp[p]; sgx += gp[p] * xhat;
        }
        const T mg = sg / T(P), mgx = sgx / T(P);
        T* __restrict__ gxr = gx + row * P;
        #pragma omp simd
        for (int64_t q = 0; q < P; ++q) gxr[q] = rs * (gp[q] - mg - xhp[q] * mgx);
      }
    }
  });
}

static void check_squash(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  TORCH_CHECK(x.device().is_cpu() && w.device().is_cpu() && b.device().is_cpu(), "lev_kernel: CPU tensors only");
  TORCH_CHECK(x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "lev_kernel: contiguous tensors only");
  TORCH_CHECK(x.scalar_type() == w.scalar_type() && x.scalar_type() == b.scalar_type(),
              "lev_kernel: x, ln_weight and ln_bias must have the same dtype");
  TORCH_CHECK(x.dim() == 3 && w.dim() == 2 && w.sizes() == b.sizes() && x.size(1) == w.size(0) && x.size(2) == w.size(1),
              "lev_kernel: expected x (N, h, d_s) and ln_weight, ln_bias (h, d_s)");
}

// x (N, h, d_s); w, b (h, d_s) -> u (N, h, d_s)
torch::Tensor squash_fwd(torch::Tensor x, torch::Tensor w, torch::Tensor b, double temperature, double ln_eps) {
  check_squash(x, w, b);
  const int64_t N = x.size(0), H = x.size(1), P = x.size(2);
  auto u = torch::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squash_fwd", [&] {
    squash_fwd_impl<scalar_t>(x.data_ptr<scalar_t>(), w.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                              u.data_ptr<scalar_t>(), N, H, P, static_cast<scalar_t>(1.0 / temperature),
                              static_cast<scalar_t>(ln_eps));
  });
  return u;
}

// dL/du, x, u (N, h, d_s); w (h, d_s) -> dL/dx (N, h, d_s), dL/dw, dL/db (h, d_s)
std::vector<torch::Tensor> squash_bwd(torch::Tensor grad_u, torch::Tensor x, torch::Tensor u, torch::Tensor w,
                                      double temperature, double ln_eps) {
  check_squash(x, w, w);
  TORCH_CHECK(grad_u.sizes() == x.sizes() && u.sizes() == x.sizes() && grad_u.is_contiguous() && u.is_contiguous() &&
              grad_u.scalar_type() == x.scalar_type() && u.scalar_type() == x.scalar_type(),
              "lev_kernel: squash_bwd expects grad_u and u like x (N, h, d_s), contiguous");
  const int64_t N = x.size(0), H = x.size(1), P = x.size(2);
  auto gx = torch::empty_like(x), gw = torch::empty_like(w), gb = torch::empty_like(w);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "squash_bwd", [&] {
    squash_bwd_impl<scalar_t>(grad_u.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(),
                              w.data_ptr<scalar_t>(), gx.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(),
                              gb.data_ptr<scalar_t>(), N, H, P, static_cast<scalar_t>(1.0 / temperature),
                              static_cast<scalar_t>(ln_eps));
  });
  return {gx, gw, gb};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("spline_fwd", &spline_fwd, "LEV steps 4-6 forward: M");
  m.def("spline_bwd", &spline_bwd, "LEV steps 4-6 backward: (dL/du, dL/dS)");
  m.def("squash_fwd", &squash_fwd, "LEV step 3 after the matmul, forward: u");
  m.def("squash_bwd", &squash_bwd, "LEV step 3 after the matmul, backward: (dL/dx, dL/dw, dL/db)");
}
