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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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

static PyObject *launch_ex(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "launch_ex(config, function, params): 3 addresses");
        return NULL;
    }
    if (entry == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "launch_ex: set_entry() was not called");
        return NULL;
    }
    void *cfg, *f, *params;
    if (address(args[0], &cfg) < 0 || address(args[1], &f) < 0 ||
        address(args[2], &params) < 0)
        return NULL;
    if (cfg == NULL || f == NULL) {
        PyErr_SetString(PyExc_ValueError, "launch_ex: a null config or function");
        return NULL;
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = entry(cfg, f, (void **)params, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(err);
}

static PyMethodDef methods[] = {
    {"set_entry", set_entry, METH_O, "Set the cuLaunchKernelEx entry point (an address)."},
    {"launch_ex", (PyCFunction)(void (*)(void))launch_ex, METH_FASTCALL,
     "launch_ex(config, function, params) -> CUresult: cuLaunchKernelEx from C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ptxdsl._launch_c",
    "cuLaunchKernelEx called from C (see the source's header comment).", -1, methods,
};

PyMODINIT_FUNC PyInit__launch_c(void)
{
    return PyModule_Create(&module);
}
