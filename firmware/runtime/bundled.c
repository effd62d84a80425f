/* Bundled programs (.bpte): verify the wrapper, feed each test case's inputs
 * into a method and compare its outputs with the expected ones. */
#include <inttypes.h>
#include <math.h>

#include "et_fmt.h"
#include "runtime.h"
#include "schema_ids.h"

#define CORRUPT(msg, what) et_errf(msg, ET_E_INVALID_PROGRAM, "corrupt bundled program: %s (%s)", what, fb_last_error)

et_status et_bundle_load(et_bundle *b, const uint8_t *data, size_t len) {
  memset(b, 0, sizeof *b);
  b->buf.base = data;
  b->buf.len = len;
  if (data == NULL || len < 8) return et_errf(b->msg, ET_E_INVALID_PROGRAM, "bundled program truncated: fewer than 8 bytes");
  if (memcmp(data + 4, FBB_FILE_IDENTIFIER, 4) != 0)
    return et_errf(b->msg, ET_E_INVALID_PROGRAM,
                   "not a bundled program: identifier is not %s (give the .bpte that python -m emlkit compile writes)", FBB_FILE_IDENTIFIER);
  if (!fb_root(&b->buf, FBB_FILE_IDENTIFIER, &b->root)) return CORRUPT(b->msg, "root");
  uint32_t version;
  if (!fb_u32(&b->root, FBB_BundledProgram__version, 0, &version)) return CORRUPT(b->msg, "version");
  if (version != FBB_SCHEMA_VERSION)
    return et_errf(b->msg, ET_E_INVALID_PROGRAM, "bundled program schema version %" PRIu32 " not supported (runtime reads %u)",
                   version, FBB_SCHEMA_VERSION);
  bool present;
  fb_vec suites, prog;
  if (!fb_vector(&b->root, FBB_BundledProgram__method_test_suites, 4, &present, &suites))
    return CORRUPT(b->msg, "test suites");
  if (suites.len != 1)
    return et_errf(b->msg, ET_E_NOT_SUPPORTED,
                   "bundled program has %" PRIu32 " test suites; the runner runs exactly one method (bundle one suite)", suites.len);
  uint32_t nlen;
  if (!fb_vec_table(&suites, 0, &b->suite) ||
      !fb_string(&b->suite, FBB_BundledMethodTestSuite__method_name, &present, &b->method_name, &nlen) ||
      !fb_vector(&b->suite, FBB_BundledMethodTestSuite__test_cases, 4, &present, &b->cases))
    return CORRUPT(b->msg, "test suite");
  if (!fb_vector(&b->root, FBB_BundledProgram__program, 1, &present, &prog)) return CORRUPT(b->msg, "program");
  if (!present || prog.len == 0) return et_errf(b->msg, ET_E_INVALID_PROGRAM, "bundled program contains no program");
  b->program = fb_vec_ptr(&prog);
  b->program_len = prog.len;
  return ET_OK;
}

uint32_t et_bundle_num_cases(const et_bundle *b) { return b->cases.len; }

/* A bundled Value as the runtime's types: tensors point into the bundle. */
typedef struct {
  uint8_t type; /* FBBU_ValueUnion__* */
  et_tensor t;
  int64_t i;
  bool bv;
  double d;
} bvalue;

