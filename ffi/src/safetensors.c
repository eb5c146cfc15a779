#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise MADV_DONTNEED */

#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fail.h"
#include "json.h"
#include "read_file.h"

/* The format caps the header at 100 MB. */
#define HEADER_MAX ((uint64_t)100 * 1024 * 1024)

typedef struct mapped_file {
  char *name;
  void *map;
  size_t size;
  rill_json_doc *header;
} mapped_file;

struct rill_checkpoint {
  mapped_file *files;
  size_t num_files;
  rill_tensor *tensors;
  size_t num_tensors, cap_tensors;
  size_t data_bytes;
  bool sharded;
};

static void close_file(mapped_file *f) {
  if (f->map != NULL && f->map != MAP_FAILED) munmap(f->map, f->size);
  rill_json_free(f->header);
  free(f->name);
}

void rill_checkpoint_close(rill_checkpoint *ck) {
  if (ck == NULL) return;
  for (size_t i = 0; i < ck->num_files; i++) close_file(&ck->files[i]);
  free(ck->files);
  free(ck->tensors);
  free(ck);
}

const rill_tensor *rill_checkpoint_find(const rill_checkpoint *ck, const char *name) {
  for (size_t i = 0; i < ck->num_tensors; i++) {
    if (strcmp(ck->tensors[i].name, name) == 0) return &ck->tensors[i];
  }
  return NULL;
}

size_t rill_checkpoint_bytes(const rill_checkpoint *ck) { return ck->data_bytes; }

void rill_checkpoint_drop_resident(const rill_checkpoint *ck) {
  /* The mappings are private, read-only and never written, so dropping their pages loses nothing. Advice only: a
   * kernel that ignores it keeps the pages resident, which is correct too. */
  for (size_t i = 0; i < ck->num_files; i++) {
    const mapped_file *f = &ck->files[i];
    if (f->map != NULL && f->map != MAP_FAILED && f->size > 0) (void)madvise(f->map, f->size, MADV_DONTNEED);
  }
}

const char *rill_checkpoint_name(const rill_checkpoint *ck) {
  return ck->sharded ? "model.safetensors.index.json" : "model.safetensors";
}

static bool dtype_of(const char *s, rill_tensor_dtype *dt, size_t *elem) {
  static const struct {
    const char *name;
    rill_tensor_dtype dt;
    size_t size;
  } table[] = {
      {"F32", RILL_TENSOR_F32, 4},   {"F16", RILL_TENSOR_F16, 2},   {"BF16", RILL_TENSOR_BF16, 2},
      {"F64", RILL_TENSOR_OTHER, 8}, {"I64", RILL_TENSOR_OTHER, 8}, {"I32", RILL_TENSOR_OTHER, 4},
      {"I16", RILL_TENSOR_OTHER, 2}, {"I8", RILL_TENSOR_OTHER, 1},  {"U8", RILL_TENSOR_OTHER, 1},
      {"BOOL", RILL_TENSOR_OTHER, 1}, {"U16", RILL_TENSOR_OTHER, 2}, {"U32", RILL_TENSOR_OTHER, 4},
      {"U64", RILL_TENSOR_OTHER, 8}, {"F8_E4M3", RILL_TENSOR_OTHER, 1}, {"F8_E5M2", RILL_TENSOR_OTHER, 1},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    if (strcmp(s, table[i].name) == 0) {
      *dt = table[i].dt;
      *elem = table[i].size;
      return true;
    }
  }
  return false;
}

static rill_status add_tensor(rill_checkpoint *ck, const rill_tensor *t, char *err, size_t err_cap) {
  if (rill_checkpoint_find(ck, t->name) != NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: tensor %s is also in another file", t->file, t->name);
  }
  if (ck->num_tensors == ck->cap_tensors) {
    size_t cap = ck->cap_tensors == 0 ? 64 : ck->cap_tensors * 2;
    rill_tensor *nt = realloc(ck->tensors, cap * sizeof *nt);
    if (nt == NULL) {
      return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
    }
    ck->tensors = nt;
    ck->cap_tensors = cap;
  }
  ck->tensors[ck->num_tensors++] = *t;
  return RILL_OK;
}

