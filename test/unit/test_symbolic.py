from hypothesis import given, settings, strategies as st, HealthCheck
from fusegrad.dtype import dtypes
from fusegrad.uop.ops import Ops, UOp
from fusegrad.uop.symbolic import simplify

I = dtypes.int32  # noqa: E741  (the int32 dtype)
def c(v, dt=I): return UOp.const(dt, v)
def rng(n: int, i: int = 0) -> UOp: return UOp(Ops.RANGE, I, (c(n),), i)
def var(name: str, lo: int, hi: int) -> UOp: return UOp(Ops.DEFINE_VAR, I, (), (name, lo, hi))

# ---------- an independent evaluator with C semantics (division and remainder truncate toward zero)
def c_div(a: int, b: int) -> int:
  q = abs(a) // abs(b)
  return q if (a >= 0) == (b > 0) else -q
def c_mod(a: int, b: int) -> int: return a - b * c_div(a, b)

def evaluate(u: UOp, env: dict) -> int | bool:
  memo: dict = {}
  for x in u.toposort():
    s = [memo[y] for y in x.src]
    op = x.op
    if op is Ops.CONST: v = x.arg
    elif op in (Ops.RANGE, Ops.DEFINE_VAR): v = env[x]
    elif op is Ops.ADD: v = s[0] + s[1]
    elif op is Ops.SUB: v = s[0] - s[1]
    elif op is Ops.MUL: v = s[0] * s[1]
    elif op is Ops.NEG: v = -s[0]
    elif op is Ops.IDIV: v = c_div(s[0], s[1])
    elif op is Ops.MOD: v = c_mod(s[0], s[1])
    elif op is Ops.MAX: v = max(s[0], s[1])
    elif op is Ops.CMPLT: v = s[0] < s[1]
    elif op is Ops.CMPNE: v = s[0] != s[1]
    elif op is Ops.CMPEQ: v = s[0] == s[1]
    elif op is Ops.AND: v = s[0] and s[1] if x.dtype == dtypes.bool else s[0] & s[1]
    elif op is Ops.OR: v = s[0] or s[1] if x.dtype == dtypes.bool else s[0] | s[1]
    elif op is Ops.XOR: v = s[0] != s[1] if x.dtype == dtypes.bool else s[0] ^ s[1]
    elif op is Ops.WHERE: v = s[1] if s[0] else s[2]
    elif op is Ops.CAST: v = bool(s[0]) if x.dtype == dtypes.bool else int(s[0])
    else: raise NotImplementedError(f"evaluator: {op}")
    if x.dtype == dtypes.bool: v = bool(v)
    memo[x] = v
  return memo[u]

# ---------- random index expressions
@st.composite
def variables(draw, allow_negative: bool):
  out = []
  for i in range(draw(st.integers(1, 3))):
    if draw(st.booleans()): out.append(rng(draw(st.integers(1, 24)), 100 + i))
    else:
      lo = draw(st.integers(-12 if allow_negative else 0, 12))
      out.append(var(f"v{i}", lo, lo + draw(st.integers(0, 40))))
  return out

@st.composite
def int_expr(draw, vs: list, depth: int):
  if depth == 0 or draw(st.integers(0, 4)) == 0:
    return draw(st.sampled_from(vs)) if draw(st.integers(0, 5)) else c(draw(st.integers(0, 9)))
  a = draw(int_expr(vs, depth - 1))
  kind = draw(st.sampled_from(["add", "add", "sub", "mulc", "mulc", "div", "div", "mod", "mod", "addc"]))
  if kind == "add": return a + draw(int_expr(vs, depth - 1))
  if kind == "sub": return a - draw(int_expr(vs, depth - 1))
  if kind == "addc": return a + c(draw(st.integers(-8, 16)))
  if kind == "mulc": return a * c(draw(st.integers(-2, 8)))
  k = c(draw(st.integers(1, 9)))
  return a // k if kind == "div" else a % k

@st.composite
def bool_expr(draw, vs: list, depth: int):
  a, b = draw(int_expr(vs, depth)), draw(int_expr(vs, depth))
  kind = draw(st.sampled_from(["lt", "ltc", "ne", "eq"]))
  if kind == "lt": return a < b
  if kind == "ltc": return a < c(draw(st.integers(-5, 40)))
  return a.ne(b) if kind == "ne" else a.eq(b)

def assignments(draw, vs: list[UOp]) -> dict:
  return {v: draw(st.integers(v.vmin, v.vmax)) for v in vs}

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))

