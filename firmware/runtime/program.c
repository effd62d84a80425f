/* Program (.pte) verification: identifier, schema version, extended header,
 * segment table and constant storage. Nothing is copied: tensors later point
 * straight into these bytes. */
#include <inttypes.h>

#include "et_fmt.h"
#include "runtime.h"
#include "schema_ids.h"

#define EH_MAGIC "eh00"
#define EH_OFFSET 8u
#define EH_MIN_LEN 24u

static et_status perr(et_program *p, et_status st, const char *fmt, const char *detail) {
  et_snprintf(p->msg, sizeof p->msg, fmt, detail);
  return st;
}

static uint64_t rd64le(const uint8_t *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
  return v;
}

/* The extended header, present when segments follow the flatbuffer: the flatbuffer's length in *FB_LEN and
 * where the segment data lies. */
static et_status read_extended_header(et_program *p, const uint8_t *data, size_t len, size_t *fb_len) {
  if (len >= EH_OFFSET + EH_MIN_LEN && memcmp(data + EH_OFFSET, EH_MAGIC, 4) == 0) {
    const uint8_t *h = data + EH_OFFSET;
    uint32_t hlen = (uint32_t)h[4] | ((uint32_t)h[5] << 8) | ((uint32_t)h[6] << 16) | ((uint32_t)h[7] << 24);
    if (hlen < EH_MIN_LEN || hlen > len - EH_OFFSET)
      return perr(p, ET_E_INVALID_PROGRAM, "program extended header %s", "has a bad length");
    uint64_t prog_size = rd64le(h + 8), base = rd64le(h + 16);
    uint64_t seg_size = hlen >= 32 ? rd64le(h + 24) : 0;
    if (prog_size < EH_OFFSET + hlen || prog_size > len)
      return perr(p, ET_E_INVALID_PROGRAM, "program truncated: %s",
                  "the extended header's program size exceeds the file");
    if (base != 0) {
      if (base < prog_size || base > len)
        return perr(p, ET_E_INVALID_PROGRAM, "program truncated: %s",
                    "segment base offset outside the file");
      if (seg_size == 0) seg_size = len - base;
      if (seg_size > len - base)
        return perr(p, ET_E_INVALID_PROGRAM, "program truncated: %s", "segment data runs past the file end");
      p->seg_base = (size_t)base;
      p->seg_size = (size_t)seg_size;
    }
    *fb_len = (size_t)prog_size;
  }
  return ET_OK;
}

/* Segments must all lie inside the segment data. */
static et_status check_segments(et_program *p) {
  bool present;
  if (!fb_vector(&p->root, FBP_Program__segments, 4, &present, &p->segments))
    return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", fb_last_error);
  for (uint32_t i = 0; i < p->segments.len; i++) {
    fb_table s;
    uint64_t off, size;
    if (!fb_vec_table(&p->segments, i, &s) || !fb_u64(&s, FBP_DataSegment__offset, 0, &off) ||
        !fb_u64(&s, FBP_DataSegment__size, 0, &size))
      return perr(p, ET_E_INVALID_PROGRAM, "corrupt program segment table: %s", fb_last_error);
    if (off > p->seg_size || size > p->seg_size - off)
      return perr(p, ET_E_INVALID_PROGRAM, "program truncated: %s", "a segment lies outside the file");
  }

  return ET_OK;
}

/* Constants: inline Buffers or offsets into one segment, never both. */
static et_status read_constants(et_program *p) {
  bool present;
  fb_vec cb;
  if (!fb_vector(&p->root, FBP_Program__constant_buffer, 4, &present, &cb))
    return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", fb_last_error);
  fb_table cs;
  bool cs_present;
  if (!fb_sub_table(&p->root, FBP_Program__constant_segment, &cs_present, &cs))
    return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", fb_last_error);
  fb_vec offs = {0};
  uint32_t seg_idx = 0;
  if (cs_present) {
    if (!fb_u32(&cs, FBP_SubsegmentOffsets__segment_index, 0, &seg_idx) ||
        !fb_vector(&cs, FBP_SubsegmentOffsets__offsets, 8, &present, &offs))
      return perr(p, ET_E_INVALID_PROGRAM, "corrupt constant segment: %s", fb_last_error);
  }
  if (cb.len > 0 && offs.len > 0)
    return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s",
                "constants both inline and in a segment");
  if (cb.len > 0) {
    p->const_inline = true;
    p->const_buffers = cb;
  } else if (offs.len > 1) { /* offsets[0] is the reserved placeholder */
    fb_table s;
    uint64_t off, size;
    if (seg_idx >= p->segments.len)
      return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", "constant segment index out of range");
    if (!fb_vec_table(&p->segments, seg_idx, &s) || !fb_u64(&s, FBP_DataSegment__offset, 0, &off) ||
        !fb_u64(&s, FBP_DataSegment__size, 0, &size))
      return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", fb_last_error);
    p->const_offsets = offs;
    p->const_seg = p->seg_base + (size_t)off;
    p->const_seg_size = (size_t)size;
  }
  return ET_OK;
}

