/* The fused training loop of attnsvm.gd.fused (docs/science.md §3, "Fused step").
 *
 * Normalized full-batch GD on the logistic loss of the linear-head attention model, W trained
 * directly (m = 0) or as W = K Q^T (K, Q of d x m), float64, every step of every seed in one
 * call: the same formulas as attnsvm.gd.model.Objective (the stable form relative to the top
 * token, the logistic loss and sigmoid of attnsvm.gd.kernel.logistic, the scaled normalization
 * of attnsvm.gd.train._normalized_step).
 *
 * SIMD across seeds: seeds are processed LANES at a time, the seed innermost in every array
 * (x[... ][lane]), so each scalar operation of the per-seed formulas is one vector operation
 * over LANES seeds. A lane never reads another lane, and every lane performs the same IEEE
 * operations in the same order (every sum over its index in increasing order, multiply-adds
 * written as explicit fma(), no other contraction, no fast-math), so a seed's numbers do not
 * depend on its lane, its batch, or the instruction set the library was built for (AVX-512,
 * AVX2 + FMA, or plain C where fma() is libm's correctly rounded one). A partial last block
 * is padded with copies of the batch's last seed, whose outputs are dropped.
 *
 * exp is this file's own (vexp: Cody-Waite reduction, degree-13 Taylor polynomial, exact
 * power-of-two scaling), written in the same vector operations, so no lane ever takes a
 * different code path. log1p (the loss) is libm's, per lane, at checkpoints only: between
 * checkpoints only the loss's finiteness is needed (loss_i = max(m_i, 0) + log1p(...) is
 * finite exactly when the margin m_i is).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

#ifndef LANES /* seeds per vector: 8 or 4 (attnsvm.gd.fused.LEVELS sets it per build) */
#define LANES 8
#endif
#ifndef TILE_MAX /* register tiles of abt: up to TILE_MAX x TILE_MAX, or 2 TILE_MAX x 1 */
#define TILE_MAX 4
#endif
#if TILE_MAX < 1 || TILE_MAX > 4 /* tile()'s accumulators and abt()'s cases stop at 4 (8 x 1) */
#error "TILE_MAX must be 1 to 4"
#endif
typedef double vd __attribute__((vector_size(LANES * 8)));
typedef int64_t vi __attribute__((vector_size(LANES * 8)));

static inline vd splat(double x) {
    vd r;
    for (int l = 0; l < LANES; l++) r[l] = x;
    return r;
}

