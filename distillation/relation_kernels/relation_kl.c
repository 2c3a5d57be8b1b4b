/*
 * MiniLMv2 relation KL and its gradient in one pass over each relation row (compact-bert).
 *
 * For one relation head with student states X_s [seq, ds] and teacher states X_t [seq, dt], the relation scores are
 * S = X_s X_sᵀ / √ds and T = X_t X_tᵀ / √dt (paper 002, eq. 4: the Q-Q, K-K, V-V self-attention relations), keys with
 * mask 0 excluded. For each query row i:
 *
 *     KL_i = Σ_j p_t,ij (log p_t,ij − log p_s,ij)          p = softmax over the row's real keys
 *          = Σ_j p_t,ij (T_ij − S_ij) − logsumexp(T_i) + logsumexp(S_i)
 *
 * and, for a loss Σ_i w_i KL_i, the gradient ∂/∂S_ij = w_i (p_s,ij − p_t,ij), so that
 *
 *     ∂/∂x_i += (1/√ds) Σ_j w_i (p_s,ij − p_t,ij) x_j          (row i's scores)
 *     ∂/∂x_j += (1/√ds) w_i (p_s,ij − p_t,ij) x_i              (column j's scores)
 *
 * One row's T, S, softmaxes and gradient live in a few arrays of `seq` floats (L1 cache); nothing of size seq × seq
 * is ever written to memory. The loops over keys are written to be vectorised by the compiler (-O3, simd pragmas),
 * including exp (a Cephes-style polynomial, relative error ~1e-7, instead of libm's scalar expf).
 *
 * Heads are independent: the caller runs disjoint ranges of heads on several threads.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline float vector_exp(float x) {
    /* Real keys give x <= 0 (scores minus their row maximum); padded keys, multiplied by 0 afterwards, may give
     * anything and are clamped so that the result stays finite. Below -87 the result is ~1e-38, next to terms ~1.
     * Branch-free, so that the compiler turns the loop that calls it into 8-wide vector code. */
    x = x < -87.0f ? -87.0f : x; /* ternaries, not fminf/fmaxf: those are libm calls unless NaNs are ruled out */
    x = x > 0.0f ? 0.0f : x;
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest (|n| < 2^22) */
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* scores[j] = scale · x_i · x_j for every key j, from the transposed states xT [width, seq]. */
static void row_scores(const float *restrict x_i, const float *restrict xT, int64_t seq, int64_t width, float scale,
                       float *restrict scores) {
    for (int64_t j = 0; j < seq; j++) scores[j] = 0.0f;
    for (int64_t d = 0; d < width; d++) {
        const float a = x_i[d] * scale;
        const float *restrict column = xT + d * seq;
#pragma omp simd
        for (int64_t j = 0; j < seq; j++) scores[j] += a * column[j];
    }
}

/* probs[j] = mask[j] · exp(scores[j] − max); returns the sum, and the max through *row_max. */
static float masked_exp(const float *restrict scores, const float *restrict mask, int64_t seq, float *restrict probs,
                        float *row_max) {
    float top = -FLT_MAX;
#pragma omp simd reduction(max : top)
    for (int64_t j = 0; j < seq; j++) {
        const float value = mask[j] > 0.0f ? scores[j] : -FLT_MAX;
        top = value > top ? value : top;
    }
#pragma omp simd
    for (int64_t j = 0; j < seq; j++) probs[j] = mask[j] * vector_exp(scores[j] - top);
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < seq; j++) total += probs[j];
    *row_max = top;
    return total;
}

static void transpose(const float *x, int64_t seq, int64_t width, float *xT) {
    for (int64_t j = 0; j < seq; j++)
        for (int64_t d = 0; d < width; d++) xT[d * seq + j] = x[j * width + d];
}

/*
 * Heads [first, last) of:
 *   student  [heads, seq, ds], teacher [heads, seq, dt], key_mask [heads, seq] (1 real, 0 padding),
 *   row_weight [heads, seq] (w_i; read only when grad is not NULL),
 *   divergence [heads, seq] (out: KL_i), grad [heads, seq, ds] (out, may be NULL: no gradient).
 * Returns 0, or 1 when scratch memory could not be allocated.
 */
int relation_kl(int64_t first, int64_t last, int64_t seq, int64_t ds, int64_t dt, const float *student,
                const float *teacher, const float *key_mask, const float *row_weight, float *divergence,
                float *grad) {
    const float student_scale = 1.0f / sqrtf((float)ds), teacher_scale = 1.0f / sqrtf((float)dt);
    const int64_t floats = seq * (ds + dt + ds) + 5 * seq;
    float *scratch = (float *)malloc((size_t)floats * sizeof(float));
    if (scratch == NULL) return 1;
    float *studentT = scratch, *teacherT = studentT + ds * seq, *gradT = teacherT + dt * seq;
    float *t = gradT + ds * seq, *s = t + seq, *pt = s + seq, *ps = pt + seq, *diff = ps + seq;
    for (int64_t head = first; head < last; head++) {
        const float *xs = student + head * seq * ds, *xt = teacher + head * seq * dt, *mask = key_mask + head * seq;
        float *out = divergence + head * seq;
        float *g = grad ? grad + head * seq * ds : NULL;
        transpose(xs, seq, ds, studentT);
        transpose(xt, seq, dt, teacherT);
        if (g) memset(gradT, 0, (size_t)(ds * seq) * sizeof(float));
        for (int64_t i = 0; i < seq; i++) {
            row_scores(xt + i * dt, teacherT, seq, dt, teacher_scale, t);
            row_scores(xs + i * ds, studentT, seq, ds, student_scale, s);
            float t_max, s_max;
            const float zt = masked_exp(t, mask, seq, pt, &t_max);
            const float zs = masked_exp(s, mask, seq, ps, &s_max);
            if (zt <= 0.0f) { /* no real key in this sequence: nothing to distill */
                out[i] = 0.0f;
                continue;
            }
            float cross = 0.0f;
#pragma omp simd reduction(+ : cross)
            for (int64_t j = 0; j < seq; j++) cross += pt[j] * (t[j] - s[j]);
            out[i] = cross / zt - t_max - logf(zt) + s_max + logf(zs);
            if (!g) continue;
            const float weight = row_weight[head * seq + i] * student_scale;
            if (weight == 0.0f) continue;
            const float inv_zs = weight / zs, inv_zt = weight / zt;
#pragma omp simd
            for (int64_t j = 0; j < seq; j++) diff[j] = ps[j] * inv_zs - pt[j] * inv_zt;
            float *g_i = g + i * ds;
            const float *x_i = xs + i * ds;
            for (int64_t d = 0; d < ds; d++) {
                const float *column = studentT + d * seq;
                float *grad_column = gradT + d * seq;
                const float x_id = x_i[d];
                float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                for (int64_t j = 0; j < seq; j++) {
                    acc += diff[j] * column[j];
                    grad_column[j] += diff[j] * x_id;
                }
                g_i[d] += acc;
            }
        }
        if (g)
            for (int64_t j = 0; j < seq; j++)
                for (int64_t d = 0; d < ds; d++) g[j * ds + d] += gradT[d * seq + j];
    }
    free(scratch);
    return 0;
}