/* Maps dir/name, parses and checks its header, and adds its tensors. */
static rill_status open_file(rill_checkpoint *ck, const char *dir, const char *name, char *err, size_t err_cap) {
  mapped_file *f = &ck->files[ck->num_files];
  memset(f, 0, sizeof *f);
  f->name = strdup(name);
  if (f->name == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  ck->num_files++;
  size_t plen = strlen(dir) + strlen(name) + 2;
  char *path = malloc(plen);
  if (path == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  snprintf(path, plen, "%s/%s", dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  free(path);
  if (fd < 0) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: cannot open: %s", name, strerror(errno));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: not a regular file", name);
  }
  f->size = (size_t)st.st_size;
  if (f->size < 8) {
    close(fd);
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: truncated: %zu bytes, shorter than the 8-byte header length",
                     name, f->size);
  }
  f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (f->map == MAP_FAILED) {
    f->map = NULL;
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: cannot map: %s", name, strerror(errno));
  }
  const unsigned char *bytes = f->map;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | bytes[i];
  if (hlen > HEADER_MAX) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: header length %llu is over the format's 100 MB limit", name,
                     (unsigned long long)hlen);
  }
  if (hlen > f->size - 8) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: truncated: header of %llu bytes but the file has %zu", name,
                     (unsigned long long)hlen, f->size);
  }
  char jerr[192];
  f->header = rill_json_parse((const char *)bytes + 8, (size_t)hlen, jerr, sizeof jerr);
  if (f->header == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: bad header: %s", name, jerr);
  }
  const rill_json *root = rill_json_root(f->header);
  if (root->kind != RILL_JSON_OBJECT) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: bad header: not a JSON object", name);
  }
  const unsigned char *data = bytes + 8 + hlen;
  size_t data_len = f->size - 8 - (size_t)hlen;
  for (const rill_json *m = root->first; m != NULL; m = m->next) {
    if (strcmp(m->key, "__metadata__") == 0) continue;
    rill_tensor t;
    memset(&t, 0, sizeof t);
    t.name = m->key;
    t.file = f->name;
    const rill_json *dt = rill_json_get(m, "dtype");
    const rill_json *shape = rill_json_get(m, "shape");
    const rill_json *offs = rill_json_get(m, "data_offsets");
    size_t elem = 0;
    if (m->kind != RILL_JSON_OBJECT || dt == NULL || dt->kind != RILL_JSON_STRING || shape == NULL ||
        shape->kind != RILL_JSON_ARRAY || offs == NULL || offs->kind != RILL_JSON_ARRAY || offs->length != 2) {
      return rill_fail(err, err_cap, RILL_ERR_MODEL,
                       "%s: tensor %s: header entry needs dtype, shape and data_offsets [begin, end]", name, m->key);
    }
    if (!dtype_of(dt->string, &t.dtype, &elem)) {
      return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: tensor %s: unknown dtype %s", name, m->key, dt->string);
    }
    t.dtype_name = dt->string;
    if (shape->length > RILL_TENSOR_MAX_DIMS) {
      return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: tensor %s: %zu dimensions (at most %d)", name, m->key,
                       shape->length, RILL_TENSOR_MAX_DIMS);
    }
    t.ndim = (int)shape->length;
    t.numel = 1;
    int d = 0;
    for (const rill_json *e = shape->first; e != NULL; e = e->next, d++) {
      if (e->kind != RILL_JSON_NUMBER || !e->is_integer || e->integer < 0 || e->integer > ((int64_t)1 << 40)) {
        return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: tensor %s: bad shape entry", name, m->key);
      }
      t.shape[d] = e->integer;
      if (t.numel > 0 && e->integer > ((int64_t)1 << 50) / t.numel) {
        return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: tensor %s: shape too large", name, m->key);
      }
      t.numel *= e->integer;
    }
    const rill_json *b = offs->first, *e = offs->first->next;
    if (b->kind != RILL_JSON_NUMBER || !b->is_integer || e->kind != RILL_JSON_NUMBER || !e->is_integer ||
        b->integer < 0 || e->integer < b->integer) {
      return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: tensor %s: bad data_offsets", name, m->key);
    }
    uint64_t begin = (uint64_t)b->integer, end = (uint64_t)e->integer;
    if (end - begin != (uint64_t)t.numel * elem) {
      return rill_fail(err, err_cap, RILL_ERR_MODEL,
                       "%s: tensor %s: data_offsets span %llu bytes but %s of shape needs %llu", name, m->key,
                       (unsigned long long)(end - begin), dt->string, (unsigned long long)((uint64_t)t.numel * elem));
    }
    if (end > data_len) {
      return rill_fail(err, err_cap, RILL_ERR_MODEL,
                       "%s: truncated: tensor %s ends at data byte %llu but the file holds %zu data bytes", name,
                       m->key, (unsigned long long)end, data_len);
    }
    t.data = data + begin;
    t.nbytes = (size_t)(end - begin);
    ck->data_bytes += t.nbytes;
    rill_status s = add_tensor(ck, &t, err, err_cap);
    if (s != RILL_OK) return s;
  }
  return RILL_OK;
}

