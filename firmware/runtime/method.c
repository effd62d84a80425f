/* Method: values built from the verified program, planned memory bound to the
 * caller's arenas, operators resolved once, then the instruction loop. */
#include <inttypes.h>
#include <stdarg.h>

#include "et_fmt.h"
#include "backend.h"
#include "registry.h"
#include "runtime.h"
#include "schema_ids.h"

_Static_assert(ET_TAG_NONE == FBPU_KernelTypes__Null, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_INT == FBPU_KernelTypes__Int, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_BOOL == FBPU_KernelTypes__Bool, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_DOUBLE == FBPU_KernelTypes__Double, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_TENSOR == FBPU_KernelTypes__Tensor, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_STRING == FBPU_KernelTypes__String, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_INT_LIST == FBPU_KernelTypes__IntList, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_DOUBLE_LIST == FBPU_KernelTypes__DoubleList, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_BOOL_LIST == FBPU_KernelTypes__BoolList, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_TENSOR_LIST == FBPU_KernelTypes__TensorList, "et_tag must follow KernelTypes");
_Static_assert(ET_TAG_OPT_TENSOR_LIST == FBPU_KernelTypes__OptionalTensorList, "et_tag must follow KernelTypes");

#define ALIGN 8u

et_status et_errf(char *msg, et_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  et_vsnprintf(msg, ET_MSG_CAP, fmt, ap);
  va_end(ap);
  return st;
}
#define CORRUPT(msg, what) et_errf(msg, ET_E_INVALID_PROGRAM, "corrupt program: %s (%s)", what, fb_last_error)

static size_t align_up(size_t n) { return (n + (ALIGN - 1)) & ~(size_t)(ALIGN - 1); }

/* Find method `name` (NULL: the first). */
static et_status find_plan(et_program *p, const char *name, char *msg, fb_table *plan, const char **pname) {
  for (uint32_t i = 0; i < p->plans.len; i++) {
    const char *s;
    uint32_t n;
    bool present;
    if (!fb_vec_table(&p->plans, i, plan) || !fb_string(plan, FBP_ExecutionPlan__name, &present, &s, &n))
      return CORRUPT(msg, "execution plan");
    if (name == NULL || (strlen(name) == n && memcmp(name, s, n) == 0)) {
      *pname = s;
      return ET_OK;
    }
  }
  return et_errf(msg, ET_E_INVALID_ARG, "program has no method '%s'", name);
}

typedef struct {
  fb_vec values, chains, ops, sizes;
  uint32_t ntensors, ninstr, nargs;
  size_t kstate; /* the kernel calls' own state (registry state bytes, each rounded up) */
} plan_shape;


/* A call's state bytes from the registry's figure: the figure itself, or for
 * ET_STATE_FROM_ARG(k) the Int value of argument k (0 when it is none). */
static uint32_t state_from_arg(uint32_t reg, bool is_int, int64_t v) {
  if (!(reg & ET_STATE_ARG_FLAG)) return reg;
  return is_int && v >= 0 && v <= (int64_t)ET_MAX_CALL_STATE ? (uint32_t)v : 0;
}

/* Bytes of state the registry gives operator `op` of the plan for the call
 * with arguments AV (0 for an operator out of range or unknown: the load
 * refuses those later). */
static uint32_t op_state_bytes(const fb_vec *ops, int32_t op, const fb_vec *values, const fb_vec *av) {
  fb_table t, ev, val;
  bool p1, p2;
  const char *name, *ov;
  uint32_t nl, ol, bytes = 0;
  if (op < 0 || (uint32_t)op >= ops->len || !fb_vec_table(ops, (uint32_t)op, &t) ||
      !fb_string(&t, FBP_Operator__name, &p1, &name, &nl) || !fb_string(&t, FBP_Operator__overload, &p2, &ov, &ol))
    return 0;
  (void)et_registry_find(name, nl, ov, ol, NULL, &bytes);
  if (!(bytes & ET_STATE_ARG_FLAG)) return bytes;
  const uint32_t k = bytes & ~ET_STATE_ARG_FLAG;
  const int32_t vi = k < av->len ? fb_vec_i32(av, k) : -1;
  uint8_t type = 0;
  int64_t v = -1;
  const bool is_int = vi >= 0 && (uint32_t)vi < values->len && fb_vec_table(values, (uint32_t)vi, &ev) &&
                      fb_union(&ev, FBP_EValue__val, &type, &p1, &val) && type == FBPU_KernelTypes__Int &&
                      fb_i64(&val, FBP_Int__int_val, 0, &v);
  return state_from_arg(bytes, is_int, v);
}

/* The state bytes of a kernel call of a loaded method. */
static uint32_t call_state_bytes(const et_method *m, const et_instr *ins) {
  const uint32_t reg = m->ops[ins->a].state_bytes, k = reg & ~ET_STATE_ARG_FLAG;
  if (!(reg & ET_STATE_ARG_FLAG)) return reg;
  const bool is_int = k < ins->nargs && ins->args[k]->tag == ET_TAG_INT;
  return state_from_arg(reg, is_int, is_int ? ins->args[k]->u.i : -1);
}

