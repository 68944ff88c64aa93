/* fusegrad's native core: the hottest loops of eager graph building and realizing in C, each the exact equivalent of a Python
   function that stays in the package (and runs where this module cannot be built). Which Python function each one
   replaces is named above it; fusegrad/native/__init__.py builds and installs them, and test/unit/test_native.py checks
   that both give the same results.

   Every object this module needs from Python is handed over once by setup(): it imports nothing of fusegrad. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* set by setup() */
static PyObject *UOp, *Tensor, *KeyRef, *TensorRef, *ucache_refs, *ucache_forget, *INTS, *void_dtype, *op_values;
static PyObject *BUFFER, *RESHAPE, *BIND, *CONST, *COPY, *SHRINK, *REALIZED, *float_dtypes, *comparisons, *consts, *bool_dtype;
static PyObject *lazy, *tensor_unregister, *tensor_const, *CMPLT, *WHERE, *DERIVATIVE, *relu_vjp, *relu_py, *tensor_relu_py,
                *tensor_clip_py, *partial, *clamp_vjp;
static PyObject *zero_int, *one_int, *minus_zero, *plain_view_py, *run_task_py;
static PyObject *ops_cpu;  /* (the module: _run_task looks its cpu_count and pool_address up at each call) */
/* interned attribute names, the empty tuple, 0 and -0.0 */
static PyObject *s_params, *s_task_addr, *s_parallel, *s_cpu_count, *s_pool_address, *s_op, *s_dtype, *s_src, *s_arg,
                *s_uop, *s_ref, *s_shape, *s_vshape, *s_device, *s_tensor_level, *s_stop, *s_shrink, *s_binds, *s_order,
                *empty_tuple;

/* KeyRef's `key` and _TensorRef's `group` slots (helpers.py, tensor/tensor.py), read and written as their member
   descriptors do, without the attribute lookup (every node and tensor sets them once, and reads them when it dies) */
static PyMemberDef *ref_key, *ref_group;
static PyObject *get_member(PyObject *o, PyMemberDef *m) { return PyMember_GetOne((const char *)o, m); }
static int set_member(PyObject *o, PyMemberDef *m, PyObject *v) { return PyMember_SetOne((char *)o, m, v); }
static PyMemberDef *member_of(PyObject *type, const char *name) {
  PyObject *descr = PyObject_GetAttrString(type, name);
  if (!descr) return NULL;
  PyMemberDef *m = Py_IS_TYPE(descr, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)descr)->d_member : NULL;
  Py_DECREF(descr);  /* (the class keeps it) */
  if (!m) PyErr_Format(PyExc_TypeError, "%R.%s is not a slot", type, name);
  return m;
}

/* type(obj, callback) for a weakref subclass, by its constructor alone (weakref's __init__ only checks the arguments) */
static PyObject *new_ref(PyObject *type, PyObject *obj, PyObject *callback) {
  PyObject *args = PyTuple_Pack(2, obj, callback);
  if (!args) return NULL;
  PyObject *ref = ((PyTypeObject *)type)->tp_new((PyTypeObject *)type, args, NULL);
  Py_DECREF(args);
  return ref;
}

/* ---- hash-consing: UOpMeta.__call__ and _arg_key (ops.py) */

/* _arg_key: a hashable key for a node's arg in which 1, 1.0 and True (and 0.0, -0.0) differ */
static PyObject *arg_key(PyObject *arg) {
  if (arg == Py_None) return Py_NewRef(Py_None);
  if (PyTuple_Check(arg)) {
    Py_ssize_t n = PyTuple_GET_SIZE(arg);
    int plain = 1;
    for (Py_ssize_t i = 0; i < n && plain; i++) plain = PyLong_CheckExact(PyTuple_GET_ITEM(arg, i));
    if (plain) {
      PyObject *t = PyTuple_CheckExact(arg) ? Py_NewRef(arg) : PySequence_Tuple(arg);
      if (!t) return NULL;
      PyObject *ret = PyTuple_Pack(2, INTS, t);
      Py_DECREF(t);
      return ret;
    }
    PyObject *ret = PyTuple_New(n);
    if (!ret) return NULL;
    if (Py_EnterRecursiveCall(" in a node's arg")) { Py_DECREF(ret); return NULL; }  /* (Python's version raises RecursionError) */
    for (Py_ssize_t i = 0; i < n && ret; i++) {
      PyObject *k = arg_key(PyTuple_GET_ITEM(arg, i));
      if (!k) Py_CLEAR(ret);
      else PyTuple_SET_ITEM(ret, i, k);
    }
    Py_LeaveRecursiveCall();
    return ret;
  }
  if (PyFloat_Check(arg)) {  /* struct.pack("d", arg): the exact bits, native order */
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred()) return NULL;
    PyObject *bits = PyBytes_FromStringAndSize((const char *)&v, sizeof v);
    if (!bits) return NULL;
    PyObject *ret = PyTuple_Pack(2, (PyObject *)&PyFloat_Type, bits);
    Py_DECREF(bits);
    return ret;
  }
  if (PyLong_Check(arg)) return PyTuple_Pack(2, (PyObject *)Py_TYPE(arg), arg);
  return Py_NewRef(arg);
}

static PyObject *py_arg_key(PyObject *self, PyObject *arg) { return arg_key(arg); }

/* The node cache's key where the Python version has the tuple (op, dtype, src, arg key): the same fields and equality,
   with its hash kept. A tuple's hash is recomputed (its sources' hashes too) at every lookup, and a dead node's entry
   is looked up twice (WeakValueCache._forget): that was about a third of freeing a graph. */
typedef struct { PyObject_HEAD PyObject *f[4]; Py_hash_t hash; } NodeKey;
static PyTypeObject NodeKeyType;

static void nodekey_dealloc(PyObject *o) {
  for (int i = 0; i < 4; i++) Py_XDECREF(((NodeKey *)o)->f[i]);
  Py_TYPE(o)->tp_free(o);
}
static Py_hash_t nodekey_hash(PyObject *o) { return ((NodeKey *)o)->hash; }
static PyObject *nodekey_richcompare(PyObject *a, PyObject *b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !Py_IS_TYPE(a, &NodeKeyType) || !Py_IS_TYPE(b, &NodeKeyType)) Py_RETURN_NOTIMPLEMENTED;
  int eq = a == b || ((NodeKey *)a)->hash == ((NodeKey *)b)->hash;
  for (int i = 0; i < 4 && eq && a != b; i++)
    if ((eq = PyObject_RichCompareBool(((NodeKey *)a)->f[i], ((NodeKey *)b)->f[i], Py_EQ)) < 0) return NULL;
  return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}
static PyObject *nodekey_repr(PyObject *o) {
  NodeKey *k = (NodeKey *)o;
  return PyUnicode_FromFormat("NodeKey(%R, %R, %R, %R)", k->f[0], k->f[1], k->f[2], k->f[3]);
}
static PyTypeObject NodeKeyType = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "fusegrad.native._fgcore.NodeKey", .tp_basicsize = sizeof(NodeKey), .tp_dealloc = nodekey_dealloc,
  .tp_repr = nodekey_repr, .tp_hash = nodekey_hash, .tp_richcompare = nodekey_richcompare, .tp_flags = Py_TPFLAGS_DEFAULT,
  .tp_doc = "the node cache's key: (op, dtype, src, arg key), its hash kept"};

/* a new key for (op, dtype, src, arg key); steals ak */
static PyObject *nodekey_new(PyObject *op, PyObject *dtype, PyObject *src, PyObject *ak) {
  NodeKey *k = PyObject_New(NodeKey, &NodeKeyType);
  if (!k) { Py_DECREF(ak); return NULL; }
  k->f[0] = Py_NewRef(op); k->f[1] = Py_NewRef(dtype); k->f[2] = Py_NewRef(src); k->f[3] = ak;
  Py_uhash_t acc = 0x27D4EB2F165667C5ull;  /* (xxHash's mixing, as tuple's hash) */
  for (int i = 0; i < 4; i++) {
    Py_hash_t h = PyObject_Hash(k->f[i]);
    if (h == -1) { Py_DECREF(k); return NULL; }
    acc += (Py_uhash_t)h * 0xC2B2AE3D27D4EB4Full;
    acc = (acc << 31) | (acc >> 33);
    acc *= 0x9E3779B185EBCA87ull;
  }
  k->hash = acc == (Py_uhash_t)-1 ? 1546275796 : (Py_hash_t)acc;
  return (PyObject *)k;
}

