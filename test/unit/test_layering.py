"""The package layering of DESIGN.md ("Package layout"), checked by parsing fusegrad/ with `ast` (nothing is imported).

Every import of a fusegrad module counts, wherever it is (module level, functions, methods, try/except), as do
relative imports and `importlib.import_module("fusegrad...")` with a constant name. Only imports under
`if TYPE_CHECKING:` are skipped: they never run. `from fusegrad.x import y` is an edge to fusegrad.x.y when that is a
module, else to fusegrad.x; `import fusegrad.x.y` is an edge to fusegrad.x.y only (the parent packages it implicitly
runs are not counted, or everything would import fusegrad/__init__.py)."""
import ast, fnmatch, pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = ROOT / "fusegrad"

# lowest first; a module may import from its own layer or any layer below it. Patterns match dotted module names
# (a package's __init__.py is the package's own name: "fusegrad.schedule").
LAYERS: list[tuple[str, tuple[str, ...]]] = [
  ("base", ("fusegrad.helpers", "fusegrad.dtype", "fusegrad.uop", "fusegrad.uop.*")),
  ("device registry", ("fusegrad.device",)),
  ("buffer state", ("fusegrad.buffers", "fusegrad.buffers.*")),
  ("renderer", ("fusegrad.renderer", "fusegrad.renderer.*")),
  ("runtime", ("fusegrad.runtime", "fusegrad.runtime.*")),  # each ops_<device>.py owns a Renderer object
  ("codegen", ("fusegrad.codegen", "fusegrad.codegen.*")),  # asks Device for the renderer
  ("schedule", ("fusegrad.schedule", "fusegrad.schedule.*")),
  ("engine", ("fusegrad.engine", "fusegrad.engine.realize", "fusegrad.engine.rng")),
  ("gradient", ("fusegrad.gradient",)),
  ("tensor", ("fusegrad.tensor", "fusegrad.tensor_*", "fusegrad.tensor.*")),
  # the C versions of eager hot paths, swapped in for Python functions of uop, schedule and tensor
  ("native", ("fusegrad.native",)),
  # TinyJit captures and replays functions of Tensors, so it sits above tensor (which only reports captures through
  # engine/realize.py's hook); it keeps tinygrad's path, fusegrad/engine/jit.py
  ("jit", ("fusegrad.engine.jit",)),
  ("nn", ("fusegrad.nn", "fusegrad.nn.*")),
  ("top", ("fusegrad.function", "fusegrad.llm", "fusegrad.llm.*", "fusegrad")),
]

# (importer, imported) edges that go up a layer on purpose, each with the reason. Keep it empty if at all possible.
ALLOWED: set[tuple[str, str]] = {
  # the registry lists the folders of the empty runtime package (its __path__, which a plug-in may extend) to find
  # ops_<name>.py; the runtime modules themselves it imports by computed name, when a device is opened
  ("fusegrad.device", "fusegrad.runtime"),
}

def module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(ROOT).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}

def layer_of(mod: str) -> int:
  hits = [i for i, (_, pats) in enumerate(LAYERS) if any(fnmatch.fnmatchcase(mod, p) for p in pats)]
  assert len(hits) == 1, f"{mod} is in {len(hits)} layers of LAYERS; give it exactly one"
  return hits[0]

def resolve(name: str) -> str | None:
  """The deepest fusegrad module `name` names (fusegrad.tensor.Tensor -> fusegrad.tensor), or None outside fusegrad."""
  while name and name not in MODULES: name = name.rpartition(".")[0]
  return name or None

def _is_type_checking(node: ast.If) -> bool:
  t = node.test
  return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")

def imports_of(mod: str, path: pathlib.Path) -> list[tuple[str, int]]:
  """(imported module, line) for every fusegrad import in the file."""
  pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
  out: list[tuple[str, int]] = []
  def visit(node: ast.AST):
    if isinstance(node, ast.If) and _is_type_checking(node):
      for n in node.orelse: visit(n)
      return
    if isinstance(node, ast.Import): out.extend((a.name, node.lineno) for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level: base = ".".join(pkg.split(".")[:len(pkg.split(".")) - node.level + 1] + ([base] if base else []))
      for a in node.names: out.append((f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base, node.lineno))
    elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
      fn = node.func
      if (fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)) in ("import_module", "__import__"):
        out.append((node.args[0].value, node.lineno))
    for child in ast.iter_child_nodes(node): visit(child)
  visit(ast.parse(path.read_text(), str(path)))
  return [(r, line) for name, line in out if (r := resolve(name)) is not None and r != mod]