/* One walk over the plan that counts what the runtime memory must hold. */
static et_status shape_of(const fb_table *plan, char *msg, plan_shape *s) {
  bool present;
  memset(s, 0, sizeof *s);
  if (!fb_vector(plan, FBP_ExecutionPlan__values, 4, &present, &s->values) ||
      !fb_vector(plan, FBP_ExecutionPlan__chains, 4, &present, &s->chains) ||
      !fb_vector(plan, FBP_ExecutionPlan__operators, 4, &present, &s->ops) ||
      !fb_vector(plan, FBP_ExecutionPlan__non_const_buffer_sizes, 8, &present, &s->sizes))
    return CORRUPT(msg, "execution plan");
  for (uint32_t i = 0; i < s->values.len; i++) {
    fb_table ev, val;
    uint8_t type;
    if (!fb_vec_table(&s->values, i, &ev) || !fb_union(&ev, FBP_EValue__val, &type, &present, &val))
      return CORRUPT(msg, "value table");
    if (type == FBPU_KernelTypes__Tensor) s->ntensors++;
  }
  if (s->chains.len > ET_MAX_CHAINS)
    return et_errf(msg, ET_E_NOT_SUPPORTED, "program has %" PRIu32 " chains; this runtime runs up to %d",
                   s->chains.len, ET_MAX_CHAINS);
  for (uint32_t c = 0; c < s->chains.len; c++) {
    fb_table ch, in, args;
    fb_vec instrs, av;
    if (!fb_vec_table(&s->chains, c, &ch) || !fb_vector(&ch, FBP_Chain__instructions, 4, &present, &instrs))
      return CORRUPT(msg, "chain");
    if (instrs.len > UINT32_MAX - s->ninstr) return CORRUPT(msg, "too many instructions");
    s->ninstr += instrs.len;
    for (uint32_t i = 0; i < instrs.len; i++) {
      uint8_t type;
      if (!fb_vec_table(&instrs, i, &in) || !fb_union(&in, FBP_Instruction__instr_args, &type, &present, &args))
        return CORRUPT(msg, "instruction");
      if (type == FBPU_InstructionArguments__KernelCall || type == FBPU_InstructionArguments__DelegateCall) {
        unsigned slot = type == FBPU_InstructionArguments__KernelCall ? FBP_KernelCall__args : FBP_DelegateCall__args;
        if (!present || !fb_vector(&args, slot, 4, &present, &av)) return CORRUPT(msg, "call arguments");
        if (av.len > UINT32_MAX - s->nargs) return CORRUPT(msg, "too many arguments");
        s->nargs += av.len;
      }
      int32_t op = -1;
      if (type == FBPU_InstructionArguments__KernelCall && fb_i32(&args, FBP_KernelCall__op_index, 0, &op))
        s->kstate += align_up(op_state_bytes(&s->ops, op, &s->values, &av));
    }
  }
  if (s->sizes.len > ET_MAX_ARENAS + 1)
    return et_errf(msg, ET_E_NOT_SUPPORTED, "program plans %" PRIu32 " memory arenas; this runtime supports %d",
                   s->sizes.len - 1, ET_MAX_ARENAS);
  return ET_OK;
}

size_t et_runtime_bytes(const et_plan_counts *n, const et_abi_sizes *abi) {
  static const et_abi_sizes native = {sizeof(et_value), sizeof(et_tensor), sizeof(et_op_slot), sizeof(et_instr),
                                      sizeof(et_value *)};
  if (abi == NULL) abi = &native;
  return align_up((size_t)abi->value * n->values) + align_up((size_t)abi->tensor * n->tensors) +
         align_up((size_t)abi->op_slot * n->ops) + align_up((size_t)abi->instr * n->instrs) +
         align_up((size_t)abi->pointer * n->args) + n->kernel_state;
}

static et_plan_counts counts_of(const plan_shape *s) {
  return (et_plan_counts){s->values.len, s->ntensors, s->ops.len, s->ninstr, s->nargs, s->kstate};
}

static size_t runtime_bytes(const plan_shape *s) {
  const et_plan_counts n = counts_of(s);
  return et_runtime_bytes(&n, NULL);
}

/* The backend and processed data of delegate `di` called by instruction `n`. */
static et_status resolve_delegate(et_program *p, const fb_table *plan, uint32_t di, uint32_t n, char *msg,
                                  const et_backend **backend, const uint8_t **data, size_t *len) {
  fb_vec delegates;
  fb_table d;
  bool present;
  const char *id;
  uint32_t idlen;
  if (!fb_vector(plan, FBP_ExecutionPlan__delegates, 4, &present, &delegates)) return CORRUPT(msg, "delegates");
  if (di >= delegates.len)
    return et_errf(msg, ET_E_INVALID_PROGRAM, "corrupt program: instruction %" PRIu32 " calls delegate %" PRIu32 " of %" PRIu32, n, di,
                   delegates.len);
  if (!fb_vec_table(&delegates, di, &d) || !fb_string(&d, FBP_BackendDelegate__id, &present, &id, &idlen) || !present)
    return CORRUPT(msg, "delegate");
  *backend = et_backend_find(id, idlen);
  if (*backend == NULL)
    return et_errf(msg, ET_E_NO_BACKEND, "instruction %" PRIu32 " calls delegate backend '%.*s', which this build does not include", n,
                   (int)(idlen > 60 ? 60 : idlen), id);
  et_status st = et_program_delegate_data(p, &d, data, len);
  if (st != ET_OK) return et_errf(msg, st, "instruction %" PRIu32 ": %s", n, p->msg);
  return ET_OK;
}

static size_t align_delegate(size_t n) { return (n + (ET_DELEGATE_ALIGN - 1)) & ~(size_t)(ET_DELEGATE_ALIGN - 1); }

/* Planned memory of every delegate call, in instruction order. */
static et_status delegate_needs(et_program *p, const fb_table *plan, const plan_shape *s, char *msg, size_t *total) {
  uint32_t n = 0;
  *total = 0;
  for (uint32_t c = 0; c < s->chains.len; c++) {
    fb_table ch, in, a;
    fb_vec instrs;
    bool present;
    if (!fb_vec_table(&s->chains, c, &ch) || !fb_vector(&ch, FBP_Chain__instructions, 4, &present, &instrs))
      return CORRUPT(msg, "chain");
    for (uint32_t i = 0; i < instrs.len; i++, n++) {
      uint8_t type;
      int32_t di;
      if (!fb_vec_table(&instrs, i, &in) || !fb_union(&in, FBP_Instruction__instr_args, &type, &present, &a))
        return CORRUPT(msg, "instruction");
      if (type != FBPU_InstructionArguments__DelegateCall) continue;
      if (!fb_i32(&a, FBP_DelegateCall__delegate_index, 0, &di)) return CORRUPT(msg, "delegate call");
      const et_backend *b;
      const uint8_t *data;
      size_t len, bytes = 0;
      et_status st = resolve_delegate(p, plan, (uint32_t)di, n, msg, &b, &data, &len);
      if (st != ET_OK) return st;
      char dmsg[ET_MSG_CAP];
      dmsg[0] = 0;
      st = b->needs(data, len, &bytes, dmsg, sizeof dmsg);
      if (st != ET_OK) return et_errf(msg, st, "instruction %" PRIu32 " (delegate %s): %s", n, b->id, dmsg);
      if (bytes > SIZE_MAX / 2 || *total > SIZE_MAX / 2) return et_errf(msg, ET_E_INVALID_PROGRAM, "corrupt program: delegate too large");
      *total += align_delegate(bytes);
    }
  }
  return ET_OK;
}