def check_equal(data, e: UOp, vs: list[UOp], n: int = 6):
  s = simplify(e)
  for _ in range(n):
    env = assignments(data.draw, vs)
    want, got = evaluate(e, env), evaluate(s, env)
    assert got == want, f"simplify changed the value at {{{', '.join(f'{v.arg}={x}' for v, x in env.items())}}}: {want} -> {got}\nbefore:\n{e}\nafter:\n{s}"

class TestSimplifyProperty:
  @SETTINGS
  @given(st.data())
  def test_nonnegative_index_math(self, data):
    vs = data.draw(variables(False))
    check_equal(data, data.draw(int_expr(vs, 4)), vs)

  @SETTINGS
  @given(st.data())
  def test_signed_index_math(self, data):
    vs = data.draw(variables(True))
    check_equal(data, data.draw(int_expr(vs, 4)), vs)

  @SETTINGS
  @given(st.data())
  def test_comparisons(self, data):
    vs = data.draw(variables(data.draw(st.booleans())))
    e = data.draw(bool_expr(vs, 3))
    if data.draw(st.booleans()): e = e.where(data.draw(int_expr(vs, 2)), data.draw(int_expr(vs, 2)))
    check_equal(data, e, vs)

  @SETTINGS
  @given(st.data())
  def test_flat_index_roundtrip(self, data):
    # the lowerer's reshape pattern: flatten (i, j, k) then split it again; each part must come back exactly
    dims = [data.draw(st.integers(2, 7)) for _ in range(3)]  # the lowerer never makes a RANGE of size 1
    rs = [rng(d, 200 + i) for i, d in enumerate(dims)]
    flat = rs[0] * c(dims[1] * dims[2]) + rs[1] * c(dims[2]) + rs[2]
    parts = [flat // c(dims[1] * dims[2]), (flat // c(dims[2])) % c(dims[1]), flat % c(dims[2])]
    for p, r in zip(parts, rs):
      check_equal(data, p, rs, n=3)
      s = simplify(p)
      assert s is r, f"expected {r.arg} from\n{p}\ngot\n{s}"

class TestBoundsProperty:
  @SETTINGS
  @given(st.data())
  def test_vmin_vmax_sound(self, data):
    vs = data.draw(variables(data.draw(st.booleans())))
    e = data.draw(int_expr(vs, 4)) if data.draw(st.booleans()) else data.draw(bool_expr(vs, 3))
    nodes = e.toposort()
    for _ in range(6):
      env = assignments(data.draw, vs)
      for u in nodes:
        v = evaluate(u, env)
        assert u.vmin <= v <= u.vmax, f"{u.op} value {v} outside its bounds [{u.vmin}, {u.vmax}]\n{u}"

  @SETTINGS
  @given(st.data())
  def test_bounds_of_simplified_sound(self, data):
    vs = data.draw(variables(False))
    s = simplify(data.draw(int_expr(vs, 4)))
    for _ in range(4):
      env = assignments(data.draw, vs)
      for u in s.toposort():
        v = evaluate(u, env)
        assert u.vmin <= v <= u.vmax, f"{u.op} value {v} outside [{u.vmin}, {u.vmax}]\n{u}"

class TestBoundsExact:
  def test_leaf_bounds(self):
    assert (rng(8).vmin, rng(8).vmax) == (0, 7)
    assert (var("b", -3, 5).vmin, var("b", -3, 5).vmax) == (-3, 5)
    assert (c(4).vmin, c(4).vmax) == (4, 4)

  def test_arith_bounds(self):
    r = rng(8)
    assert ((r * 4 + 3).vmin, (r * 4 + 3).vmax) == (3, 31)
    assert ((r // 2).vmin, (r // 2).vmax) == (0, 3)
    assert ((r % 3).vmin, (r % 3).vmax) == (0, 2)
    assert ((r - 10).vmin, (r - 10).vmax) == (-10, -3)
    assert ((r * -2).vmin, (r * -2).vmax) == (-14, 0)

  def test_comparison_bounds(self):
    r = rng(8)
    assert (r < 8).vmin is True and (r < 0).vmax is False
    assert ((r < 4).vmin, (r < 4).vmax) == (False, True)

class TestRules:
  def test_constant_folding(self):
    assert simplify(c(3) + c(4)) is c(7)
    assert simplify((c(7) * c(3)) // c(2)) is c(10)
    assert simplify(c(-7) // c(2)) is c(-3)   # C: truncate toward zero
    assert simplify(c(-7) % c(2)) is c(-1)
    assert simplify(c(2) < c(3)) is c(True, dtypes.bool)
    assert simplify(UOp(Ops.MAX, I, (c(2), c(9)))) is c(9)

  def test_constant_folding_wraps(self):
    big = c(2**31 - 1)
    assert simplify(big + c(1)) is c(-2**31)
    assert simplify(c(200, dtypes.uint8) + c(100, dtypes.uint8)) is c(44, dtypes.uint8)

  def test_identities(self):
    x = var("x", 0, 100)
    assert simplify(x * 1) is x
    assert simplify(x + 0) is x
    assert simplify(c(1) * x) is x
    assert simplify(c(0) + x) is x
    assert simplify(x * 0) is c(0)
    assert simplify(x - x) is c(0)
    assert simplify(x // 1) is x
    assert simplify(x % 1) is c(0)

  def test_constants_chain(self):
    x = var("x", 0, 100)
    assert simplify((x + 3) + 4) is x + 7
    assert simplify((x * 3) * 4) is x * 12
    assert simplify(x + 3 - 3) is x

  def test_float_identities_are_not_applied(self):
    xf = UOp(Ops.DEFINE_VAR, dtypes.float32, (), ("xf", 0, 1))
    z = UOp.const(dtypes.float32, 0.0)
    assert simplify(xf * z) is xf * z       # inf * 0 is nan, not 0
    assert simplify(xf + z) is xf + z       # -0.0 + 0.0 is 0.0
    assert simplify(xf * UOp.const(dtypes.float32, 1.0)) is xf

  def test_transcendentals_not_folded(self):
    e = UOp(Ops.EXP2, dtypes.float32, (UOp.const(dtypes.float32, 0.5),))
    assert simplify(e) is e

  def test_div_mod_recombine(self):
    x = var("x", 0, 1000)
    assert simplify((x // 8) * 8 + x % 8) is x
    assert simplify(x % 8 + (x // 8) * 8) is x
    r = rng(37)
    assert simplify((r // 5) * 5 + r % 5) is r

  def test_div_mod_by_bounds(self):
    i, k = rng(16, 0), rng(8, 1)
    e = i * 8 + k
    assert simplify(e // 8) is i
    assert simplify(e % 8) is k
    assert simplify(k // 8) is c(0)
    assert simplify(k % 8) is k
    assert simplify((i * 16 + k * 2) // 2) is simplify(i * 8 + k)

  def test_div_of_div(self):
    x = var("x", 0, 1000)
    assert simplify((x // 2) // 3) is x // 6
    assert simplify((x % 12) % 4) is x % 4

  def test_compare_folds_from_bounds(self):
    r = rng(4)
    assert simplify(r < 4) is c(True, dtypes.bool)
    assert simplify(r < 0) is c(False, dtypes.bool)
    assert simplify(r + 10 < 5) is c(False, dtypes.bool)

  def test_where_and_bool(self):
    x, y = var("x", 0, 9), var("y", 0, 9)
    t, f = c(True, dtypes.bool), c(False, dtypes.bool)
    assert simplify(t.where(x, y)) is x
    assert simplify(f.where(x, y)) is y
    cond = x < 5
    assert simplify(cond.where(y, y)) is y
    assert simplify(cond & t) is cond and simplify(cond & f) is f
    assert simplify(cond | f) is cond and simplify(cond | t) is t

  def test_signed_div_not_folded_wrongly(self):
    # x in [-7, 7]: (x + 8) // 8 is not x // 8 + 1 in C semantics (truncation); whatever simplify does must stay exact
    x = var("s", -7, 7)
    for e in ((x + 8) // 8, (x * 8 + 3) // 8, (x * 8 + 3) % 8, (x // 2) // 3):
      s = simplify(e)
      for v in range(-7, 8):
        assert evaluate(s, {x: v}) == evaluate(e, {x: v}), f"{e} at {v}"

class TestDivModRecombine:
  def test_flatten_of_a_reshape_is_the_index_itself(self):
    # a (32, 7, 7) view flattened: j//49*49 + j//7%7*7 + j%7 is j, also among other terms and scaled
    j, n = rng(1568, 1), rng(16, 2)
    e = n * c(1568) + (j // c(49)) * c(49) + ((j // c(7)) % c(7)) * c(7) + j % c(7)
    assert simplify(e) is simplify(n * c(1568) + j)
    assert simplify(((j // c(7)) % c(7)) * c(21) + (j % c(7)) * c(3)) is simplify((j % c(49)) * c(3))

  def test_exact_for_negative_values_with_truncating_division(self):
    x = var("x", -500, 500)
    for e in ((x // c(7)) * c(7) + x % c(7), ((x // c(7)) % c(5)) * c(7) + x % c(7)):
      s = simplify(e)
      for v in range(-500, 501, 37): assert evaluate(s, {x: v}) == evaluate(e, {x: v})
