/* Side-by-side kernel benchmark: every kernel layer of a compiled program, run
 * with our kernels and with Arm's CMSIS-NN on the same inputs, timed with the
 * board counter (QEMU -icount: instructions), outputs compared byte for byte.
 *
 * The layer table (scripts/bench_cmsis_nn.py writes it) is loaded by the
 * simulator at the board's model address: a 16-byte header "LAYR", count,
 * bytes, 0; then `count` records of LAYER_WORDS int32; then the data the
 * records point into (weights, bias, multipliers, shifts, kernel sums).
 * Prints one JSON line per layer and a final {"done": N}. CMSIS-NN's sources
 * come from a checkout the user passes; nothing of it is in this repository. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "arm_nnfunctions.h"
#include "board_config.h"
#include "kernels.h"
#include "platform.h"

#define LAYER_WORDS 48
enum { K_CONV = 1, K_DWCONV = 2, K_LINEAR = 3, K_ADD = 4, K_AVGPOOL = 5, K_MAXPOOL = 6, K_MUL = 7 };

/* record fields */
enum {
  F_KIND, F_N, F_IH, F_IW, F_IC, F_OH, F_OW, F_OC, F_KH, F_KW, F_SH, F_SW, F_PH, F_PW, F_DH, F_DW, F_MULT, F_IOFF,
  F_OOFF, F_AMIN, F_AMAX, F_W, F_B, F_M, F_S, F_KS, F_FOFF, F_QM, F_QS, F_AZP, F_AM, F_AS, F_BZP, F_BM, F_BS, F_ELEMS,
  F_INLEN, F_OUTLEN, F_DB
};

static void out(const char *s) { plat_write(s, strlen(s)); }

static uint32_t g_rng;
static void fill(int8_t *p, int32_t n, uint32_t seed) {
  g_rng = seed * 2654435761u + 1u;
  for (int32_t i = 0; i < n; i++) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 17, g_rng ^= g_rng << 5;
    p[i] = (int8_t)(g_rng >> 24);
  }
}

static const void *at(const uint8_t *base, int32_t off) { return off < 0 ? NULL : base + off; }

/* Average pool outputs where the two libraries differ and the window's mean is
 * not a half-way tie. The two round differently by definition: the program's
 * reference (cortex_m::quantized_avg_pool2d) rounds (mean - zp) half to even
 * in float, arm_avgpool_s8 rounds the raw mean half away from zero; away from
 * ties both give the nearest integer. A non-zero count is a real disagreement. */
static int32_t avgpool_nontie_diffs(const int32_t *r, const int8_t *in, const int8_t *a, const int8_t *b,
                                    int32_t *ties) {
  int32_t other = 0;
  *ties = 0;
  for (int32_t n = 0; n < r[F_N]; n++)
    for (int32_t oy = 0; oy < r[F_OH]; oy++)
      for (int32_t ox = 0; ox < r[F_OW]; ox++)
        for (int32_t c = 0; c < r[F_IC]; c++) {
          const int32_t o = ((n * r[F_OH] + oy) * r[F_OW] + ox) * r[F_IC] + c;
          if (a[o] == b[o]) continue;
          int32_t sum = 0, cnt = 0;
          for (int32_t ky = 0; ky < r[F_KH]; ky++)
            for (int32_t kx = 0; kx < r[F_KW]; kx++) {
              const int32_t y = oy * r[F_SH] - r[F_PH] + ky, x = ox * r[F_SW] - r[F_PW] + kx;
              if (y < 0 || y >= r[F_IH] || x < 0 || x >= r[F_IW]) continue;
              sum += in[((n * r[F_IH] + y) * r[F_IW] + x) * r[F_IC] + c];
              cnt++;
            }
          if (cnt > 0 && sum % cnt != 0 && (2 * sum) % cnt == 0) (*ties)++;
          else other++;
        }
  return other;
}

