/* The driver call of Function.launch, made from C (optional: ptxdsl falls back to
 * cuda.bindings' cuLaunchKernelEx when this module is not built).
 *
 * cuda.bindings' Python-level cuLaunchKernelEx converts its four arguments back into C on
 * every call; ptxdsl already holds them as addresses (the CUlaunchConfig struct its cached
 * config wraps, the CUfunction, the packed kernelParams array), so the call is made here
 * through the driver's own entry point, which ptxdsl looks up once with cuGetProcAddress.
 *
 *   set_entry(address)                  the cuLaunchKernelEx entry point (0: unset)
 *   launch_ex(config, function, params) its CUresult, as an int; the GIL is released
 *                                       around the call, as cuda.bindings does
 *
 * The arguments' common cases are packed here too (runtime/args.py, `ArgPacker`): a spec
 * made once per kernel signature names each parameter's kind, offset and range, and
 * `launch_packed` converts exactly the values the generated Python `pack` takes without its
 * converters (an exact int in range, an exact float, a live DeviceBuffer, a TensorMap),
 * writes them into a buffer on this call's stack (the driver copies the values during the
 * call, so concurrent launches need no shared buffer) and launches. Anything else, or any
 * doubt (an int too wide, an f32 that overflows, more than STACK_BYTES of parameters),
 * returns -1 with nothing launched, and Python packs and reports as before: the C side
 * never decides that an argument is wrong.
 *
 *   set_types(DeviceBuffer, TensorMap)  the two classes whose instances are packed here
 *   make_spec(size, kinds)              a capsule: the parameters' total size and one
 *                                       (kind, bits, offset, lo, hi) tuple per parameter
 *   pack(spec, args, buffer)            True when packed into the buffer at that address
 *                                       (spec's size bytes), False: not here
 *   launch_packed(config, function, spec, args)  pack, then launch_ex: the CUresult, or
 *                                       -1 when the arguments were not packed here
 *
 * And the common launch itself, so that it runs no Python frame (`Function.launch` as
 * `functools.partial(fast_launch, state)`, runtime/launch.py):
 *
 *   fast_launch(state, grid, block, args=(), *, shared_mem=0, stream=None, cluster=None)
 *       state = (launch, tls, device, configs, function, spec): an int grid and block, the
 *       legacy default stream or a stream handle as an int, no cluster, this thread's device record equal to the
 *       kernel's device, a configuration already in `configs` and arguments C packs are
 *       launched here; anything else, and a launch the driver refused, is handed to
 *       `launch` (the Python method) with the same arguments, which checks, reports and
 *       launches as it always did. A launch the driver refused enqueued nothing, so
 *       handing it on launches once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
 *                           void **extra); CUresult is an enum (int-sized). */
typedef int (*launch_ex_fn)(const void *config, void *f, void **params, void **extra);

static launch_ex_fn entry = NULL;

/* An address from a Python int: TypeError for anything else, OverflowError when negative or
 * wider than 64 bits. */
static int address(PyObject *o, void **out)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (void *)(uintptr_t)v;
    return 0;
}

static PyObject *set_entry(PyObject *self, PyObject *arg)
{
    void *p;
    if (address(arg, &p) < 0)
        return NULL;
    entry = (launch_ex_fn)p;
    Py_RETURN_NONE;
}

/* The launch's config and function from args[0] and args[1] (addresses, neither null), once
 * the entry point is set; -1 with the error set, naming `who`, otherwise. */
static int launch_target(PyObject *const *args, const char *who, void **cfg, void **f)
{
    if (entry == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s: set_entry() was not called", who);
        return -1;
    }
    if (address(args[0], cfg) < 0 || address(args[1], f) < 0)
        return -1;
    if (*cfg == NULL || *f == NULL) {
        PyErr_Format(PyExc_ValueError, "%s: a null config or function", who);
        return -1;
    }
    return 0;
}