static et_status read_value(et_bundle *b, const fb_vec *vals, uint32_t k, bvalue *out) {
  fb_table v, body;
  bool present;
  memset(out, 0, sizeof *out);
  if (!fb_vec_table(vals, k, &v) || !fb_union(&v, FBB_Value__val, &out->type, &present, &body) || !present)
    return CORRUPT(b->msg, "test value");
  switch (out->type) {
    case FBBU_ValueUnion__Tensor: {
      uint8_t dt;
      fb_vec sizes, data, order;
      if (!fb_u8(&body, FBB_Tensor__scalar_type, 0, &dt) || !fb_vector(&body, FBB_Tensor__sizes, 4, &present, &sizes) ||
          !fb_vector(&body, FBB_Tensor__data, 1, &present, &data) ||
          !fb_vector(&body, FBB_Tensor__dim_order, 1, &present, &order))
        return CORRUPT(b->msg, "test tensor");
      et_tensor *t = &out->t;
      t->dtype = (int8_t)dt;
      size_t es = et_dtype_size(t->dtype);
      if (es == 0) return et_errf(b->msg, ET_E_NOT_SUPPORTED, "test tensor %" PRIu32 " has unsupported dtype %d", k, t->dtype);
      if (sizes.len > ET_MAX_DIM) return et_errf(b->msg, ET_E_NOT_SUPPORTED, "test tensor %" PRIu32 " has too many dims", k);
      t->dim = (uint8_t)sizes.len;
      size_t numel = 1;
      for (uint32_t d = 0; d < sizes.len; d++) {
        int32_t s = fb_vec_i32(&sizes, d);
        if (s < 0 || (s && numel > SIZE_MAX / 16 / (size_t)s)) return CORRUPT(b->msg, "test tensor size");
        t->sizes[d] = s;
        numel *= (size_t)s;
      }
      unsigned seen = 0;
      if (order.len != 0 && order.len != sizes.len) return CORRUPT(b->msg, "test tensor dim order length");
      for (uint8_t d = 0; d < t->dim && d < ET_MAX_DIM; d++) {
        uint8_t o = order.len ? fb_vec_u8(&order, d) : d;
        if (o >= sizes.len || ((seen >> o) & 1u)) return CORRUPT(b->msg, "test tensor dim order");
        seen |= 1u << o;
        t->dim_order[d] = o;
      }
      t->nbytes = numel * es;
      if (data.len != t->nbytes)
        return et_errf(b->msg, ET_E_INVALID_PROGRAM, "corrupt bundled program: test tensor %" PRIu32 " holds %" PRIu32 " bytes, its shape needs %lu",
                       k, data.len, (unsigned long)t->nbytes);
      t->data = (void *)fb_vec_ptr(&data); /* read only */
      break;
    }
    case FBBU_ValueUnion__Int:
      if (!fb_i64(&body, FBB_Int__int_val, 0, &out->i)) return CORRUPT(b->msg, "test int");
      break;
    case FBBU_ValueUnion__Bool: {
      uint8_t x;
      if (!fb_u8(&body, FBB_Bool__bool_val, 0, &x)) return CORRUPT(b->msg, "test bool");
      out->bv = x != 0;
      break;
    }
    case FBBU_ValueUnion__Double:
      if (!fb_f64(&body, FBB_Double__double_val, 0, &out->d)) return CORRUPT(b->msg, "test double");
      break;
    default:
      return et_errf(b->msg, ET_E_INVALID_PROGRAM, "corrupt bundled program: test value of unknown kind %u", out->type);
  }
  return ET_OK;
}

static et_status case_vec(et_bundle *b, uint32_t c, unsigned slot, fb_vec *out) {
  fb_table tc;
  bool present;
  if (c >= b->cases.len) return et_errf(b->msg, ET_E_INVALID_ARG, "test case %" PRIu32 " does not exist", c);
  if (!fb_vec_table(&b->cases, c, &tc) || !fb_vector(&tc, slot, 4, &present, out)) return CORRUPT(b->msg, "test case");
  return ET_OK;
}

et_status et_bundle_set_inputs(et_bundle *b, uint32_t c, et_method *m) {
  fb_vec ins;
  et_status st = case_vec(b, c, FBB_BundledMethodTestCase__inputs, &ins);
  if (st != ET_OK) return st;
  if (ins.len != et_method_num_inputs(m))
    return et_errf(b->msg, ET_E_INVALID_ARG, "test case %" PRIu32 " has %" PRIu32 " inputs, method '%s' takes %" PRIu32,
                   c, ins.len, m->name, et_method_num_inputs(m));
  for (uint32_t k = 0; k < ins.len; k++) {
    bvalue v;
    if ((st = read_value(b, &ins, k, &v)) != ET_OK) return st;
    et_value *dst = et_method_input(m, k);
    int want = v.type == FBBU_ValueUnion__Tensor ? ET_TAG_TENSOR : v.type == FBBU_ValueUnion__Int ? ET_TAG_INT
               : v.type == FBBU_ValueUnion__Bool ? ET_TAG_BOOL : ET_TAG_DOUBLE;
    if (dst->tag != want)
      return et_errf(b->msg, ET_E_INVALID_ARG, "test case %" PRIu32 " input %" PRIu32 " has the wrong kind for the method", c, k);
    switch (want) {
      case ET_TAG_TENSOR:
        if ((st = et_method_set_input_tensor(m, k, &v.t)) != ET_OK)
          return et_errf(b->msg, st, "test case %" PRIu32 ": %s", c, m->msg);
        break;
      case ET_TAG_INT: dst->u.i = v.i; break;
      case ET_TAG_BOOL: dst->u.b = v.bv; break;
      default: dst->u.d = v.d; break;
    }
  }
  return ET_OK;
}