/* the node for (op, dtype, src, arg): the live one if there is one, else a new one filed weakly in the cache */
static PyObject *uop_get(PyObject *op, PyObject *dtype, PyObject *src, PyObject *arg) {
  PyObject *ak = arg_key(arg);
  if (!ak) return NULL;
  PyObject *key = nodekey_new(op, dtype, src, ak);
  if (!key) return NULL;
  PyObject *ref = PyDict_GetItemWithError(ucache_refs, key);  /* borrowed */
  if (ref) {
    PyObject *live = PyWeakref_GET_OBJECT(ref);
    if (live != Py_None) { Py_DECREF(key); return Py_NewRef(live); }
  } else if (PyErr_Occurred()) { Py_DECREF(key); return NULL; }
  PyObject *ret = ((PyTypeObject *)UOp)->tp_new((PyTypeObject *)UOp, empty_tuple, NULL);
  if (!ret) { Py_DECREF(key); return NULL; }
  if (PyObject_SetAttr(ret, s_op, op) || PyObject_SetAttr(ret, s_dtype, dtype) || PyObject_SetAttr(ret, s_src, src) ||
      PyObject_SetAttr(ret, s_arg, arg)) goto fail;
  ref = new_ref(KeyRef, ret, ucache_forget);
  if (!ref) goto fail;
  if (set_member(ref, ref_key, key) || PyDict_SetItem(ucache_refs, key, ref)) { Py_DECREF(ref); goto fail; }
  Py_DECREF(ref);
  Py_DECREF(key);
  return ret;
fail:
  Py_DECREF(key);
  Py_DECREF(ret);
  return NULL;
}

/* UOpMeta.__call__(cls, op, dtype=dtypes.void, src=(), arg=None), installed as the metaclass's __call__ (a builtin
   is not bound, so cls is not passed: it is always UOp, which has no subclasses) */
static PyObject *uop_new(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *v[4] = {NULL, void_dtype, empty_tuple, Py_None};
  static const char *names[4] = {"op", "dtype", "src", "arg"};
  if (nargs > 4) return PyErr_Format(PyExc_TypeError, "UOp() takes at most 4 arguments (%zd given)", nargs);
  for (Py_ssize_t i = 0; i < nargs; i++) v[i] = args[i];
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nk; k++) {
    int j = 0;
    while (j < 4 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), names[j]) != 0) j++;
    if (j == 4) return PyErr_Format(PyExc_TypeError, "UOp() got an unexpected keyword argument '%U'", PyTuple_GET_ITEM(kwnames, k));
    if (j < nargs) return PyErr_Format(PyExc_TypeError, "UOp() got multiple values for argument '%s'", names[j]);
    v[j] = args[nargs + k];
  }
  if (!v[0]) return PyErr_Format(PyExc_TypeError, "UOp() missing required argument 'op'");
  return uop_get(v[0], v[1], v[2], v[3]);
}

/* WeakValueCache._forget for the node cache, and _unregister (tensor.py) for the live-tensor registry: a dead value's
   reference leaves its dict, unless the key was rebuilt with a new value meanwhile */
static int drop_ref(PyObject *group, PyObject *ref) {
  if (!PyObject_TypeCheck(ref, (PyTypeObject *)KeyRef)) { PyErr_Format(PyExc_TypeError, "not a KeyRef: %R", ref); return -1; }
  PyObject *key = get_member(ref, ref_key);
  if (!key) return -1;
  PyObject *cur = PyDict_GetItemWithError(group, key);
  int rc = (cur == ref) ? PyDict_DelItem(group, key) : (PyErr_Occurred() ? -1 : 0);
  Py_DECREF(key);
  return rc;
}
static PyObject *forget_in(PyObject *group, PyObject *ref) {
  if (drop_ref(group, ref)) return NULL;
  Py_RETURN_NONE;
}
static PyMethodDef forget_def = {"forget", forget_in, METH_O, "a dead value's reference leaves its dict (WeakValueCache._forget)"};
/* forgetter(refs) -> WeakValueCache._forget for the cache whose dict is refs */
static PyObject *forgetter(PyObject *mod, PyObject *refs) {
  if (!PyDict_Check(refs)) return PyErr_Format(PyExc_TypeError, "forgetter takes a dict");
  return PyCFunction_New(&forget_def, refs);
}
static PyObject *unregister(PyObject *self, PyObject *ref) {
  if (!PyObject_TypeCheck(ref, (PyTypeObject *)TensorRef)) return PyErr_Format(PyExc_TypeError, "not a _TensorRef: %R", ref);
  PyObject *group = get_member(ref, ref_group);
  if (!group) return NULL;
  int rc = group == Py_None ? 0 : drop_ref(group, ref);
  Py_DECREF(group);
  if (rc) return NULL;
  Py_RETURN_NONE;
}

/* ---- eager elementwise ops: Tensor._fast_binary, OpBuilder._fast_alu and _elementwise (tensor/elementwise.py, ops.py) */

static PyObject *node_dict(PyObject *u) { return PyObject_GenericGetDict(u, NULL); }  /* new reference */

/* _elementwise's facts: a new node's shape, vshape, device and tensor_level are its sources', set unless already set */
static int set_facts(PyObject *u, PyObject *shape, PyObject *device) {
  PyObject *d = node_dict(u);
  if (!d) return -1;
  int has = PyDict_Contains(d, s_shape);
  int rc = has < 0 || (!has && (PyDict_SetItem(d, s_shape, shape) || PyDict_SetItem(d, s_vshape, shape) ||
                                 PyDict_SetItem(d, s_device, device) || PyDict_SetItem(d, s_tensor_level, Py_True)));
  Py_DECREF(d);
  return rc ? -1 : 0;
}

/* ops._elementwise(op, dtype, src, shape, device) */
static PyObject *elementwise(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 5) return PyErr_Format(PyExc_TypeError, "_elementwise takes 5 arguments");
  PyObject *u = uop_get(args[0], args[1], args[2], Py_None);
  if (u && set_facts(u, args[3], args[4])) Py_CLEAR(u);
  return u;
}

/* ops._movement(op, x, shape, arg=None): a movement op (or REDUCE_AXIS) of x to shape, its facts set from x's */
static PyObject *movement(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs < 3 || nargs > 4) return PyErr_Format(PyExc_TypeError, "_movement takes 3 or 4 arguments");
  PyObject *op = args[0], *x = args[1], *shape = args[2], *arg = nargs == 4 && args[3] != Py_None ? args[3] : shape;
  PyObject *dtype = PyObject_GetAttr(x, s_dtype), *src = dtype ? PyTuple_Pack(1, x) : NULL, *u = NULL, *d = NULL;
  if (!src || !(u = uop_get(op, dtype, src, arg)) || !(d = node_dict(u))) goto done;
  int has = PyDict_Contains(d, s_shape);
  if (has < 0) { Py_CLEAR(u); goto done; }
  if (!has) {  /* (_set_facts) */
    PyObject *device = PyObject_GetAttr(x, s_device), *tl = device ? PyObject_GetAttr(x, s_tensor_level) : NULL;
    if (!tl || PyDict_SetItem(d, s_shape, shape) || PyDict_SetItem(d, s_vshape, shape) || PyDict_SetItem(d, s_device, device) ||
        PyDict_SetItem(d, s_tensor_level, tl)) Py_CLEAR(u);
    Py_XDECREF(device);
    Py_XDECREF(tl);
  }
done:
  Py_XDECREF(dtype); Py_XDECREF(src); Py_XDECREF(d);
  return u;
}

/* ops._plain_sizes(shape): are these all non-negative ints (no bools, Variables or -1)? */
static PyObject *plain_sizes(PyObject *mod, PyObject *shape) {
  PyObject *seq = PySequence_Fast(shape, "_plain_sizes takes a sequence");
  if (!seq) return NULL;
  int plain = 1;
  for (Py_ssize_t i = 0; plain && i < PySequence_Fast_GET_SIZE(seq); i++) {
    PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
    if ((plain = PyLong_CheckExact(s)) && (plain = PyObject_RichCompareBool(s, zero_int, Py_GE)) < 0) { Py_DECREF(seq); return NULL; }
  }
  Py_DECREF(seq);
  return PyBool_FromLong(plain);
}