et_status et_method_needs_get(et_program *p, const char *name, et_method_needs *needs) {
  fb_table plan;
  plan_shape s;
  const char *pname;
  memset(needs, 0, sizeof *needs);
  et_status st = find_plan(p, name, p->msg, &plan, &pname);
  if (st == ET_OK) st = shape_of(&plan, p->msg, &s);
  if (st != ET_OK) return st;
  needs->counts = counts_of(&s);
  needs->runtime_bytes = et_runtime_bytes(&needs->counts, NULL);
  if ((st = delegate_needs(p, &plan, &s, p->msg, &needs->delegate_bytes)) != ET_OK) return st;
  needs->n_arenas = s.sizes.len > 1 ? s.sizes.len - 1 : 0;
  for (uint32_t k = 0; k < needs->n_arenas; k++) {
    int64_t v = fb_vec_i64(&s.sizes, k + 1);
    if (v < 0 || (uint64_t)v > (uint64_t)SIZE_MAX)
      return et_errf(p->msg, ET_E_INVALID_PROGRAM, "corrupt program: arena %" PRIu32 " has size %" PRId64, k + 1, v);
    needs->arena_bytes[k] = (uint64_t)v;
  }
  return ET_OK;
}

/* ---- values ---- */

/* dim_order must be a permutation; absent means contiguous. */
static et_status parse_dim_order(et_method *m, uint32_t vi, const fb_vec *order, uint32_t rank, et_tensor *out) {
  if (order->len == 0) {
    for (uint32_t d = 0; d < rank; d++) out->dim_order[d] = (uint8_t)d;
    return ET_OK;
  }
  unsigned seen = 0;
  if (order->len != rank)
    return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: value %" PRIu32 " dim_order length differs from its rank", vi);
  for (uint32_t d = 0; d < order->len; d++) {
    uint8_t o = fb_vec_u8(order, d);
    if (o >= rank || (seen >> o) & 1u)
      return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: value %" PRIu32 " dim_order is not a permutation", vi);
    seen |= 1u << o;
    out->dim_order[d] = o;
  }
  return ET_OK;
}

/* A planned tensor's place: its offset in its arena, checked against the arena's planned size. */
static et_status place_tensor(et_method *m, uint32_t vi, const fb_table *alloc, uint32_t dbi, et_tensor *out,
                              const uint8_t *const *arena_base, const uint64_t *arena_plan) {
  uint32_t id, lo, hi;
  if (!fb_u32(alloc, FBP_AllocationDetails__memory_id, 0, &id) ||
      !fb_u32(alloc, FBP_AllocationDetails__memory_offset_low, 0, &lo) ||
      !fb_u32(alloc, FBP_AllocationDetails__memory_offset_high, 0, &hi))
    return CORRUPT(m->msg, "allocation info");
  if (dbi != 0)
    return et_errf(m->msg, ET_E_NOT_SUPPORTED, "value %" PRIu32 ": mutable tensors with initial data are not supported", vi);
  uint64_t off = ((uint64_t)hi << 32) | lo;
  if (id == 0 || id > ET_MAX_ARENAS || arena_base[id - 1] == NULL)
    return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: value %" PRIu32 " planned in unknown memory id %" PRIu32, vi, id);
  if (off > arena_plan[id - 1] || out->nbytes > arena_plan[id - 1] - off)
    return et_errf(m->msg, ET_E_INVALID_PROGRAM,
                   "corrupt program: value %" PRIu32 " (%lu bytes at offset %" PRIu64 ") lies outside arena %" PRIu32 " (%" PRIu64 " bytes)",
                   vi, (unsigned long)out->nbytes, off, id, arena_plan[id - 1]);
  out->data = (uint8_t *)arena_base[id - 1] + off;
  return ET_OK;
}

static et_status parse_tensor(et_method *m, uint32_t vi, const fb_table *t, et_tensor *out,
                              const uint8_t *const *arena_base, const uint64_t *arena_plan) {
  bool present;
  uint8_t dtype_u, dyn;
  int32_t storage_offset;
  uint32_t dbi;
  fb_vec sizes, order;
  fb_table alloc, extra;
  bool has_alloc, has_extra;
  memset(out, 0, sizeof *out);
  if (!fb_u8(t, FBP_Tensor__scalar_type, 0, &dtype_u) || !fb_i32(t, FBP_Tensor__storage_offset, 0, &storage_offset) ||
      !fb_vector(t, FBP_Tensor__sizes, 4, &present, &sizes) || !fb_vector(t, FBP_Tensor__dim_order, 1, &present, &order) ||
      !fb_u32(t, FBP_Tensor__data_buffer_idx, 0, &dbi) || !fb_sub_table(t, FBP_Tensor__allocation_info, &has_alloc, &alloc) ||
      !fb_u8(t, FBP_Tensor__shape_dynamism, 0, &dyn) || !fb_sub_table(t, FBP_Tensor__extra_tensor_info, &has_extra, &extra))
    return CORRUPT(m->msg, "tensor");
  int dtype = (int8_t)dtype_u;
  size_t es = et_dtype_size(dtype);
  if (es == 0)
    return et_errf(m->msg, ET_E_NOT_SUPPORTED, "value %" PRIu32 ": tensor dtype %d is not supported by this runtime", vi, dtype);
  if (sizes.len > ET_MAX_DIM)
    return et_errf(m->msg, ET_E_NOT_SUPPORTED, "value %" PRIu32 ": tensor has %" PRIu32 " dims (max %d)", vi, sizes.len, ET_MAX_DIM);
  if (storage_offset != 0) return et_errf(m->msg, ET_E_NOT_SUPPORTED, "value %" PRIu32 ": nonzero storage_offset", vi);
  if (dyn != FBPE_TensorShapeDynamism__STATIC)
    return et_errf(m->msg, ET_E_NOT_SUPPORTED, "value %" PRIu32 ": dynamic shapes are not supported (export with static shapes)", vi);
  if (has_extra) {
    uint8_t loc;
    if (!fb_u8(&extra, FBP_ExtraTensorInfo__location, 0, &loc)) return CORRUPT(m->msg, "tensor info");
    if (loc != FBPE_TensorDataLocation__SEGMENT)
      return et_errf(m->msg, ET_E_NOT_SUPPORTED, "value %" PRIu32 ": external tensor data (.ptd) is not supported", vi);
  }
  out->dtype = (int8_t)dtype;
  out->dim = (uint8_t)sizes.len;
  size_t numel = 1;
  for (uint32_t d = 0; d < sizes.len; d++) {
    int32_t v = fb_vec_i32(&sizes, d);
    if (v < 0) return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: value %" PRIu32 " has a negative size", vi);
    if (v != 0 && numel > (SIZE_MAX / 16) / (size_t)v)
      return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: value %" PRIu32 " is impossibly large", vi);
    numel *= (size_t)v;
    out->sizes[d] = v;
  }
  out->nbytes = numel * es;
  et_status st = parse_dim_order(m, vi, &order, sizes.len, out);
  if (st != ET_OK) return st;
  if (has_alloc) {
    if ((st = place_tensor(m, vi, &alloc, dbi, out, arena_base, arena_plan)) != ET_OK) return st;
  } else if (dbi != 0) {
    const uint8_t *c;
    st = et_program_constant(m->prog, dbi, out->nbytes, &c);
    if (st != ET_OK) return et_errf(m->msg, st, "value %" PRIu32 ": %s", vi, m->prog->msg);
    out->data = (void *)c; /* constants are read-only by contract: ops never write inputs */
  }
  /* Kernels load whole elements; misaligned data would fault on Cortex-M. */
  if (out->data != NULL && ((uintptr_t)out->data % es) != 0)
    return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: value %" PRIu32 " data is not %lu-byte aligned", vi, (unsigned long)es);
  return ET_OK;
}

