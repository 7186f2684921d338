/* The fused training loop on a CUDA GPU (attnsvm.gd.fused_cuda; docs/science.md §3, "Fused
 * step"): fused.c's arithmetic, one GPU thread per seed instead of one vector lane.
 *
 * Every formula, every operation and its order are fused.c's, written for one seed: sums in
 * increasing index order from +0, multiply-adds as explicit fma() and nothing else contracted
 * (nvcc --fmad=false; the host build -ffp-contract=off), IEEE division and square root, exp
 * the loop's own (vexp1, fused.c's vexp for one lane). So a seed's W(k) and softmax have the
 * same bits as in fused.c, on any GPU and in any batch; the loss at checkpoints calls the
 * platform's log1p (within an ulp of libm's on a GPU, libm's itself in the host build).
 *
 * Arrays are seed-innermost across the whole batch: element j of seed s lives at p[j * S + s],
 * so the 32 threads of a warp read 32 consecutive doubles (coalesced), as the lanes of a
 * vector do in fused.c. The small products are register-tiled as there (tile / abt).
 *
 * The same file builds for the host (g++ -x c++, no __CUDACC__): then
 * attnsvm_train_linear_host runs the per-seed routine over the seeds in a loop. The tests
 * compare that build with fused.c bit for bit on any machine with a C++ compiler, so the
 * arithmetic the GPU runs is checked where there is no GPU (tests/test_fused_cuda.py).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define HD static __host__ __device__ __forceinline__
#define HDM __host__ __device__ __forceinline__
#else
#define HD static inline
#define HDM inline
#endif

/* A strided view: element j at p[j * st] (st = the batch's seed count S). */
struct V {
    double *p;
    size_t st;
    HDM double &operator[](size_t j) const { return p[j * st]; }
    HDM V operator+(size_t o) const { return V{p + o * st, st}; }
};

HD int64_t bits(double x) {
#ifdef __CUDA_ARCH__
    return __double_as_longlong(x);
#else
    int64_t b;
    memcpy(&b, &x, 8);
    return b;
#endif
}

HD double from_bits(int64_t b) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double(b);
#else
    double x;
    memcpy(&x, &b, 8);
    return x;
#endif
}

/* fused.c's vexp for one lane: Cody-Waite reduction, degree-13 Taylor polynomial, exact
 * power-of-two scaling; the same operations in the same order. */
HD double vexp1(double x) {
    const double shift = 0x1.8p52;
    double xc = x < -746.0 ? -746.0 : x;
    xc = xc > 710.0 ? 710.0 : xc;
    double t = xc * 0x1.71547652b82fep0 + shift;
    double k = t - shift;
    double r = fma(k, -0x1.62e42fefa39efp-1, xc);
    r = fma(k, -0x1.abc9e3b39803fp-56, r);
    const double c[14] = {
        1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
        1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
        1.0 / 6227020800.0};
    double p = c[13];
#ifdef __CUDACC__
#pragma unroll
#endif
    for (int j = 12; j >= 0; j--) p = fma(p, r, c[j]);
    int64_t ki = bits(t) - bits(shift);
    int64_t kh = ki >> 1, kl = ki - kh;
    double s1 = from_bits((int64_t)((uint64_t)(kh + 1023) << 52));
    double s2 = from_bits((int64_t)((uint64_t)(kl + 1023) << 52));
    return (p * s1) * s2;
}

/* theta -= lr G / (||G||_F + eps), fused.c's normalized_update for one seed: G scaled by the
 * power of two of max |G| (at least the smallest normal number), its sum of squares in four
 * partial sums (j mod 4), combined as (s0 + s1) + (s2 + s3). */
HD void normalized_update(V theta, V g, int len, double lr, double eps, double tiny) {
    int64_t mx = 0;
    for (int j = 0; j < len; j++) {
        int64_t a = bits(g[j]) & INT64_MAX;
        mx = a > mx ? a : mx;
    }
    int64_t lo = bits(tiny);
    mx = mx > lo ? mx : lo;
    double inv = 1.0 / from_bits(mx & INT64_C(0x7ff0000000000000));
    double ss[4] = {0.0, 0.0, 0.0, 0.0};
    for (int j = 0; j < len; j++) {
        double gj = g[j] * inv;
        g[j] = gj;
        ss[j & 3] = fma(gj, gj, ss[j & 3]);
    }
    double den = sqrt((ss[0] + ss[1]) + (ss[2] + ss[3])) + inv * eps;
    double mscale = -((1.0 / den) * lr);
    for (int j = 0; j < len; j++) theta[j] = fma(g[j], mscale, theta[j]);
}