static PyObject *launch_ex(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "launch_ex(config, function, params): 3 addresses");
        return NULL;
    }
    void *cfg, *f, *params;
    if (launch_target(args, "launch_ex", &cfg, &f) < 0 || address(args[2], &params) < 0)
        return NULL;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = entry(cfg, f, (void **)params, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(err);
}


/* Parameter kinds of a spec; the values are runtime/args.py's C_* constants. */
enum { K_SLOW = 0, K_PTR = 1, K_UINT = 2, K_SINT = 3, K_F32 = 4, K_F64 = 5, K_MAP = 6 };
#define MAP_BYTES 128
/* Parameters packed on the stack: the classic 4 KB kernel-parameter limit (a larger list,
 * possible since CUDA 12.1, goes through Python's buffer). */
#define STACK_BYTES 4096
#define STACK_PARAMS 1024

typedef struct {
    int kind, bits;
    Py_ssize_t offset;
    long long lo;
    unsigned long long hi;
} param_t;

typedef struct {
    Py_ssize_t size, n;
    param_t p[];
} spec_t;

static PyObject *devbuf_type = NULL, *tmap_type = NULL, *str_ptr = NULL, *str_data = NULL;

static PyObject *set_types(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_types(DeviceBuffer, TensorMap)");
        return NULL;
    }
    Py_XDECREF(devbuf_type);
    Py_XDECREF(tmap_type);
    Py_INCREF(args[0]);
    Py_INCREF(args[1]);
    devbuf_type = args[0];
    tmap_type = args[1];
    Py_RETURN_NONE;
}

static void free_spec(PyObject *capsule)
{
    free(PyCapsule_GetPointer(capsule, "ptxdsl.argspec"));
}

static PyObject *make_spec(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "make_spec(size, kinds)");
        return NULL;
    }
    Py_ssize_t size = PyLong_AsSsize_t(args[0]);
    if (size == -1 && PyErr_Occurred())
        return NULL;
    if (size < 0) {
        PyErr_SetString(PyExc_ValueError, "make_spec: a negative size");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(args[1]);
    spec_t *spec = malloc(sizeof(spec_t) + (size_t)n * sizeof(param_t));
    if (spec == NULL)
        return PyErr_NoMemory();
    spec->size = size;
    spec->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        param_t *p = &spec->p[i];
        PyObject *t = PyTuple_GetItem(args[1], i);
        if (t == NULL || !PyTuple_Check(t) || PyTuple_Size(t) != 5) {
            free(spec);
            PyErr_SetString(PyExc_TypeError, "make_spec: a kind is (kind, bits, offset, lo, hi)");
            return NULL;
        }
        p->kind = (int)PyLong_AsLong(PyTuple_GetItem(t, 0));
        p->bits = (int)PyLong_AsLong(PyTuple_GetItem(t, 1));
        p->offset = PyLong_AsSsize_t(PyTuple_GetItem(t, 2));
        p->lo = PyLong_AsLongLong(PyTuple_GetItem(t, 3));
        p->hi = PyLong_AsUnsignedLongLong(PyTuple_GetItem(t, 4));
        if (PyErr_Occurred()) {
            free(spec);
            return NULL;
        }
        Py_ssize_t width = p->kind == K_MAP ? MAP_BYTES : p->bits / 8;
        if (p->kind < K_SLOW || p->kind > K_MAP || p->offset < 0 || p->offset + width > size ||
            (p->kind != K_MAP && p->kind != K_SLOW && p->bits != 8 && p->bits != 16 &&
             p->bits != 32 && p->bits != 64)) {
            free(spec);
            PyErr_SetString(PyExc_ValueError, "make_spec: a kind out of range");
            return NULL;
        }
    }
    PyObject *capsule = PyCapsule_New(spec, "ptxdsl.argspec", free_spec);
    if (capsule == NULL)
        free(spec);
    return capsule;
}

