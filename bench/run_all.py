"""Run every benchmark in bench/ and print one table: workload | fusegrad | reference | ratio | unit.

usage: python bench/run_all.py [name ...]   (names: matmul conv2d norms mnist_step tiny_mnist resnet18 overhead conv_forms beam; default all)
Each script also runs alone: python bench/<name>.py"""
import sys, time, traceback
from common import print_table, print_problems, env_info, PROBLEMS  # first: drops OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE before numpy loads
import matmul, conv2d, norms, mnist_step, tiny_mnist, resnet18, overhead, conv_forms, beam

SUITE = {"matmul": matmul, "conv2d": conv2d, "norms": norms, "mnist_step": mnist_step, "tiny_mnist": tiny_mnist, "resnet18": resnet18,
         "overhead": overhead, "conv_forms": conv_forms, "beam": beam}

def main(names: list[str]):
  print(env_info(), flush=True)
  rows, st = [], time.perf_counter()
  for name in names or list(SUITE):
    t0 = time.perf_counter()
    print(f"running {name} ...", end=" ", file=sys.stderr, flush=True)
    try: rows += SUITE[name].rows()
    except Exception as e:
      PROBLEMS.append(f"{name}: crashed with {type(e).__name__}: {e}")
      traceback.print_exc()
    print(f"{time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
  print()
  print_table(rows)
  print(f"(suite took {time.perf_counter() - st:.0f} s; fusegrad GFLOP/s and GB/s use kernel time, GlobalCounters.time_sum_s; "
        "'(wall)' rows and all references are wall clock)")
  print_problems()
  return 1 if any("crashed" in p for p in PROBLEMS) else 0

if __name__ == "__main__":
  if unknown := [n for n in sys.argv[1:] if n not in SUITE]:
    sys.exit(f"unknown benchmark {', '.join(unknown)}; {__doc__.splitlines()[2]}")
  sys.exit(main(sys.argv[1:]))
