/* The cuBLASLt loader's failure paths (cublaslt_loader.h), which decide when the CUDA device keeps its tiled GEMM:
 * nothing to open, a file that is not a library, a library without the functions. The success path needs a real
 * libcublasLt and is checked by scripts/gpu_check.py on a GPU machine. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cuda/cublaslt_loader.h"

static int zeroed(const rill_cublaslt *lt) {
  static const rill_cublaslt zero;
  return memcmp(lt, &zero, sizeof zero) == 0;
}

int main(void) {
  rill_cublaslt lt;
  char why[512];

  /* Nothing opens: the reason names the loader's error for the last candidate. */
  const char *absent[] = {"/nonexistent/libcublasLt.so.13", "/nonexistent/libcublasLt.so.12"};
  CHECK_EQ_INT(rill_cublaslt_load_from(absent, 2, &lt, why, sizeof why), RILL_ERR_UNSUPPORTED);
  CHECK(strncmp(why, "no libcublasLt (", 16) == 0);
  CHECK(strstr(why, "/nonexistent/libcublasLt.so.12") != NULL);
  CHECK(zeroed(&lt));
  CHECK_EQ_INT(rill_cublaslt_load_from(absent, 0, &lt, why, sizeof why), RILL_ERR_UNSUPPORTED);
  CHECK(strcmp(why, "no libcublasLt (no candidates)") == 0);

  /* A fake directory whose libcublasLt.so.13 is an empty file: dlopen refuses it, nothing crashes. */
  char dir[] = "/tmp/rill_cublaslt_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char fake[128];
  snprintf(fake, sizeof fake, "%s/libcublasLt.so.13", dir);
  FILE *f = fopen(fake, "w");
  CHECK(f != NULL);
  if (f != NULL) fclose(f);
  const char *empty[] = {fake};
  CHECK_EQ_INT(rill_cublaslt_load_from(empty, 1, &lt, why, sizeof why), RILL_ERR_UNSUPPORTED);
  CHECK(strncmp(why, "no libcublasLt (", 16) == 0);
  CHECK(strstr(why, fake) != NULL);
  CHECK(zeroed(&lt));

  /* A real shared library without cuBLASLt's functions: the first missing one is named, the handle closed. */
  const char *wrong[] = {"/nonexistent/libcublasLt.so.13", "libm.so.6"};
  CHECK_EQ_INT(rill_cublaslt_load_from(wrong, 2, &lt, why, sizeof why), RILL_ERR_UNSUPPORTED);
  CHECK(strcmp(why, "libm.so.6: missing symbol cublasLtCreate") == 0);
  CHECK(zeroed(&lt));

  /* The default search with RILL_CUBLASLT_DIR at the fake directory: the empty file is skipped. Where a real
   * libcublasLt is on the loader's path this succeeds through the bare names; otherwise it reports none found. */
  CHECK(setenv("RILL_CUBLASLT_DIR", dir, 1) == 0);
  const rill_status s = rill_cublaslt_load(&lt, why, sizeof why);
  if (s == RILL_OK) {
    CHECK(lt.lib != NULL && lt.create != NULL && lt.matmul != NULL);
  } else {
    CHECK_EQ_INT(s, RILL_ERR_UNSUPPORTED);
    CHECK(strncmp(why, "no libcublasLt (", 16) == 0);
    CHECK(zeroed(&lt));
  }
  rill_cublaslt_unload(&lt);
  CHECK(zeroed(&lt));
  rill_cublaslt_unload(&lt); /* a zeroed loader unloads as a no-op */

  unlink(fake);
  rmdir(dir);
  printf("%d passed, %d failed\n", check_passed_count, check_failed_count);
  return check_failed_count > 0;
}
