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
} et_status;

/* Short fixed text for a status ("invalid program", ...). */
const char *et_status_str(et_status st);

#endif