/* Does the scalar v key tensor_const's memo as itself (Python's `v and v == v`: not 0, -0.0, NaN or False)? -1: error */
static int keys_as_itself(PyObject *v) {
  if (PyFloat_CheckExact(v)) { double d = PyFloat_AS_DOUBLE(v); return d != 0 && d == d; }
  if (PyLong_CheckExact(v)) return PyObject_IsTrue(v);
  int truth = PyObject_IsTrue(v);
  if (truth <= 0) return truth;
  PyObject *eq = PyObject_RichCompare(v, v, Py_EQ);  /* (not RichCompareBool, which takes a NaN object as equal to itself) */
  if (!eq) return -1;
  truth = PyObject_IsTrue(eq);
  Py_DECREF(eq);
  return truth;
}

/* the memo's node for (value, dtype, device, shape), borrowed, or NULL (a miss, or an error if PyErr_Occurred) */
static PyObject *const_memo(PyObject *value, PyObject *dtype, PyObject *device, PyObject *shape) {
  int plain = keys_as_itself(value);
  if (plain < 0) return NULL;
  PyObject *key;
  if (plain) key = PyTuple_Pack(5, (PyObject *)Py_TYPE(value), value, dtype, device, shape);
  else {  /* 0, -0.0, NaN: keyed on their exact bits */
    PyObject *ak = arg_key(value);
    if (!ak) return NULL;
    key = PyTuple_Pack(4, ak, dtype, device, shape);
    Py_DECREF(ak);
  }
  if (!key) return NULL;
  PyObject *c = PyDict_GetItemWithError(consts, key);
  Py_DECREF(key);
  return c;
}

/* The last constants asked for, by the identity of (value, dtype, device, shape), each entry holding all five alive: an
   eager program's scalars are the same objects call after call (`x * 1.01` in a loop), and keying the memo (a tuple of
   five, a float's hash) cost about as much as the rest of the op. Holding the node alive, the entry gives what the
   memo would: the memo's node, or, once evicted from it, the same node rebuilt (hash-consing finds the live one). */
#define RECENT_CONSTS 64
static struct { PyObject *value, *dtype, *device, *shape, *node; } recent[RECENT_CONSTS];

/* OpBuilder.tensor_const(value, dtype, device, shape) as a new reference: a recent entry, the memo's node, else the
   Python function's */
static PyObject *const_node(PyObject *value, PyObject *dtype, PyObject *device, PyObject *shape) {
  size_t h = ((size_t)value >> 4) ^ ((size_t)shape >> 4) * 31 ^ ((size_t)dtype >> 4) * 7 ^ ((size_t)device >> 4) * 3;
  h = (h * 0x9E3779B97F4A7C15ull) >> 58;  /* (the top 6 bits: RECENT_CONSTS entries) */
  if (recent[h].value == value && recent[h].dtype == dtype && recent[h].device == device && recent[h].shape == shape)
    return Py_NewRef(recent[h].node);
  PyObject *c = const_memo(value, dtype, device, shape);
  if (c) Py_INCREF(c);
  else if (PyErr_Occurred()) return NULL;
  else {
    PyObject *args[4] = {value, dtype, device, shape};
    if (!(c = PyObject_Vectorcall(tensor_const, args, 4, NULL))) return NULL;
  }
  /* the old entry is let go of only once the new one is whole (freeing it may run code that asks for a constant) */
  PyObject *old[5] = {recent[h].value, recent[h].dtype, recent[h].device, recent[h].shape, recent[h].node};
  recent[h].value = Py_NewRef(value); recent[h].dtype = Py_NewRef(dtype); recent[h].device = Py_NewRef(device);
  recent[h].shape = Py_NewRef(shape); recent[h].node = Py_NewRef(c);
  for (int i = 0; i < 5; i++) Py_XDECREF(old[i]);
  return c;
}

static PyObject *py_tensor_const(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 4) return PyErr_Format(PyExc_TypeError, "tensor_const takes 4 arguments");
  return const_node(args[0], args[1], args[2], args[3]);
}

/* A new tensor of class cls holding node u: Tensor.__init__(u) and _register for a node that is no BUFFER or RESHAPE
   (an elementwise result), in C for Tensor itself; a subclass runs its own __init__ */
static PyObject *wrap(PyObject *cls, PyObject *u) {
  if (cls != Tensor) return PyObject_CallOneArg(cls, u);
  PyObject *t = ((PyTypeObject *)cls)->tp_new((PyTypeObject *)cls, empty_tuple, NULL);
  if (!t) return NULL;
  PyObject *ref = NULL, *id = NULL;
  if (PyObject_SetAttr(t, s_uop, u)) goto fail;
  if (!(ref = new_ref(TensorRef, t, tensor_unregister))) goto fail;
  if (!(id = PyLong_FromVoidPtr(t))) goto fail;
  if (set_member(ref, ref_key, id) || set_member(ref, ref_group, lazy) || PyObject_SetAttr(t, s_ref, ref) ||
      PyDict_SetItem(lazy, id, ref)) goto fail;
  Py_DECREF(ref);
  Py_DECREF(id);
  return t;
fail:
  Py_XDECREF(ref);
  Py_XDECREF(id);
  Py_DECREF(t);
  return NULL;
}

static PyObject *dget(PyObject *d, PyObject *name) { return PyDict_GetItemWithError(d, name); }  /* borrowed */

/* OpBuilder._fast_alu: self op x for a float node self of concrete shape and x a Python int or float or a node of
   self's shape, dtype and device; Py_None (new ref) where the general path must run */
static PyObject *fast_alu(PyObject *self, PyObject *op, PyObject *x, int reverse) {
  PyObject *d = node_dict(self), *c = NULL, *xd = NULL, *ret = NULL, *dtype = NULL;
  if (!d) return NULL;
  PyObject *shape = dget(d, s_shape), *vshape, *tl, *device;
  if (!shape || (vshape = dget(d, s_vshape)) != shape || !(tl = dget(d, s_tensor_level)) || tl != Py_True) goto none;
  if (!(dtype = PyObject_GetAttr(self, s_dtype))) goto error;
  int is_float = PySet_Contains(float_dtypes, dtype);
  if (is_float < 0) goto error;
  if (!is_float || !(device = dget(d, s_device))) goto none;
  if (Py_IS_TYPE(x, (PyTypeObject *)UOp)) {
    if (!(xd = node_dict(x))) goto error;
    PyObject *xdt = PyObject_GetAttr(x, s_dtype);
    if (!xdt) goto error;
    Py_DECREF(xdt);  /* (identity only: dtypes live for good) */
    PyObject *xs = dget(xd, s_shape), *xtl, *xdev;
    if (xdt != dtype || !xs || dget(xd, s_vshape) != xs || !(xtl = dget(xd, s_tensor_level)) || !(xdev = dget(xd, s_device))) goto none;
    int same = PyObject_RichCompareBool(xs, shape, Py_EQ);
    if (same < 0) goto error;
    if (!same) goto none;
    int istl = PyObject_IsTrue(xtl);
    if (istl <= 0) { if (istl < 0) goto error; goto none; }
    if ((same = PyObject_RichCompareBool(xdev, device, Py_EQ)) < 0) goto error;
    if (!same) goto none;
    c = Py_NewRef(x);
  } else if (PyLong_CheckExact(x) || PyFloat_CheckExact(x)) {
    if (!(c = const_node(x, dtype, device, shape))) goto error;
  } else goto none;
  int cmp = PySet_Contains(comparisons, op);
  if (cmp < 0) goto error;
  PyObject *src = reverse ? PyTuple_Pack(2, c, self) : PyTuple_Pack(2, self, c);
  if (!src) goto error;
  ret = uop_get(op, cmp ? bool_dtype : dtype, src, Py_None);
  Py_DECREF(src);
  if (!ret) goto error;
  if (set_facts(ret, shape, device)) goto error;
  goto done;
none:
  ret = Py_NewRef(Py_None);
  goto done;
error:
  Py_CLEAR(ret);
done:
  Py_XDECREF(c);
  Py_XDECREF(xd);
  Py_XDECREF(dtype);
  Py_DECREF(d);
  return ret;
}

/* Tensor._fast_binary(self, op, x, reverse=False) */
static PyObject *fast_binary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs < 3 || nargs > 4) return PyErr_Format(PyExc_TypeError, "_fast_binary takes 3 or 4 arguments");
  PyObject *self = args[0], *x = args[2], *cls = (PyObject *)Py_TYPE(self);
  int reverse = nargs == 4 ? PyObject_IsTrue(args[3]) : 0;
  if (reverse < 0) return NULL;
  PyObject *u = PyObject_GetAttr(self, s_uop), *xu = NULL;
  if (!u) return NULL;
  if ((PyObject *)Py_TYPE(x) == cls) {
    if (!(xu = PyObject_GetAttr(x, s_uop))) { Py_DECREF(u); return NULL; }
    x = xu;
  }
  PyObject *node = fast_alu(u, args[1], x, reverse), *ret;
  Py_DECREF(u);
  Py_XDECREF(xu);
  if (!node || node == Py_None) return node;
  ret = wrap(cls, node);
  Py_DECREF(node);
  return ret;
}