/* One register tile of C = A B^T (fused.c's tile): every sum over j in increasing order from
 * +0, so the tiling changes no bit. */
template <int TP, int TQ>
HD void tile(int J, V Cm, int cp, int cq, V A, int ap, int aj, V B, int bq, int bj) {
    double acc[TP][TQ];
    for (int u = 0; u < TP; u++)
        for (int w = 0; w < TQ; w++) acc[u][w] = 0.0;
    for (int j = 0; j < J; j++) {
        double a[TP], b[TQ];
        for (int u = 0; u < TP; u++) a[u] = A[(size_t)(u * ap + j * aj)];
        for (int w = 0; w < TQ; w++) b[w] = B[(size_t)(w * bq + j * bj)];
        for (int u = 0; u < TP; u++)
            for (int w = 0; w < TQ; w++) acc[u][w] = fma(a[u], b[w], acc[u][w]);
    }
    for (int u = 0; u < TP; u++)
        for (int w = 0; w < TQ; w++) Cm[(size_t)(u * cp + w * cq)] = acc[u][w];
}

#define TILE(tp, tq) tile<tp, tq>(J, Cm + (size_t)(p * cp + q * cq), cp, cq, \
                                  A + (size_t)(p * ap), ap, aj, B + (size_t)(q * bq), bq, bj)

/* C[p cp + q cq] = sum_j A[p ap + j aj] B[q bq + j bj] over P x Q outputs (fused.c's abt). */
HD void abt(int P, int Q, int J, V Cm, int cp, int cq, V A, int ap, int aj, V B, int bq,
            int bj) {
    if (Q == 1) {
        int p = 0, q = 0;
        for (; p + 4 <= P; p += 4) TILE(4, 1);
        for (; p < P; p++) TILE(1, 1);
        return;
    }
    for (int p = 0; p < P; p += 4) {
        int tp = P - p < 4 ? P - p : 4;
        for (int q = 0; q < Q; q += 4) {
            int tq = Q - q < 4 ? Q - q : 4;
            switch (tp * 4 + tq) {
            case 4 * 4 + 4: TILE(4, 4); break;
            case 4 * 4 + 3: TILE(4, 3); break;
            case 4 * 4 + 2: TILE(4, 2); break;
            case 4 * 4 + 1: TILE(4, 1); break;
            case 3 * 4 + 4: TILE(3, 4); break;
            case 3 * 4 + 3: TILE(3, 3); break;
            case 3 * 4 + 2: TILE(3, 2); break;
            case 3 * 4 + 1: TILE(3, 1); break;
            case 2 * 4 + 4: TILE(2, 4); break;
            case 2 * 4 + 3: TILE(2, 3); break;
            case 2 * 4 + 2: TILE(2, 2); break;
            case 2 * 4 + 1: TILE(2, 1); break;
            case 1 * 4 + 4: TILE(1, 4); break;
            case 1 * 4 + 3: TILE(1, 3); break;
            case 1 * 4 + 2: TILE(1, 2); break;
            default: TILE(1, 1); break;
            }
        }
    }
}

/* doubles per seed of train_seed's scratch space (fused.c's block_work) */
HD size_t seed_work(int n, int T, int d, int m) {
    size_t mm = m > 0 ? m : 1;
    return (size_t)2 * d * d + 2 * d * mm + 3 * (size_t)n * T + 2 * (size_t)n * d + 5 * n;
}

/* fused.c's train_block for one seed: X (n,T,d), Y (n), Z (n,d), v (d), theta W (d,d) or K
 * then Q (d,m each), updated in place; checkpoint outputs Wout (C,d,d), sout (C,n,T), lout
 * (C); *probe: 0 where every loss and the last theta are finite, else NaN. */