static void put(char *at, int bits, unsigned long long v)
{
    /* Hosts CUDA runs on are little-endian: the low bytes of v are the value. */
    uint8_t b8 = (uint8_t)v;
    uint16_t b16 = (uint16_t)v;
    uint32_t b32 = (uint32_t)v;
    switch (bits) {
    case 8: memcpy(at, &b8, 1); break;
    case 16: memcpy(at, &b16, 2); break;
    case 32: memcpy(at, &b32, 4); break;
    default: memcpy(at, &v, 8); break;
    }
}

/* 1: one argument written; 0: not one this code takes (no exception left set). */
static int put_arg(const param_t *p, char *buffer, PyObject *v)
{
    char *at = buffer + p->offset;
    switch (p->kind) {
    case K_PTR:
        if (devbuf_type != NULL && (PyObject *)Py_TYPE(v) == devbuf_type) {
            PyObject *ptr = PyObject_GetAttr(v, str_ptr);
            if (ptr == NULL) {
                PyErr_Clear();
                return 0;
            }
            int ok = PyLong_CheckExact(ptr);
            unsigned long long a = ok ? PyLong_AsUnsignedLongLong(ptr) : 0;
            Py_DECREF(ptr);
            if (!ok || (a == (unsigned long long)-1 && PyErr_Occurred())) {
                PyErr_Clear();
                return 0;
            }
            put(at, 64, a);
            return 1;
        }
        /* fall through: an address as an exact int */
    case K_UINT: {
        if (!PyLong_CheckExact(v))
            return 0;
        unsigned long long a = PyLong_AsUnsignedLongLong(v);
        if (a == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();      /* negative, or wider than 64 bits */
            return 0;
        }
        if (a > p->hi)
            return 0;
        put(at, p->kind == K_PTR ? 64 : p->bits, a);
        return 1;
    }
    case K_SINT: {
        if (!PyLong_CheckExact(v))
            return 0;
        long long a = PyLong_AsLongLong(v);
        if (a == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (a < p->lo || (a >= 0 && (unsigned long long)a > p->hi))
            return 0;
        put(at, p->bits, (unsigned long long)a);
        return 1;
    }
    case K_F32: {
        if (!PyFloat_CheckExact(v))
            return 0;
        double d = PyFloat_AsDouble(v);
        float f = (float)d;
        if (isinf(f) && !isinf(d))
            return 0;       /* struct's "f" refuses it: Python reports the parameter */
        memcpy(at, &f, 4);
        return 1;
    }
    case K_F64: {
        if (!PyFloat_CheckExact(v))
            return 0;
        double d = PyFloat_AsDouble(v);
        memcpy(at, &d, 8);
        return 1;
    }
    case K_MAP: {
        if (tmap_type == NULL || (PyObject *)Py_TYPE(v) != tmap_type)
            return 0;
        PyObject *data = PyObject_GetAttr(v, str_data);
        if (data == NULL) {
            PyErr_Clear();
            return 0;
        }
        char *bytes;
        Py_ssize_t len;
        int ok = PyBytes_CheckExact(data) && PyBytes_AsStringAndSize(data, &bytes, &len) == 0 &&
                 len == MAP_BYTES;
        if (ok)
            memcpy(at, bytes, MAP_BYTES);
        else
            PyErr_Clear();
        Py_DECREF(data);
        return ok;
    }
    default:
        return 0;
    }
}

/* 1: every argument packed into `buffer` (the spec's size) and, when `params` is given, the
 * kernelParams array filled; 0: not here; -1: not a spec (error set). */
static int pack_args(PyObject *capsule, PyObject *args, char *buffer, void **params)
{
    spec_t *spec = PyCapsule_GetPointer(capsule, "ptxdsl.argspec");
    if (spec == NULL)
        return -1;
    if (!PyTuple_CheckExact(args) || PyTuple_Size(args) != spec->n)
        return 0;
    /* The padding between parameters reads as zeros, as struct.pack_into leaves it. */
    memset(buffer, 0, (size_t)spec->size);
    for (Py_ssize_t i = 0; i < spec->n; i++) {
        if (!put_arg(&spec->p[i], buffer, PyTuple_GetItem(args, i)))
            return 0;
        if (params != NULL)
            params[i] = buffer + spec->p[i].offset;
    }
    return 1;
}

static PyObject *pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    void *buffer;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "pack(spec, args, buffer)");
        return NULL;
    }
    if (address(args[2], &buffer) < 0)
        return NULL;
    if (buffer == NULL) {
        PyErr_SetString(PyExc_ValueError, "pack: a null buffer");
        return NULL;
    }
    int r = pack_args(args[0], args[1], buffer, NULL);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