/* _TensorMeta.__call__(cls, *args, **kw), installed as a method descriptor of the metaclass: Tensor(u) of a lazy node u
   (how every op wraps its result) is wrap() without a Python frame; anything else is type.__call__ */
static PyObject *tensor_call(PyObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  if (cls == Tensor && nargs == 1 && !kwnames && Py_IS_TYPE(args[0], (PyTypeObject *)UOp)) {
    PyObject *op = PyObject_GetAttr(args[0], s_op);
    if (!op) return NULL;
    Py_DECREF(op);
    if (op != BUFFER && op != RESHAPE) return wrap(cls, args[0]);  /* (a buffer's holders are filed by Python's _register) */
  }
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *pos = PyTuple_New(nargs), *kw = nk ? PyDict_New() : NULL, *ret = NULL;
  if (!pos || (nk && !kw)) goto done;
  for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(pos, i, Py_NewRef(args[i]));
  for (Py_ssize_t k = 0; k < nk; k++)
    if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, k), args[nargs + k])) goto done;
  ret = PyType_Type.tp_call(cls, pos, kw);
done:
  Py_XDECREF(pos);
  Py_XDECREF(kw);
  return ret;
}
static PyMethodDef tensor_call_def = {"__call__", (PyCFunction)(void (*)(void))tensor_call, METH_FASTCALL | METH_KEYWORDS, "Tensor(...)"};
/* ---- the arithmetic dunders of Tensor (tensor/elementwise.py): fast_binary, else the Python method they replace */
enum { D_ADD, D_RADD, D_SUB, D_RSUB, D_MUL, D_RMUL, D_DIV, D_RDIV, D_LT, D_GT, N_DUNDERS };
static const char *dunder_names[N_DUNDERS] = {"__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
                                              "__rtruediv__", "__lt__", "__gt__"};
static const char *dunder_ops[N_DUNDERS] = {"ADD", "ADD", "SUB", "SUB", "MUL", "MUL", "FDIV", "FDIV", "CMPLT", "CMPLT"};
static const int dunder_reverse[N_DUNDERS] = {0, 0, 0, 1, 0, 1, 0, 1, 0, 1};  /* (a + b is b + a: __radd__ keeps the order) */
static PyObject *dunder_op[N_DUNDERS], *dunder_py[N_DUNDERS];

static PyObject *dunder(int which, PyObject *self, PyObject *x) {
  PyObject *args[4] = {self, dunder_op[which], x, dunder_reverse[which] ? Py_True : Py_False};
  PyObject *t = fast_binary(NULL, args, 4);
  if (t != Py_None) return t;
  Py_DECREF(t);
  PyObject *call[2] = {self, x};
  return PyObject_Vectorcall(dunder_py[which], call, 2, NULL);
}
#define DUNDER(i) static PyObject *dunder_##i(PyObject *self, PyObject *x) { return dunder(i, self, x); }
DUNDER(0) DUNDER(1) DUNDER(2) DUNDER(3) DUNDER(4) DUNDER(5) DUNDER(6) DUNDER(7) DUNDER(8) DUNDER(9)
static PyMethodDef dunder_defs[N_DUNDERS] = {
  {"__add__", dunder_0, METH_O, NULL}, {"__radd__", dunder_1, METH_O, NULL}, {"__sub__", dunder_2, METH_O, NULL},
  {"__rsub__", dunder_3, METH_O, NULL}, {"__mul__", dunder_4, METH_O, NULL}, {"__rmul__", dunder_5, METH_O, NULL},
  {"__truediv__", dunder_6, METH_O, NULL}, {"__rtruediv__", dunder_7, METH_O, NULL}, {"__lt__", dunder_8, METH_O, NULL},
  {"__gt__", dunder_9, METH_O, NULL}};

/* dunders(Tensor, ops, pythons) -> {name: method descriptor}: ops maps an op's name to it, pythons a dunder's name to
   the Python method to hand over to */
static PyObject *dunders(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyType_Check(args[0]) || !PyDict_Check(args[1]) || !PyDict_Check(args[2])) return PyErr_Format(PyExc_TypeError, "dunders(type, ops, pythons)");
  PyObject *ret = PyDict_New();
  for (int i = 0; ret && i < N_DUNDERS; i++) {
    PyObject *op = PyDict_GetItemString(args[1], dunder_ops[i]), *py = PyDict_GetItemString(args[2], dunder_names[i]), *m;
    if (!op || !py) { Py_DECREF(ret); return PyErr_Format(PyExc_KeyError, "dunders: no %s or %s", dunder_ops[i], dunder_names[i]); }
    Py_XSETREF(dunder_op[i], Py_NewRef(op));
    Py_XSETREF(dunder_py[i], Py_NewRef(py));
    if (!(m = PyDescr_NewMethod((PyTypeObject *)args[0], &dunder_defs[i])) || PyDict_SetItemString(ret, dunder_names[i], m)) Py_CLEAR(ret);
    Py_XDECREF(m);
  }
  return ret;
}

static PyMethodDef uop_relu_def, tensor_relu_def, tensor_clip_def;
/* method(name, type): the C method `name` (tensor_call, uop_relu, tensor_relu, tensor_clip) as a method descriptor of
   type, to be set as its attribute (a plain builtin would not be bound to the instance) */
static PyObject *method(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyType_Check(args[1])) return PyErr_Format(PyExc_TypeError, "method(name, type)");
  static const char *names[] = {"tensor_call", "uop_relu", "tensor_relu", "tensor_clip"};
  PyMethodDef *defs[] = {&tensor_call_def, &uop_relu_def, &tensor_relu_def, &tensor_clip_def};
  for (int i = 0; i < 4; i++)
    if (!PyUnicode_CompareWithASCIIString(args[0], names[i])) return PyDescr_NewMethod((PyTypeObject *)args[1], defs[i]);
  return PyErr_Format(PyExc_KeyError, "no C method %R", args[0]);
}

/* ---- relu and clamp of float tensors: UOp.relu's float branch and Tensor.clip's with constant bounds (ops.py,
   tensor/elementwise.py), as method descriptors that hand everything else to the Python methods they replace */

/* Is u a concrete tensor-level float node? Its shape and device (borrowed from its __dict__, which *d holds) and dtype
   (borrowed: dtypes live for good). 0: no (the Python method runs), -1: error. */
static int float_node(PyObject *u, PyObject **d, PyObject **shape, PyObject **device, PyObject **dtype) {
  if (!Py_IS_TYPE(u, (PyTypeObject *)UOp)) return 0;
  if (!(*d = node_dict(u))) return -1;
  PyObject *tl;
  if (!(*shape = dget(*d, s_shape)) || dget(*d, s_vshape) != *shape || !(tl = dget(*d, s_tensor_level)) || tl != Py_True ||
      !(*device = dget(*d, s_device)) || !(*dtype = dget(*d, s_dtype))) return PyErr_Occurred() ? -1 : 0;
  return PySet_Contains(float_dtypes, *dtype);
}

/* WHERE(CMPLT(a, b), t, f) with the facts of a node of (shape, device, dtype) */
static PyObject *where_less(PyObject *a, PyObject *b, PyObject *t, PyObject *f, PyObject *dtype, PyObject *shape, PyObject *device) {
  PyObject *src = PyTuple_Pack(2, a, b), *cmp = NULL, *ret = NULL;
  if (!src || !(cmp = uop_get(CMPLT, bool_dtype, src, Py_None)) || set_facts(cmp, shape, device)) goto done;
  Py_SETREF(src, PyTuple_Pack(3, cmp, t, f));
  if (src && (ret = uop_get(WHERE, dtype, src, Py_None)) && set_facts(ret, shape, device)) Py_CLEAR(ret);
done:
  Py_XDECREF(src);
  Py_XDECREF(cmp);
  return ret;
}


/* y.__dict__[DERIVATIVE] = ((x,), vjp); steals vjp */
static int set_derivative(PyObject *y, PyObject *x, PyObject *vjp) {
  PyObject *d = vjp ? node_dict(y) : NULL, *ins = d ? PyTuple_Pack(1, x) : NULL, *rule = ins ? PyTuple_Pack(2, ins, vjp) : NULL;
  int rc = rule ? PyDict_SetItem(d, DERIVATIVE, rule) : -1;
  Py_XDECREF(d); Py_XDECREF(ins); Py_XDECREF(rule); Py_XDECREF(vjp);
  return rc;
}

