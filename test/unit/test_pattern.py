from fusegrad.dtype import dtypes
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.pattern import PatternMatcher, UPat, graph_rewrite

def c(v, dt=dtypes.int32): return UOp.const(dt, v)
def var(name, lo=0, hi=10, dt=dtypes.int32): return UOp(Ops.DEFINE_VAR, dt, (), (name, lo, hi))
def first(pat: UPat, u: UOp) -> dict | None:
  m = pat.match(u, {})
  return m[0] if m else None

class TestUPat:
  def test_named_capture(self):
    x = var("x")
    m = first(UPat(Ops.ADD, src=(UPat.var("a"), UPat.cvar("k"))), x + 3)
    assert m is not None and m["a"] is x and m["k"] is c(3)

  def test_capture_whole_node(self):
    e = var("x") * 2
    assert first(UPat(Ops.MUL, name="root"), e)["root"] is e

  def test_op_filter(self):
    x = var("x")
    assert first(UPat(Ops.ADD), x + 1) is not None
    assert first(UPat(Ops.MUL), x + 1) is None
    assert first(UPat((Ops.ADD, Ops.MUL)), x * 2) is not None
    assert first(UPat({Ops.IDIV, Ops.MOD}), x % 2) is not None

  def test_dtype_filter(self):
    xi, xf = var("x"), UOp(Ops.DEFINE_VAR, dtypes.float32, (), ("xf", 0, 1))
    assert first(UPat(dtype=dtypes.int32), xi) is not None
    assert first(UPat(dtype=dtypes.float32), xi) is None
    assert first(UPat(dtype=(dtypes.int64, dtypes.float32)), xf) is not None
    assert first(UPat.cvar("c", dtypes.bool), c(True, dtypes.bool)) is not None
    assert first(UPat.cvar("c", dtypes.bool), c(1)) is None

  def test_dtype_matches_pointer_base(self):
    g = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(4), (), 0)
    assert first(UPat(Ops.DEFINE_GLOBAL, dtype=dtypes.float32), g) is not None

  def test_arg_filter(self):
    r0, r1 = UOp(Ops.RANGE, dtypes.int32, (c(4),), 0), UOp(Ops.RANGE, dtypes.int32, (c(4),), 1)
    assert first(UPat(Ops.RANGE, arg=1), r1) is not None
    assert first(UPat(Ops.RANGE, arg=1), r0) is None
    assert first(UPat(Ops.CONST, arg=3), c(3)) is not None and first(UPat(Ops.CONST, arg=3), c(4)) is None

  def test_custom_predicate(self):
    even = UPat(Ops.CONST, custom=lambda u: u.arg % 2 == 0)
    assert first(even, c(4)) is not None and first(even, c(5)) is None

  def test_src_tuple_is_ordered(self):
    x = var("x")
    pat = UPat(Ops.ADD, src=(UPat.cvar("k"), UPat.var("v")))
    assert first(pat, x + 3) is None
    assert first(pat, UOp(Ops.ADD, dtypes.int32, (c(3), x))) is not None

  def test_src_length_must_match(self):
    x = var("x")
    assert first(UPat(Ops.WHERE, src=(UPat.var("a"), UPat.var("b"))), (x < 3).where(x, c(0))) is None
    assert first(UPat(Ops.WHERE, src=(UPat.var("a"), UPat.var("b")), allow_any_len=True), (x < 3).where(x, c(0))) is not None

  def test_src_list_is_commutative(self):
    x = var("x")
    pat = UPat(Ops.ADD, src=[UPat.cvar("k"), UPat.var("v")])
    for e in (x + 3, UOp(Ops.ADD, dtypes.int32, (c(3), x))):
      m = first(pat, e)
      assert m is not None and m["k"] is c(3) and m["v"] is x

  def test_permutations_all_returned(self):
    x, y = var("x"), var("y")
    ms = UPat(Ops.ADD, src=[UPat.var("a"), UPat.var("b")]).match(x + y, {})
    assert {(m["a"], m["b"]) for m in ms} == {(x, y), (y, x)}

  def test_operator_sugar_is_commutative_for_add_mul(self):
    x = var("x")
    pat = UPat.var("v") * UPat.cvar("k")
    assert first(pat, x * 5) is not None and first(pat, UOp(Ops.MUL, dtypes.int32, (c(5), x))) is not None
    assert first(UPat.var("v") // UPat.cvar("k"), UOp(Ops.IDIV, dtypes.int32, (c(5), x))) is None

  def test_single_upat_src_matches_every_source(self):
    x, y = var("x"), var("y")
    pat = UPat(Ops.ADD, src=UPat(Ops.DEFINE_VAR))
    assert first(pat, x + y) is not None and first(pat, x + 1) is None

  def test_repeated_name_binds_same_node(self):
    x, y = var("x"), var("y")
    pat = UPat(Ops.ADD, src=(UPat.var("a"), UPat.var("a")))
    assert first(pat, x + x)["a"] is x
    assert first(pat, x + y) is None
    # equal structure is the same node thanks to hash-consing
    assert first(pat, (x * 2) + (x * 2)) is not None

  def test_repeated_name_nested(self):
    x, y = var("x"), var("y")
    pat = UPat(Ops.ADD, src=[UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("k"))), UPat(Ops.MOD, src=(UPat.var("a"), UPat.cvar("k")))])
    assert first(pat, x * 4 + x % 4) is not None
    assert first(pat, x % 4 + x * 4) is not None
    assert first(pat, x * 4 + y % 4) is None
    assert first(pat, x * 4 + x % 5) is None