/* Items of lists are value indices: check range and kind once. */
static et_status check_list(et_method *m, uint32_t vi, et_value *v) {
  for (uint32_t k = 0; k < v->u.list.len; k++) {
    int64_t idx;
    int want;
    if (v->tag == ET_TAG_INT_LIST) {
      memcpy(&idx, v->u.list.items + 8u * k, 8);
      want = ET_TAG_INT;
    } else {
      int32_t i32;
      memcpy(&i32, v->u.list.items + 4u * k, 4);
      idx = i32;
      want = ET_TAG_TENSOR;
      if (v->tag == ET_TAG_OPT_TENSOR_LIST && idx == -1) continue;
    }
    if (idx < 0 || idx >= (int64_t)m->nvalues)
      return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: list value %" PRIu32 " refers to value %" PRId64, vi, idx);
    int tag = m->values[idx].tag;
    if (tag != want && !(v->tag == ET_TAG_OPT_TENSOR_LIST && tag == ET_TAG_NONE))
      return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: list value %" PRIu32 " item %" PRIu32 " has the wrong kind", vi, k);
  }
  return ET_OK;
}

static et_status parse_values(et_method *m, const plan_shape *s, const uint8_t *const *arena_base,
                              const uint64_t *arena_plan) {
  uint32_t ti = 0;
  for (uint32_t i = 0; i < s->values.len; i++) {
    fb_table ev, val;
    uint8_t type;
    bool present;
    et_value *v = &m->values[i];
    fb_vec items;
    if (!fb_vec_table(&s->values, i, &ev) || !fb_union(&ev, FBP_EValue__val, &type, &present, &val))
      return CORRUPT(m->msg, "value table");
    v->tag = type;
    bool ok = true;
    switch (type) {
      case FBPU_KernelTypes__Null: break;
      case FBPU_KernelTypes__Int: ok = fb_i64(&val, FBP_Int__int_val, 0, &v->u.i); break;
      case FBPU_KernelTypes__Bool: {
        uint8_t b;
        ok = fb_u8(&val, FBP_Bool__bool_val, 0, &b);
        v->u.b = b != 0;
        break;
      }
      case FBPU_KernelTypes__Double: ok = fb_f64(&val, FBP_Double__double_val, 0, &v->u.d); break;
      case FBPU_KernelTypes__String:
        ok = fb_string(&val, FBP_String__string_val, &present, &v->u.s.ptr, &v->u.s.len);
        break;
      case FBPU_KernelTypes__Tensor: {
        et_tensor *t = &m->tensors[ti++];
        et_status st = parse_tensor(m, i, &val, t, arena_base, arena_plan);
        if (st != ET_OK) return st;
        v->u.t = t;
        break;
      }
      case FBPU_KernelTypes__IntList:
      case FBPU_KernelTypes__DoubleList:
      case FBPU_KernelTypes__BoolList:
      case FBPU_KernelTypes__TensorList:
      case FBPU_KernelTypes__OptionalTensorList: {
        uint32_t es = type == FBPU_KernelTypes__IntList || type == FBPU_KernelTypes__DoubleList ? 8
                      : type == FBPU_KernelTypes__BoolList ? 1 : 4;
        /* every list table's `items` is slot 0 */
        ok = fb_vector(&val, FBP_IntList__items, es, &present, &items);
        v->u.list.values = m->values;
        v->u.list.items = fb_vec_ptr(&items);
        v->u.list.len = items.len;
        break;
      }
      default:
        return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: value %" PRIu32 " has unknown kind %u", i, type);
    }
    if (!ok) return CORRUPT(m->msg, "value");
    if (type != FBPU_KernelTypes__Null && !present && type != FBPU_KernelTypes__String)
      return CORRUPT(m->msg, "value without a body");
  }
  m->ntensors = ti;
  for (uint32_t i = 0; i < s->values.len; i++) {
    et_value *v = &m->values[i];
    if (v->tag == ET_TAG_INT_LIST || v->tag == ET_TAG_TENSOR_LIST || v->tag == ET_TAG_OPT_TENSOR_LIST) {
      et_status st = check_list(m, i, v);
      if (st != ET_OK) return st;
    }
  }
  return ET_OK;
}

static et_status check_index_vec(et_method *m, const fb_vec *v, const char *what) {
  for (uint32_t i = 0; i < v->len; i++) {
    int32_t idx = fb_vec_i32(v, i);
    if (idx < 0 || (uint32_t)idx >= m->nvalues)
      return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: %s %" PRIu32 " refers to value %" PRId32, what, i, idx);
  }
  return ET_OK;
}

/* Bind delegate call `ins` (instruction n): validate once, carve its planned memory. */
static et_status init_delegate(et_method *m, et_instr *ins, uint32_t n, uint8_t **dmem, size_t *dleft) {
  const uint8_t *data;
  size_t len, bytes = 0;
  const et_backend *b;
  et_status st = resolve_delegate(m->prog, &m->plan, ins->a, n, m->msg, &b, &data, &len);
  if (st != ET_OK) return st;
  m->kmsg[0] = 0;
  if ((st = b->needs(data, len, &bytes, m->kmsg, sizeof m->kmsg)) != ET_OK)
    return et_errf(m->msg, st, "instruction %" PRIu32 " (delegate %s): %s", n, b->id, m->kmsg);
  size_t take = align_delegate(bytes);
  if (take > *dleft)
    return et_errf(m->msg, ET_E_ARENA_TOO_SMALL, "delegate memory too small: instruction %" PRIu32 " (delegate %s) needs %lu more bytes",
                   n, b->id, (unsigned long)(take - *dleft));
  m->kmsg[0] = 0;
  st = b->init(*dmem, bytes, data, len, (et_value *const *)ins->args, ins->nargs, m->kmsg, sizeof m->kmsg);
  if (st != ET_OK) return et_errf(m->msg, st, "instruction %" PRIu32 " (delegate %s): %s", n, b->id, m->kmsg);
  ins->backend = b;
  ins->dstate = *dmem;
  *dmem += take;
  *dleft -= take;
  return ET_OK;
}