/* the float relu of node u: where(u < -0.0, 0, u), with torch's gradient as its rule; Py_None: not a float node */
static PyObject *relu_node(PyObject *u) {
  PyObject *d = NULL, *shape, *device, *dtype, *zero = NULL, *below = NULL, *ret = NULL;
  int is = float_node(u, &d, &shape, &device, &dtype);
  if (is <= 0) { Py_XDECREF(d); return is < 0 ? NULL : Py_NewRef(Py_None); }
  if ((zero = const_node(zero_int, dtype, device, shape)) && (below = const_node(minus_zero, dtype, device, shape)) &&
      (ret = where_less(u, below, zero, u, dtype, shape, device)) && set_derivative(ret, u, Py_NewRef(relu_vjp))) Py_CLEAR(ret);
  Py_XDECREF(zero); Py_XDECREF(below); Py_DECREF(d);
  return ret;
}

/* UOp.relu(self) */
static PyObject *uop_relu(PyObject *self, PyObject *unused) {
  PyObject *r = relu_node(self);
  if (r != Py_None) return r;
  Py_DECREF(r);
  return PyObject_CallOneArg(relu_py, self);
}

/* Tensor.relu(self) */
static PyObject *tensor_relu(PyObject *self, PyObject *unused) {
  PyObject *u = PyObject_GetAttr(self, s_uop), *r = u ? relu_node(u) : NULL, *ret;
  Py_XDECREF(u);
  if (r != Py_None) {
    ret = r ? wrap((PyObject *)Py_TYPE(self), r) : NULL;
    Py_XDECREF(r);
    return ret;
  }
  Py_DECREF(r);
  return PyObject_CallOneArg(tensor_relu_py, self);
}

/* a bound clip takes in C: None, or an int or float that is not NaN (bool, NaN, tensors and numpy scalars: Python) */
static int plain_bound(PyObject *b) {
  return b == Py_None || PyLong_CheckExact(b) || (PyFloat_CheckExact(b) && !isnan(PyFloat_AS_DOUBLE(b)));
}

/* partial(_clamp_vjp, lo, hi), the gradient rule of a clamp with constant bounds, kept for the last bounds (by identity,
   as the recent constants): one rule object serves every clamp with those bounds */
#define RECENT_RULES 16
static struct { PyObject *lo, *hi, *rule; } rules[RECENT_RULES];
static PyObject *clamp_rule(PyObject *lo, PyObject *hi) {
  size_t h = (((size_t)lo >> 4) * 31 ^ ((size_t)hi >> 4)) * 0x9E3779B97F4A7C15ull >> 60;
  if (rules[h].rule && rules[h].lo == lo && rules[h].hi == hi) return Py_NewRef(rules[h].rule);
  PyObject *rule = PyObject_CallFunctionObjArgs(partial, clamp_vjp, lo, hi, NULL);
  if (!rule) return NULL;
  PyObject *old[3] = {rules[h].lo, rules[h].hi, rules[h].rule};
  rules[h].lo = Py_NewRef(lo); rules[h].hi = Py_NewRef(hi); rules[h].rule = Py_NewRef(rule);
  for (int i = 0; i < 3; i++) Py_XDECREF(old[i]);
  return rule;
}

/* Tensor.clip(self, min_=None, max_=None, *, min=None, max=None) */
static PyObject *tensor_clip(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  PyObject *lo = nargs > 0 ? args[0] : Py_None, *hi = nargs > 1 ? args[1] : Py_None;
  Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  int fast = nargs <= 2;
  for (Py_ssize_t k = 0; k < nk && fast; k++) {  /* one spelling of each bound, given once */
    PyObject *name = PyTuple_GET_ITEM(kwnames, k), *v = args[nargs + k];
    int is_lo = !PyUnicode_CompareWithASCIIString(name, "min") || !PyUnicode_CompareWithASCIIString(name, "min_");
    int is_hi = !PyUnicode_CompareWithASCIIString(name, "max") || !PyUnicode_CompareWithASCIIString(name, "max_");
    if (is_lo && lo == Py_None && (nargs < 1)) lo = v;
    else if (is_hi && hi == Py_None && (nargs < 2)) hi = v;
    else fast = 0;
  }
  fast = fast && (lo != Py_None || hi != Py_None) && plain_bound(lo) && plain_bound(hi);
  PyObject *u = fast ? PyObject_GetAttr(self, s_uop) : NULL, *d = NULL, *shape, *device, *dtype, *out = NULL, *ret = NULL;
  if (fast && !u) return NULL;
  int is = fast ? float_node(u, &d, &shape, &device, &dtype) : 0;
  if (is < 0) goto done;
  if (!is) {
    PyObject *pos = PyTuple_New(nargs + 1), *kw = nk ? PyDict_New() : NULL, *m = NULL;
    if (pos && (!nk || kw)) {
      PyTuple_SET_ITEM(pos, 0, Py_NewRef(self));
      for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(pos, i + 1, Py_NewRef(args[i]));
      int bad = 0;
      for (Py_ssize_t k = 0; k < nk && !bad; k++) bad = PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, k), args[nargs + k]);
      if (!bad) m = PyObject_Call(tensor_clip_py, pos, kw);
    }
    Py_XDECREF(pos); Py_XDECREF(kw);
    ret = m;
    goto done;
  }
  out = Py_NewRef(u);
  PyObject *bounds[2] = {lo, hi};
  for (int i = 0; i < 2; i++) {
    if (bounds[i] == Py_None) continue;
    PyObject *c = const_node(bounds[i], dtype, device, shape), *next;
    if (!c) goto done;
    next = i == 0 ? where_less(out, c, c, out, dtype, shape, device) : where_less(c, out, c, out, dtype, shape, device);
    Py_DECREF(c);
    Py_SETREF(out, next);
    if (!out) goto done;
  }
  if (!set_derivative(out, u, clamp_rule(lo, hi))) ret = wrap((PyObject *)Py_TYPE(self), out);
done:
  Py_XDECREF(u); Py_XDECREF(d); Py_XDECREF(out);
  return ret;
}

static PyMethodDef uop_relu_def = {"relu", uop_relu, METH_NOARGS, "relu($self, /)\n--\n\nmax(x, 0) with torch's NaN, -0.0 and gradient rules"};
static PyMethodDef tensor_relu_def = {"relu", tensor_relu, METH_NOARGS, "relu($self, /)\n--\n\nmax(x, 0) with torch's NaN, -0.0 and gradient rules"};
static PyMethodDef tensor_clip_def = {"clip", (PyCFunction)(void (*)(void))tensor_clip, METH_FASTCALL | METH_KEYWORDS,
  "clip($self, /, min_=None, max_=None, *, min=None, max=None)\n--\n\nBound the values (NaN passes through); bounds are numbers or tensors"};

/* ---- the schedule cache's key: schedule/cache.py's Walk.__init__ loop */

static PyObject *op_value(PyObject *op) {  /* op._value_, borrowed (the Enum's int, hashed without Python code) */
  PyObject *v = PyDict_GetItemWithError(op_values, op);
  if (!v && !PyErr_Occurred()) PyErr_Format(PyExc_KeyError, "unknown op %R", op);
  return v;
}

/* const_key (Walk._const_key): (type, exact bits) for floats, (type, value) otherwise */
static PyObject *const_key(PyObject *v) {
  if (PyFloat_CheckExact(v)) {
    double d = PyFloat_AS_DOUBLE(v);
    unsigned long long bits64;
    unsigned char b[8];
    memcpy(&bits64, &d, 8);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(bits64 >> (8 * i));  /* struct.pack("<d") */
    PyObject *bits = PyBytes_FromStringAndSize((const char *)b, 8);
    if (!bits) return NULL;
    PyObject *ret = PyTuple_Pack(2, (PyObject *)Py_TYPE(v), bits);
    Py_DECREF(bits);
    return ret;
  }
  return PyTuple_Pack(2, (PyObject *)Py_TYPE(v), v);
}

/* a node's field, borrowed from its __dict__ (where UOpMeta puts op, dtype, src and arg); NULL with an error if absent */
static PyObject *field(PyObject *d, PyObject *name) {
  PyObject *v = PyDict_GetItemWithError(d, name);
  if (!v && !PyErr_Occurred()) PyErr_Format(PyExc_AttributeError, "a node without %U", name);
  return v;
}

