/* The processed bytes ExecuTorch's Arm backend stores for an Ethos-U delegate
 * (the "Vela bin stream" of executorch/backends/arm/arm_vela.py), parsed and
 * validated in place: nothing is copied, every length and offset is checked.
 *
 * Layout: a sequence of blocks, each a 16-byte NUL-padded name, a little-endian
 * u32 payload length, a u8 "external" flag and 11 reserved bytes, then the
 * payload padded to 16 bytes. Blocks: vela_bin_stream (start), cmd_data (an
 * optional "COP1" driver header, then the register command stream),
 * weight_data, scratch_size (u32), inputs, outputs (a count, then per tensor a
 * 6-D shape, element size, byte offset and region, all i32), vela_end_stream. */
#ifndef ETHOSU_BLOB_H
#define ETHOSU_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define ETHOSU_MAX_IO 16     /* delegate inputs + outputs */
#define ETHOSU_ALIGN 16u     /* command stream, weights and base pointers */

typedef struct {
  uint32_t elem_size; /* 1, 2 or 4 */
  uint32_t offset;    /* bytes into its region */
  uint32_t region;
  uint32_t nbytes;    /* product of its 6-D shape times elem_size */
} ethosu_io;

typedef struct {
  const uint32_t *cmd;      /* register command stream (16-byte aligned) */
  uint32_t cmd_words;
  const uint8_t *weights;   /* region 0 */
  uint32_t weights_len;
  uint32_t scratch_size;    /* region 1 */
  uint32_t n_inputs, n_outputs;
  ethosu_io io[ETHOSU_MAX_IO]; /* inputs, then outputs */
  bool has_config;          /* the COP1 header named the NPU the stream was compiled for */
  uint32_t config;          /* its CONFIG register word (product, MACs, command stream version) */
  uint32_t arch_id;         /* its ID register word (architecture version) */
} ethosu_blob;

/* CONFIG word fields shared by the U55, U65 and U85. */
#define ETHOSU_CFG_MACS_LOG2(c) ((c) & 0xFu)
#define ETHOSU_CFG_CMD_VERSION(c) (((c) >> 4) & 0xFu)
#define ETHOSU_CFG_CUSTOM_DMA(c) (((c) >> 27) & 1u)
#define ETHOSU_CFG_PRODUCT(c) (((c) >> 28) & 0xFu)
#define ETHOSU_PRODUCT_U55 0u
#define ETHOSU_PRODUCT_U65 1u
#define ETHOSU_PRODUCT_U85 2u
/* ID word fields. */
#define ETHOSU_ID_ARCH_MAJOR(i) (((i) >> 28) & 0xFu)
#define ETHOSU_ID_ARCH_MINOR(i) (((i) >> 20) & 0xFFu)
#define ETHOSU_ID_ARCH_PATCH(i) (((i) >> 16) & 0xFu)

const char *ethosu_product_name(uint32_t product);

/* Parse and validate `len` bytes at `data`. On failure returns
 * ET_E_DELEGATE_CORRUPT (or ET_E_NOT_SUPPORTED) with one line in `msg`. */
et_status ethosu_blob_parse(const uint8_t *data, size_t len, ethosu_blob *b, char *msg, size_t cap);

#endif
