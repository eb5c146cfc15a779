/* Reading and parsing a model directory's config.json. */
#ifndef RILL_CONFIG_JSON_H
#define RILL_CONFIG_JSON_H

#include <stddef.h>

#include "json.h"
#include "rill.h"

/* Parses dir/config.json into *out (free with rill_json_free). On failure *out is NULL and err holds one line:
 * the read's own status when the file cannot be read, RILL_ERR_MODEL when it is not JSON. */
rill_status rill_config_json_read(const char *dir, rill_json_doc **out, char *err, size_t err_cap);

#endif /* RILL_CONFIG_JSON_H */
