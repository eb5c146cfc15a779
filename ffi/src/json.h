/*
 * A small strict JSON reader (RFC 8259) for config.json, safetensors headers and model.safetensors.index.json.
 * The whole document becomes one tree of rill_json nodes owned by a rill_json_doc; strings are NUL-terminated UTF-8.
 * Strict: no comments, no trailing commas, no leading zeros, no bare control characters, nothing after the value,
 * nesting at most RILL_JSON_MAX_DEPTH deep.
 */
#ifndef RILL_JSON_H
#define RILL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RILL_JSON_MAX_DEPTH 64

typedef enum rill_json_kind {
  RILL_JSON_NULL,
  RILL_JSON_FALSE,
  RILL_JSON_TRUE,
  RILL_JSON_NUMBER,
  RILL_JSON_STRING,
  RILL_JSON_ARRAY,
  RILL_JSON_OBJECT
} rill_json_kind;

typedef struct rill_json rill_json;
struct rill_json {
  rill_json_kind kind;
  double number;      /* NUMBER */
  bool is_integer;    /* NUMBER written without fraction or exponent and within int64 */
  int64_t integer;    /* NUMBER when is_integer */
  const char *string; /* STRING: the decoded text */
  size_t length;      /* STRING: bytes; ARRAY / OBJECT: members */
  const char *key;    /* the member's key when this node is an object member, else NULL */
  rill_json *first;   /* ARRAY / OBJECT: first member */
  rill_json *next;    /* next sibling */
};

typedef struct rill_json_doc rill_json_doc;

/* Parses text[0..len). On failure returns NULL and writes a one-line message with the byte offset into err. */
rill_json_doc *rill_json_parse(const char *text, size_t len, char *err, size_t err_cap);
void rill_json_free(rill_json_doc *doc);
const rill_json *rill_json_root(const rill_json_doc *doc);

/* The member named key of an object (the last one when repeated), or NULL (also when obj is not an object). */
const rill_json *rill_json_get(const rill_json *obj, const char *key);
/* Element i of an array, or NULL. */
const rill_json *rill_json_at(const rill_json *arr, size_t i);

#endif /* RILL_JSON_H */