HD void train_seed(int n, int T, int d, int m, V X, V Y, V Z, V v, V theta, double lr,
                   double eps, double tiny, double ridge, int iterations, const int *ks, int C,
                   V Wout, V sout, V lout, V probe_out, V work) {
    int dd = d * d, mm = m > 0 ? m : 1;
    V Wk = work;                /* d*d: K Q^T (KQ) */
    V GW = Wk + dd;             /* d*d */
    V G = GW + dd;              /* 2*d*m (KQ) */
    V c = G + 2 * d * mm;       /* n*T token scores v^T x_it */
    V ls = c + n * T;           /* n*T logits, then softmax */
    V q = ls + n * T;           /* n*T: dl_it */
    V P = q + n * T;            /* n*d: X_i^T dl_i */
    V WZ = P + n * d;           /* n*d: W z_i */
    V mi = WZ + n * d;          /* n: margins */
    V em = mi + n;              /* n: exp(-|m_i|) */
    V gy = em + n;              /* n: -Y_i / n */
    V top = gy + n;             /* n: top logit, then sum_t s_it e_it */
    V ctop = top + n;           /* n: the top token's score */
    V K = theta, Q = theta + d * m;
    V W = m > 0 ? Wk : theta;
    double probe = 0.0;
    int slot = 0;
    abt(n * T, 1, d, c, 1, 0, X, d, 1, v, 0, 1);
    for (int i = 0; i < n; i++) gy[i] = -Y[i] / (double)n;
    for (int it = 0; it <= iterations; it++) {
        int last = it == iterations;
        if (m > 0) abt(d, d, m, Wk, d, 1, K, m, 1, Q, m, 1); /* W = K Q^T */
        abt(n, d, d, WZ, d, 1, Z, d, 1, W, d, 1);           /* W z_i */
        for (int i = 0; i < n; i++) /* logits x_it^T W z_i */
            abt(T, 1, d, ls + i * T, 1, 0, X + i * T * d, d, 1, WZ + i * d, 0, 1);
        for (int i = 0; i < n; i++) { /* the top token */
            V ci = c + i * T, si = ls + i * T;
            double lt = si[0], ca = ci[0];
            for (int t = 1; t < T; t++) {
                double st = si[t];
                bool up = (st > lt) || ((st != st) && (lt == lt));
                lt = up ? st : lt;
                ca = up ? ci[t] : ca;
            }
            top[i] = lt;
            ctop[i] = ca;
        }
        for (int i = 0; i < n; i++)
            for (int t = 0; t < T; t++) ls[i * T + t] = vexp1(ls[i * T + t] - top[i]);
        for (int i = 0; i < n; i++) {
            V ci = c + i * T, si = ls + i * T;
            double ca = ctop[i], se = 0.0;
            for (int t = 0; t < T; t++) se = se + si[t];
            double rse = 1.0 / se, sse = 0.0;
            for (int t = 0; t < T; t++) {
                double s = si[t] * rse; /* s_it */
                si[t] = s;
                sse = fma(s, ci[t] - ca, sse);
            }
            double f = ca + sse, mg = -Y[i] * f;
            mi[i] = mg;
            probe = fma(mg, 0.0, probe);
            top[i] = sse;
        }
        for (int i = 0; i < n; i++) {
            double mg = mi[i], lo = mg < 0.0 ? mg : 0.0, hi = mg > 0.0 ? mg : 0.0;
            em[i] = vexp1(lo - hi);
        }
        for (int i = 0; !last && i < n; i++) {
            V ci = c + i * T, si = ls + i * T, qi = q + i * T;
            double mg = mi[i], e = em[i], ca = ctop[i], sse = top[i];
            /* exp(lo) is e itself when m < 0 (hi = 0) and 1 otherwise (lo = 0) */
            double g = gy[i] * ((mg < 0.0 ? e : 1.0) / (e + 1.0));
            for (int t = 0; t < T; t++) qi[t] = ((ci[t] - ca) - sse) * (si[t] * g);
        }
        if (slot < C && ks[slot] == it) {
            double s = 0.0;
            for (int i = 0; i < n; i++) {
                double h = mi[i] > 0.0 ? mi[i] : 0.0;
                s += h + log1p(em[i]);
            }
            double loss = s / n;
            if (m > 0) {
                double sk = 0.0, sq = 0.0;
                for (int j = 0; j < d * m; j++) {
                    sk = fma(K[j], K[j], sk);
                    sq = fma(Q[j], Q[j], sq);
                }
                loss = fma(ridge, sk + sq, loss);
            }
            V Wo = Wout + (size_t)slot * dd, so = sout + (size_t)slot * n * T;
            for (int j = 0; j < dd; j++) Wo[j] = W[j];
            for (int j = 0; j < n * T; j++) so[j] = ls[j];
            lout[slot] = loss;
            slot++;
        }
        if (last) break;
        for (int i = 0; i < n; i++) /* X_i^T dl_i */
            abt(d, 1, T, P + i * d, 1, 0, X + i * T * d, 1, d, q + i * T, 0, 1);
        abt(d, d, n, GW, d, 1, P, 1, d, Z, 1, d); /* G_W = sum_i P_i z_i^T */
        if (m > 0) { /* G_K = G_W Q + 2 ridge K, G_Q = G_W^T K + 2 ridge Q */
            V GK = G, GQ = G + d * m;
            double r2 = 2.0 * ridge;
            abt(d, m, d, GK, m, 1, GW, d, 1, Q, 1, m);
            abt(d, m, d, GQ, m, 1, GW, 1, d, K, 1, m);
            for (int j = 0; j < d * m; j++) {
                GK[j] = fma(r2, K[j], GK[j]);
                GQ[j] = fma(r2, Q[j], GQ[j]);
            }
            normalized_update(K, GK, d * m, lr, eps, tiny);
            normalized_update(Q, GQ, d * m, lr, eps, tiny);
        } else {
            normalized_update(theta, GW, dd, lr, eps, tiny);
        }
    }
    int len = m > 0 ? 2 * d * m : dd;
    for (int j = 0; j < len; j++) probe = fma(theta[j], 0.0, probe);
    probe_out[0] = probe;
}