/* a * b + c, one rounding, per lane */
static inline vd vfma(vd a, vd b, vd c) {
#if defined(__AVX512F__) && LANES == 8
    return (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
#elif defined(__FMA__) && defined(__AVX__) && LANES % 4 == 0
    typedef double h4 __attribute__((vector_size(32)));
    union { vd v; h4 h[LANES / 4]; } ua = {a}, ub = {b}, uc = {c}, ur;
    for (int j = 0; j < LANES / 4; j++)
        ur.h[j] = (h4)_mm256_fmadd_pd((__m256d)ua.h[j], (__m256d)ub.h[j], (__m256d)uc.h[j]);
    return ur.v;
#else
    vd r;
    for (int l = 0; l < LANES; l++) r[l] = fma(a[l], b[l], c[l]);
    return r;
#endif
}

static inline vd vsel(vi mask, vd a, vd b) { /* mask ? a : b, per lane */
    return (vd)(((vi)a & mask) | ((vi)b & ~mask));
}

static inline vd vsqrt(vd x) {
    vd r;
    for (int l = 0; l < LANES; l++) r[l] = sqrt(x[l]);
    return r;
}

static inline vd vabs(vd x) {
    vi m;
    for (int l = 0; l < LANES; l++) m[l] = INT64_MAX;
    return (vd)((vi)x & m);
}

/* exp per lane, within an ulp of libm's (tests/test_fused.py); NaN gives NaN, x < -746
 * gives 0, x > 710 gives inf. k = round(x / ln 2) by the 1.5 * 2^52 shift (its low bits are
 * k), r = x - k ln 2 in two fma steps, e^r by Horner on the Taylor series to r^13 (|r| <=
 * 0.35: truncation below 2^-57), then times 2^(k>>1) (exact) and 2^(k - (k>>1)) (the one
 * rounding, into the subnormals where it must). */
static inline __attribute__((always_inline)) vd vexp(vd x) {
    const vd shift = splat(0x1.8p52);
    vd xc = vsel(x < splat(-746.0), splat(-746.0), x);
    xc = vsel(xc > splat(710.0), splat(710.0), xc);
    vd t = xc * splat(0x1.71547652b82fep0) + shift;
    vd k = t - shift;
    vd r = vfma(k, splat(-0x1.62e42fefa39efp-1), xc);
    r = vfma(k, splat(-0x1.abc9e3b39803fp-56), r);
    static const double c[14] = {
        1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
        1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
        1.0 / 6227020800.0};
    vd p = splat(c[13]);
    for (int j = 12; j >= 0; j--) p = vfma(p, r, splat(c[j]));
    vi ki = (vi)t - (vi)shift;
    vi kh = ki >> 1, kl = ki - kh;
    vd s1 = (vd)((kh + 1023) << 52), s2 = (vd)((kl + 1023) << 52);
    return (p * s1) * s2;
}

static inline vi vimax(vi a, vi b) {
    vi m = a > b;
    return (a & m) | (b & ~m);
}

/* The bits of max |g_j| over j, per lane, as an integer: the bits of non-negative doubles
 * order as the doubles do, so the maximum is exact in any order (four independent chains). A
 * NaN in g needs no care here: it makes the sum of squares, hence the whole update, NaN. */
static inline vi vmaxabs_bits(const vd *g, int len) {
    vi mx[4];
    for (int u = 0; u < 4; u++) mx[u] = (vi)splat(0.0);
    vi mask;
    for (int l = 0; l < LANES; l++) mask[l] = INT64_MAX;
    int j = 0;
    for (; j + 4 <= len; j += 4)
        for (int u = 0; u < 4; u++) {
            vi a = (vi)g[j + u] & mask;
            mx[u] = vimax(a, mx[u]);
        }
    for (; j < len; j++) {
        vi a = (vi)g[j] & mask;
        mx[0] = vimax(a, mx[0]);
    }
    for (int u = 1; u < 4; u++) mx[0] = vimax(mx[u], mx[0]);
    return mx[0];
}

/* theta -= lr G / (||G||_F + eps) (train._normalized_step). As there, G is first scaled so
 * that squaring neither overflows nor underflows, here by the power of two p = 2^floor(log2
 * max |G|) (max |G| raised to at least the smallest normal number) rather than by max |G|
 * itself: the same formula, but the scaling is exact and a multiplication. NaN or inf in G
 * gives NaN in theta (the seed is then trained again by the torch loop). */
static void normalized_update(vd *theta, vd *g, int len, double lr, double eps, double tiny) {
    vi mx = vmaxabs_bits(g, len), lo = (vi)splat(tiny), expo;
    mx = vimax(mx, lo);
    for (int l = 0; l < LANES; l++) expo[l] = INT64_C(0x7ff0000000000000);
    vd inv = splat(1.0) / (vd)(mx & expo);
    vd ss[4] = {splat(0.0), splat(0.0), splat(0.0), splat(0.0)};
    int j = 0;
    for (; j + 4 <= len; j += 4) /* four partial sums of squares, j = u mod 4 */
        for (int u = 0; u < 4; u++) {
            g[j + u] = g[j + u] * inv;
            ss[u] = vfma(g[j + u], g[j + u], ss[u]);
        }
    for (; j < len; j++) {
        g[j] = g[j] * inv;
        ss[j & 3] = vfma(g[j], g[j], ss[j & 3]);
    }
    vd den = vsqrt((ss[0] + ss[1]) + (ss[2] + ss[3])) + inv * splat(eps);
    vd mscale = -((splat(1.0) / den) * splat(lr));
    for (int j = 0; j < len; j++) theta[j] = vfma(g[j], mscale, theta[j]);
}

/* One register tile of C = A B^T: C[p cp + q cq] = sum_j A[p ap + j aj] B[q bq + j bj] for
 * p < tp, q < tq, every sum over j in increasing order from 0 (tp, tq constants after
 * inlining: the accumulators stay in registers). */
static inline __attribute__((always_inline)) void tile(int tp, int tq, int J, vd *Cm, int cp,
                                                       int cq, const vd *A, int ap, int aj,
                                                       const vd *B, int bq, int bj) {
    vd acc[8][4];
    for (int u = 0; u < tp; u++)
        for (int w = 0; w < tq; w++) acc[u][w] = splat(0.0);
    for (int j = 0; j < J; j++) {
        vd a[8], b[4];
        for (int u = 0; u < tp; u++) a[u] = A[u * ap + j * aj];
        for (int w = 0; w < tq; w++) b[w] = B[w * bq + j * bj];
        for (int u = 0; u < tp; u++)
            for (int w = 0; w < tq; w++) acc[u][w] = vfma(a[u], b[w], acc[u][w]);
    }
    for (int u = 0; u < tp; u++)
        for (int w = 0; w < tq; w++) Cm[u * cp + w * cq] = acc[u][w];
}

#define TILE(tp, tq) tile(tp, tq, J, Cm + p * cp + q * cq, cp, cq, A + p * ap, ap, aj, \
                          B + q * bq, bq, bj)

