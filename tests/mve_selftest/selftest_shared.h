/* The kernels that both the MVE and the DSP self-test check against their *_ref twins (included by their main.c
 * after its trials: trial_<kernel> for each, and selftest_rnn.h's). conv_trials for the two convolutions: the MVE
 * test runs a second set on its wide shapes. */
#ifndef SELFTEST_SHARED_H
#define SELFTEST_SHARED_H

static UNUSED_FN void run_shared_trials(int conv_trials, int trials) {
  run_trials("emk_conv2d_s8", conv_trials, trial_conv);
  run_trials("emk_depthwise_conv2d_s8", conv_trials, trial_dwconv);
  run_trials("emk_linear_s8", trials, trial_linear);
  run_trials("emk_add_s8", trials, trial_add);
  run_trials("emk_mul_s8", trials, trial_mul);
  run_trials("emk_lut_s8", trials, trial_lut);
  run_trials("emk_max_pool2d_s8", trials, trial_maxpool);
  run_trials("emk_avg_pool2d_s8", trials, trial_avgpool);
  run_trials("emk_emlkit_lstm_s8", trials, trial_emlkit_lstm);
  run_trials("emk_emlkit_gru_s8", trials, trial_emlkit_gru);
}

#endif