/* The arguments of both entry points. Every array is seed-innermost over the S seeds: X
 * (n,T,d,S), Y (n,S), Z (n,d,S), v (d,S), theta (len,S) with len d*d (m = 0) or 2*d*m (K then
 * Q), updated in place; Wout (C,d,d,S), sout (C,n,T,S), lout (C,S), probe (S), work
 * (seed_work,S); ks (C) the checkpoints. */
#define TRAIN_ARGS                                                                         \
    int S, int n, int T, int d, int m, double *X, double *Y, double *Z, double *v,         \
        double *theta, double lr, double eps, double tiny, double ridge, int iterations,   \
        const int *ks, int C, double *Wout, double *sout, double *lout, double *probe,     \
        double *work
#define SEED_VIEWS(s, S)                                                                   \
    V{X + (s), (size_t)(S)}, V{Y + (s), (size_t)(S)}, V{Z + (s), (size_t)(S)},             \
        V{v + (s), (size_t)(S)}, V{theta + (s), (size_t)(S)}

/* doubles per seed of the scratch space `work` */
extern "C" size_t attnsvm_seed_work(int n, int T, int d, int m) { return seed_work(n, T, d, m); }

#ifdef __CUDACC__
__global__ void train_kernel(TRAIN_ARGS) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= S) return;
    train_seed(n, T, d, m, SEED_VIEWS(s, S), lr, eps, tiny, ridge, iterations, ks, C,
               V{Wout + s, (size_t)S}, V{sout + s, (size_t)S}, V{lout + s, (size_t)S},
               V{probe + s, (size_t)S}, V{work + s, (size_t)S});
}

/* Launches the kernel on `stream` of CUDA device `device` (arrays on that device); returns the
 * launch's cudaError_t (0: launched). */
extern "C" int attnsvm_train_linear_cuda(int device, void *stream, int threads, TRAIN_ARGS) {
    cudaError_t err = cudaSetDevice(device);
    if (err != cudaSuccess) return (int)err;
    int blocks = (S + threads - 1) / threads;
    train_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>(
        S, n, T, d, m, X, Y, Z, v, theta, lr, eps, tiny, ridge, iterations, ks, C, Wout, sout,
        lout, probe, work);
    return (int)cudaGetLastError();
}
#else
/* The same routine on the host, seed after seed (tests: the GPU's arithmetic, checked on a
 * CPU). Returns 0. */
extern "C" int attnsvm_train_linear_host(TRAIN_ARGS) {
    for (int s = 0; s < S; s++)
        train_seed(n, T, d, m, SEED_VIEWS(s, S), lr, eps, tiny, ridge, iterations, ks, C,
                   V{Wout + s, (size_t)S}, V{sout + s, (size_t)S}, V{lout + s, (size_t)S},
                   V{probe + s, (size_t)S}, V{work + s, (size_t)S});
    return 0;
}
#endif