static et_status parse_instructions(et_method *m, const plan_shape *s, et_value **argbuf, uint8_t *kstate, uint8_t *dmem,
                                    size_t dleft) {
  uint32_t n = 0;
  bool present;
  m->nchains = s->chains.len;
  for (uint32_t c = 0; c < s->chains.len; c++) {
    fb_table ch, in, a;
    fb_vec instrs, av;
    if (!fb_vec_table(&s->chains, c, &ch) || !fb_vector(&ch, FBP_Chain__instructions, 4, &present, &instrs))
      return CORRUPT(m->msg, "chain");
    m->chain_start[c] = n;
    for (uint32_t i = 0; i < instrs.len; i++, n++) {
      uint8_t type;
      et_instr *ins = &m->instrs[n];
      if (!fb_vec_table(&instrs, i, &in) || !fb_union(&in, FBP_Instruction__instr_args, &type, &present, &a))
        return CORRUPT(m->msg, "instruction");
      ins->kind = type;
      int32_t x = 0, y = 0;
      bool ok = true;
      switch (type) {
        case FBPU_InstructionArguments__KernelCall:
          ok = fb_i32(&a, FBP_KernelCall__op_index, 0, &x) && fb_vector(&a, FBP_KernelCall__args, 4, &present, &av);
          if (ok && (x < 0 || (uint32_t)x >= m->nops))
            return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: instruction %" PRIu32 " uses operator %" PRId32, n, x);
          break;
        case FBPU_InstructionArguments__DelegateCall:
          ok = fb_i32(&a, FBP_DelegateCall__delegate_index, 0, &x) && fb_vector(&a, FBP_DelegateCall__args, 4, &present, &av);
          if (ok && x < 0) return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: instruction %" PRIu32 " calls delegate %" PRId32, n, x);
          break;
        case FBPU_InstructionArguments__MoveCall:
          ok = fb_i32(&a, FBP_MoveCall__move_from, 0, &x) && fb_i32(&a, FBP_MoveCall__move_to, 0, &y);
          if (ok && (x < 0 || y < 0 || (uint32_t)x >= m->nvalues || (uint32_t)y >= m->nvalues))
            return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: move %" PRIu32 " out of range", n);
          break;
        case FBPU_InstructionArguments__JumpFalseCall:
          ok = fb_i32(&a, FBP_JumpFalseCall__cond_value_index, 0, &x) &&
               fb_i32(&a, FBP_JumpFalseCall__destination_instruction, 0, &y);
          if (ok && (x < 0 || (uint32_t)x >= m->nvalues || y < 0 || (uint32_t)y >= instrs.len))
            return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: jump %" PRIu32 " out of range", n);
          break;
        case FBPU_InstructionArguments__FreeCall:
          ok = fb_i32(&a, FBP_FreeCall__value_index, 0, &x);
          if (ok && (x < 0 || (uint32_t)x >= m->nvalues))
            return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: free %" PRIu32 " out of range", n);
          break;
        default:
          return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: instruction %" PRIu32 " has unknown kind %u", n, type);
      }
      if (!ok) return CORRUPT(m->msg, "instruction");
      ins->a = (uint32_t)x;
      ins->b = (uint32_t)y;
      if (type == FBPU_InstructionArguments__KernelCall || type == FBPU_InstructionArguments__DelegateCall) {
        ins->args = argbuf;
        ins->nargs = av.len;
        for (uint32_t k = 0; k < av.len; k++) {
          int32_t vi = fb_vec_i32(&av, k);
          if (vi < 0 || (uint32_t)vi >= m->nvalues)
            return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: instruction %" PRIu32 " argument %" PRIu32 " out of range", n, k);
          argbuf[k] = &m->values[vi];
        }
        argbuf += av.len;
      }
      if (type == FBPU_InstructionArguments__KernelCall && call_state_bytes(m, ins)) {
        ins->dstate = kstate; /* zeroed with the runtime memory */
        kstate += align_up(call_state_bytes(m, ins));
      }
      if (type == FBPU_InstructionArguments__DelegateCall) {
        et_status st = init_delegate(m, ins, n, &dmem, &dleft);
        if (st != ET_OK) return st;
      }
    }
  }
  m->chain_start[s->chains.len] = n;
  return ET_OK;
}

static bool ranges_overlap(const et_tensor *a, const et_tensor *b) {
  if (a == b || a->data == NULL || b->data == NULL || a->nbytes == 0 || b->nbytes == 0) return false;
  uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
  return a0 < b0 + b->nbytes && b0 < a0 + a->nbytes;
}

/* In place: the op's registry entry allows its output over input argument k
 * (et_registry_in_place), and the output either starts exactly at that input
 * with elements no larger, or ends exactly where it ends with as many elements,
 * each no smaller (the kernels then only write bytes already read). */
static bool in_place_ok(const et_op_slot *op, uint32_t k, const et_tensor *out, const et_tensor *in) {
  if (k >= 32) return false;
  const size_t osz = et_dtype_size(out->dtype), isz = et_dtype_size(in->dtype);
  if ((op->in_place >> k & 1u) && out->data == in->data && out->nbytes <= in->nbytes && osz <= isz) return true;
  return (op->in_place_tail >> k & 1u) && (const char *)out->data + out->nbytes == (const char *)in->data + in->nbytes &&
         et_tensor_numel(out) == et_tensor_numel(in) && osz >= isz;
}

/* In place with a lead: the op's registry entry lets its output start before input argument k
 * (et_registry_in_place_ahead), and it starts D bytes before it, D the lead the op computes from the call's
 * arguments or more by whole steps (a depthwise convolution: its window reads no input before a fixed
 * distance behind the pixel it writes). *lead: that lead (-1: none for this call, or no such entry). */
