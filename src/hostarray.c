/* Host arrays as images: the one dtype table, the one shape check and the one
 * host-image check every operation uses. */
#include "fastmog.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static const fm_dtype dtypes[] = {
    {NPY_UINT8, "uint8", 1, 'u', 1},
    {NPY_INT8, "int8", 1, 'i', 0},
    {NPY_UINT16, "uint16", 2, 'u', 1},
    {NPY_INT16, "int16", 2, 'i', 0},
    {NPY_UINT32, "uint32", 4, 'u', 1},
    {NPY_INT32, "int32", 4, 'i', 0},
    {NPY_FLOAT32, "float32", 4, 'f', 2},
    {NPY_FLOAT64, "float64", 8, 'f', 2},
};
#define N_DTYPES ((int)(sizeof dtypes / sizeof dtypes[0]))

const fm_dtype *fm_dtype_of(int type_num)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (dtypes[i].type_num == type_num)
            return &dtypes[i];
    return NULL;
}

const char *fm_dtype_name(int type_num)
{
    const fm_dtype *d = fm_dtype_of(type_num);
    return d ? d->name : "?";
}

int fm_dtype_size(int type_num)
{
    const fm_dtype *d = fm_dtype_of(type_num);
    return d ? d->itemsize : 0;
}

static int dtype_find(char kind, int itemsize)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (dtypes[i].kind == kind && dtypes[i].itemsize == itemsize)
            return dtypes[i].type_num;
    return -1;
}

int fm_dtype_from_descr(PyArray_Descr *descr)
{
    if (descr == NULL || !PyDataType_ISNOTSWAPPED(descr) || PyDataType_ISBOOL(descr))
        return -1;
    char kind = PyDataType_ISUNSIGNED(descr) ? 'u'
                : PyDataType_ISSIGNED(descr) ? 'i'
                : PyDataType_ISFLOAT(descr) ? 'f' : 0;
    return kind ? dtype_find(kind, (int)PyDataType_ELSIZE(descr)) : -1;
}

int fm_dtype_from_dlpack(uint8_t code, uint8_t bits, uint16_t lanes)
{
    if (lanes != 1 || bits % 8 != 0)
        return -1;
    for (int i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dl_code == code && dtypes[i].itemsize * 8 == bits
            && !(code == 0 && dtypes[i].kind != 'i'))
            return dtypes[i].type_num;
    return -1;
}

/* ---- shapes ---------------------------------------------------------------- */

int fm_image_shape_make(int ndim, const int64_t *dims, int type_num, const char *argname,
                        fm_image_shape *out)
{
    if (ndim != 2 && ndim != 3) {
        PyErr_Format(PyExc_ValueError, "%s must be H x W or H x W x C, got %d dimension%s",
                     argname, ndim, ndim == 1 ? "" : "s");
        return -1;
    }
    int elem = fm_dtype_size(type_num);
    if (elem == 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s has an unsupported dtype: use uint8, int8, uint16, int16, uint32, "
                     "int32, float32 or float64", argname);
        return -1;
    }
    int64_t h = dims[0], w = dims[1], c = ndim == 3 ? dims[2] : 1;
    if (h < 1 || w < 1) {
        PyErr_Format(PyExc_ValueError, "%s must not be empty, got height=%lld width=%lld",
                     argname, (long long)h, (long long)w);
        return -1;
    }
    if (c < 1 || c > 4) {
        PyErr_Format(PyExc_ValueError, "%s must have 1 to 4 channels, got %lld", argname,
                     (long long)c);
        return -1;
    }
    /* Each factor is checked before the product, so nothing wraps. */
    if (h > INT32_MAX || w > INT32_MAX / 32 || w * c * elem > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s of %lldx%lldx%lld is too large", argname,
                     (long long)h, (long long)w, (long long)c);
        return -1;
    }
    out->height = (int)h;
    out->width = (int)w;
    out->channels = (int)c;
    out->ndim = ndim;
    out->type_num = type_num;
    out->readonly = 0;
    return 0;
}

static const char *channel_list(unsigned mask, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int c = 1; c <= 4; c++)
        if (mask & FM_CHANNELS_BIT(c))
            n += (size_t)snprintf(buf + n, size - n, "%s%d", n ? ", " : "", c);
    return buf;
}

static const char *dtype_list(unsigned mask, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_DTYPES; i++)
        if (mask & FM_DTYPE_BIT(dtypes[i].type_num))
            n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " or " : "", dtypes[i].name);
    return buf;
}

int fm_image_rule_check(const fm_image_rule *rule, const fm_image_shape *shape,
                        const char *argname)
{
    char list[96];
    if (rule->dtypes && !(rule->dtypes & FM_DTYPE_BIT(shape->type_num))) {
        PyErr_Format(PyExc_TypeError, "%s must have dtype %s, not %s", argname,
                     dtype_list(rule->dtypes, list, sizeof list), fm_dtype_name(shape->type_num));
        return -1;
    }
    if (rule->channels && !(rule->channels & FM_CHANNELS_BIT(shape->channels))) {
        PyErr_Format(PyExc_ValueError, "%s has shape %dx%dx%d but must have %s channel%s",
                     argname, shape->height, shape->width, shape->channels,
                     channel_list(rule->channels, list, sizeof list),
                     rule->channels == FM_CHANNELS_BIT(1) ? "" : "s");
        return -1;
    }
    if ((rule->height > 0 && shape->height != rule->height)
        || (rule->width > 0 && shape->width != rule->width)) {
        PyErr_Format(PyExc_ValueError, "%s has shape %dx%d but %s is %dx%d", argname,
                     shape->height, shape->width, rule->like ? rule->like : "it must be",
                     rule->height, rule->width);
        return -1;
    }
    if (rule->max_height > 0 && shape->height > rule->max_height) {
        PyErr_Format(PyExc_ValueError, "%s has %d rows; at most %d are supported", argname,
                     shape->height, rule->max_height);
        return -1;
    }
    if (rule->writable && shape->readonly) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", argname);
        return -1;
    }
    return 0;
}

