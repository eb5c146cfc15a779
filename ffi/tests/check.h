/*
 * The C test programs' assertions. Each program counts its checks and ends with the line scripts/test.ts sums:
 * `N passed, N failed`; its exit status is 1 when any check failed.
 */
#ifndef RILL_CHECK_H
#define RILL_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_passed_count = 0;
static int check_failed_count = 0;

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (cond) {                                                                 \
      check_passed_count++;                                                     \
    } else {                                                                    \
      check_failed_count++;                                                     \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                           \
  } while (0)

#define CHECK_MSG(cond, ...)                                    \
  do {                                                          \
    if (cond) {                                                 \
      check_passed_count++;                                     \
    } else {                                                    \
      check_failed_count++;                                     \
      fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                             \
      fputc('\n', stderr);                                      \
    }                                                           \
  } while (0)

#define CHECK_EQ_INT(a, b) \
  CHECK_MSG((long long)(a) == (long long)(b), "%s == %s (%lld vs %lld)", #a, #b, (long long)(a), (long long)(b))

#define CHECK_NEAR(a, b, tol)                                                                            \
  CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%s ~ %s (%.9g vs %.9g, tol %g)", #a, #b, (double)(a), \
            (double)(b), (double)(tol))

/* Prints the summary line and returns the exit status for main. */
static inline int check_summary(void) {
  printf("%d passed, %d failed\n", check_passed_count, check_failed_count);
  return check_failed_count == 0 ? 0 : 1;
}

#endif /* RILL_CHECK_H */