static bool ahead_ok(const et_op_slot *op, const et_instr *ins, uint32_t k, const et_tensor *out, const et_tensor *in,
                     int64_t *lead, uint32_t *step) {
  et_in_place_lead_fn fn = NULL;
  *lead = -1, *step = 1;
  if (k >= 32 || !(et_registry_in_place_ahead(op->name, (uint32_t)strlen(op->name), op->overload,
                                              (uint32_t)strlen(op->overload), &fn) >> k & 1u))
    return false;
  *lead = fn(ins->args, ins->nargs, k, step);
  const uintptr_t o = (uintptr_t)out->data, i = (uintptr_t)in->data;
  if (*lead < 0 || *step == 0 || o > i) return false;
  const uint64_t d = (uint64_t)(i - o);
  return d >= (uint64_t)*lead && (d - (uint64_t)*lead) % *step == 0;
}

/* Item j of list argument k lies in place: the op's registry entry allows it
 * (et_registry_in_place's list_args), the item has the output's element size
 * and dim order and differs from it in at most one dim (the concat dim, which
 * the adapter's prepare checks), every dim outside that one in memory order
 * has size 1, so the item's part of the output is one run of bytes, and the
 * item starts exactly where that run starts (after the items before it). The
 * concat then finds it already written; no other item's copy reaches it. */
static bool list_item_in_place(const et_op_slot *op, uint32_t k, const et_tensor *out, const et_value *list, uint32_t j) {
  const et_tensor *t = et_list_tensor(list, j);
  if (k >= 32 || !(op->in_place_list >> k & 1u) || t == NULL || t->dim != out->dim ||
      et_dtype_size(t->dtype) != et_dtype_size(out->dtype))
    return false;
  int differs = -1;
  for (uint8_t d = 0; d < out->dim; d++) {
    if (t->dim_order[d] != out->dim_order[d]) return false;
    if (t->sizes[d] != out->sizes[d]) {
      if (differs >= 0) return false;
      differs = d;
    }
  }
  for (uint8_t i = 0; i < out->dim && differs >= 0 && out->dim_order[i] != (uint8_t)differs; i++)
    if (out->sizes[out->dim_order[i]] != 1) return false;
  size_t at = 0;
  for (uint32_t i = 0; i < j; i++) {
    const et_tensor *p = et_list_tensor(list, i);
    if (p == NULL) return false;
    at += p->nbytes;
  }
  return (const char *)t->data == (const char *)out->data + at && at + t->nbytes <= out->nbytes;
}

/* A kernel's output (its last argument, by the out-variant convention) must not
 * share bytes with any of its inputs, except in place where the registry allows
 * it (in_place_ok, list_item_in_place): the kernels (block copies above all) rely on it. A program
 * that does otherwise is damaged; refusing it at load keeps execution sound. */
static et_status check_aliasing(et_method *m) {
  for (uint32_t pc = 0; pc < m->chain_start[m->nchains]; pc++) {
    const et_instr *ins = &m->instrs[pc];
    if (ins->kind != FBPU_InstructionArguments__KernelCall || ins->nargs < 2) continue;
    const et_value *ov = ins->args[ins->nargs - 1];
    if (ov->tag != ET_TAG_TENSOR) continue;
    for (uint32_t k = 0; k + 1 < ins->nargs; k++) {
      const et_value *v = ins->args[k];
      if (v == ov) continue; /* the out argument repeated as the return value */
      bool clash = false;
      if (v->tag == ET_TAG_TENSOR) {
        clash = ranges_overlap(ov->u.t, v->u.t) && !in_place_ok(&m->ops[ins->a], k, ov->u.t, v->u.t);
        int64_t lead = -1;
        uint32_t step = 1;
        if (clash && !ahead_ok(&m->ops[ins->a], ins, k, ov->u.t, v->u.t, &lead, &step) && lead >= 0)
          return et_errf(m->msg, ET_E_INVALID_PROGRAM,
                         "corrupt program: instruction %" PRIu32 " writes its output %lld bytes before its argument %"
                         PRIu32 ", over it: the kernel needs it to start %lld bytes before it (or more by whole steps "
                         "of %" PRIu32 " bytes); plan the program again with this version of emlkit",
                         pc, (long long)((intptr_t)v->u.t->data - (intptr_t)ov->u.t->data), k, (long long)lead, step);
        clash = clash && lead < 0;
      } else if (v->tag == ET_TAG_TENSOR_LIST || v->tag == ET_TAG_OPT_TENSOR_LIST) {
        for (uint32_t j = 0; j < v->u.list.len && !clash; j++) {
          const et_tensor *t = et_list_tensor(v, j);
          clash = t != NULL && ranges_overlap(ov->u.t, t) && !list_item_in_place(&m->ops[ins->a], k, ov->u.t, v, j);
        }
      }
      if (clash)
        return et_errf(m->msg, ET_E_INVALID_PROGRAM,
                       "corrupt program: instruction %" PRIu32 " writes its output over its argument %" PRIu32, pc, k);
    }
  }
  return ET_OK;
}

static et_status resolve_ops(et_method *m, const plan_shape *s) {
  m->nops = s->ops.len;
  for (uint32_t i = 0; i < s->ops.len; i++) {
    fb_table op;
    bool p1, p2;
    uint32_t nl, ol;
    et_op_slot *slot = &m->ops[i];
    memset(slot, 0, sizeof *slot);
    if (!fb_vec_table(&s->ops, i, &op) || !fb_string(&op, FBP_Operator__name, &p1, &slot->name, &nl) ||
        !fb_string(&op, FBP_Operator__overload, &p2, &slot->overload, &ol))
      return CORRUPT(m->msg, "operator table");
    slot->fn = et_registry_find(slot->name, nl, slot->overload, ol, &slot->prepare, &slot->state_bytes);
    slot->in_place = et_registry_in_place(slot->name, nl, slot->overload, ol, &slot->in_place_tail, &slot->in_place_list);
    if (slot->fn == NULL)
      return et_errf(m->msg, ET_E_UNKNOWN_OP, "unknown operator %s.%s: no kernel registered for it in firmware/ops/*.def",
                     slot->name, ol ? slot->overload : "default");
  }
  return ET_OK;
}

/* Prepare: every kernel call's adapter checks its arguments once, at load.
 * A plan with move instructions can change values after load (an argument
 * may only become valid through a move): its calls are prepared right before
 * each eval instead, as one call used to check and run. */
