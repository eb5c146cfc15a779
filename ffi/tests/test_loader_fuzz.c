/*
 * Mutation fuzz of the model-loading parsers: random byte flips, insertions and truncations of a config.json, of
 * JSON in general, and of a small safetensors file (header and data). Every input must give RILL_OK or a one-line
 * error, never a crash or a read outside the file (run under ASan/UBSan).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "json.h"
#include "model_config.h"
#include "safetensors.h"
#include "test_model_batch.h"
#include "test_rng.h"

static uint32_t rng = 2024;
static uint32_t next(void) { return xorshift32(&rng); }

/* Applies 1..4 random edits to buf[0..*len) (capacity cap). */
static void mutate(char *buf, size_t *len, size_t cap) {
  static const char tokens[] = "{}[],:\"\\0123456789eE+-.tfnul \x01\xff";
  int edits = 1 + (int)(next() % 4);
  for (int i = 0; i < edits && *len > 0; i++) {
    size_t at = next() % *len;
    switch (next() % 4) {
    case 0: buf[at] = tokens[next() % (sizeof tokens - 1)]; break;
    case 1: buf[at] = (char)(next() & 0xFF); break;
    case 2:
      if (*len < cap) {
        memmove(buf + at + 1, buf + at, *len - at);
        buf[at] = tokens[next() % (sizeof tokens - 1)];
        (*len)++;
      }
      break;
    default: *len = at; break;
    }
  }
}

static void write_bytes(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) return;
  fwrite(data, 1, n, f);
  fclose(f);
}

int main(void) {
  char dir[] = "/tmp/rill-test-fuzz-XXXXXX";
  if (mkdtemp(dir) == NULL) return 1;
  char path[256], err[512];

  /* config.json */
  size_t clen = 0;
  char *cfg = mb_read_file("models/rill-tiny-harmony/config.json", &clen);
  CHECK(cfg != NULL);
  int ok = 0, refused = 0, bad_message = 0;
  char *buf = malloc(clen * 2 + 16);
  snprintf(path, sizeof path, "%s/config.json", dir);
  for (int i = 0; cfg != NULL && i < 3000; i++) {
    size_t n = clen;
    memcpy(buf, cfg, clen);
    mutate(buf, &n, clen * 2 + 16);
    write_bytes(path, buf, n);
    rill_model_config c;
    err[0] = '\0';
    rill_status s = rill_model_config_read(dir, &c, err, sizeof err);
    if (s == RILL_OK) {
      ok++;
      bad_message += c.num_heads <= 0 || c.head_dim <= 0 || c.num_heads % c.num_kv_heads != 0;
    } else {
      refused++;
      bad_message += s != RILL_ERR_MODEL || err[0] == '\0' || strchr(err, '\n') != NULL;
    }
    /* The same bytes straight into the JSON reader. */
    rill_json_doc *d = rill_json_parse(buf, n, err, sizeof err);
    rill_json_free(d);
  }
  printf("config.json mutations: %d accepted, %d refused\n", ok, refused);
  CHECK(refused > 1000);
  CHECK_EQ_INT(bad_message, 0);
  free(buf);
  free(cfg);

  /* A small safetensors file: three tensors of F32, BF16 and F16. */
  char st[1024];
  const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
                    "\"c\":{\"dtype\":\"F16\",\"shape\":[1,2,2],\"data_offsets\":[32,40]}}";
  size_t hl = strlen(hdr);
  for (int i = 0; i < 8; i++) st[i] = (char)((hl >> (8 * i)) & 0xFF);
  memcpy(st + 8, hdr, hl);
  for (int i = 0; i < 40; i++) st[8 + hl + (size_t)i] = (char)(i * 7);
  size_t stlen = 8 + hl + 40;
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  write_bytes(path, st, stlen);
  rill_checkpoint *ck = NULL;
  CHECK(rill_checkpoint_open(dir, &ck, err, sizeof err) == RILL_OK);
  if (ck != NULL) {
    CHECK(rill_checkpoint_find(ck, "a") != NULL && rill_checkpoint_find(ck, "c")->shape[2] == 2);
    CHECK(rill_checkpoint_bytes(ck) == 40);
    rill_checkpoint_close(ck);
  }
  ok = refused = bad_message = 0;
  char mut[2048];
  for (int i = 0; i < 3000; i++) {
    size_t n = stlen;
    memcpy(mut, st, stlen);
    /* Mostly the header; sometimes the length prefix. */
    if (next() % 8 == 0) {
      mut[next() % 8] = (char)(next() & 0xFF);
    } else {
      mutate(mut, &n, sizeof mut);
    }
    write_bytes(path, mut, n);
    ck = NULL;
    err[0] = '\0';
    rill_status s = rill_checkpoint_open(dir, &ck, err, sizeof err);
    if (s == RILL_OK) {
      ok++;
      /* Whatever was accepted lies inside the file. */
      static const char *const names[] = {"a", "b", "c"};
      for (int k0 = 0; k0 < 3; k0++) {
        const rill_tensor *t = rill_checkpoint_find(ck, names[k0]);
        if (t == NULL) continue;
        const char *base = (const char *)t->data;
        volatile char sink = 0;
        for (size_t k = 0; k < t->nbytes; k++) sink ^= base[k];
        (void)sink;
      }
      rill_checkpoint_close(ck);
    } else {
      refused++;
      bad_message += ck != NULL || err[0] == '\0' || strchr(err, '\n') != NULL;
    }
  }
  printf("safetensors mutations: %d accepted, %d refused\n", ok, refused);
  CHECK(refused > 1000);
  CHECK_EQ_INT(bad_message, 0);

  snprintf(path, sizeof path, "%s/config.json", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  remove(path);
  rmdir(dir);
  return check_summary();
}