/* ---- host images ------------------------------------------------------------ */

int fm_host_image_check(PyObject *obj, const char *argname, const fm_image_rule *rule,
                        fm_host_image *out)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy array, not %.200s", argname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    int nd = PyArray_NDIM(a);
    int64_t dims[3] = {0, 0, 1};
    for (int i = 0; i < nd && i < 3; i++)
        dims[i] = PyArray_DIM(a, i);
    int type_num = fm_dtype_from_descr(PyArray_DESCR(a));
    if (type_num < 0 && (nd == 2 || nd == 3)) {
        PyErr_Format(PyExc_TypeError, "%s has dtype %R, which fastmog does not support",
                     argname, (PyObject *)PyArray_DESCR(a));
        return -1;
    }
    if (fm_image_shape_make(nd, dims, type_num, argname, &out->shape) < 0)
        return -1;
    out->shape.readonly = !PyArray_ISWRITEABLE(a);
    if (rule != NULL && fm_image_rule_check(rule, &out->shape, argname) < 0)
        return -1;

    const npy_intp *strides = PyArray_STRIDES(a);
    npy_intp elem = fm_dtype_size(type_num), c = out->shape.channels;
    npy_intp row_bytes = (npy_intp)fm_image_row_bytes(&out->shape);
    int pixels_ok = (dims[1] == 1 || strides[1] == c * elem) && (nd == 2 || c == 1 || strides[2] == elem);
    npy_intp row_stride = dims[0] == 1 ? row_bytes : strides[0];
    if (!pixels_ok || row_stride < row_bytes) {
        PyObject *got = PyObject_GetAttrString(obj, "strides");
        if (got != NULL)
            PyErr_Format(PyExc_ValueError,
                         "%s must have contiguous pixels within each row and rows in order "
                         "(strides %R); use numpy.ascontiguousarray()", argname, got);
        Py_XDECREF(got);
        return -1;
    }
    /* The kernels and the host loop read whole values. */
    if ((uintptr_t)PyArray_BYTES(a) % (uintptr_t)elem != 0 || row_stride % elem != 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s is not aligned to its %d-byte values; use numpy.ascontiguousarray()",
                     argname, (int)elem);
        return -1;
    }
    out->data = PyArray_BYTES(a);
    out->pitch = (size_t)row_stride;
    out->array = obj;
    return 0;
}

int fm_host_image_pinned(const fm_host_image *img)
{
    const char *last = img->data + img->pitch * (size_t)(img->shape.height - 1)
                       + fm_image_row_bytes(&img->shape) - 1;
    return fm_is_pinned_range(img->data, last);
}

/* Large copies are split over threads: one core's memcpy (about 10 GB/s on
 * the lent H200's host) is far below what PCIe takes, and a pageable frame's
 * copy into pinned memory sits on the critical path of every upload. How many
 * threads is best depends on where the frame lies: on that host a 4K grey
 * frame still in cache packed fastest on 4 threads (0.20 ms; 0.29 on 16),
 * while the pipeline over 40 frames in DRAM ran faster on all 16. So every
 * OpenMP thread by default; FASTMOG_PACK_THREADS=N caps them. Pieces are at
 * least FM_PACK_CHUNK, so small images stay on one thread. */
#define FM_PACK_CHUNK ((size_t)1 << 18)

static long pack_threads(void)
{
#ifdef _OPENMP
    long n = omp_get_max_threads();
#else
    long n = 1;
#endif
    const char *env = getenv("FASTMOG_PACK_THREADS");
    if (env != NULL) {
        long asked = strtol(env, NULL, 10);
        if (asked >= 1 && asked < n)
            n = asked;
    }
    return n;
}

static void pack_rows(const fm_host_image *img, char *dst)
{
    size_t row = fm_image_row_bytes(&img->shape);
    size_t total = row * (size_t)img->shape.height;
    long pieces = (long)(total / FM_PACK_CHUNK);
    long threads = pack_threads();
    if (pieces > threads)
        pieces = threads;
    if (pieces < 1)
        pieces = 1;
    const char *src = img->data;
    if (img->pitch == row) {
        /* Piece boundaries on 4 KiB pages: no two threads write one page. */
        size_t piece = ((total / (size_t)pieces) + 4095) & ~(size_t)4095;
#pragma omp parallel for schedule(static) num_threads(pieces) if (pieces > 1)
        for (long i = 0; i < pieces; i++) {
            size_t at = (size_t)i * piece;
            if (at < total)
                memcpy(dst + at, src + at, total - at < piece ? total - at : piece);
        }
        return;
    }
    long rows = img->shape.height;
#pragma omp parallel for schedule(static) num_threads(pieces) if (pieces > 1)
    for (long y = 0; y < rows; y++)
        memcpy(dst + (size_t)y * row, src + (size_t)y * img->pitch, row);
}

void fm_host_image_pack(const fm_host_image *img, void *dst)
{
    if (fm_image_row_bytes(&img->shape) * (size_t)img->shape.height < 2 * FM_PACK_CHUNK) {
        pack_rows(img, dst);
        return;
    }
    Py_BEGIN_ALLOW_THREADS
    pack_rows(img, dst);
    Py_END_ALLOW_THREADS
}

PyObject *fm_host_image_new_pinned(fm_state *st, const fm_image_shape *shape)
{
    npy_intp dims[3] = {shape->height, shape->width, shape->channels};
    return fm_pinned_array(st, PyArray_DescrFromType(shape->type_num), shape->ndim, dims);
}