/* C = A B^T over P x Q outputs and J terms (strides as in tile), in tiles of up to TILE_MAX x
 * TILE_MAX, or 2 TILE_MAX x 1 where Q is 1. Each output's sum is the same whatever the tiling. */
static void abt(int P, int Q, int J, vd *Cm, int cp, int cq, const vd *A, int ap, int aj,
                const vd *B, int bq, int bj) {
    if (Q == 1) {
        int p = 0, q = 0;
        for (; p + 2 * TILE_MAX <= P; p += 2 * TILE_MAX) TILE(2 * TILE_MAX, 1);
        for (; p + TILE_MAX <= P; p += TILE_MAX) TILE(TILE_MAX, 1);
        for (; p < P; p++) TILE(1, 1);
        return;
    }
    for (int p = 0; p < P; p += TILE_MAX) {
        int tp = P - p < TILE_MAX ? P - p : TILE_MAX;
        for (int q = 0; q < Q; q += TILE_MAX) {
            int tq = Q - q < TILE_MAX ? Q - q : TILE_MAX;
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

/* One block of LANES seeds, every array seed-innermost: X (n,T,d), Y (n), Z (n,d), v (d),
 * theta W (d,d) or K then Q (d,m each). Checkpoint outputs Wout (C,d,d), sout (C,n,T),
 * lout (C), per lane; probe: 0 per lane where every loss and the last theta are finite,
 * else NaN. work: scratch space (block_work). */
static void train_block(int n, int T, int d, int m, const vd *X, const vd *Y, const vd *Z,
                        const vd *v, vd *theta, double lr, double eps, double tiny,
                        double ridge, int iterations, const int *ks, int C, vd *Wout, vd *sout,
                        vd *lout, vd *probe_out, vd *work, volatile long long *ctl) {
    int dd = d * d, mm = m > 0 ? m : 1;
    vd *Wk = work;                /* d*d: K Q^T (KQ) */
    vd *GW = Wk + dd;             /* d*d */
    vd *G = GW + dd;              /* 2*d*m (KQ) */
    vd *c = G + 2 * d * mm;       /* n*T token scores v^T x_it */
    vd *ls = c + n * T;           /* n*T logits, then softmax */
    vd *q = ls + n * T;           /* n*T: dl_it */
    vd *P = q + n * T;            /* n*d: X_i^T dl_i */
    vd *WZ = P + n * d;           /* n*d: W z_i */
    vd *mi = WZ + n * d;          /* n: margins */
    vd *em = mi + n;              /* n: exp(-|m_i|) */
    vd *gy = em + n;              /* n: -Y_i / n */
    vd *top = gy + n;             /* n: top logit, then sum_t s_it e_it */
    vd *ctop = top + n;           /* n: the top token's score */
    vd *K = theta, *Q = theta + d * m;
    vd *W = m > 0 ? Wk : theta;
    vd probe = splat(0.0);
    const vd zero = splat(0.0), one = splat(1.0);
    int slot = 0;
    abt(n * T, 1, d, c, 1, 0, X, d, 1, v, 0, 1);
    for (int i = 0; i < n; i++) gy[i] = -Y[i] / splat((double)n);
    for (int it = 0; it <= iterations; it++) {
        if (ctl[0]) return; /* the caller asked to stop (Ctrl-C) */
        ctl[1]++;           /* progress, read by the caller between steps */
        int last = it == iterations;
        if (m > 0) abt(d, d, m, Wk, d, 1, K, m, 1, Q, m, 1); /* W = K Q^T */
        abt(n, d, d, WZ, d, 1, Z, d, 1, W, d, 1);           /* W z_i */
        for (int i = 0; i < n; i++) /* logits x_it^T W z_i */
            abt(T, 1, d, ls + i * T, 1, 0, X + i * T * d, d, 1, WZ + i * d, 0, 1);
        for (int i = 0; i < n; i++) { /* the top token */
            const vd *ci = c + i * T, *si = ls + i * T;
            vd lt = si[0], ca = ci[0];
            for (int t = 1; t < T; t++) {
                vi up = (si[t] > lt) | ((si[t] != si[t]) & (lt == lt));
                lt = vsel(up, si[t], lt);
                ca = vsel(up, ci[t], ca);
            }
            top[i] = lt;
            ctop[i] = ca;
        }
        for (int i = 0; i < n; i++) /* independent exps: the vector units stay busy */
            for (int t = 0; t < T; t++) ls[i * T + t] = vexp(ls[i * T + t] - top[i]);
        for (int i = 0; i < n; i++) {
            const vd *ci = c + i * T;
            vd *si = ls + i * T, *qi = q + i * T, ca = ctop[i];
            vd se = zero;
            for (int t = 0; t < T; t++) se = se + si[t];
            vd rse = one / se, sse = zero;
            for (int t = 0; t < T; t++) {
                si[t] = si[t] * rse; /* s_it */
                sse = vfma(si[t], ci[t] - ca, sse);
            }
            vd f = ca + sse, mg = -Y[i] * f;
            mi[i] = mg;
            probe = vfma(mg, zero, probe);
            top[i] = sse;
        }
        for (int i = 0; i < n; i++) {
            vd mg = mi[i], lo = vsel(mg < zero, mg, zero), hi = vsel(mg > zero, mg, zero);
            em[i] = vexp(lo - hi);
        }
        for (int i = 0; !last && i < n; i++) {
            const vd *ci = c + i * T, *si = ls + i * T;
            vd *qi = q + i * T, mg = mi[i], e = em[i], ca = ctop[i], sse = top[i];
            /* exp(lo) is e itself when m < 0 (hi = 0) and 1 otherwise (lo = 0) */
            vd g = gy[i] * (vsel(mg < zero, e, one) / (e + one));
            for (int t = 0; t < T; t++) qi[t] = ((ci[t] - ca) - sse) * (si[t] * g);
        }
        if (slot < C && ks[slot] == it) {
            vd loss;
            for (int l = 0; l < LANES; l++) {
                double s = 0.0;
                for (int i = 0; i < n; i++) {
                    double h = mi[i][l] > 0.0 ? mi[i][l] : 0.0;
                    s += h + log1p(em[i][l]);
                }
                loss[l] = s / n;
            }
            if (m > 0) {
                vd sk = zero, sq = zero;
                for (int j = 0; j < d * m; j++) {
                    sk = vfma(K[j], K[j], sk);
                    sq = vfma(Q[j], Q[j], sq);
                }
                loss = vfma(splat(ridge), sk + sq, loss);
            }
            memcpy(Wout + (size_t)slot * dd, W, sizeof(vd) * dd);
            memcpy(sout + (size_t)slot * n * T, ls, sizeof(vd) * n * T);
            lout[slot] = loss;
            slot++;
        }
        if (last) break;
        for (int i = 0; i < n; i++) /* X_i^T dl_i */
            abt(d, 1, T, P + i * d, 1, 0, X + i * T * d, 1, d, q + i * T, 0, 1);
        abt(d, d, n, GW, d, 1, P, 1, d, Z, 1, d); /* G_W = sum_i P_i z_i^T */
        if (m > 0) { /* G_K = G_W Q + 2 ridge K, G_Q = G_W^T K + 2 ridge Q */
            vd *GK = G, *GQ = G + d * m, r2 = splat(2.0 * ridge);
            abt(d, m, d, GK, m, 1, GW, d, 1, Q, 1, m);
            abt(d, m, d, GQ, m, 1, GW, 1, d, K, 1, m);
            for (int j = 0; j < d * m; j++) {
                GK[j] = vfma(r2, K[j], GK[j]);
                GQ[j] = vfma(r2, Q[j], GQ[j]);
            }
            normalized_update(K, GK, d * m, lr, eps, tiny);
            normalized_update(Q, GQ, d * m, lr, eps, tiny);
        } else {
            normalized_update(theta, GW, dd, lr, eps, tiny);
        }
    }
    int len = m > 0 ? 2 * d * m : dd;
    for (int j = 0; j < len; j++) probe = vfma(theta[j], zero, probe);
    *probe_out = probe;
}

/* vd words of train_block's scratch space */
static size_t block_work(int n, int T, int d, int m) {
    size_t mm = m > 0 ? m : 1;
    return (size_t)2 * d * d + 2 * d * mm + 3 * (size_t)n * T + 2 * (size_t)n * d + 5 * n;
}

/* S seeds: X (S,n,T,d), Y (S,n), Z (S,n,d), v (S,d); theta (S, d, d) for W (m = 0) or
 * (S, 2, d, m) for KQ, updated in place; Wout (S,C,d,d), sout (S,C,n,T), lout (S,C),
 * alive (S). ctl: ctl[0] nonzero stops the run before its next step (the caller's Ctrl-C),
 * ctl[1] counts the steps begun, over all blocks of LANES seeds (progress; neither changes
 * any number computed). Returns 0, 1 if stopped, or -1 if scratch memory could not be
 * allocated. */
int attnsvm_train_linear(int S, int n, int T, int d, int m, const double *X, const double *Y,
                         const double *Z, const double *v, double *theta, double lr,
                         double eps, double tiny, double ridge, int iterations, const int *ks,
                         int C, double *Wout, double *sout, double *lout, int *alive,
                         volatile long long *ctl) {
    int dd = d * d, len = m > 0 ? 2 * d * m : dd;
    size_t nx = (size_t)n * T * d, nz = (size_t)n * d;
    size_t words = nx + n + nz + d + len + (size_t)C * (dd + n * T + 1) + 1 +
                   block_work(n, T, d, m);
    vd *buf = NULL;
    if (posix_memalign((void **)&buf, sizeof(vd), sizeof(vd) * words) != 0) return -1;
    vd *bX = buf, *bY = bX + nx, *bZ = bY + n, *bv = bZ + nz, *bth = bv + d;
    vd *bW = bth + len, *bs = bW + (size_t)C * dd, *bl = bs + (size_t)C * n * T;
    vd *bp = bl + C, *work = bp + 1;
    for (int s0 = 0; s0 < S; s0 += LANES) {
        for (int l = 0; l < LANES; l++) { /* gather, seed innermost; pad with the last seed */
            size_t s = s0 + l < S ? (size_t)(s0 + l) : (size_t)(S - 1);
            for (size_t j = 0; j < nx; j++) bX[j][l] = X[s * nx + j];
            for (int j = 0; j < n; j++) bY[j][l] = Y[s * n + j];
            for (size_t j = 0; j < nz; j++) bZ[j][l] = Z[s * nz + j];
            for (int j = 0; j < d; j++) bv[j][l] = v[s * d + j];
            for (int j = 0; j < len; j++) bth[j][l] = theta[s * len + j];
        }
        train_block(n, T, d, m, bX, bY, bZ, bv, bth, lr, eps, tiny, ridge, iterations, ks, C,
                    bW, bs, bl, bp, work, ctl);
        if (ctl[0]) {
            free(buf);
            return 1;
        }
        for (int l = 0; l < LANES && s0 + l < S; l++) { /* scatter the real seeds */
            size_t s = (size_t)(s0 + l);
            for (int j = 0; j < len; j++) theta[s * len + j] = bth[j][l];
            for (size_t j = 0; j < (size_t)C * dd; j++) Wout[s * C * dd + j] = bW[j][l];
            for (size_t j = 0; j < (size_t)C * n * T; j++) sout[s * C * n * T + j] = bs[j][l];
            for (int j = 0; j < C; j++) lout[s * C + j] = bl[j][l];
            alive[s] = (*bp)[l] == 0.0;
        }
    }
    free(buf);
    return 0;
}

/* vexp on len values (for tests: agreement with libm, the same bits in every lane) */
void attnsvm_exp(int len, const double *x, double *out) {
    for (int j0 = 0; j0 < len; j0 += LANES) {
        vd a = splat(0.0);
        for (int l = 0; l < LANES && j0 + l < len; l++) a[l] = x[j0 + l];
        vd r = vexp(a);
        for (int l = 0; l < LANES && j0 + l < len; l++) out[j0 + l] = r[l];
    }
}

/* seeds per vector of this build (its LANES) */
int attnsvm_lanes(void) { return LANES; }

/* the vector width this build was compiled for, in doubles (diagnostics) */
int attnsvm_isa(void) {
#if defined(__AVX512F__)
    return 512;
#elif defined(__FMA__) && defined(__AVX__)
    return 256;
#else
    return 0;
#endif
}
