/* The fused training loop of attnsvm.gd.fused (docs/science.md §3, "Fused step").
 *
 * Normalized full-batch GD on the logistic loss of the linear-head attention model, W trained
 * directly (m = 0) or as W = K Q^T (K, Q of d x m), float64, every step of every seed in one
 * call: the same formulas as attnsvm.gd.model.Objective (the stable form relative to the top
 * token, the logistic loss and sigmoid of attnsvm.gd.kernel.logistic, the scaled normalization
 * of attnsvm.gd.train._normalized_step), evaluated seed by seed, so a seed's numbers never
 * depend on its batch. Built by attnsvm.gd.fused with the machine's C compiler; plain C99 and
 * libm, no fast-math (IEEE arithmetic in program order).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double maxabs(const double *g, int len) {
    double mx = 0.0;
    for (int j = 0; j < len; j++) {
        double a = fabs(g[j]);
        if (a > mx || a != a) mx = a; /* NaN propagates */
    }
    return mx;
}

/* theta -= lr G / (||G||_F + eps), scaled by max |G| (train._normalized_step) */
static void normalized_update(double *theta, double *g, int len, double lr, double eps,
                              double tiny) {
    double mx = maxabs(g, len);
    if (mx < tiny) mx = tiny;
    double ss = 0.0;
    for (int j = 0; j < len; j++) {
        g[j] /= mx;
        ss += g[j] * g[j];
    }
    double den = sqrt(ss) + (1.0 / mx) * eps;
    double scale = (1.0 / den) * lr;
    for (int j = 0; j < len; j++) theta[j] -= g[j] * scale;
}

/* One seed: X (n,T,d), Y (n), Z (n,d), v (d); theta W (d,d), or K then Q (d,m each) in
 * theta[0 .. 2 d m). ks (C) checkpoints; outputs Wout (C,d,d), sout (C,n,T), lout (C).
 * Returns 1 if every loss and the last theta are finite, else 0. work: scratch space.
 * Every sum runs over its index in increasing order; the loops are ordered so that the
 * innermost one runs over independent outputs (vectorizable without reordering a sum). */
