/* Page-locked host memory: a pool of blocks (cudaHostAlloc is slow and
 * cudaFreeHost synchronizes the device) and numpy arrays over them. */
#include "fastmog.h"
#include "docstrings.h"

#define BLOCK_GRANULE ((size_t)4096)
/* Cached pinned memory beyond this is freed rather than kept. */
#define CACHE_LIMIT ((size_t)1 << 30)
/* A cached block serves a request if it wastes at most this much. */
#define MAX_SLACK(n) ((n) + (size_t)(1 << 20))

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static int pool_take(fm_pinned_pool *pool, size_t nbytes, fm_pinned_block *out)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < pool->n_free; i++) {
        size_t size = pool->free_blocks[i].size;
        if (size >= nbytes && size <= MAX_SLACK(nbytes)
            && (best == SIZE_MAX || size < pool->free_blocks[best].size))
            best = i;
    }
    if (best == SIZE_MAX)
        return 0;
    *out = pool->free_blocks[best];
    pool->free_blocks[best] = pool->free_blocks[--pool->n_free];
    pool->bytes_cached -= out->size;
    return 1;
}

static void free_host_block(void *ptr)
{
    /* cudaFreeHost waits for the device; let other threads run meanwhile. */
    Py_BEGIN_ALLOW_THREADS
    (void)cudaFreeHost(ptr);
    Py_END_ALLOW_THREADS
}

void fm_pinned_pool_clear(fm_pinned_pool *pool)
{
    /* Detach the cached blocks before freeing them: freeing releases the GIL,
     * and another thread may use the pool meanwhile. */
    fm_pinned_block *blocks = pool->free_blocks;
    size_t n = pool->n_free;
    pool->free_blocks = NULL;
    pool->n_free = pool->cap_free = 0;
    pool->bytes_cached = 0;
    for (size_t i = 0; i < n; i++)
        free_host_block(blocks[i].ptr);
    PyMem_Free(blocks);
}

static void pool_give_back(fm_pinned_pool *pool, fm_pinned_block block)
{
    pool->bytes_in_use -= block.size;
    if (pool->bytes_cached + block.size > CACHE_LIMIT) {
        free_host_block(block.ptr);
        return;
    }
    if (pool->n_free == pool->cap_free) {
        size_t cap = pool->cap_free ? 2 * pool->cap_free : 16;
        fm_pinned_block *grown = PyMem_Realloc(pool->free_blocks, cap * sizeof(*grown));
        if (grown == NULL) {
            free_host_block(block.ptr);  /* cannot cache it: free it */
            return;
        }
        pool->free_blocks = grown;
        pool->cap_free = cap;
    }
    pool->free_blocks[pool->n_free++] = block;
    pool->bytes_cached += block.size;
}

static int pool_acquire(fm_state *st, size_t nbytes, fm_pinned_block *out)
{
    fm_pinned_pool *pool = &st->pinned;
    if (nbytes == 0)
        nbytes = 1;
    /* Staging buffers whose copies are done go back to the pool first. */
    fm_keepalive_sweep(st);
    if (!pool_take(pool, nbytes, out)) {
        size_t size = round_up(nbytes, BLOCK_GRANULE);
        void *ptr = NULL;
        cudaError_t err;
        Py_BEGIN_ALLOW_THREADS
        err = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
        Py_END_ALLOW_THREADS
        if (err == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            fm_pinned_pool_clear(pool);
            Py_BEGIN_ALLOW_THREADS
            err = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
            Py_END_ALLOW_THREADS
            if (err == cudaErrorMemoryAllocation) {
                (void)cudaGetLastError();
                PyErr_Format(PyExc_MemoryError,
                             "cannot allocate %zu bytes of pinned host memory "
                             "(cudaErrorMemoryAllocation)", size);
                return -1;
            }
        }
        if (err != cudaSuccess)
            return fm_cuda_fail(st, err, "allocating %zu bytes of pinned host memory", size);
        out->ptr = ptr;
        out->size = size;
        pool->n_host_allocs++;
    }
    pool->bytes_in_use += out->size;
    return 0;
}