class TestPatternMatcher:
  def test_first_rule_wins(self):
    x = var("x")
    pm = PatternMatcher([(UPat(Ops.ADD, name="a"), lambda a: c(1)), (UPat(Ops.ADD, name="a"), lambda a: c(2))])
    assert pm.rewrite(x + 1) is c(1)

  def test_none_falls_through(self):
    x = var("x")
    pm = PatternMatcher([(UPat(Ops.ADD, name="a"), lambda a: None), (UPat(Ops.ADD, name="a"), lambda a: c(2))])
    assert pm.rewrite(x + 1) is c(2)
    assert pm.rewrite(x * 1) is None

  def test_ctx_passed(self):
    x = var("x")
    seen = []
    pm = PatternMatcher([(UPat(Ops.ADD, name="a"), lambda ctx, a: ctx.append(a))])
    assert pm.rewrite(x + 1, ctx=seen) is None and seen == [x + 1]

  def test_combination_with_plus(self):
    x = var("x")
    pm1 = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("v"), UPat.cvar("k", ))), lambda v, k: v if k.arg == 0 else None)])
    pm2 = PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("v"), UPat.cvar("k"))), lambda v, k: v if k.arg == 1 else None)])
    both = pm1 + pm2
    assert pm1.rewrite(x * 1) is None and pm2.rewrite(x + 0) is None
    assert both.rewrite(x * 1) is x and both.rewrite(x + 0) is x
    assert graph_rewrite((x + 0) * 1, both) is x
    # order is kept: the left matcher's rules come first
    a = PatternMatcher([(UPat(Ops.ADD), lambda: c(1))])
    b = PatternMatcher([(UPat(Ops.ADD), lambda: c(2))])
    assert (a + b).rewrite(x + 5) is c(1) and (b + a).rewrite(x + 5) is c(2)

class TestGraphRewrite:
  def test_bottom_up_to_fixed_point(self):
    # x + 1 + 1 + 1 ... folded by one rule that must be applied repeatedly at every level
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat(Ops.ADD, src=(UPat.var("x"), UPat.cvar("a"))), UPat.cvar("b"))),
                          lambda x, a, b: x + (a.arg + b.arg))])
    x = var("x")
    e = x
    for _ in range(10): e = e + 1
    assert graph_rewrite(e, pm) is x + 10

  def test_sources_rewritten_before_parents(self):
    order = []
    def log(u):
      order.append(u.arg if u.op is Ops.CONST else u.op)
      return None
    pm = PatternMatcher([(UPat(name="u"), log)])
    x = var("x")
    graph_rewrite((x + 1) * 2, pm)
    assert order.index(Ops.ADD) < order.index(Ops.MUL) and order.index(Ops.DEFINE_VAR) < order.index(Ops.ADD)

  def test_result_is_rewritten_again(self):
    # SUB(a, b) -> a + NEG(b) creates NEG(NEG(y)), a new node that must itself be rewritten
    x, y = var("x"), var("y")
    pm = PatternMatcher([
      (UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat.var("v"),)),)), lambda v: v),
      (UPat(Ops.SUB, src=(UPat.var("a"), UPat.var("b"))), lambda a, b: a + (-b)),
    ])
    assert graph_rewrite(x - (-y), pm) is x + y
    assert graph_rewrite((x - (-y)) - (-(-(x - y))), pm) is (x + y) + (-(x + (-y)))

  def test_rewrites_inside_shared_subgraphs_once(self):
    calls = []
    x = var("x")
    shared = x * 3
    e = (shared + 1) * (shared + 2)
    def f(v):
      calls.append(v)
      return None
    graph_rewrite(e, PatternMatcher([(UPat(Ops.MUL, src=(UPat.var("v"), UPat.cvar())), f)]))
    assert calls.count(x) == 1

  def test_no_match_returns_same_graph(self):
    x = var("x")
    e = (x + 1) * (x + 2)
    assert graph_rewrite(e, PatternMatcher([])) is e

  def test_deep_graph(self):
    x = var("x")
    e = x
    for _ in range(3000): e = e + 0
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("v"), UPat.cvar("k"))), lambda v, k: v if k.arg == 0 else None)])
    assert graph_rewrite(e, pm) is x
