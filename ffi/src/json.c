#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"

/* Nodes and decoded strings live in a chain of chunks freed together with the document. */
typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  max_align_t align[]; /* payload */
} chunk;

struct rill_json_doc {
  chunk *chunks;
  rill_json *root;
};

typedef struct parser {
  const char *s;
  size_t len, pos;
  rill_json_doc *doc;
  char *err;
  size_t err_cap;
  bool failed;
} parser;

static void fail(parser *p, const char *fmt, ...) {
  if (p->failed) return;
  p->failed = true;
  if (p->err == NULL || p->err_cap == 0) return;
  char msg[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  (void)rill_fail(p->err, p->err_cap, RILL_ERR_INVALID_ARGUMENT, "invalid JSON at byte %zu: %s", p->pos, msg);
}

static void *arena_alloc(parser *p, size_t n) {
  n = (n + 15u) & ~(size_t)15u;
  chunk *c = p->doc->chunks;
  if (c == NULL || c->cap - c->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    chunk *nc = malloc(sizeof(chunk) + cap);
    if (nc == NULL) {
      fail(p, "out of memory");
      return NULL;
    }
    nc->next = c;
    nc->used = 0;
    nc->cap = cap;
    p->doc->chunks = nc;
    c = nc;
  }
  void *out = (char *)c->align + c->used;
  c->used += n;
  return out;
}

static void skip_ws(parser *p) {
  while (p->pos < p->len) {
    char c = p->s[p->pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      p->pos++;
    } else {
      break;
    }
  }
}

static bool literal(parser *p, const char *word) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return false;
  p->pos += n;
  return true;
}

static int hex4(parser *p) {
  if (p->len - p->pos < 4) return -1;
  int v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->s[p->pos + (size_t)i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return -1;
    }
    v = v * 16 + d;
  }
  p->pos += 4;
  return v;
}

static size_t put_utf8(char *out, uint32_t cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Validates one UTF-8 sequence starting at s[0] (n bytes available); returns its length or 0. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return len;
}

/* Parses a string at p->pos (which is at the opening quote); returns the decoded text in the arena. */
static const char *parse_string(parser *p, size_t *out_len) {
  p->pos++; /* opening quote */
  /* Decoded text is never longer than the source. */
  size_t start = p->pos;
  size_t end = start;
  while (end < p->len && p->s[end] != '"') {
    if (p->s[end] == '\\') end++;
    end++;
  }
  if (end >= p->len) {
    fail(p, "unterminated string");
    return NULL;
  }
  char *out = arena_alloc(p, end - start + 1);
  if (out == NULL) return NULL;
  size_t n = 0;
  while (p->pos < end) {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c < 0x20) {
      fail(p, "control character in string");
      return NULL;
    }
    if (c != '\\') {
      size_t l = utf8_len((const unsigned char *)p->s + p->pos, end - p->pos);
      if (l == 0) {
        fail(p, "invalid UTF-8 in string");
        return NULL;
      }
      memcpy(out + n, p->s + p->pos, l);
      n += l;
      p->pos += l;
      continue;
    }
    p->pos++;
    char e = p->s[p->pos++];
    switch (e) {
    case '"': out[n++] = '"'; break;
    case '\\': out[n++] = '\\'; break;
    case '/': out[n++] = '/'; break;
    case 'b': out[n++] = '\b'; break;
    case 'f': out[n++] = '\f'; break;
    case 'n': out[n++] = '\n'; break;
    case 'r': out[n++] = '\r'; break;
    case 't': out[n++] = '\t'; break;
    case 'u': {
      int hi = hex4(p);
      if (hi < 0) {
        fail(p, "bad \\u escape");
        return NULL;
      }
      uint32_t cp = (uint32_t)hi;
      if (hi >= 0xD800 && hi <= 0xDBFF) {
        if (!(p->pos + 1 < end && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u')) {
          fail(p, "lone high surrogate");
          return NULL;
        }
        p->pos += 2;
        int lo = hex4(p);
        if (lo < 0xDC00 || lo > 0xDFFF) {
          fail(p, "bad low surrogate");
          return NULL;
        }
        cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
      } else if (hi >= 0xDC00 && hi <= 0xDFFF) {
        fail(p, "lone low surrogate");
        return NULL;
      }
      n += put_utf8(out + n, cp);
      break;
    }
    default: fail(p, "bad escape"); return NULL;
    }
  }
  p->pos = end + 1;
  out[n] = '\0';
  *out_len = n;
  return out;
}

static bool parse_number(parser *p, rill_json *node) {
  size_t start = p->pos;
  bool integral = true;
  if (p->pos < p->len && p->s[p->pos] == '-') p->pos++;
  if (p->pos >= p->len) {
    fail(p, "bad number");
    return false;
  }
  if (p->s[p->pos] == '0') {
    p->pos++;
  } else if (p->s[p->pos] >= '1' && p->s[p->pos] <= '9') {
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
  } else {
    fail(p, "bad number");
    return false;
  }
  if (p->pos < p->len && p->s[p->pos] == '.') {
    integral = false;
    p->pos++;
    size_t d = p->pos;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    if (p->pos == d) {
      fail(p, "bad fraction");
      return false;
    }
  }
  if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
    integral = false;
    p->pos++;
    if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
    size_t d = p->pos;
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') p->pos++;
    if (p->pos == d) {
      fail(p, "bad exponent");
      return false;
    }
  }
  char buf[64];
  size_t n = p->pos - start;
  if (n >= sizeof buf) {
    /* Longer lexemes are still valid JSON; strtod needs a terminated copy. */
    char *big = arena_alloc(p, n + 1);
    if (big == NULL) return false;
    memcpy(big, p->s + start, n);
    big[n] = '\0';
    node->number = strtod(big, NULL);
    node->is_integer = false;
  } else {
    memcpy(buf, p->s + start, n);
    buf[n] = '\0';
    node->number = strtod(buf, NULL);
    node->is_integer = false;
    if (integral) {
      errno = 0;
      long long v = strtoll(buf, NULL, 10);
      if (errno == 0) {
        node->is_integer = true;
        node->integer = (int64_t)v;
      }
    }
  }
  node->kind = RILL_JSON_NUMBER;
  return true;
}

