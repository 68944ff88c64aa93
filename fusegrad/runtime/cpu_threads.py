"""The CPU's kernel threads: a small pthread pool in C. A kernel split across cores runs as one call into it, which wakes
the workers, runs slice 0 itself and waits for the rest, all without the GIL. A Python thread pool cost ~80 us per
launch (submit, GIL handoffs, futures), more than a whole decode-sized kernel: a LLaMA token is ~600 such launches.

Workers spin for SPIN_US after each job, then sleep on a condition variable so an idle process costs nothing. The
kernels of one schedule follow each other within microseconds, but eager code builds the next op's graph in Python
between them (a conv's 0.2 ms); a worker that had gone to sleep must be woken, which on a VM took long enough that the
first kernels after a pause ran at half speed (a grouped 3x3 conv 0.6 -> 1.2 ms after 0.3 s idle). Spinning is timed,
not counted: a pause instruction takes 10 to 140 cycles depending on the CPU."""
from __future__ import annotations
import ctypes, hashlib
from fusegrad.renderer import ProgramSpec

POOL_SRC = r"""
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
typedef void (*task_fn)(void **bufs, const int *vars, int core_id, int n_cores);
static task_fn job_fn; static void **job_bufs; static const int *job_vars; static int job_n;
static atomic_int generation, remaining;
static int n_workers = 0;
static pid_t owner = 0;  /* a forked child has no workers: it starts its own */
static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER, wake_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static long long now_us(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000LL + t.tv_nsec / 1000; }

static void *worker(void *arg) {
  /* the generation before the worker's first job, known when it was created (it may start after that job is posted) */
  int id = (int)((long)arg & 0xffff), seen = (int)((long)arg >> 16);
  for (;;) {
    int g;
    long long until = now_us() + SPIN_US;
    for (int spins = 1; (g = atomic_load_explicit(&generation, memory_order_acquire)) == seen; spins++) {
      relax();
      if (spins % 64 == 0 && now_us() > until) break;  /* the clock is read every 64 pauses: a vDSO call, ~20 ns */
    }
    if (g == seen) {
      pthread_mutex_lock(&wake_mu);
      while ((g = atomic_load_explicit(&generation, memory_order_acquire)) == seen) pthread_cond_wait(&wake, &wake_mu);
      pthread_mutex_unlock(&wake_mu);
    }
    seen = g;
    if (id < job_n) job_fn(job_bufs, job_vars, id, job_n);
    atomic_fetch_sub_explicit(&remaining, 1, memory_order_acq_rel);
  }
  return 0;
}

/* Run fn(bufs, vars, i, n) for i in 0..n-1 on n threads (this one and n-1 workers); returns 0, or -1 if a worker
   thread could not be started (the caller then runs the slices itself). */
int pool_run(task_fn fn, void **bufs, const int *vars, int n) {
  pthread_mutex_lock(&run_mu);
  if (owner != getpid()) { n_workers = 0; owner = getpid(); }
  while (n_workers < n - 1) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, worker, (void *)(((long)atomic_load(&generation) << 16) | (n_workers + 1)));
    pthread_attr_destroy(&attr);
    if (err) { pthread_mutex_unlock(&run_mu); return -1; }
    n_workers++;
  }
  job_fn = fn; job_bufs = bufs; job_vars = vars; job_n = n;
  atomic_store_explicit(&remaining, n_workers, memory_order_relaxed);
  pthread_mutex_lock(&wake_mu);
  atomic_fetch_add_explicit(&generation, 1, memory_order_release);
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&wake_mu);
  fn(bufs, vars, 0, n);
  /* a worker the OS has not scheduled (more busy threads than cores) gets this core after a while */
  for (int spins = 0; atomic_load_explicit(&remaining, memory_order_acquire) > 0; spins++) if (spins < SPINS) relax(); else sched_yield();
  pthread_mutex_unlock(&run_mu);
  return 0;
}
"""
SPINS = 4000  # pauses the caller spins on a worker that has not finished before yielding its core
SPIN_US = 1000  # how long a worker spins for the next job before it sleeps

def task_symbol(spec: ProgramSpec) -> str:
  """The one symbol a kernel's library exports: named by its source, so kernels of the same name (E_32 of different
  ASTs) linked into one library (ops_cpu.compile_many) never clash."""
  return f"task_{hashlib.sha256(spec.src.encode()).hexdigest()[:20]}"

KERNEL_MARK = "/* kernel: */\n"  # kernel_source's line between the prelude and the kernel's own code

_NOT_ACROSS_CALLS = "#ifdef __clang__\n__attribute__((noinline))\n#else\n__attribute__((noipa))\n#endif\n"

def kernel_source(spec: ProgramSpec) -> str:
  """The kernel as a static function, and `task_<hash>(bufs, vars, core_id, n_cores)` calling it: one signature the
  pool can call. KERNEL_MARK parts the prelude (types, helpers) from the function, so kernels with the same prelude can
  be compiled as one translation unit (ops_cpu.compile_many)."""
  args = [f"b[{j}]" for j in range(len(spec.globals))] + [f"v[{j}]" for j in range(len(spec.vars))] + ["core_id", "n_cores"]
  head = f"void {spec.name}("
  if head not in spec.src: raise RuntimeError(f"kernel {spec.name}: its source does not define {head}...)")
  # never inlined into the wrapper: gcc then drops what the kernel's restrict parameters promised (no aliasing), and
  # loads of one buffer wait on stores to another (a 64-channel 3x3 conv 5% slower, 25% with partial sums kept in its
  # output). For gcc not analyzed across the call either (noipa): gcc 12 took a kernel whose store address induction-
  # variable optimization had rewritten for one without side effects, and dropped the call (two strided reads of one
  # buffer gave zeros). clang has no noipa
  return (spec.src.replace(head, KERNEL_MARK + _NOT_ACROSS_CALLS + "static " + head, 1) +
          f"\nvoid {task_symbol(spec)}(void **b, const int *v, int core_id, int n_cores) {{ {spec.name}({', '.join(args)}); }}\n")

def pool_source() -> str: return f"#define SPINS {SPINS}\n#define SPIN_US {SPIN_US}\n" + POOL_SRC

def load_pool(lib_path: str):
  """pool_run from the compiled pool library."""
  return ctypes.CDLL(lib_path).pool_run  # no argtypes: callers pass ctypes objects and an int, and it returns an int