int main(int argc, char **argv) {
  plat_init(argc, argv);
  const uint8_t *blob = (const uint8_t *)(uintptr_t)BOARD_MODEL_ADDR;
  if (memcmp(blob, "LAYR", 4) != 0) {
    out("{\"error\": \"no layer table at the model address\"}\n");
    plat_exit(2);
  }
  int32_t count, bytes;
  memcpy(&count, blob + 4, 4);
  memcpy(&bytes, blob + 8, 4);
  const int32_t *recs = (const int32_t *)(const void *)(blob + 16);
  /* work memory after the table, in DDR */
  uint8_t *work = (uint8_t *)(((uintptr_t)blob + (uintptr_t)bytes + 64u) & ~(uintptr_t)63u);
  char line[320];
  for (int32_t li = 0; li < count; li++) {
    const int32_t *r = recs + li * LAYER_WORDS;
    int8_t *in = (int8_t *)work;
    int8_t *in2 = in + ((r[F_INLEN] + 63) & ~63);
    int8_t *o_ours = in2 + ((r[F_INLEN] + 63) & ~63);
    int8_t *o_cmsis = o_ours + ((r[F_OUTLEN] + 63) & ~63);
    uint8_t *scratch = (uint8_t *)o_cmsis + ((r[F_OUTLEN] + 63) & ~63);
    fill(in, r[F_INLEN], (uint32_t)li + 1u);
    fill(in2, r[F_INLEN], (uint32_t)li + 1001u);
    memset(o_ours, 0x55, (size_t)r[F_OUTLEN]);
    memset(o_cmsis, 0x2a, (size_t)r[F_OUTLEN]);
    const int8_t *w = at(blob, r[F_W]);
    const int32_t *b = at(blob, r[F_B]);
    int32_t *m = (int32_t *)(uintptr_t)at(blob, r[F_M]);
    int32_t *s = (int32_t *)(uintptr_t)at(blob, r[F_S]);
    uint64_t t0, t_ours = 0, t_cmsis = 0;
    arm_cmsis_nn_status cs = ARM_CMSIS_NN_SUCCESS;
    k_status ks = K_OK;
    cmsis_nn_context cctx = {scratch, 0};
    cmsis_nn_dims idim = {r[F_N], r[F_IH], r[F_IW], r[F_IC]}, odim = {r[F_N], r[F_OH], r[F_OW], r[F_OC]};
    switch (r[F_KIND]) {
      case K_CONV:
      case K_DWCONV: {
        qconv_params p = {r[F_N], r[F_IH], r[F_IW], r[F_IC], r[F_OH], r[F_OW], r[F_OC], r[F_KH], r[F_KW], r[F_SH], r[F_SW],
                          r[F_PH], r[F_PW], r[F_DH], r[F_DW], r[F_KIND] == K_CONV ? 1 : r[F_IC], r[F_IOFF], r[F_OOFF],
                          r[F_AMIN], r[F_AMAX], NULL, NULL};
        p.beff = (const int32_t *)at(blob, r[F_KS]); /* the program's folded window bias, or NULL */
        p.dwblk = (const int32_t *)at(blob, r[F_DB]); /* its depthwise 16-channel blocks, or NULL */
        cmsis_nn_per_channel_quant_params q = {m, s};
        cmsis_nn_dims bdim = {1, 1, 1, r[F_OC]};
        if (r[F_KIND] == K_CONV) {
          t0 = plat_counter();
          ks = emk_conv2d_s8(&p, in, w, b, m, s, o_ours, scratch, emk_conv2d_s8_get_buffer_size(&p));
          t_ours = plat_counter() - t0;
          cmsis_nn_conv_params cp = {r[F_IOFF], r[F_OOFF], {r[F_SW], r[F_SH]}, {r[F_PW], r[F_PH]}, {r[F_DW], r[F_DH]},
                                     {r[F_AMIN], r[F_AMAX]}};
          cmsis_nn_dims fdim = {r[F_OC], r[F_KH], r[F_KW], r[F_IC]};
          cctx.size = arm_convolve_wrapper_s8_get_buffer_size(&cp, &idim, &fdim, &odim);
          t0 = plat_counter();
          cs = arm_convolve_wrapper_s8(&cctx, &cp, &q, &idim, in, &fdim, w, &bdim, b, &odim, o_cmsis);
          t_cmsis = plat_counter() - t0;
        } else {
          t0 = plat_counter();
          ks = emk_depthwise_conv2d_s8(&p, in, w, b, m, s, o_ours, scratch, emk_depthwise_conv2d_s8_get_buffer_size(&p));
          t_ours = plat_counter() - t0;
          cmsis_nn_dw_conv_params dp = {r[F_IOFF], r[F_OOFF], r[F_MULT], {r[F_SW], r[F_SH]}, {r[F_PW], r[F_PH]},
                                        {r[F_DW], r[F_DH]}, {r[F_AMIN], r[F_AMAX]}};
          cmsis_nn_dims fdim = {1, r[F_KH], r[F_KW], r[F_OC]};
          cctx.size = arm_depthwise_conv_wrapper_s8_get_buffer_size(&dp, &idim, &fdim, &odim);
          t0 = plat_counter();
          cs = arm_depthwise_conv_wrapper_s8(&cctx, &dp, &q, &idim, in, &fdim, w, &bdim, b, &odim, o_cmsis);
          t_cmsis = plat_counter() - t0;
        }
        break;
      }
      case K_LINEAR: {
        qlinear_params p = {r[F_N], r[F_IC], r[F_OC], r[F_IOFF], r[F_FOFF], r[F_OOFF], r[F_QM], r[F_QS], r[F_AMIN], r[F_AMAX]};
        const int32_t *ks = at(blob, r[F_KS]);
        t0 = plat_counter();
        emk_linear_s8(&p, in, w, b, ks, o_ours);
        t_ours = plat_counter() - t0;
        cmsis_nn_fc_params fp = {r[F_IOFF], r[F_FOFF], r[F_OOFF], {r[F_AMIN], r[F_AMAX]}};
        cmsis_nn_per_tensor_quant_params q = {r[F_QM], r[F_QS]};
        cmsis_nn_dims fdim = {r[F_IC], 1, 1, r[F_OC]}, bdim = {1, 1, 1, r[F_OC]};
        cmsis_nn_dims fin = {r[F_N], 1, 1, r[F_IC]}, fout = {r[F_N], 1, 1, r[F_OC]};
        cctx.size = arm_fully_connected_s8_get_buffer_size(&fdim);
        /* CMSIS-NN's MVE path reads precomputed kernel sums (bias included) from its context, as ours reads the
         * program's: the program's own (the AOT stage computes them for CMSIS-NN's contract), or computed here,
         * once, outside the timing */
        if (cctx.size > 0) {
          if (ks) memcpy(cctx.buf, ks, (size_t)r[F_OC] * sizeof(int32_t));
          else arm_vector_sum_s8((int32_t *)cctx.buf, r[F_IC], r[F_OC], w, r[F_IOFF], r[F_FOFF], b);
        }
        t0 = plat_counter();
        cs = arm_fully_connected_s8(&cctx, &fp, &q, &fin, in, &fdim, w, &bdim, b, &fout, o_cmsis);
        t_cmsis = plat_counter() - t0;
        break;
      }
      case K_ADD: {
        qadd_params p = {r[F_AZP], r[F_AM], r[F_AS], r[F_BZP], r[F_BM], r[F_BS], r[F_OOFF], r[F_QM], r[F_QS],
                         r[F_AMIN], r[F_AMAX]};
        t0 = plat_counter();
        emk_add_s8(in, (size_t)r[F_ELEMS], in2, (size_t)r[F_ELEMS], o_ours, &p);
        t_ours = plat_counter() - t0;
        t0 = plat_counter();
        cs = arm_elementwise_add_s8(in, in2, -r[F_AZP], r[F_AM], r[F_AS], -r[F_BZP], r[F_BM], r[F_BS], 20, o_cmsis,
                                    r[F_OOFF], r[F_QM], r[F_QS], r[F_AMIN], r[F_AMAX], r[F_ELEMS]);
        t_cmsis = plat_counter() - t0;
        break;
      }
      case K_MUL: {
        qmul_params p = {r[F_AZP], r[F_BZP], r[F_OOFF], r[F_QM], r[F_QS]};
        t0 = plat_counter();
        emk_mul_s8(in, (size_t)r[F_ELEMS], in2, (size_t)r[F_ELEMS], o_ours, &p);
        t_ours = plat_counter() - t0;
        t0 = plat_counter();
        cs = arm_elementwise_mul_s8(in, in2, -r[F_AZP], -r[F_BZP], o_cmsis, r[F_OOFF], r[F_QM], r[F_QS], r[F_AMIN],
                                    r[F_AMAX], r[F_ELEMS]);
        t_cmsis = plat_counter() - t0;
        break;
      }
      case K_AVGPOOL:
      case K_MAXPOOL: {
        qpool_params p = {r[F_N], r[F_IH], r[F_IW], r[F_IC], r[F_OH], r[F_OW], r[F_KH], r[F_KW], r[F_SH], r[F_SW], r[F_PH], r[F_PW]};
        cmsis_nn_pool_params pp = {{r[F_SW], r[F_SH]}, {r[F_PW], r[F_PH]}, {r[F_AMIN], r[F_AMAX]}};
        cmsis_nn_dims fdim = {1, r[F_KH], r[F_KW], 1};
        if (r[F_KIND] == K_AVGPOOL) {
          t0 = plat_counter();
          ks = emk_avg_pool2d_s8(&p, in, o_ours, r[F_AZP], r[F_QM], r[F_QS], scratch, emk_avg_pool2d_s8_get_buffer_size(&p));
          t_ours = plat_counter() - t0;
          cctx.size = arm_avgpool_s8_get_buffer_size(r[F_OW], r[F_IC]);
          t0 = plat_counter();
          cs = arm_avgpool_s8(&cctx, &pp, &idim, in, &fdim, &odim, o_cmsis);
          t_cmsis = plat_counter() - t0;
        } else {
          t0 = plat_counter();
          emk_max_pool2d_s8(&p, in, o_ours, r[F_AMIN], r[F_AMAX]);
          t_ours = plat_counter() - t0;
          t0 = plat_counter();
          cs = arm_max_pool_s8(&cctx, &pp, &idim, in, &fdim, &odim, o_cmsis);
          t_cmsis = plat_counter() - t0;
        }
        break;
      }
      default:
        snprintf(line, sizeof line, "{\"layer\": %" PRId32 ", \"error\": \"unknown kind %" PRId32 "\"}\n", li, r[F_KIND]);
        out(line);
        continue;
    }
    /* a kernel that refused (status) did not produce its output */
    int equal = ks == K_OK && memcmp(o_ours, o_cmsis, (size_t)r[F_OUTLEN]) == 0;
    int32_t ties = 0, other = 0;
    if (!equal && ks == K_OK && r[F_KIND] == K_AVGPOOL) other = avgpool_nontie_diffs(r, in, o_ours, o_cmsis, &ties);
    snprintf(line, sizeof line,
             "{\"layer\": %" PRId32 ", \"kind\": %" PRId32 ", \"ours\": %" PRIu64 ", \"cmsis\": %" PRIu64
             ", \"equal\": %s, \"cmsis_status\": %d, \"status\": %d, \"tie_diffs\": %" PRId32
             ", \"other_diffs\": %" PRId32 "}\n",
             li, r[F_KIND], t_ours, t_cmsis, equal ? "true" : "false", (int)cs, (int)ks, ties, other);
    out(line);
  }
  snprintf(line, sizeof line, "{\"done\": %" PRId32 ", \"unit\": \"%s\"}\n", count, plat_counter_unit());
  out(line);
  plat_exit(0);
}
