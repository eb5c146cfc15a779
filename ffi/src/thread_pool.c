#define _GNU_SOURCE

#include "thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Waits for work or completion spin (yielding the processor) this long before sleeping: a step runs ~100 parallel
 * regions with short serial stages between them, and a sleep/wake costs tens of microseconds on a virtual machine —
 * as much as a small projection. (A fixed count of yields runs out within a serial stage.) */
#define SPIN_SECONDS 2e-3

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct worker {
  rill_pool *pool;
  int index;
  pthread_t thread;
} worker;

struct rill_pool {
  int threads;
  worker *workers;
  pthread_mutex_t mu;
  pthread_cond_t wake, done;
  bool stop;
  /* The current job: workers pick up a new one when generation changes. */
  atomic_uint_fast64_t generation;
  rill_task_fn fn;
  void *ctx;
  int64_t num_tasks;
  atomic_int_fast64_t next;
  atomic_int busy; /* workers still inside the current job */
  int sleepers;    /* workers waiting on wake (under mu) */
};

static void drain(rill_pool *p, rill_task_fn fn, void *ctx, int64_t n, int thread) {
  for (;;) {
    int64_t t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    if (t >= n) return;
    fn(ctx, t, thread);
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  rill_pool *p = w->pool;
  uint_fast64_t seen = 0;
  for (;;) {
    uint_fast64_t g = atomic_load_explicit(&p->generation, memory_order_acquire);
    for (double t0 = seconds(); g == seen && seconds() - t0 < SPIN_SECONDS;) {
      sched_yield();
      g = atomic_load_explicit(&p->generation, memory_order_acquire);
    }
    if (g == seen) {
      pthread_mutex_lock(&p->mu);
      p->sleepers++;
      while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen && !p->stop) {
        pthread_cond_wait(&p->wake, &p->mu);
      }
      p->sleepers--;
      bool stop = p->stop;
      pthread_mutex_unlock(&p->mu);
      if (stop) return NULL;
    }
    seen = g;
    drain(p, p->fn, p->ctx, p->num_tasks, w->index);
    if (atomic_fetch_sub_explicit(&p->busy, 1, memory_order_acq_rel) == 1) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

int rill_cpu_count(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

rill_status rill_pool_create(int threads, rill_pool **out) {
  *out = NULL;
  if (threads < 1) threads = 1;
  rill_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return RILL_ERR_OUT_OF_MEMORY;
  p->threads = threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->generation, 0);
  atomic_init(&p->next, 0);
  atomic_init(&p->busy, 0);
  if (threads > 1) {
    p->workers = calloc((size_t)threads - 1, sizeof *p->workers);
    if (p->workers == NULL) {
      rill_pool_destroy(p);
      return RILL_ERR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < threads - 1; i++) {
      p->workers[i].pool = p;
      p->workers[i].index = i + 1;
      if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) {
        p->threads = i + 1; /* the ones started so far, plus the caller */
        rill_pool_destroy(p);
        return RILL_ERR_INTERNAL;
      }
    }
  }
  *out = p;
  return RILL_OK;
}

void rill_pool_destroy(rill_pool *p) {
  if (p == NULL) return;
  if (p->workers != NULL) {
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->threads - 1; i++) pthread_join(p->workers[i].thread, NULL);
    free(p->workers);
  }
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int rill_pool_threads(const rill_pool *p) { return p->threads; }

void rill_pool_run(rill_pool *p, rill_task_fn fn, void *ctx, int64_t num_tasks) {
  if (num_tasks <= 0) return;
  if (p->threads == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; t++) fn(ctx, t, 0);
    return;
  }
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->num_tasks = num_tasks;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->busy, p->threads - 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
  if (p->sleepers > 0) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  drain(p, fn, ctx, num_tasks, 0);
  for (double t0 = seconds(); atomic_load_explicit(&p->busy, memory_order_acquire) > 0 && seconds() - t0 < SPIN_SECONDS;) {
    sched_yield();
  }
  if (atomic_load_explicit(&p->busy, memory_order_acquire) > 0) {
    pthread_mutex_lock(&p->mu);
    while (atomic_load_explicit(&p->busy, memory_order_acquire) > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
}