static bool safe_file_name(const char *s) {
  if (s[0] == '\0' || s[0] == '.' || strchr(s, '/') != NULL || strchr(s, '\\') != NULL) return false;
  return true;
}

static rill_status open_sharded(rill_checkpoint *ck, const char *dir, const char *index_path, char *err,
                                size_t err_cap) {
  const char *iname = "model.safetensors.index.json";
  char *text = NULL;
  size_t len = 0;
  rill_status s = rill_read_file(index_path, iname, (size_t)64 << 20, &text, &len, err, err_cap);
  if (s != RILL_OK) return s;
  char jerr[192];
  rill_json_doc *doc = rill_json_parse(text, len, jerr, sizeof jerr);
  free(text);
  if (doc == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: %s", iname, jerr);
  }
  const rill_json *map = rill_json_get(rill_json_root(doc), "weight_map");
  if (map == NULL || map->kind != RILL_JSON_OBJECT || map->length == 0) {
    rill_json_free(doc);
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: no weight_map object", iname);
  }
  ck->files = calloc(map->length, sizeof *ck->files);
  if (ck->files == NULL) {
    rill_json_free(doc);
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  s = RILL_OK;
  for (const rill_json *m = map->first; m != NULL && s == RILL_OK; m = m->next) {
    if (m->kind != RILL_JSON_STRING || !safe_file_name(m->string)) {
      snprintf(err, err_cap, "%s: tensor %s: shard must be a plain file name", iname, m->key);
      s = RILL_ERR_MODEL;
      break;
    }
    bool seen = false;
    for (size_t i = 0; i < ck->num_files; i++) seen = seen || strcmp(ck->files[i].name, m->string) == 0;
    if (!seen) s = open_file(ck, dir, m->string, err, err_cap);
  }
  /* Every tensor the index names must be in the shard it names. */
  for (const rill_json *m = map->first; m != NULL && s == RILL_OK; m = m->next) {
    const rill_tensor *t = rill_checkpoint_find(ck, m->key);
    if (t == NULL || strcmp(t->file, m->string) != 0) {
      snprintf(err, err_cap, "%s: tensor %s is listed in %s but not found there", iname, m->key, m->string);
      s = RILL_ERR_MODEL;
    }
  }
  rill_json_free(doc);
  return s;
}

rill_status rill_checkpoint_open(const char *dir, rill_checkpoint **out, char *err, size_t err_cap) {
  *out = NULL;
  rill_checkpoint *ck = calloc(1, sizeof *ck);
  if (ck == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  size_t plen = strlen(dir) + 64;
  char *path = malloc(plen);
  if (path == NULL) {
    free(ck);
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  rill_status s;
  snprintf(path, plen, "%s/model.safetensors.index.json", dir);
  if (access(path, F_OK) == 0) {
    ck->sharded = true;
    s = open_sharded(ck, dir, path, err, err_cap);
  } else {
    snprintf(path, plen, "%s/model.safetensors", dir);
    if (access(path, F_OK) != 0) {
      snprintf(err, err_cap, "%s: no model.safetensors or model.safetensors.index.json", dir);
      s = RILL_ERR_MODEL;
    } else {
      ck->files = calloc(1, sizeof *ck->files);
      if (ck->files == NULL) {
        snprintf(err, err_cap, "out of memory");
        s = RILL_ERR_OUT_OF_MEMORY;
      } else {
        s = open_file(ck, dir, "model.safetensors", err, err_cap);
      }
    }
  }
  free(path);
  if (s != RILL_OK) {
    rill_checkpoint_close(ck);
    return s;
  }
  *out = ck;
  return RILL_OK;
}