static int train_seed(int n, int T, int d, int m, const double *X, const double *Y,
                      const double *Z, const double *v, double *theta, double lr, double eps,
                      double tiny, double ridge, int iterations, const int *ks, int C,
                      double *Wout, double *sout, double *lout, double *work) {
    int dd = d * d, mm = m > 0 ? m : 1;
    double *W = work;             /* d*d */
    double *WT = W + dd;          /* d*d: W^T */
    double *GW = WT + dd;         /* d*d */
    double *G = GW + dd;          /* 2*d*m (KQ) */
    double *QT = G + 2 * d * mm;  /* m*d: Q^T */
    double *c = QT + d * mm;      /* n*T token scores v^T x_it */
    double *ls = c + n * T;       /* n*T logits, then exp, then s */
    double *dl = ls + n * T;      /* n*T */
    double *XT = dl + n * T;      /* n*d*T: X_i^T */
    double *Wz = XT + n * d * T;  /* d */
    double *P = Wz + d;           /* d */
    double *K = theta, *Q = theta + d * m;
    double loss_sum = 0.0;
    int slot = 0;
    for (int i = 0; i < n * T; i++) {
        double acc = 0.0;
        for (int k = 0; k < d; k++) acc += X[i * d + k] * v[k];
        c[i] = acc;
    }
    for (int i = 0; i < n; i++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < d; k++) XT[(i * d + k) * T + t] = X[(i * T + t) * d + k];
    for (int it = 0; it <= iterations; it++) {
        int last = it == iterations;
        if (m > 0) { /* W = K Q^T */
            for (int r = 0; r < m; r++)
                for (int b = 0; b < d; b++) QT[r * d + b] = Q[b * m + r];
            for (int a = 0; a < d; a++) {
                double *Wa = W + a * d;
                for (int b = 0; b < d; b++) Wa[b] = 0.0;
                for (int r = 0; r < m; r++) {
                    double kar = K[a * m + r];
                    const double *q = QT + r * d;
                    for (int b = 0; b < d; b++) Wa[b] += kar * q[b];
                }
            }
        } else {
            memcpy(W, theta, sizeof(double) * dd);
        }
        for (int a = 0; a < d; a++)
            for (int b = 0; b < d; b++) WT[b * d + a] = W[a * d + b];
        double loss = 0.0;
        if (!last) memset(GW, 0, sizeof(double) * dd);
        for (int i = 0; i < n; i++) {
            const double *z = Z + i * d, *Xi = X + i * T * d, *XTi = XT + i * d * T;
            double *li = ls + i * T, *ci = c + i * T, *dli = dl + i * T;
            for (int a = 0; a < d; a++) Wz[a] = 0.0; /* W z_i */
            for (int b = 0; b < d; b++) {
                double zb = z[b];
                const double *w = WT + b * d;
                for (int a = 0; a < d; a++) Wz[a] += w[a] * zb;
            }
            for (int t = 0; t < T; t++) li[t] = 0.0; /* logits x_it^T W z_i */
            for (int k = 0; k < d; k++) {
                double wk = Wz[k];
                const double *x = XTi + k * T;
                for (int t = 0; t < T; t++) li[t] += x[t] * wk;
            }
            int top = 0;
            for (int t = 1; t < T; t++)
                if (li[t] > li[top] || (li[t] != li[t] && li[top] == li[top])) top = t;
            double lt = li[top], se = 0.0;
            for (int t = 0; t < T; t++) {
                li[t] = exp(li[t] - lt);
                se += li[t];
            }
            double ca = ci[top], sse = 0.0;
            for (int t = 0; t < T; t++) {
                li[t] = li[t] / se; /* s_it */
                dli[t] = ci[t] - ca; /* e_it */
                sse += li[t] * dli[t];
            }
            double f = ca + sse, mi = -Y[i] * f;
            double lo = mi < 0.0 ? mi : 0.0, hi = mi > 0.0 ? mi : 0.0;
            double em = exp(lo - hi);
            loss += hi + log1p(em);
            if (last) continue;
            /* exp(lo) is em itself when m < 0 (hi = 0) and 1 otherwise (lo = 0) */
            double g = (-Y[i] / n) * ((mi < 0.0 ? em : 1.0) / (em + 1.0));
            for (int k = 0; k < d; k++) P[k] = 0.0; /* X_i^T dl_i */
            for (int t = 0; t < T; t++) {
                double q = (dli[t] - sse) * (li[t] * g);
                const double *x = Xi + t * d;
                for (int k = 0; k < d; k++) P[k] += x[k] * q;
            }
            for (int a = 0; a < d; a++) {
                double pa = P[a];
                double *ga = GW + a * d;
                for (int b = 0; b < d; b++) ga[b] += pa * z[b];
            }
        }
        loss /= n;
        if (m > 0) {
            double sk = 0.0, sq = 0.0;
            for (int j = 0; j < d * m; j++) {
                sk += K[j] * K[j];
                sq += Q[j] * Q[j];
            }
            loss += ridge * (sk + sq);
        }
        loss_sum += loss;
        if (slot < C && ks[slot] == it) {
            memcpy(Wout + (size_t)slot * dd, W, sizeof(double) * dd);
            memcpy(sout + (size_t)slot * n * T, ls, sizeof(double) * n * T);
            lout[slot] = loss;
            slot++;
        }
        if (last) break;
        if (m > 0) { /* G_K = G_W Q + 2 ridge K, G_Q = G_W^T K + 2 ridge Q */
            double *GK = G, *GQ = G + d * m;
            for (int a = 0; a < d; a++) {
                double *gk = GK + a * m, *gq = GQ + a * m;
                for (int r = 0; r < m; r++) gk[r] = gq[r] = 0.0;
                for (int b = 0; b < d; b++) {
                    double w1 = GW[a * d + b], w2 = GW[b * d + a];
                    const double *qb = Q + b * m, *kb = K + b * m;
                    for (int r = 0; r < m; r++) {
                        gk[r] += w1 * qb[r];
                        gq[r] += w2 * kb[r];
                    }
                }
                for (int r = 0; r < m; r++) {
                    gk[r] += (2.0 * ridge) * K[a * m + r];
                    gq[r] += (2.0 * ridge) * Q[a * m + r];
                }
            }
            normalized_update(K, GK, d * m, lr, eps, tiny);
            normalized_update(Q, GQ, d * m, lr, eps, tiny);
        } else {
            normalized_update(theta, GW, dd, lr, eps, tiny);
        }
    }
    int len = m > 0 ? 2 * d * m : dd;
    double probe = loss_sum;
    for (int j = 0; j < len; j++) probe += 0.0 * theta[j];
    return (probe - probe) == 0.0;
}

/* S seeds: X (S,n,T,d), Y (S,n), Z (S,n,d), v (S,d); theta (S, d, d) for W (m = 0) or
 * (S, 2, d, m) for KQ, updated in place; Wout (S,C,d,d), sout (S,C,n,T), lout (S,C),
 * alive (S). Returns 0, or -1 if scratch memory could not be allocated. */
int attnsvm_train_linear(int S, int n, int T, int d, int m, const double *X, const double *Y,
                         const double *Z, const double *v, double *theta, double lr,
                         double eps, double tiny, double ridge, int iterations, const int *ks,
                         int C, double *Wout, double *sout, double *lout, int *alive) {
    int dd = d * d, len = m > 0 ? 2 * d * m : dd;
    int mm = m > 0 ? m : 1;
    double *work = malloc(sizeof(double) * ((size_t)3 * dd + 3 * d * mm + 3 * n * T + (size_t)n * d * T + 2 * d));
    if (!work) return -1;
    for (int s = 0; s < S; s++)
        alive[s] = train_seed(n, T, d, m, X + (size_t)s * n * T * d, Y + (size_t)s * n,
                              Z + (size_t)s * n * d, v + (size_t)s * d, theta + (size_t)s * len,
                              lr, eps, tiny, ridge, iterations, ks, C,
                              Wout + (size_t)s * C * dd, sout + (size_t)s * C * n * T,
                              lout + (size_t)s * C, work);
    free(work);
    return 0;
}