/* the walk's stack: borrowed nodes (every one is reachable from the sink, which the caller holds, through immutable
   src tuples) and NULL markers */
typedef struct { PyObject **items; Py_ssize_t n, cap; } Stack;
static int push(Stack *st, PyObject *u) {
  if (st->n == st->cap) {
    Py_ssize_t cap = st->cap ? 2 * st->cap : 256;
    PyObject **items = PyMem_Realloc(st->items, cap * sizeof(PyObject *));
    if (!items) { PyErr_NoMemory(); return -1; }
    st->items = items;
    st->cap = cap;
  }
  st->items[st->n++] = u;
  return 0;
}

/* the walk's nodes by address (open addressing): each seen node, with its entry's position in the key once it has one
   (an int it owns; NULL before) */
typedef struct { PyObject *node, *pos; } Slot;
typedef struct { Slot *slots; size_t mask, n; } Seen;
static Slot *slot_of(Seen *m, PyObject *u) {
  size_t i = ((size_t)u >> 4) * 0x9E3779B97F4A7C15ull >> 20 & m->mask;
  while (m->slots[i].node && m->slots[i].node != u) i = (i + 1) & m->mask;
  return &m->slots[i];
}
/* u's slot, added if new (*added says which); NULL: out of memory */
static Slot *see(Seen *m, PyObject *u, int *added) {
  if (2 * (m->n + 1) > m->mask + 1) {  /* (kept at most half full) */
    Seen bigger = {PyMem_Calloc(2 * (m->mask + 1), sizeof(Slot)), 2 * m->mask + 1, m->n};
    if (!bigger.slots) { PyErr_NoMemory(); return NULL; }
    for (size_t i = 0; i <= m->mask; i++) if (m->slots[i].node) *slot_of(&bigger, m->slots[i].node) = m->slots[i];
    PyMem_Free(m->slots);
    *m = bigger;
  }
  Slot *sl = slot_of(m, u);
  if ((*added = !sl->node)) { sl->node = u; m->n++; }
  return sl;
}
/* the position of u's entry (borrowed), or NULL with an error */
static PyObject *pos_of(Seen *m, PyObject *u) {
  PyObject *p = slot_of(m, u)->pos;
  if (!p) PyErr_SetString(PyExc_KeyError, "walk: a source was not keyed before its user");
  return p;
}
static void free_seen(Seen *m) {
  for (size_t i = 0; m->slots && i <= m->mask; i++) Py_XDECREF(m->slots[i].pos);
  PyMem_Free(m->slots);
}

/* a node's src as the walk reads it: a tuple, with a source for a BIND or SHRINK (else an error set, and 0) */
static int good_src(PyObject *src, PyObject *op) {
  if (PyTuple_Check(src) && (PyTuple_GET_SIZE(src) > 0 || (op != BIND && op != SHRINK))) return 1;
  PyErr_Format(PyExc_TypeError, "walk: a %R node with src %R", op, src);
  return 0;
}

/* walk(w, sink, key) -> ok: cache._walk. Appends the scheduler's toposort to w.order and each node's entry to key (a
   list holding the key's header), numbers w.binds; entries of stop nodes (BUFFERs and realized nodes) come from w._stop(u),
   those of SHRINKs that are windows from w._shrink(u, source position). ok is False where the graph cannot be keyed. */
static PyObject *walk(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 3) return PyErr_Format(PyExc_TypeError, "walk takes 3 arguments");
  PyObject *w = args[0], *key = args[2];
  PyObject *order = PyObject_GetAttr(w, s_order), *binds = PyObject_GetAttr(w, s_binds), *ret = NULL, *d = NULL;
  Stack st = {NULL, 0, 0};
  Seen seen = {PyMem_Calloc(512, sizeof(Slot)), 511, 0};
  int ok = 1, added;
  if (!seen.slots) { PyErr_NoMemory(); goto done; }
  if (!order || !binds || push(&st, args[1])) goto done;
  if (!PyList_Check(key) || !PyList_Check(order) || !PyDict_Check(binds)) { PyErr_SetString(PyExc_TypeError, "walk: key and w.order must be lists, w.binds a dict"); goto done; }
  /* a NULL on the stack means "the node under it has all its sources done"; sources are pushed even when seen and
     skipped when popped: toposort's order without a filter */
  while (st.n) {
    PyObject *u = st.items[--st.n], *op, *src, *ent;
    Slot *sl;
    Py_CLEAR(d);
    if (u) {
      if (!(sl = see(&seen, u, &added))) goto done;
      if (!added) continue;
      if (!(d = node_dict(u)) || !(op = field(d, s_op))) goto done;
      int realized = PyDict_Contains(d, REALIZED);
      if (realized < 0) goto done;
      if (op != BUFFER && !realized) {
        if (!(src = field(d, s_src)) || !good_src(src, op) || push(&st, u) || push(&st, NULL)) goto done;
        /* a bound value is not walked (not part of the key): the order lacks it (Walk.order_ok) */
        if (op == BIND) { if (push(&st, PyTuple_GET_ITEM(src, 0))) goto done; }
        else for (Py_ssize_t i = PyTuple_GET_SIZE(src) - 1; i >= 0; i--) if (push(&st, PyTuple_GET_ITEM(src, i))) goto done;
        continue;
      }
      /* a stop node: toposort appends it right away */
      if (PyList_Append(order, u)) goto done;
      if (!ok) continue;
      if (!(ent = PyObject_CallMethodOneArg(w, s_stop, u))) goto done;
      if (ent == Py_None) { ok = 0; Py_DECREF(ent); continue; }
      sl = slot_of(&seen, u);  /* (the callback may not add nodes, but look again all the same) */
      int bad = !(sl->pos = PyLong_FromSsize_t(PyList_GET_SIZE(key))) || PyList_Append(key, ent);
      Py_DECREF(ent);
      if (bad) goto done;
      continue;
    }
    u = st.items[--st.n];
    if (PyList_Append(order, u)) goto done;
    if (!ok) continue;
    if (!(d = node_dict(u)) || !(op = field(d, s_op))) goto done;
    if (op == COPY) { ok = 0; continue; }  /* a device transfer is not worth keying */
    PyObject *val = op_value(op), *dtype = field(d, s_dtype), *pos;
    if (!val || !dtype || !(src = field(d, s_src)) || !(pos = PyLong_FromSsize_t(PyList_GET_SIZE(key)))) goto done;
    slot_of(&seen, u)->pos = pos;
    if (op == BIND) {
      PyObject *n = PyLong_FromSsize_t(PyDict_GET_SIZE(binds)), *r;
      if (!n) goto done;
      r = PyDict_SetDefault(binds, u, n);
      Py_DECREF(n);
      if (!r || !(r = pos_of(&seen, PyTuple_GET_ITEM(src, 0))) || PyList_Append(key, val) || PyList_Append(key, dtype) ||
          PyList_Append(key, r)) goto done;
      continue;
    }
    if (op == SHRINK) {  /* a window of an input, or None: then keyed as any node */
      PyObject *r = pos_of(&seen, PyTuple_GET_ITEM(src, 0));
      if (!r || !(ent = PyObject_CallMethodObjArgs(w, s_shrink, u, r, NULL))) goto done;
      if (ent != Py_None) {
        int bad = PyList_Append(key, ent);
        Py_DECREF(ent);
        if (bad) goto done;
        continue;
      }
      Py_DECREF(ent);
    }
    /* (op value, dtype, arg, source count, source positions), flat in the key */
    Py_ssize_t n = PyTuple_GET_SIZE(src);
    PyObject *arg = field(d, s_arg), *count = PyLong_FromSsize_t(n);
    if (!arg || !count) { Py_XDECREF(count); goto done; }
    PyObject *k = op == CONST ? const_key(arg) : Py_NewRef(arg);
    int bad = !k || PyList_Append(key, val) || PyList_Append(key, dtype) || PyList_Append(key, k) || PyList_Append(key, count);
    Py_XDECREF(k);
    Py_DECREF(count);
    for (Py_ssize_t i = 0; i < n && !bad; i++) {
      PyObject *r = pos_of(&seen, PyTuple_GET_ITEM(src, i));
      bad = !r || PyList_Append(key, r);
    }
    if (bad) goto done;
  }
  ret = PyBool_FromLong(ok);
done:
  PyMem_Free(st.items);
  free_seen(&seen);
  Py_XDECREF(d);
  Py_XDECREF(order);
  Py_XDECREF(binds);
  return ret;
}

