/* Table of the delegate backends the application registered. */
#include "backend.h"

static const et_backend *g_backends[ET_MAX_BACKENDS];
static uint32_t g_count;

et_status et_backend_register(const et_backend *b) {
  for (uint32_t i = 0; i < g_count; i++)
    if (g_backends[i] == b) return ET_OK;
  if (b == NULL || b->id == NULL || g_count >= ET_MAX_BACKENDS) return ET_E_INTERNAL;
  g_backends[g_count++] = b;
  return ET_OK;
}

const et_backend *et_backend_find(const char *id, uint32_t len) {
  for (uint32_t i = 0; i < g_count; i++)
    if (strlen(g_backends[i]->id) == len && memcmp(g_backends[i]->id, id, len) == 0) return g_backends[i];
  return NULL;
}
