/* Status codes returned by every runtime entry point that can fail. */
#ifndef ET_STATUS_H
#define ET_STATUS_H

typedef enum {
  ET_OK = 0,
  ET_E_INVALID_PROGRAM,  /* corrupt, truncated or wrong identifier */
  ET_E_INVALID_ARG,      /* an argument has the wrong kind or value */
  ET_E_UNKNOWN_OP,       /* operator name/overload not in the registry */
  ET_E_NOT_SUPPORTED,    /* dtype, shape or feature a kernel does not handle */
  ET_E_ARENA_TOO_SMALL,  /* caller's memory is smaller than the plan needs */
  ET_E_NO_BACKEND,       /* delegate call to a backend this build lacks */
  ET_E_MISMATCH,         /* bundled output differs from the expected one */
  ET_E_INTERNAL,
  /* Delegates on an NPU (firmware/npu): each failure class has its own code. */
  ET_E_DELEGATE_CORRUPT, /* delegate data malformed, truncated or inconsistent with the method */
  ET_E_NPU_STREAM,       /* the command stream addresses memory outside its regions */
  ET_E_NPU_CONFIG,       /* no NPU, or not the product/MAC count/architecture the program was built for */
  ET_E_NPU_TIMEOUT,      /* the NPU did not signal completion in time */
  ET_E_NPU_BUS_ERROR,    /* the NPU reported a bus abort */
  ET_E_NPU_FAULT,        /* the NPU reported a command-stream, weight-decoder or ECC fault */
} et_status;

/* Stable lower-case name of a status ("npu_timeout", ...), for result lines. */
const char *et_status_name(et_status st);

/* Short fixed text for a status ("invalid program", ...). */
const char *et_status_str(et_status st);

#endif