/* ---- launching a CPU kernel: runtime/ops_cpu._run_task(prg, mems, var_vals) */

typedef void (*task_fn)(void **bufs, const int *vars, int core_id, int n_cores);
typedef int (*pool_fn)(task_fn fn, void **bufs, const int *vars, int n);
#define MAX_ARGS 256

/* an int as a C value (steals it); -1 with an error */
static long long as_int(PyObject *v) {
  if (!v) return -1;
  long long r = PyLong_AsLongLong(v);
  Py_DECREF(v);
  return r;
}

/* on cpu_count() threads (looked up in runtime/ops_cpu at each call, as the Python version does) through
   pool_address()'s pool if prg.parallel, else on one */
static PyObject *run_task(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 3) return PyErr_Format(PyExc_TypeError, "_run_task takes 3 arguments");
  PyObject *prg = args[0], *mems = args[1], *vals = args[2], *params = PyObject_GetAttr(prg, s_params);
  void *bufs[MAX_ARGS];
  int vars[MAX_ARGS];
  long long task = params ? as_int(PyObject_GetAttr(prg, s_task_addr)) : -1, pool = 0, n = 1;
  PyObject *par = task == -1 ? NULL : PyObject_GetAttr(prg, s_parallel);
  int parallel = par ? PyObject_IsTrue(par) : -1;
  Py_XDECREF(par);
  if (parallel == 1 && (n = as_int(PyObject_CallMethodNoArgs(ops_cpu, s_cpu_count))) > 1) pool = as_int(PyObject_CallMethodNoArgs(ops_cpu, s_pool_address));
  if (!PyErr_Occurred() && !task) PyErr_SetString(PyExc_ValueError, "_run_task: a program without a task address");
  if (PyErr_Occurred()) { Py_XDECREF(params); return NULL; }
  Py_ssize_t np = PyTuple_Check(params) ? PyTuple_GET_SIZE(params) : -1, nv = PyList_Check(vals) ? PyList_GET_SIZE(vals) : -1;
  int plain = np >= 0 && PyList_Check(mems) && nv >= 0 && np <= MAX_ARGS && nv <= MAX_ARGS && n >= 1 && n <= INT_MAX;
  for (Py_ssize_t i = 0; plain && i < np; i++) {  /* mems[param][1]: the buffer's address */
    Py_ssize_t j = PyLong_AsSsize_t(PyTuple_GET_ITEM(params, i));
    PyObject *mem = (j >= 0 && j < PyList_GET_SIZE(mems)) ? PyList_GET_ITEM(mems, j) : NULL;
    if ((plain = mem && PyTuple_Check(mem) && PyTuple_GET_SIZE(mem) >= 2 && PyLong_CheckExact(PyTuple_GET_ITEM(mem, 1))))
      bufs[i] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(mem, 1));
  }
  Py_DECREF(params);
  for (Py_ssize_t i = 0; plain && i < nv && i < PyList_GET_SIZE(vals); i++) {
    int overflow = 0;
    long v = PyLong_Check(PyList_GET_ITEM(vals, i)) ? PyLong_AsLongAndOverflow(PyList_GET_ITEM(vals, i), &overflow) : 0;
    if ((plain = PyLong_Check(PyList_GET_ITEM(vals, i)) && !overflow && v >= INT_MIN && v <= INT_MAX)) vars[i] = (int)v;
  }
  if (PyErr_Occurred()) return NULL;
  /* anything else (more than MAX_ARGS buffers or variables, a value beyond an int, other containers): ctypes' version */
  if (!plain) return PyObject_Vectorcall(run_task_py, args, 3, NULL);
  task_fn fn = (task_fn)(uintptr_t)task;
  int threads = (int)n;
  Py_BEGIN_ALLOW_THREADS
  if (threads == 1 || !pool || ((pool_fn)(uintptr_t)pool)(fn, bufs, vars, threads) != 0)
    for (int i = 0; i < threads; i++) fn(bufs, vars, i, threads);  /* one thread, or no worker could be started */
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

/* ---- basic indexing: tensor/indexing._plain_view(u, indices) for ints, step-1 slices, None and one ... (other steps:
   the Python function) */

static PyObject *pair(Py_ssize_t a, Py_ssize_t b) { return Py_BuildValue("(nn)", a, b); }

static PyObject *plain_view(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs != 2) return PyErr_Format(PyExc_TypeError, "_plain_view takes 2 arguments");
  PyObject *u = args[0], *indices = args[1];
  PyObject *idx = PyTuple_CheckExact(indices) ? Py_NewRef(indices) : PyTuple_Pack(1, indices);
  PyObject *shape = idx ? PyObject_GetAttr(u, s_shape) : NULL, *vshape = shape ? PyObject_GetAttr(u, s_vshape) : NULL;
  PyObject *arg = NULL, *out = NULL, *ret = NULL, *v = NULL;
  if (!vshape) goto done;
  if (vshape != shape || !PyTuple_Check(shape)) { ret = Py_NewRef(Py_None); goto done; }
  Py_ssize_t ndim = PyTuple_GET_SIZE(shape), n = PyTuple_GET_SIZE(idx), rest = ndim, d = 0;
  for (Py_ssize_t k = 0; k < n; k++) {
    PyObject *i = PyTuple_GET_ITEM(idx, k);
    if (PyLong_CheckExact(i)) rest--;
    else if (PySlice_Check(i)) {
      PySliceObject *sl = (PySliceObject *)i;  /* int or None bounds, step None or 1: else the Python function */
      if ((sl->start != Py_None && !PyLong_CheckExact(sl->start)) || (sl->stop != Py_None && !PyLong_CheckExact(sl->stop)) ||
          (sl->step != Py_None && !(PyLong_CheckExact(sl->step) && PyLong_AsLong(sl->step) == 1))) {
        if (PyErr_Occurred()) PyErr_Clear();  /* (a step too large for a long is no step of 1) */
        ret = PyObject_Vectorcall(plain_view_py, args, 2, NULL);
        goto done;
      }
      rest--;
    }
  }
  if (rest < 0) { ret = Py_NewRef(Py_None); goto done; }  /* (more indexes than dims: the general path raises) */
  if (!(arg = PyList_New(0)) || !(out = PyList_New(0))) goto done;
  for (Py_ssize_t k = 0; k < n; k++) {
    PyObject *i = PyTuple_GET_ITEM(idx, k), *p = NULL;
    if (i == Py_None) { if (PyList_Append(out, one_int)) goto done; continue; }
    if (i == Py_Ellipsis && rest >= 0) {
      for (Py_ssize_t j = d; j < d + rest; j++) {
        PyObject *s = PyTuple_GET_ITEM(shape, j);
        Py_ssize_t size = PyLong_AsSsize_t(s);
        if ((size == -1 && PyErr_Occurred()) || !(p = pair(0, size)) || PyList_Append(arg, p) || PyList_Append(out, s)) { Py_XDECREF(p); goto done; }
        Py_CLEAR(p);
      }
      d += rest;
      rest = -1;  /* (a second ... is the general path's) */
      continue;
    }
    if (!PyLong_CheckExact(i) && !PySlice_Check(i)) { ret = Py_NewRef(Py_None); goto done; }
    Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
    if (size == -1 && PyErr_Occurred()) goto done;
    if (PyLong_CheckExact(i)) {
      int overflow;
      long long x = PyLong_AsLongLongAndOverflow(i, &overflow);
      if (overflow || x < -size || x >= size) { ret = Py_NewRef(Py_None); goto done; }  /* (out of range: the general path raises) */
      if (x < 0) x += size;
      if (!(p = pair((Py_ssize_t)x, (Py_ssize_t)x + 1)) || PyList_Append(arg, p)) { Py_XDECREF(p); goto done; }
    } else {
      Py_ssize_t b, e, st;
      if (PySlice_Unpack(i, &b, &e, &st) < 0) goto done;
      Py_ssize_t cnt = PySlice_AdjustIndices(size, &b, &e, st);  /* (slice.indices(size); step 1) */
      PyObject *c = PyLong_FromSsize_t(cnt);
      if (!c || !(p = pair(b, e > b ? e : b)) || PyList_Append(arg, p) || PyList_Append(out, c)) { Py_XDECREF(c); Py_XDECREF(p); goto done; }
      Py_DECREF(c);
    }
    Py_DECREF(p);
    d++;
  }
  int full = 1;
  for (Py_ssize_t j = d; j < ndim; j++) {
    PyObject *s = PyTuple_GET_ITEM(shape, j), *p = pair(0, PyLong_AsSsize_t(s));
    if (!p || PyErr_Occurred() || PyList_Append(arg, p) || PyList_Append(out, s)) { Py_XDECREF(p); goto done; }
    Py_DECREF(p);
  }
  Py_ssize_t na = PyList_GET_SIZE(arg);
  PyObject *sizes = PyTuple_New(na), *arg_t = sizes ? PyList_AsTuple(arg) : NULL;
  if (!arg_t) { Py_XDECREF(sizes); goto done; }
  for (Py_ssize_t j = 0; j < na; j++) {  /* the shrink's sizes; is it the whole shape? */
    PyObject *pr = PyList_GET_ITEM(arg, j);
    Py_ssize_t b = PyLong_AsSsize_t(PyTuple_GET_ITEM(pr, 0)), e = PyLong_AsSsize_t(PyTuple_GET_ITEM(pr, 1));
    PyTuple_SET_ITEM(sizes, j, PyLong_FromSsize_t(e - b));
    if (!PyTuple_GET_ITEM(sizes, j)) { Py_DECREF(sizes); Py_DECREF(arg_t); goto done; }
    full = full && b == 0 && e == PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, j));
  }
  v = Py_NewRef(u);
  if (!full) {
    PyObject *margs[4] = {SHRINK, u, sizes, arg_t};
    Py_SETREF(v, movement(NULL, margs, 4));
  }
  Py_DECREF(arg_t);
  if (!v) { Py_DECREF(sizes); goto done; }
  PyObject *out_t = PyList_AsTuple(out), *vs = out_t ? PyObject_GetAttr(v, s_shape) : NULL;
  int same = vs ? PyObject_RichCompareBool(vs, out_t, Py_EQ) : -1;
  Py_DECREF(sizes);
  Py_XDECREF(vs);
  if (same < 0) { Py_XDECREF(out_t); goto done; }
  if (same) ret = Py_NewRef(v);
  else {
    PyObject *margs[3] = {RESHAPE, v, out_t};
    ret = movement(NULL, margs, 3);
  }
  Py_DECREF(out_t);