/* Pack `args` by the spec into a buffer on this stack and launch: 1 (the CUresult in *err),
 * 0 when the arguments are not packed here (nothing launched), -1 on a bad spec (error set). */
static int pack_and_launch(void *cfg, void *f, PyObject *capsule, PyObject *args, int *err)
{
    spec_t *spec = PyCapsule_GetPointer(capsule, "ptxdsl.argspec");
    if (spec == NULL)
        return -1;
    if (spec->size > STACK_BYTES || spec->n > STACK_PARAMS)
        return 0;
    /* 128-byte aligned, as a CUtensorMap parameter is declared (alignas(128)). */
    _Alignas(128) char buffer[STACK_BYTES];
    void *params[STACK_PARAMS];
    int r = pack_args(capsule, args, buffer, params);
    if (r <= 0)
        return r;
    Py_BEGIN_ALLOW_THREADS
    *err = entry(cfg, f, params, NULL);
    Py_END_ALLOW_THREADS
    return 1;
}

static PyObject *launch_packed(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "launch_packed(config, function, spec, args)");
        return NULL;
    }
    void *cfg, *f;
    int err;
    if (launch_target(args, "launch_packed", &cfg, &f) < 0)
        return NULL;
    int r = pack_and_launch(cfg, f, args[2], args[3], &err);
    if (r < 0)
        return NULL;
    return PyLong_FromLong(r == 0 ? -1 : err);
}

static PyObject *str_device = NULL, *zero = NULL;

/* The Python launch with the call's own arguments (state[0]). */
static PyObject *hand_on(PyObject *slow, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames)
{
    PyObject *pos = PyTuple_New(nargs);
    if (pos == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(pos, i, args[i]);
    }
    PyObject *kw = NULL;
    if (kwnames != NULL && PyTuple_Size(kwnames) > 0) {
        kw = PyDict_New();
        if (kw == NULL) {
            Py_DECREF(pos);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyTuple_Size(kwnames); i++) {
            if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, i), args[nargs + i]) < 0) {
                Py_DECREF(pos);
                Py_DECREF(kw);
                return NULL;
            }
        }
    }
    PyObject *r = PyObject_Call(slow, pos, kw);
    Py_DECREF(pos);
    Py_XDECREF(kw);
    return r;
}