# importer -> {imported: lines}
GRAPH: dict[str, dict[str, list[int]]] = {m: {} for m in MODULES}
for _m, _p in MODULES.items():
  for _dst, _line in sorted(set(imports_of(_m, _p))): GRAPH[_m].setdefault(_dst, []).append(_line)

def where(src: str, dst: str) -> str: return f"{MODULES[src].relative_to(ROOT)}:{','.join(map(str, GRAPH[src][dst]))}: {src} -> {dst}"

def strongly_connected(graph: dict[str, dict[str, list[int]]]) -> list[list[str]]:
  """Tarjan's algorithm; components of more than one module (self imports were dropped)."""
  index: dict[str, int] = {}
  low: dict[str, int] = {}
  stack: list[str] = []
  out: list[list[str]] = []
  def connect(v: str):
    index[v] = low[v] = len(index)
    stack.append(v)
    for w in graph[v]:
      if w not in index: connect(w); low[v] = min(low[v], low[w])
      elif w in stack: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while (w := stack.pop()) != v: comp.append(w)
      comp.append(v)
      if len(comp) > 1: out.append(sorted(comp))
  for v in graph:
    if v not in index: connect(v)
  return out

def test_walker_sees_imports():
  assert "fusegrad.dtype" in GRAPH["fusegrad.tensor"], "the walker found no fusegrad.tensor -> fusegrad.dtype import"
  assert "fusegrad.tensor" in GRAPH["fusegrad"], "the walker found no fusegrad/__init__.py -> fusegrad.tensor import"
  assert sum(map(len, GRAPH.values())) > 50, "suspiciously few fusegrad imports found"
  for m in MODULES: layer_of(m)  # every module has exactly one layer

def shortest_path(src: str, dst: str, within: set[str]) -> list[str]:
  prev, todo = {src: src}, [src]
  for v in todo:
    for w in GRAPH[v]:
      if w in within and w not in prev: prev[w] = v; todo.append(w)
  path = [dst]
  while path[-1] != src: path.append(prev[path[-1]])
  return path[::-1]

def test_no_import_cycles():
  """Each cycle is shown as the shortest loop through an edge that closes it: an upward import (test_no_upward_imports
  also lists those), or an import within one layer when the cycle remains with every upward import removed."""
  down = {s: {d: n for d, n in ds.items() if layer_of(d) <= layer_of(s)} for s, ds in GRAPH.items()}
  closing = [(s, d, set(c)) for c in strongly_connected(GRAPH) for s in c for d in GRAPH[s] if d in c and layer_of(d) > layer_of(s)]
  closing += [(s, d, set(c)) for c in strongly_connected(down) for s in c for d in down[s] if d in c]
  lines, seen = [f"components: {c}" for c in strongly_connected(GRAPH)], set()
  for s, d, comp in closing:
    loop = [s] + shortest_path(d, s, comp)
    if (key := frozenset(zip(loop, loop[1:]))) in seen: continue
    seen.add(key)
    lines.append("cycle:\n" + "".join(f"  {where(a, b)}\n" for a, b in zip(loop, loop[1:])))
  assert not lines, "import cycles in fusegrad:\n" + "\n".join(lines)

def test_no_upward_imports():
  bad = [f"{where(s, d)}  ({LAYERS[layer_of(s)][0]} imports {LAYERS[layer_of(d)][0]})"
         for s in GRAPH for d in GRAPH[s] if layer_of(d) > layer_of(s) and (s, d) not in ALLOWED]
  assert not bad, "imports of a higher layer (see LAYERS; DESIGN.md 'Package layout'):\n" + "\n".join(bad)

def test_allowed_edges_still_exist():
  stale = [e for e in ALLOWED if e[1] not in GRAPH.get(e[0], {})]
  assert not stale, f"ALLOWED lists edges that no longer exist, remove them: {stale}"