done:
  Py_XDECREF(idx); Py_XDECREF(shape); Py_XDECREF(vshape); Py_XDECREF(arg); Py_XDECREF(out); Py_XDECREF(v);
  return ret;
}

/* ---- setup: the Python objects above, by name */

static int take(PyObject *objs, const char *name, PyObject **slot) {
  PyObject *v = PyDict_GetItemString(objs, name);
  if (!v) { PyErr_Format(PyExc_KeyError, "native setup: missing %s", name); return -1; }
  Py_XSETREF(*slot, Py_NewRef(v));
  return 0;
}

static PyObject *setup(PyObject *mod, PyObject *objs) {
  if (!PyDict_Check(objs)) return PyErr_Format(PyExc_TypeError, "setup takes a dict");
  if (take(objs, "UOp", &UOp) || take(objs, "Tensor", &Tensor) || take(objs, "KeyRef", &KeyRef) ||
      take(objs, "TensorRef", &TensorRef) || take(objs, "ucache_refs", &ucache_refs) || take(objs, "INTS", &INTS) ||
      take(objs, "void", &void_dtype) || take(objs, "bool", &bool_dtype) || take(objs, "op_values", &op_values) ||
      take(objs, "BUFFER", &BUFFER) || take(objs, "RESHAPE", &RESHAPE) || take(objs, "BIND", &BIND) || take(objs, "CONST", &CONST) || take(objs, "COPY", &COPY) ||
      take(objs, "SHRINK", &SHRINK) || take(objs, "REALIZED", &REALIZED) || take(objs, "float_dtypes", &float_dtypes) ||
      take(objs, "comparisons", &comparisons) || take(objs, "consts", &consts) || take(objs, "lazy", &lazy) ||
      take(objs, "tensor_const", &tensor_const) || take(objs, "tensor_unregister", &tensor_unregister) ||
      take(objs, "ucache_forget", &ucache_forget) || take(objs, "CMPLT", &CMPLT) || take(objs, "WHERE", &WHERE) ||
      take(objs, "DERIVATIVE", &DERIVATIVE) || take(objs, "relu_vjp", &relu_vjp) || take(objs, "relu_py", &relu_py) ||
      take(objs, "tensor_relu_py", &tensor_relu_py) || take(objs, "tensor_clip_py", &tensor_clip_py) || take(objs, "partial", &partial) ||
      take(objs, "clamp_vjp", &clamp_vjp) || take(objs, "ops_cpu", &ops_cpu) || take(objs, "plain_view_py", &plain_view_py) ||
      take(objs, "run_task_py", &run_task_py)) return NULL;
  if (!(ref_key = member_of(KeyRef, "key")) || !(ref_group = member_of(TensorRef, "group"))) return NULL;
  if (!PyType_IsSubtype((PyTypeObject *)TensorRef, (PyTypeObject *)KeyRef)) return PyErr_Format(PyExc_TypeError, "TensorRef must be a KeyRef");
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
  {"setup", setup, METH_O, "hand over the Python objects the functions below use"},
  {"uop_new", (PyCFunction)(void (*)(void))uop_new, METH_FASTCALL | METH_KEYWORDS, "UOpMeta.__call__ without cls"},
  {"arg_key", py_arg_key, METH_O, "ops._arg_key"},
  {"forgetter", forgetter, METH_O, "a WeakValueCache's weak-reference callback, for its dict"},
  {"unregister", unregister, METH_O, "the live-tensor registry's weak-reference callback"},
  {"fast_binary", (PyCFunction)(void (*)(void))fast_binary, METH_FASTCALL, "Tensor._fast_binary"},
  {"elementwise", (PyCFunction)(void (*)(void))elementwise, METH_FASTCALL, "ops._elementwise"},
  {"tensor_const", (PyCFunction)(void (*)(void))py_tensor_const, METH_FASTCALL, "OpBuilder.tensor_const"},
  {"dunders", (PyCFunction)(void (*)(void))dunders, METH_FASTCALL, "Tensor's arithmetic dunders as method descriptors"},
  {"method", (PyCFunction)(void (*)(void))method, METH_FASTCALL, "a C method as a method descriptor of a type"},
  {"run_task", (PyCFunction)(void (*)(void))run_task, METH_FASTCALL, "runtime/ops_cpu._run_task"},
  {"movement", (PyCFunction)(void (*)(void))movement, METH_FASTCALL, "ops._movement"},
  {"plain_sizes", plain_sizes, METH_O, "ops._plain_sizes"},
  {"plain_view", (PyCFunction)(void (*)(void))plain_view, METH_FASTCALL, "tensor/indexing._plain_view"},
  {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL, "the schedule cache's Walk loop"},
  {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fgcore", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fgcore(void) {
  s_op = PyUnicode_InternFromString("op"); s_dtype = PyUnicode_InternFromString("dtype");
  s_src = PyUnicode_InternFromString("src"); s_arg = PyUnicode_InternFromString("arg");
  s_uop = PyUnicode_InternFromString("_uop"); s_ref = PyUnicode_InternFromString("_ref");
  s_shape = PyUnicode_InternFromString("shape"); s_vshape = PyUnicode_InternFromString("vshape");
  s_device = PyUnicode_InternFromString("device"); s_tensor_level = PyUnicode_InternFromString("tensor_level");
  s_stop = PyUnicode_InternFromString("_stop"); s_shrink = PyUnicode_InternFromString("_shrink");
  s_params = PyUnicode_InternFromString("params"); s_task_addr = PyUnicode_InternFromString("task_addr");
  s_parallel = PyUnicode_InternFromString("parallel"); s_cpu_count = PyUnicode_InternFromString("cpu_count");
  s_pool_address = PyUnicode_InternFromString("pool_address");
  if (!s_params || !s_task_addr || !s_parallel || !s_cpu_count || !s_pool_address) return NULL;
  s_binds = PyUnicode_InternFromString("binds"); s_order = PyUnicode_InternFromString("order");
  if (PyType_Ready(&NodeKeyType) < 0) return NULL;
  empty_tuple = PyTuple_New(0);
  zero_int = PyLong_FromLong(0);
  one_int = PyLong_FromLong(1);
  minus_zero = PyFloat_FromDouble(-0.0);
  if (!s_op || !s_dtype || !s_src || !s_arg || !s_uop || !s_ref || !s_shape || !s_vshape || !s_device ||
      !s_tensor_level || !s_stop || !s_shrink || !s_binds || !s_order || !empty_tuple || !zero_int || !one_int || !minus_zero) return NULL;
  return PyModule_Create(&module);
}