static bool is_float(int dt) { return dt == ET_DT_FLOAT || dt == ET_DT_DOUBLE || dt == ET_DT_HALF; }

/* Compare one output element by element in logical order (layouts may differ). */
static et_status compare_tensor(et_bundle *b, uint32_t k, const et_tensor *got, const et_tensor *exp, double step,
                                et_output_diff *d) {
  if (got->dtype != exp->dtype)
    return et_errf(b->msg, ET_E_INVALID_ARG, "output %" PRIu32 " is %s but the expected output is %s", k,
                   et_dtype_name(got->dtype), et_dtype_name(exp->dtype));
  bool shape_ok = got->dim == exp->dim;
  for (uint8_t i = 0; shape_ok && i < got->dim; i++) shape_ok = got->sizes[i] == exp->sizes[i];
  if (!shape_ok) return et_errf(b->msg, ET_E_INVALID_ARG, "output %" PRIu32 " shape differs from the expected output", k);
  size_t gs[ET_MAX_DIM], es[ET_MAX_DIM];
  et_tensor_strides(got, gs);
  et_tensor_strides(exp, es);
  size_t n = et_tensor_numel(got);
  int32_t idx[ET_MAX_DIM] = {0};
  bool flt = is_float(got->dtype);
  d->pass = true;
  for (size_t e = 0; e < n; e++) {
    size_t go = 0, eo = 0;
    for (uint8_t i = 0; i < got->dim; i++) go += gs[i] * (size_t)idx[i], eo += es[i] * (size_t)idx[i];
    double g = et_elem_as_double(got->dtype, got->data, go), x = et_elem_as_double(exp->dtype, exp->data, eo);
    if (isnan(g) || isnan(x)) {
      if (!(isnan(g) && isnan(x))) d->nan_mismatch = true, d->pass = false;
    } else {
      double diff = fabs(g - x);
      if (diff > d->max_abs) d->max_abs = diff;
      if (flt && step <= 0 && diff > ET_FLOAT_ATOL + ET_FLOAT_RTOL * fabs(x)) d->pass = false;
    }
    for (int i = (int)got->dim - 1; i >= 0; i--) {
      if (++idx[i] < got->sizes[i]) break;
      idx[i] = 0;
    }
  }
  if (!flt) {
    d->max_steps = (int64_t)d->max_abs;
  } else if (step > 0) {
    d->max_steps = (int64_t)llround(d->max_abs / step);
  } else {
    d->max_steps = -1;
  }
  if (d->max_steps > 0) d->pass = false;
  return ET_OK;
}

et_status et_bundle_compare(et_bundle *b, uint32_t c, const et_method *m, et_output_diff *diffs) {
  fb_vec outs;
  et_status st = case_vec(b, c, FBB_BundledMethodTestCase__expected_outputs, &outs);
  if (st != ET_OK) return st;
  uint32_t n = et_method_num_outputs(m);
  if (outs.len != n)
    return et_errf(b->msg, ET_E_INVALID_ARG, "test case %" PRIu32 " expects %" PRIu32 " outputs, method '%s' has %" PRIu32,
                   c, outs.len, m->name, n);
  for (uint32_t k = 0; k < n; k++) {
    bvalue v;
    et_output_diff *d = &diffs[k];
    memset(d, 0, sizeof *d);
    if ((st = read_value(b, &outs, k, &v)) != ET_OK) return st;
    const et_value *got = et_method_output(m, k);
    if (v.type == FBBU_ValueUnion__Tensor) {
      if (got->tag != ET_TAG_TENSOR) return et_errf(b->msg, ET_E_INVALID_ARG, "output %" PRIu32 " is not a tensor", k);
      double step = 0;
      if (!et_method_output_step(m, k, &step)) step = 0;
      if ((st = compare_tensor(b, k, got->u.t, &v.t, step, d)) != ET_OK) return st;
    } else {
      double g = got->tag == ET_TAG_INT ? (double)got->u.i : got->tag == ET_TAG_BOOL ? got->u.b : got->u.d;
      double x = v.type == FBBU_ValueUnion__Int ? (double)v.i : v.type == FBBU_ValueUnion__Bool ? v.bv : v.d;
      d->max_abs = fabs(g - x);
      d->max_steps = v.type == FBBU_ValueUnion__Double ? -1 : (int64_t)d->max_abs;
      d->pass = d->max_abs == 0 || (v.type == FBBU_ValueUnion__Double && d->max_abs <= ET_FLOAT_ATOL + ET_FLOAT_RTOL * fabs(x));
    }
  }
  return ET_OK;
}