static PyObject *fast_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargsf,
                             PyObject *kwnames)
{
    Py_ssize_t nargs = nargsf & ~((Py_ssize_t)1 << (8 * sizeof(Py_ssize_t) - 1));
    if (nargs < 1 || !PyTuple_Check(args[0]) || PyTuple_Size(args[0]) != 6) {
        PyErr_SetString(PyExc_TypeError, "fast_launch(state, grid, block, args=(), ...)");
        return NULL;
    }
    PyObject *state = args[0];
    PyObject *slow = PyTuple_GetItem(state, 0);
    PyObject *const *call = args + 1;
    Py_ssize_t ncall = nargs - 1;
    if (entry == NULL || ncall < 2 || ncall > 3)
        return hand_on(slow, call, ncall, kwnames);
    PyObject *grid = call[0], *block = call[1];
    PyObject *kargs = ncall == 3 ? call[2] : NULL, *shared = zero, *stream = Py_None;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GetItem(kwnames, i), *v = call[ncall + i];
        if (PyUnicode_CompareWithASCIIString(name, "shared_mem") == 0)
            shared = v;
        else if (PyUnicode_CompareWithASCIIString(name, "args") == 0 && kargs == NULL)
            kargs = v;
        else if (PyUnicode_CompareWithASCIIString(name, "stream") == 0 &&
                 (v == Py_None || PyLong_CheckExact(v)))
            stream = v;     /* a handle as an int is its own key, as in the Python launch */
        else if (PyUnicode_CompareWithASCIIString(name, "cluster") == 0 && v == Py_None)
            continue;
        else
            return hand_on(slow, call, ncall, kwnames);
    }
    if (kargs == NULL || !PyLong_CheckExact(grid) || !PyLong_CheckExact(block) ||
        !PyLong_CheckExact(shared))
        return hand_on(slow, call, ncall, kwnames);
    PyObject *recorded = PyObject_GetAttr(PyTuple_GetItem(state, 1), str_device);
    if (recorded == NULL) {
        PyErr_Clear();
        return hand_on(slow, call, ncall, kwnames);
    }
    int same = PyObject_RichCompareBool(recorded, PyTuple_GetItem(state, 2), Py_EQ);
    Py_DECREF(recorded);
    if (same != 1) {
        PyErr_Clear();
        return hand_on(slow, call, ncall, kwnames);
    }
    PyObject *key = PyTuple_Pack(5, grid, block, shared, stream, Py_None);
    if (key == NULL)
        return NULL;
    PyObject *cfg_obj = PyDict_GetItemWithError(PyTuple_GetItem(state, 3), key);   /* borrowed */
    Py_DECREF(key);
    void *cfg, *f;
    if (cfg_obj == NULL || !PyLong_CheckExact(cfg_obj) || address(cfg_obj, &cfg) < 0 ||
        cfg == NULL || address(PyTuple_GetItem(state, 4), &f) < 0 || f == NULL) {
        PyErr_Clear();
        return hand_on(slow, call, ncall, kwnames);
    }
    int err;
    int r = pack_and_launch(cfg, f, PyTuple_GetItem(state, 5), kargs, &err);
    if (r < 0)
        return NULL;
    /* Not packed here, or refused by the driver (nothing launched): the Python launch packs,
     * retries and reports. */
    if (r == 0 || err != 0)
        return hand_on(slow, call, ncall, kwnames);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_entry", set_entry, METH_O, "Set the cuLaunchKernelEx entry point (an address)."},
    {"launch_ex", (PyCFunction)(void (*)(void))launch_ex, METH_FASTCALL,
     "launch_ex(config, function, params) -> CUresult: cuLaunchKernelEx from C."},
    {"set_types", (PyCFunction)(void (*)(void))set_types, METH_FASTCALL,
     "set_types(DeviceBuffer, TensorMap): the classes packed here."},
    {"make_spec", (PyCFunction)(void (*)(void))make_spec, METH_FASTCALL,
     "make_spec(size, kinds) -> a packing spec (capsule)."},
    {"pack", (PyCFunction)(void (*)(void))pack, METH_FASTCALL,
     "pack(spec, args, buffer) -> whether the arguments were packed into the buffer."},
    {"launch_packed", (PyCFunction)(void (*)(void))launch_packed, METH_FASTCALL,
     "launch_packed(config, function, spec, args) -> CUresult, or -1: not packed here."},
    {"fast_launch", (PyCFunction)(void (*)(void))fast_launch, METH_FASTCALL | METH_KEYWORDS,
     "fast_launch(state, grid, block, args=(), *, shared_mem=0, stream=None, cluster=None)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ptxdsl._launch_c",
    "cuLaunchKernelEx called from C (see the source's header comment).", -1, methods,
};

PyMODINIT_FUNC PyInit__launch_c(void)
{
    str_ptr = PyUnicode_InternFromString("_ptr");
    str_data = PyUnicode_InternFromString("data");
    str_device = PyUnicode_InternFromString("device");
    zero = PyLong_FromLong(0);
    if (str_ptr == NULL || str_data == NULL || str_device == NULL || zero == NULL)
        return NULL;
    return PyModule_Create(&module);
}