static et_status prepare_calls(et_method *m) {
  for (uint32_t pc = 0; pc < m->chain_start[m->nchains]; pc++)
    if (m->instrs[pc].kind == FBPU_InstructionArguments__MoveCall) m->prepare_each_call = true;
  if (m->prepare_each_call) return ET_OK;
  for (uint32_t c = 0; c < m->nchains; c++) {
    for (uint32_t pc = m->chain_start[c]; pc < m->chain_start[c + 1]; pc++) {
      const et_instr *ins = &m->instrs[pc];
      if (ins->kind != FBPU_InstructionArguments__KernelCall) continue;
      const et_op_slot *op = &m->ops[ins->a];
      if (op->prepare == NULL) continue;
      m->kmsg[0] = 0;
      m->ctx.state = ins->dstate, m->ctx.state_size = call_state_bytes(m, ins);
      et_status st = op->prepare(&m->ctx, ins->args, ins->nargs);
      if (st != ET_OK)
        return et_errf(m->msg, st, "instruction %" PRIu32 " (%s.%s): %s", pc - m->chain_start[c], op->name, op->overload,
                       m->kmsg[0] ? m->kmsg : et_status_str(st));
    }
  }
  return ET_OK;
}

et_status et_method_init(et_method *m, et_program *p, const char *name, void *runtime_mem, size_t runtime_size,
                         const uint8_t *const *arena_base, const size_t *arena_size, uint32_t n_arenas,
                         void *scratch, size_t scratch_size, void *delegate_mem, size_t delegate_size) {
  plan_shape s;
  memset(m, 0, sizeof *m);
  m->prog = p;
  et_status st = find_plan(p, name, m->msg, &m->plan, &m->name);
  if (st == ET_OK) st = shape_of(&m->plan, m->msg, &s);
  if (st != ET_OK) return st;

  /* Memory checks before anything is written. */
  size_t need = runtime_bytes(&s);
  if (runtime_mem == NULL || runtime_size < need)
    return et_errf(m->msg, ET_E_ARENA_TOO_SMALL, "runtime memory too small: method '%s' needs %lu bytes, got %lu",
                   m->name, (unsigned long)need, (unsigned long)(runtime_mem ? runtime_size : 0));
  if (((uintptr_t)runtime_mem & (ALIGN - 1)) != 0)
    return et_errf(m->msg, ET_E_INVALID_ARG, "runtime memory must be %u-byte aligned", ALIGN);
  uint32_t want_arenas = s.sizes.len > 1 ? s.sizes.len - 1 : 0;
  const uint8_t *bases[ET_MAX_ARENAS] = {0};
  uint64_t plan_sizes[ET_MAX_ARENAS] = {0};
  for (uint32_t k = 0; k < want_arenas; k++) {
    int64_t v = fb_vec_i64(&s.sizes, k + 1);
    if (v < 0) return et_errf(m->msg, ET_E_INVALID_PROGRAM, "corrupt program: arena %" PRIu32 " has negative size", k + 1);
    plan_sizes[k] = (uint64_t)v;
    if (k >= n_arenas || (arena_base[k] == NULL && v > 0))
      return et_errf(m->msg, ET_E_ARENA_TOO_SMALL, "arena %" PRIu32 " missing: method '%s' needs %" PRIu32 " arenas, got %" PRIu32,
                     k + 1, m->name, want_arenas, n_arenas);
    if ((uint64_t)arena_size[k] < plan_sizes[k])
      return et_errf(m->msg, ET_E_ARENA_TOO_SMALL, "arena %" PRIu32 " too small: method '%s' needs %" PRIu64 " bytes, got %lu",
                     k + 1, m->name, plan_sizes[k], (unsigned long)arena_size[k]);
    bases[k] = arena_base[k] ? arena_base[k] : (const uint8_t *)runtime_mem; /* zero-size arena */
  }

  uint8_t *mem = runtime_mem;
  m->nvalues = s.values.len;
  m->values = (et_value *)mem;
  mem += align_up(sizeof(et_value) * s.values.len);
  m->tensors = (et_tensor *)mem;
  mem += align_up(sizeof(et_tensor) * s.ntensors);
  m->ops = (et_op_slot *)mem;
  mem += align_up(sizeof(et_op_slot) * s.ops.len);
  m->instrs = (et_instr *)mem;
  mem += align_up(sizeof(et_instr) * s.ninstr);
  et_value **argbuf = (et_value **)mem;
  uint8_t *kstate = mem + align_up(sizeof(et_value *) * s.nargs);
  memset(runtime_mem, 0, need);

  if (delegate_mem == NULL) delegate_size = 0;
  if (((uintptr_t)delegate_mem & (ET_DELEGATE_ALIGN - 1)) != 0)
    return et_errf(m->msg, ET_E_INVALID_ARG, "delegate memory must be %u-byte aligned", ET_DELEGATE_ALIGN);
  m->ctx.msg = m->kmsg;
  m->ctx.msg_cap = sizeof m->kmsg;
  st = parse_values(m, &s, bases, plan_sizes);
  if (st == ET_OK) st = resolve_ops(m, &s);
  if (st == ET_OK) st = parse_instructions(m, &s, argbuf, kstate, delegate_mem, delegate_size);
  if (st == ET_OK) st = check_aliasing(m);
  if (st != ET_OK) return st;
  bool present;
  if (!fb_vector(&m->plan, FBP_ExecutionPlan__inputs, 4, &present, &m->inputs) ||
      !fb_vector(&m->plan, FBP_ExecutionPlan__outputs, 4, &present, &m->outputs))
    return CORRUPT(m->msg, "method inputs/outputs");
  if ((st = check_index_vec(m, &m->inputs, "input")) != ET_OK) return st;
  if ((st = check_index_vec(m, &m->outputs, "output")) != ET_OK) return st;
  m->ctx.scratch = scratch;
  m->ctx.scratch_size = scratch ? scratch_size : 0;
  return prepare_calls(m);
}

et_status et_method_reset_state(et_method *m) {
  for (uint32_t pc = 0; pc < m->chain_start[m->nchains]; pc++) {
    const et_instr *ins = &m->instrs[pc];
    if (ins->kind == FBPU_InstructionArguments__KernelCall && ins->dstate &&
        (m->ops[ins->a].state_bytes & ET_STATE_ARG_FLAG))
      memset(ins->dstate, 0, call_state_bytes(m, ins));
  }
  return ET_OK;
}

uint32_t et_method_num_inputs(const et_method *m) { return m->inputs.len; }
uint32_t et_method_num_outputs(const et_method *m) { return m->outputs.len; }
et_value *et_method_input(et_method *m, uint32_t i) {
  return i < m->inputs.len ? &m->values[fb_vec_i32(&m->inputs, i)] : NULL;
}
const et_value *et_method_output(const et_method *m, uint32_t i) {
  return i < m->outputs.len ? &m->values[fb_vec_i32(&m->outputs, i)] : NULL;
}

