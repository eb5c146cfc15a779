/*
 * rill_step_batch_signature: the layout of rill_step_batch as text, so a binding that derives its own layout of the
 * struct can compare the two when it loads the library (tests/native/layout_test.ts checks the binding against
 * rill.h at build time; this check catches a library built from another rill.h at run time).
 *
 * The text is the six counts, ';', then the pointer fields, each "name:pointee type", comma-separated, in struct order.
 * The lists below are checked against the struct at compile time: every name is the field of that type at the next
 * slot, and the struct ends after the last, so a field added to rill.h without an entry here fails to compile.
 */
#include <stddef.h>
#include <stdint.h>

#include "rill.h"

#define BATCH_COUNTS(X) X(num_seqs) X(num_tokens) X(block_table_stride) X(num_mask_rows) X(history_len) X(bias_len)

/* The pointer fields before and after the sampling arrays (RILL_SAMPLING_FIELDS supplies those). */
#define BATCH_HEAD(X)                                                                                            \
  X(seq_ids, int32_t) X(tokens, int32_t) X(positions, int32_t) X(query_start, int32_t) X(context_lens, int32_t) \
  X(draft_counts, int32_t) X(sample_flags, uint8_t) X(block_tables, int32_t)
#define BATCH_TAIL(X)                                                                                            \
  X(mask_row_start, int32_t) X(allowed_mask, uint32_t) X(history_start, int32_t) X(history, int32_t)           \
  X(history_prompt_lens, int32_t) X(bias_start, int32_t) X(bias_ids, int32_t) X(bias_values, float)             \
  X(propose_counts, int32_t) X(sliding_block_tables, int32_t)

#define SAMPLING_AS_POINTER(name, type, limit, neutral) POINTER(name, type)
#define BATCH_POINTERS(POINTER_X) BATCH_HEAD(POINTER_X) RILL_SAMPLING_FIELDS(SAMPLING_AS_POINTER) BATCH_TAIL(POINTER_X)

enum {
#define COUNT_INDEX(name) count_index_##name,
  BATCH_COUNTS(COUNT_INDEX)
#undef COUNT_INDEX
  count_total
};
enum {
#define POINTER(name, type) pointer_index_##name,
  BATCH_POINTERS(POINTER)
#undef POINTER
  pointer_total
};

#define COUNT_AGREES(name)                                                                                       \
  _Static_assert(_Generic(((rill_step_batch *)0)->name, int32_t: 1, default: 0), "rill_step_batch." #name      \
                                                                                  " is not int32_t");             \
  _Static_assert(offsetof(rill_step_batch, name) == count_index_##name * sizeof(int32_t),                      \
                 "rill_step_batch." #name " is out of order");
BATCH_COUNTS(COUNT_AGREES)
#undef COUNT_AGREES

#define POINTERS_AT (count_total * sizeof(int32_t))
#define POINTER(name, type)                                                                                      \
  _Static_assert(_Generic(((rill_step_batch *)0)->name, const type *: 1, default: 0),                          \
                 "rill_step_batch." #name " is not const " #type " *");                                        \
  _Static_assert(offsetof(rill_step_batch, name) == POINTERS_AT + pointer_index_##name * sizeof(const void *), \
                 "rill_step_batch." #name " is out of order");
BATCH_POINTERS(POINTER)
#undef POINTER
_Static_assert(sizeof(rill_step_batch) == POINTERS_AT + pointer_total * sizeof(const void *),
               "rill_step_batch has a field missing from step_batch_signature.c");

#define COUNT_TEXT(name) #name ","
#define POINTER(name, type) #name ":" #type ","
/* Each list ends in a comma; the reader drops empty entries. */
static const char SIGNATURE[] = BATCH_COUNTS(COUNT_TEXT) ";" BATCH_POINTERS(POINTER);
#undef POINTER
#undef COUNT_TEXT

RILL_API const char *rill_step_batch_signature(void) { return SIGNATURE; }
