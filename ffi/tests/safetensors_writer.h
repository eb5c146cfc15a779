/* Writing a safetensors file from tensors held in memory, for the tests that build (bad) checkpoints. */
#ifndef RILL_TEST_SAFETENSORS_WRITER_H
#define RILL_TEST_SAFETENSORS_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* One tensor to write: its header entry (name, dtype as written, shape) and its bytes. */
typedef struct out_tensor {
  char name[160];
  char dtype[8];
  int ndim;
  int64_t shape[4];
  const void *data;
  size_t nbytes;
} out_tensor;

/* Writes a safetensors file of ts[0..n) in that order (header padded to 8 bytes); returns its size or 0. */
static inline size_t write_safetensors(const char *path, const out_tensor *ts, int n) {
  size_t cap = 1 << 20, len = 0, off = 0;
  char *h = malloc(cap);
  len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int i = 0; i < n; i++) {
    len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", ts[i].name, ts[i].dtype);
    for (int d = 0; d < ts[i].ndim; d++) {
      len += (size_t)snprintf(h + len, cap - len, d ? ",%lld" : "%lld", (long long)ts[i].shape[d]);
    }
    len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%zu,%zu]}", off, off + ts[i].nbytes);
    off += ts[i].nbytes;
  }
  len += (size_t)snprintf(h + len, cap - len, "}");
  while (len % 8 != 0) h[len++] = ' ';
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    free(h);
    return 0;
  }
  unsigned char hl[8];
  for (int i = 0; i < 8; i++) hl[i] = (unsigned char)(((uint64_t)len >> (8 * i)) & 0xFF);
  fwrite(hl, 1, 8, f);
  fwrite(h, 1, len, f);
  for (int i = 0; i < n; i++) fwrite(ts[i].data, 1, ts[i].nbytes, f);
  fclose(f);
  free(h);
  return 8 + len + off;
}

#endif /* RILL_TEST_SAFETENSORS_WRITER_H */
