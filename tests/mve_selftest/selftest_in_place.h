/* The in-place depthwise trial both the MVE and the DSP self-test run (included by their main.c after their
 * helpers): SELFTEST_VARIANT names the variant under test, IN_PLACE_RQ(n) draws n channels' requantization in the
 * range the variant's fast path takes. */
#ifndef SELFTEST_IN_PLACE_H
#define SELFTEST_IN_PLACE_H

/* In place: the output starting the kernel's lead (emk_depthwise_conv2d_s8_in_place_lead), plus 0-2 more whole
 * pixels, before the input, as the memory plan may put it. Same-size outputs (odd windows, half-window padding),
 * mostly whole 16-channel groups with a bias (the border columns row by row, 3x3 windows often), against the
 * reference on a separate copy of the input. */
static UNUSED_FN long trial_dwconv_in_place(int t) {
  static const int32_t ks[] = {3, 3, 3, 1, 5, 7}; /* 7: more border columns than dw_edge_cols holds */
  qconv_params p;
  random_conv_window(&p);
  p.k_h = ks[t % 6], p.k_w = ks[t / 6 % 6], p.pad_h = (p.k_h - 1) / 2, p.pad_w = (p.k_w - 1) / 2;
  p.stride_h = p.stride_w = 1;
  p.in_c = p.out_c = p.groups = t % 5 == 4 ? rr(1, 40) : 16 * rr(1, 4);
  p.input_offset = rr(-127, 128), p.output_offset = rr(-128, 127);
  p.act_min = rr(-128, 0), p.act_max = rr(0, 127);
  conv_output(&p);
  uint32_t step;
  const int64_t lead = emk_depthwise_conv2d_s8_in_place_lead(&p, &step);
  if (lead < 0) return 0; /* every shape here can go in place */
  const size_t n = (size_t)p.batch * p.in_h * p.in_w * p.in_c, d = (size_t)lead + (size_t)rr(0, 2) * step;
  fill(g_in, n);
  fill(g_w, (size_t)p.out_c * p.k_h * p.k_w);
  fill_bias(p.out_c);
  IN_PLACE_RQ(p.out_c);
  if (t & 1) /* every shift negative: the asm loops' K_FIX_NEG variants */
    for (int32_t i = 0; i < p.out_c; i++) g_shift[i] -= g_shift[i] == 0;
  const int32_t *bias = t % 7 == 6 ? NULL : g_bias;
  if ((t >> 1) & 1) p.beff = window_bias(&p, g_w, bias, 1);
  if (p.beff && ((t >> 3) & 1)) p.dwblk = dw_blocks(&p, p.beff, g_mult, g_shift);
  poison(g_a, g_b, n + d);
  emk_depthwise_conv2d_s8_ref(&p, g_in, g_w, bias, g_mult, g_shift, g_a);
  memcpy(g_b + d, g_in, n);
  void *s = scratch_for(emk_depthwise_conv2d_s8_get_buffer_size(&p));
  if (SELFTEST_VARIANT(emk_depthwise_conv2d_s8)(&p, g_b + d, g_w, bias, g_mult, g_shift, g_b, s, g_scratch_n) != K_OK ||
      !scratch_intact())
    memset(g_b, 0x77, 16);
  const long diff = first_diff(g_a, g_b, n);
  if (diff >= 0 && g_bad < 0) print_conv(&p);
  return diff;
}

#endif