et_status et_program_load(et_program *p, const uint8_t *data, size_t len) {
  memset(p, 0, sizeof *p);
  if (data == NULL || len < 8)
    return perr(p, ET_E_INVALID_PROGRAM, "program truncated: %s", "fewer than 8 bytes");
  if (memcmp(data + 4, FBP_FILE_IDENTIFIER, 4) != 0)
    return perr(p, ET_E_INVALID_PROGRAM,
                "not an ExecuTorch program: identifier is not %s (wrong file or corrupt)",
                FBP_FILE_IDENTIFIER);
  p->file = data;
  p->file_len = len;
  size_t fb_len = len;
  et_status st = read_extended_header(p, data, len, &fb_len);
  if (st != ET_OK) return st;
  p->buf.base = data;
  p->buf.len = fb_len;
  if (!fb_root(&p->buf, FBP_FILE_IDENTIFIER, &p->root))
    return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", fb_last_error);

  uint32_t version;
  if (!fb_u32(&p->root, FBP_Program__version, 0, &version))
    return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", fb_last_error);
  if (version != FBP_SCHEMA_VERSION) {
    et_snprintf(p->msg, sizeof p->msg,
             "program schema version %" PRIu32 " not supported (runtime reads version %u): re-export with the matching ExecuTorch",
             version, FBP_SCHEMA_VERSION);
    return ET_E_INVALID_PROGRAM;
  }
  bool present;
  if (!fb_vector(&p->root, FBP_Program__execution_plan, 4, &present, &p->plans))
    return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", fb_last_error);
  if (p->plans.len == 0)
    return perr(p, ET_E_INVALID_PROGRAM, "program has no methods%s", "");

  if ((st = check_segments(p)) != ET_OK) return st;
  return read_constants(p);
}

et_status et_program_constant(et_program *p, uint32_t idx, size_t nbytes, const uint8_t **out) {
  *out = NULL;
  if (p->const_inline) {
    fb_table b;
    fb_vec st;
    bool present;
    if (idx >= p->const_buffers.len) goto range;
    if (!fb_vec_table(&p->const_buffers, idx, &b) ||
        !fb_vector(&b, FBP_Buffer__storage, 1, &present, &st)) {
      et_snprintf(p->msg, sizeof p->msg, "corrupt constant buffer %" PRIu32 ": %s", idx, fb_last_error);
      return ET_E_INVALID_PROGRAM;
    }
    if (st.len < nbytes) goto small;
    *out = fb_vec_ptr(&st);
    if (*out == NULL) *out = p->buf.base; /* zero-byte constant */
    return ET_OK;
  }
  if (idx >= p->const_offsets.len) goto range;
  uint64_t off = fb_vec_u64(&p->const_offsets, idx);
  if (off > p->const_seg_size || nbytes > p->const_seg_size - off) goto small;
  *out = p->file + p->const_seg + (size_t)off;
  return ET_OK;
range:
  et_snprintf(p->msg, sizeof p->msg, "corrupt program: constant index %" PRIu32 " out of range", idx);
  return ET_E_INVALID_PROGRAM;
small:
  et_snprintf(p->msg, sizeof p->msg, "corrupt program: constant %" PRIu32 " is smaller than its tensor (%lu bytes)",
           idx, (unsigned long)nbytes);
  return ET_E_INVALID_PROGRAM;
}

et_status et_program_delegate_data(et_program *p, const fb_table *delegate, const uint8_t **data, size_t *len) {
  fb_table ref, inl;
  bool present;
  uint8_t loc;
  uint32_t idx;
  *data = NULL;
  *len = 0;
  if (!fb_sub_table(delegate, FBP_BackendDelegate__processed, &present, &ref) || !present ||
      !fb_u8(&ref, FBP_BackendDelegateDataReference__location, 0, &loc) ||
      !fb_u32(&ref, FBP_BackendDelegateDataReference__index, 0, &idx))
    return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: delegate data reference (%s)", fb_last_error);
  if (loc == FBPE_DataLocation__INLINE) {
    fb_vec all, bytes;
    if (!fb_vector(&p->root, FBP_Program__backend_delegate_data, 4, &present, &all))
      return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: delegate data table (%s)", fb_last_error);
    if (idx >= all.len) return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", "delegate data index out of range");
    if (!fb_vec_table(&all, idx, &inl) || !fb_vector(&inl, FBP_BackendDelegateInlineData__data, 1, &present, &bytes))
      return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: delegate data (%s)", fb_last_error);
    *data = fb_vec_ptr(&bytes);
    *len = bytes.len;
    return ET_OK;
  }
  if (loc == FBPE_DataLocation__SEGMENT) {
    fb_table s;
    uint64_t off, size;
    if (idx >= p->segments.len) return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", "delegate segment index out of range");
    if (!fb_vec_table(&p->segments, idx, &s) || !fb_u64(&s, FBP_DataSegment__offset, 0, &off) ||
        !fb_u64(&s, FBP_DataSegment__size, 0, &size))
      return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: delegate segment (%s)", fb_last_error);
    /* et_program_load checked every segment against the segment data */
    *data = p->file + p->seg_base + (size_t)off;
    *len = (size_t)size;
    return ET_OK;
  }
  return perr(p, ET_E_INVALID_PROGRAM, "corrupt program: %s", "delegate data has an unknown location");
}