fm_PinnedBuffer *fm_pinned_buffer_new(fm_state *st, size_t nbytes)
{
    fm_pinned_block block = {NULL, 0};
    fm_PinnedBuffer *self = PyObject_New(fm_PinnedBuffer, st->PinnedBuffer_type);
    if (self == NULL)
        return NULL;
    self->ptr = NULL;
    self->size = 0;
    if (pool_acquire(st, nbytes, &block) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->ptr = block.ptr;
    self->size = block.size;
    return self;
}

static void PinnedBuffer_dealloc(PyObject *op)
{
    fm_PinnedBuffer *self = (fm_PinnedBuffer *)op;
    PyTypeObject *tp = Py_TYPE(op);
    if (self->ptr != NULL) {
        fm_pinned_block block = {self->ptr, self->size};
        pool_give_back(&fm_state_of(op)->pinned, block);
        self->ptr = NULL;
    }
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *PinnedBuffer_repr(PyObject *op)
{
    fm_PinnedBuffer *self = (fm_PinnedBuffer *)op;
    return PyUnicode_FromFormat("<fastmog._PinnedBuffer %zu bytes at %p>",
                                self->size, self->ptr);
}

static PyType_Slot PinnedBuffer_slots[] = {
    {Py_tp_dealloc, PinnedBuffer_dealloc},
    {Py_tp_repr, PinnedBuffer_repr},
    {Py_tp_doc, (void *)"Owner of one pooled block of pinned host memory (internal)."},
    {0, NULL},
};

PyType_Spec fm_pinned_buffer_spec = {
    .name = "fastmog._PinnedBuffer",
    .basicsize = sizeof(fm_PinnedBuffer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = PinnedBuffer_slots,
};

PyObject *fm_pinned_array(fm_state *st, PyArray_Descr *descr, int ndim, const npy_intp *dims)
{
    size_t nbytes = (size_t)PyDataType_ELSIZE(descr);
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0) {
            Py_DECREF(descr);
            PyErr_SetString(PyExc_ValueError, "negative dimensions are not allowed");
            return NULL;
        }
        if (dims[i] != 0 && nbytes > (size_t)PY_SSIZE_T_MAX / (size_t)dims[i]) {
            Py_DECREF(descr);
            PyErr_SetString(PyExc_ValueError, "array is too big");
            return NULL;
        }
        nbytes *= (size_t)dims[i];
    }
    fm_PinnedBuffer *buffer = fm_pinned_buffer_new(st, nbytes);
    if (buffer == NULL) {
        Py_DECREF(descr);
        return NULL;
    }
    PyObject *array = PyArray_NewFromDescr(&PyArray_Type, descr, ndim, (npy_intp *)dims,
                                           NULL, buffer->ptr, NPY_ARRAY_CARRAY, NULL);
    if (array == NULL) {
        Py_DECREF(buffer);
        return NULL;
    }
    /* The array never owns the block: its base does, and returns it to the
     * pool once the last view is gone. */
    if (PyArray_SetBaseObject((PyArrayObject *)array, (PyObject *)buffer) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    return array;
}

static int is_pinned_ptr(const void *ptr)
{
    struct cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return attr.type == cudaMemoryTypeHost;
}

int fm_is_pinned_range(const void *first, const void *last)
{
    return is_pinned_ptr(first) && is_pinned_ptr(last);
}

/* ---- module functions ----------------------------------------------------- */

static PyObject *pinned_new(PyObject *module, PyObject *args, PyObject *kwargs,
                            const char *format, int zero)
{
    static char *kwlist[] = {"shape", "dtype", NULL};
    fm_state *st = fm_state_of_module(module);
    PyArray_Dims shape = {NULL, 0};
    PyArray_Descr *descr = NULL;
    PyObject *array = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, PyArray_IntpConverter,
                                     &shape, PyArray_DescrConverter2, &descr))
        goto done;  /* the converters may have filled shape before failing */
    if (descr == NULL)
        descr = PyArray_DescrFromType(NPY_UINT8);
    if (PyDataType_REFCHK(descr)) {
        PyErr_SetString(PyExc_TypeError, "pinned arrays cannot hold Python objects");
        Py_DECREF(descr);
        goto done;
    }
    array = fm_pinned_array(st, descr, shape.len, shape.ptr);  /* steals descr */
    if (array != NULL && zero)
        memset(PyArray_DATA((PyArrayObject *)array), 0,
               (size_t)PyArray_NBYTES((PyArrayObject *)array));
done:
    PyDimMem_FREE(shape.ptr);
    return array;
}

static PyObject *pinned_empty(PyObject *module, PyObject *args, PyObject *kwargs)
{
    return pinned_new(module, args, kwargs, "O&|O&:pinned_empty", 0);
}

static PyObject *pinned_zeros(PyObject *module, PyObject *args, PyObject *kwargs)
{
    return pinned_new(module, args, kwargs, "O&|O&:pinned_zeros", 1);
}

static PyArrayObject *require_array(PyObject *arg)
{
    if (!PyArray_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "array must be a numpy array, not %.200s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return (PyArrayObject *)arg;
}

static PyObject *pinned_like(PyObject *module, PyObject *arg)
{
    PyArrayObject *a = require_array(arg);
    if (a == NULL)
        return NULL;
    PyArray_Descr *descr = PyArray_DESCR(a);
    if (PyDataType_REFCHK(descr)) {
        PyErr_SetString(PyExc_TypeError, "pinned arrays cannot hold Python objects");
        return NULL;
    }
    Py_INCREF(descr);
    return fm_pinned_array(fm_state_of_module(module), descr, PyArray_NDIM(a), PyArray_DIMS(a));
}

static PyObject *is_pinned(PyObject *module, PyObject *arg)
{
    PyArrayObject *a = require_array(arg);
    if (a == NULL)
        return NULL;
    if (PyArray_SIZE(a) == 0)
        Py_RETURN_FALSE;
    /* The array's extent: its lowest and highest addressed bytes. */
    const char *lo = PyArray_BYTES(a), *hi = PyArray_BYTES(a);
    for (int i = 0; i < PyArray_NDIM(a); i++) {
        npy_intp span = (PyArray_DIM(a, i) - 1) * PyArray_STRIDE(a, i);
        if (span < 0) lo += span; else hi += span;
    }
    return PyBool_FromLong(fm_is_pinned_range(lo, hi + PyArray_ITEMSIZE(a) - 1));
}

PyMethodDef fm_pinned_methods[] = {
    {"pinned_empty", (PyCFunction)(void (*)(void))pinned_empty,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_PINNED_EMPTY},
    {"pinned_zeros", (PyCFunction)(void (*)(void))pinned_zeros,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_PINNED_ZEROS},
    {"pinned_like", pinned_like, METH_O, FM_DOC_PINNED_LIKE},
    {"is_pinned", is_pinned, METH_O, FM_DOC_IS_PINNED},
    {NULL, NULL, 0, NULL},
};
