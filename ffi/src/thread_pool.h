/*
 * A pool of persistent worker threads, created once with the engine. rill_pool_run hands out task indices
 * 0..num_tasks-1 to the workers and the calling thread and returns when all are done; tasks must not depend on which
 * thread runs them or in what order (every kernel writes disjoint outputs).
 */
#ifndef RILL_THREAD_POOL_H
#define RILL_THREAD_POOL_H

#include <stdint.h>

#include "rill.h"

typedef struct rill_pool rill_pool;
/* fn(ctx, task, thread): thread is 0 for the caller, 1..threads-1 for workers (for per-thread scratch). */
typedef void (*rill_task_fn)(void *ctx, int64_t task, int thread);

/* threads ≥ 1 (including the caller). */
rill_status rill_pool_create(int threads, rill_pool **out);
void rill_pool_destroy(rill_pool *pool);
int rill_pool_threads(const rill_pool *pool);
void rill_pool_run(rill_pool *pool, rill_task_fn fn, void *ctx, int64_t num_tasks);

/* Online processors (at least 1). */
int rill_cpu_count(void);

#endif /* RILL_THREAD_POOL_H */
