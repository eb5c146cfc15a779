/* Reading a small text file (config.json, an index) whole into memory. */
#ifndef RILL_READ_FILE_H
#define RILL_READ_FILE_H

#include <stddef.h>

#include "rill.h"

/* Reads path into a NUL-terminated malloc'd buffer (*out, *len without the NUL). Files over max_bytes are an error.
 * On failure writes a one-line message naming display_name into err. */
rill_status rill_read_file(const char *path, const char *display_name, size_t max_bytes, char **out, size_t *len,
                           char *err, size_t err_cap);

#endif /* RILL_READ_FILE_H */