et_status et_method_set_input_tensor(et_method *m, uint32_t i, const et_tensor *src) {
  et_value *v = et_method_input(m, i);
  if (v == NULL) return et_errf(m->msg, ET_E_INVALID_ARG, "input %" PRIu32 " does not exist (method has %" PRIu32 ")", i, m->inputs.len);
  if (v->tag != ET_TAG_TENSOR) return et_errf(m->msg, ET_E_INVALID_ARG, "input %" PRIu32 " is not a tensor", i);
  et_tensor *dst = v->u.t;
  if (dst->data == NULL) {
    /* Not planned: the input is used where the caller keeps it. */
    if (!et_same_dim_order(dst, src) || dst->dtype != src->dtype || dst->nbytes != src->nbytes)
      return et_errf(m->msg, ET_E_INVALID_ARG, "input %" PRIu32 " is not memory-planned and its layout differs from the given tensor", i);
    if (((uintptr_t)src->data % et_dtype_size(src->dtype)) != 0)
      return et_errf(m->msg, ET_E_INVALID_ARG, "input %" PRIu32 " data is not aligned to its element size", i);
    dst->data = src->data;
    return ET_OK;
  }
  et_status st = et_copy_tensor(&m->ctx, dst, src);
  if (st != ET_OK) return et_errf(m->msg, st, "input %" PRIu32 ": %s", i, m->kmsg);
  return ET_OK;
}

void et_method_reset_stats(et_method *m) {
  for (uint32_t i = 0; i < m->nops; i++) m->ops[i].calls = m->ops[i].count = 0;
  for (uint32_t i = 0; i < m->chain_start[m->nchains]; i++) m->instrs[i].calls = m->instrs[i].count = 0;
  m->other_count = 0;
}

et_status et_method_execute(et_method *m) {
  for (uint32_t i = 0; i < m->ntensors; i++) {
    if (m->tensors[i].data == NULL && m->tensors[i].nbytes > 0)
      return et_errf(m->msg, ET_E_INVALID_ARG, "a tensor has no memory: it is not planned and was not set as an input");
  }
  uint32_t steps = 0;
  for (uint32_t c = 0; c < m->nchains; c++) {
    uint32_t start = m->chain_start[c], end = m->chain_start[c + 1];
    uint32_t pc = start;
    while (pc < end) {
      if (++steps > ET_MAX_STEPS)
        return et_errf(m->msg, ET_E_INVALID_PROGRAM, "program ran more than %u instructions: a jump loops forever", ET_MAX_STEPS);
      et_instr *ins = &m->instrs[pc];
      uint64_t t0 = m->clock ? m->clock() : 0;
      uint32_t next = pc + 1;
      et_op_slot *op = NULL;
      switch (ins->kind) {
        case FBPU_InstructionArguments__KernelCall: {
          op = &m->ops[ins->a];
          m->kmsg[0] = 0;
          m->ctx.state = ins->dstate; /* state_size is prepare's to check */
          et_status st = ET_OK;
          if (m->prepare_each_call && op->prepare) {
            m->ctx.state_size = call_state_bytes(m, ins);
            st = op->prepare(&m->ctx, ins->args, ins->nargs);
          }
          if (st == ET_OK) st = op->fn(&m->ctx, ins->args, ins->nargs);
          if (st != ET_OK)
            return et_errf(m->msg, st, "instruction %" PRIu32 " (%s.%s): %s", pc - start, op->name, op->overload,
                           m->kmsg[0] ? m->kmsg : et_status_str(st));
          op->calls++;
          break;
        }
        case FBPU_InstructionArguments__DelegateCall: {
          m->kmsg[0] = 0;
          et_status st = ins->backend->execute(ins->dstate, (et_value *const *)ins->args, ins->nargs, m->kmsg, sizeof m->kmsg);
          if (st != ET_OK)
            return et_errf(m->msg, st, "instruction %" PRIu32 " (delegate %s): %s", pc - start, ins->backend->id,
                           m->kmsg[0] ? m->kmsg : et_status_str(st));
          ins->calls++;
          break;
        }
        case FBPU_InstructionArguments__MoveCall:
          m->values[ins->b] = m->values[ins->a];
          break;
        case FBPU_InstructionArguments__JumpFalseCall: {
          const et_value *cv = &m->values[ins->a];
          if (cv->tag != ET_TAG_BOOL)
            return et_errf(m->msg, ET_E_INVALID_PROGRAM, "instruction %" PRIu32 ": jump condition is not a bool", pc - start);
          if (!cv->u.b) next = start + ins->b;
          break;
        }
        case FBPU_InstructionArguments__FreeCall:
          break; /* planned memory: nothing to release */
        default:
          return et_errf(m->msg, ET_E_INTERNAL, "instruction %" PRIu32 " of unknown kind", pc - start);
      }
      if (m->clock) {
        uint64_t t1 = m->clock(), dt = t1 - t0;
        if (op) op->count += dt;
        else if (ins->kind == FBPU_InstructionArguments__DelegateCall) ins->count += dt;
        else m->other_count += dt;
        if (m->on_instr) m->on_instr(m->on_instr_user, c, pc - start, ins, op, t0, t1);
      }
      pc = next;
    }
  }
  return ET_OK;
}

/* Whether `name` contains `part`: a plain scan (libc's strstr is 1.2 KB of image for one use). */
static bool name_contains(const char *name, const char *part) {
  size_t n = strlen(name), k = strlen(part);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(name + i, part, k) == 0) return true;
  return false;
}

bool et_method_output_step(const et_method *m, uint32_t i, double *step) {
  if (i >= m->outputs.len) return false;
  const et_value *out = et_method_output(m, i);
  /* The last instruction writing the output: dequantize_per_tensor(in, scale, zp, qmin, qmax, dtype, out). */
  for (uint32_t n = m->chain_start[m->nchains]; n-- > 0;) {
    const et_instr *ins = &m->instrs[n];
    if (ins->kind != FBPU_InstructionArguments__KernelCall || ins->nargs < 7) continue;
    if (ins->args[ins->nargs - 1] != out) continue;
    const char *nm = m->ops[ins->a].name;
    if (!name_contains(nm, "dequantize_per_tensor")) return false;
    const et_value *sc = ins->args[1];
    if (sc->tag != ET_TAG_DOUBLE || !(sc->u.d > 0)) return false;
    *step = sc->u.d;
    return true;
  }
  return false;
}
