/* Status text, kernel error helper and dtype tables. */
#include <stdarg.h>

#include "et_fmt.h"
#include "et_types.h"

const char *et_status_str(et_status st) {
  switch (st) {
    case ET_OK: return "ok";
    case ET_E_INVALID_PROGRAM: return "invalid program";
    case ET_E_INVALID_ARG: return "invalid argument";
    case ET_E_UNKNOWN_OP: return "unknown operator";
    case ET_E_NOT_SUPPORTED: return "not supported";
    case ET_E_ARENA_TOO_SMALL: return "arena too small";
    case ET_E_NO_BACKEND: return "backend not available";
    case ET_E_MISMATCH: return "output mismatch";
    case ET_E_INTERNAL: return "internal error";
    case ET_E_DELEGATE_CORRUPT: return "corrupt delegate data";
    case ET_E_NPU_STREAM: return "NPU command stream out of bounds";
    case ET_E_NPU_CONFIG: return "NPU configuration mismatch";
    case ET_E_NPU_TIMEOUT: return "NPU timeout";
    case ET_E_NPU_BUS_ERROR: return "NPU bus error";
    case ET_E_NPU_FAULT: return "NPU fault";
  }
  return "unknown status";
}

const char *et_status_name(et_status st) {
  switch (st) {
    case ET_OK: return "ok";
    case ET_E_INVALID_PROGRAM: return "invalid_program";
    case ET_E_INVALID_ARG: return "invalid_argument";
    case ET_E_UNKNOWN_OP: return "unknown_operator";
    case ET_E_NOT_SUPPORTED: return "not_supported";
    case ET_E_ARENA_TOO_SMALL: return "arena_too_small";
    case ET_E_NO_BACKEND: return "no_backend";
    case ET_E_MISMATCH: return "mismatch";
    case ET_E_INTERNAL: return "internal";
    case ET_E_DELEGATE_CORRUPT: return "delegate_corrupt";
    case ET_E_NPU_STREAM: return "npu_stream";
    case ET_E_NPU_CONFIG: return "npu_config";
    case ET_E_NPU_TIMEOUT: return "npu_timeout";
    case ET_E_NPU_BUS_ERROR: return "npu_bus_error";
    case ET_E_NPU_FAULT: return "npu_fault";
  }
  return "unknown";
}

et_status et_fail(et_kernel_ctx *ctx, et_status st, const char *fmt, ...) {
  if (ctx && ctx->msg && ctx->msg_cap) {
    va_list ap;
    va_start(ap, fmt);
    et_vsnprintf(ctx->msg, ctx->msg_cap, fmt, ap);
    va_end(ap);
  }
  return st;
}

et_status et_msgf(char *msg, size_t cap, et_status st, const char *fmt, ...) {
  if (msg && cap) {
    va_list ap;
    va_start(ap, fmt);
    et_vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
  }
  return st;
}

size_t et_dtype_size(int dtype) {
  switch (dtype) {
    case ET_DT_BYTE: case ET_DT_CHAR: case ET_DT_BOOL: return 1;
    case ET_DT_SHORT: return 2;
    case ET_DT_INT: case ET_DT_FLOAT: return 4;
    case ET_DT_LONG: case ET_DT_DOUBLE: return 8;
    default: return 0; /* half and the rest: not handled */
  }
}

const char *et_dtype_name(int dtype) {
  switch (dtype) {
    case ET_DT_BYTE: return "uint8";
    case ET_DT_CHAR: return "int8";
    case ET_DT_SHORT: return "int16";
    case ET_DT_INT: return "int32";
    case ET_DT_LONG: return "int64";
    case ET_DT_HALF: return "float16";
    case ET_DT_FLOAT: return "float32";
    case ET_DT_DOUBLE: return "float64";
    case ET_DT_BOOL: return "bool";
    default: return "unsupported";
  }
}