static rill_json *parse_value(parser *p, int depth);

static rill_json *new_node(parser *p, rill_json_kind kind) {
  rill_json *n = arena_alloc(p, sizeof *n);
  if (n == NULL) return NULL;
  memset(n, 0, sizeof *n);
  n->kind = kind;
  return n;
}

static rill_json *parse_container(parser *p, int depth, bool object) {
  if (depth >= RILL_JSON_MAX_DEPTH) {
    fail(p, "nesting too deep");
    return NULL;
  }
  rill_json *node = new_node(p, object ? RILL_JSON_OBJECT : RILL_JSON_ARRAY);
  if (node == NULL) return NULL;
  char close = object ? '}' : ']';
  p->pos++;
  skip_ws(p);
  if (p->pos < p->len && p->s[p->pos] == close) {
    p->pos++;
    return node;
  }
  rill_json **tail = &node->first;
  for (;;) {
    skip_ws(p);
    const char *key = NULL;
    if (object) {
      if (p->pos >= p->len || p->s[p->pos] != '"') {
        fail(p, "expected a key");
        return NULL;
      }
      size_t klen;
      key = parse_string(p, &klen);
      if (key == NULL) return NULL;
      skip_ws(p);
      if (p->pos >= p->len || p->s[p->pos] != ':') {
        fail(p, "expected ':'");
        return NULL;
      }
      p->pos++;
    }
    rill_json *child = parse_value(p, depth + 1);
    if (child == NULL) return NULL;
    child->key = key;
    *tail = child;
    tail = &child->next;
    node->length++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->pos < p->len && p->s[p->pos] == close) {
      p->pos++;
      return node;
    }
    fail(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
    return NULL;
  }
}

static rill_json *parse_value(parser *p, int depth) {
  skip_ws(p);
  if (p->pos >= p->len) {
    fail(p, "unexpected end");
    return NULL;
  }
  char c = p->s[p->pos];
  if (c == '{') return parse_container(p, depth, true);
  if (c == '[') return parse_container(p, depth, false);
  if (c == '"') {
    rill_json *n = new_node(p, RILL_JSON_STRING);
    if (n == NULL) return NULL;
    n->string = parse_string(p, &n->length);
    return n->string == NULL ? NULL : n;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    rill_json *n = new_node(p, RILL_JSON_NUMBER);
    if (n == NULL) return NULL;
    return parse_number(p, n) ? n : NULL;
  }
  if (literal(p, "true")) return new_node(p, RILL_JSON_TRUE);
  if (literal(p, "false")) return new_node(p, RILL_JSON_FALSE);
  if (literal(p, "null")) return new_node(p, RILL_JSON_NULL);
  fail(p, "unexpected character");
  return NULL;
}

rill_json_doc *rill_json_parse(const char *text, size_t len, char *err, size_t err_cap) {
  if (err != NULL && err_cap > 0) err[0] = '\0';
  rill_json_doc *doc = calloc(1, sizeof *doc);
  if (doc == NULL) {
    if (err != NULL && err_cap > 0) snprintf(err, err_cap, "out of memory");
    return NULL;
  }
  parser p = {.s = text, .len = len, .pos = 0, .doc = doc, .err = err, .err_cap = err_cap, .failed = false};
  doc->root = parse_value(&p, 0);
  if (doc->root != NULL) {
    skip_ws(&p);
    if (p.pos != p.len) fail(&p, "trailing characters");
  }
  if (p.failed || doc->root == NULL) {
    rill_json_free(doc);
    return NULL;
  }
  return doc;
}

void rill_json_free(rill_json_doc *doc) {
  if (doc == NULL) return;
  chunk *c = doc->chunks;
  while (c != NULL) {
    chunk *n = c->next;
    free(c);
    c = n;
  }
  free(doc);
}

const rill_json *rill_json_root(const rill_json_doc *doc) { return doc == NULL ? NULL : doc->root; }

const rill_json *rill_json_get(const rill_json *obj, const char *key) {
  if (obj == NULL || obj->kind != RILL_JSON_OBJECT) return NULL;
  const rill_json *found = NULL;
  for (const rill_json *m = obj->first; m != NULL; m = m->next) {
    if (strcmp(m->key, key) == 0) found = m;
  }
  return found;
}

const rill_json *rill_json_at(const rill_json *arr, size_t i) {
  if (arr == NULL || arr->kind != RILL_JSON_ARRAY) return NULL;
  const rill_json *m = arr->first;
  while (m != NULL && i > 0) {
    m = m->next;
    i--;
  }
  return m;
}
