/* Every docstring fastmog's C code gives Python (types, methods, functions),
 * each opening with the text signature inspect.signature() and help() read:
 * the API's words in one place, apart from the code, as CPython keeps
 * Argument Clinic's in its clinic/ headers. Sections follow the .c files
 * that use them. */
#ifndef FASTMOG_DOCSTRINGS_H
#define FASTMOG_DOCSTRINGS_H

#include <Python.h>

/* ---- module functions: devices (device.c) -------------------------------- */

#define FM_DOC_CUDA_AVAILABLE PyDoc_STR( \
    "cuda_available($module, /)\n--\n\n" \
    "True if the CUDA driver is loaded and at least one GPU is usable.")

#define FM_DOC_DEVICE_COUNT PyDoc_STR( \
    "device_count($module, /)\n--\n\n" \
    "Number of usable CUDA devices; 0 where there is no GPU or driver.")

#define FM_DOC_CUDA_STATUS PyDoc_STR( \
    "_cuda_status($module, /)\n--\n\n" \
    "(error name, error text) of asking the runtime for devices: ('cudaSuccess',\n" \
    "...) when a GPU is usable. For diagnose().")

#define FM_DOC_VERSIONS PyDoc_STR( \
    "_versions($module, /)\n--\n\n" \
    "(runtime version, driver version) as CUDA encodes them (1000*major +\n" \
    "10*minor); the driver version is 0 where no driver is installed.")

#define FM_DOC_DEVICE_PROPERTIES PyDoc_STR( \
    "device_properties($module, device=None, /)\n--\n\n" \
    "A dict describing a CUDA device: name, compute capability, memory,\n" \
    "multiprocessors, L2 cache, PCI bus id, and stream_priorities: the\n" \
    "(least, greatest) priority a Stream may have (lower numbers run first).")

#define FM_DOC_MEM_GET_INFO PyDoc_STR( \
    "mem_get_info($module, device=None, /)\n--\n\n" \
    "(free, total) bytes of device memory, as cudaMemGetInfo reports them.")

/* ---- module functions: memory caches (devmem.c) -------------------------- */

#define FM_DOC_EMPTY_CACHE PyDoc_STR( \
    "empty_cache($module, /)\n--\n\n" \
    "Returns cached pinned blocks and device memory that no object uses to the\n" \
    "system. Freeing pinned memory synchronizes the device (CUDA does), so this\n" \
    "is for the end of a phase, not for the per-frame path.")

#define FM_DOC_MEMORY_STATS PyDoc_STR( \
    "memory_stats($module, /)\n--\n\n" \
    "A dict of fastmog's memory use: pinned bytes in use and cached, the number\n" \
    "of cudaHostAlloc calls so far, objects waiting for GPU work before release,\n" \
    "and per device the bytes reserved by and in use from fastmog's pool.")

/* ---- fastmog.Event (event.c) --------------------------------------------- */

#define FM_DOC_EVENT_RECORD PyDoc_STR( \
    "record($self, /, *, stream)\n--\n\n" \
    "Records this event at the current end of `stream`; returns self.")

#define FM_DOC_EVENT_SYNCHRONIZE PyDoc_STR( \
    "synchronize($self, /, *, timer=None)\n--\n\n" \
    "Waits until the recorded work is done (GIL released, interruptible).")

#define FM_DOC_EVENT_QUERY PyDoc_STR( \
    "query($self, /)\n--\n\n" \
    "True if the recorded work is done (or nothing was recorded); never waits.")

#define FM_DOC_EVENT_ELAPSED_TIME PyDoc_STR( \
    "elapsed_time($self, end, /)\n--\n\n" \
    "Milliseconds of GPU time from this event to `end`. Both must be timing\n" \
    "events, recorded, and complete (synchronize `end` first).")

#define FM_DOC_EVENT PyDoc_STR( \
    "Event(*, timing=True, device=None)\n--\n\n" \
    "A CUDA event: record(stream=s) marks a point in a stream; synchronize(),\n" \
    "query() and start.elapsed_time(end) read it.")

/* ---- fastmog.GpuMat (gpumat.c) ------------------------------------------- */

#define FM_DOC_GPUMAT_UPLOAD PyDoc_STR( \
    "upload($self, array, /, *, stream, timer=None)\n--\n\n" \
    "Copies a numpy array of the same shape and dtype into this GpuMat, queued\n" \
    "on `stream`. Rows may be strided; pixels within a row must be contiguous.\n" \
    "A pinned source is copied directly and kept alive until the copy is done;\n" \
    "a pageable one goes through a pinned staging buffer, so the call never\n" \
    "waits for the GPU either way.")

#define FM_DOC_GPUMAT_FROM_ARRAY PyDoc_STR( \
    "from_array($cls, array, /, *, stream, device=None, timer=None)\n--\n\n" \
    "A new GpuMat holding a copy of a numpy array (H x W or H x W x C), queued\n" \
    "on `stream`.")

#define FM_DOC_GPUMAT_DOWNLOAD PyDoc_STR( \
    "download($self, /, out=None, *, stream, blocking=True, timer=None)\n--\n\n" \
    "Copies this GpuMat to host memory, queued on `stream`, and returns the\n" \
    "array: `out` if given, else a new pinned array. With blocking=True the call\n" \
    "waits (GIL released, interruptible) until the data is valid; with\n" \
    "blocking=False it returns at once and the data is valid once the stream is\n" \
    "synchronized (this needs a pinned destination).")

#define FM_DOC_GPUMAT_COPY_TO PyDoc_STR( \
    "copy_to($self, other, /, *, stream, timer=None)\n--\n\n" \
    "Copies this GpuMat into `other` (same shape, dtype and device), queued on\n" \
    "`stream`.")

#define FM_DOC_GPUMAT_FILL PyDoc_STR( \
    "fill($self, value, /, *, stream, timer=None)\n--\n\n" \
    "Sets every pixel to `value`: a number, or one number per channel. Queued\n" \
    "on `stream`.")

#define FM_DOC_GPUMAT_ROI PyDoc_STR( \
    "roi($self, x, y, width, height, /)\n--\n\n" \
    "A view of a rectangle of this image sharing its memory (as m[y:y+height,\n" \
    "x:x+width]).")

#define FM_DOC_GPUMAT_CLOSE PyDoc_STR( \
    "close($self, /)\n--\n\n" \
    "Releases this GpuMat's device memory once the work queued on it is done\n" \
    "(views and DLPack exports keep it alive). After a __cuda_array_interface__\n" \
    "export the memory stays until the object itself is gone, since consumers\n" \
    "of that protocol hold the object, not the memory. Idempotent.")

#define FM_DOC_GPUMAT_REPR_HTML PyDoc_STR( \
    "_repr_html_($self, /)\n--\n\n" \
    "Metadata as an HTML table for notebooks; never copies or synchronizes.")

#define FM_DOC_GPUMAT PyDoc_STR( \
    "GpuMat(shape, dtype=numpy.uint8, *, device=None)\n--\n\n" \
    "An image in device memory with pitched rows: shape (H, W) or (H, W, C)\n" \
    "with C in 1, 3, 4. The constructor leaves it uninitialised; use\n" \
    "GpuMat.from_array(a, stream=s), upload(), fill() or copy_to() to fill it.\n" \
    "m[y0:y1, x0:x1] is a view sharing memory. close() or a with-block\n" \
    "releases the memory in stream order.")

/* ---- fastmog.BackgroundSubtractorMOG2, fastmog.apply_cameras (mog2.c) ---- */

#define FM_DOC_MOG2_APPLY PyDoc_STR( \
    "apply($self, frame, /, learning_rate=-1.0, *, stream, fgmask=None,\n" \
    "      known_foreground=None, timer=None)\n--\n\n" \
    "Updates the model with `frame` and returns the foreground mask (uint8:\n" \
    "0 background, shadow_value shadow, 255 foreground), queued on `stream`.\n\n" \
    "frame: a GpuMat, a numpy array (uploaded through a pinned staging buffer)\n" \
    "or any producer's device memory (CuPy, PyTorch, PyNvVideoCodec planes);\n" \
    "H x W or H x W x C, C in 1, 3, 4; uint8 or float32.\n" \
    "A frame of another size, channel count or dtype restarts the model, as in\n" \
    "OpenCV. learning_rate: negative for automatic (1/min(2*n, history)), 0\n" \
    "freezes the model, 1 restarts it on every frame.\n" \
    "The returned mask is a GpuMat the subtractor reuses: the next apply()\n" \
    "overwrites it. Download or copy it first, or pass your own fgmask=.\n" \
    "known_foreground: uint8 H x W; non-zero pixels are foreground and not\n" \
    "learned (OpenCV 4.13+).")

#define FM_DOC_MOG2_APPLY_BATCH PyDoc_STR( \
    "apply_batch($self, frames, /, learning_rate=-1.0, *, stream, fgmasks=None,\n" \
    "            known_foreground=None, timer=None)\n--\n\n" \
    "Updates the model with K consecutive frames in one pass over its state and\n" \
    "returns their K masks as a tuple of GpuMats: exactly what K apply() calls\n" \
    "return (the automatic learning rate advances frame by frame), with the\n" \
    "model read and written once per 16 frames instead of once per frame.\n\n" \
    "frames: a list or tuple of frames, or an array whose first axis is K\n" \
    "(numpy, CuPy, PyTorch...); each anything apply() takes, all of one shape\n" \
    "and dtype. fgmasks: K GpuMats to write, or None: views of one buffer the\n" \
    "subtractor reuses (the next apply_batch() overwrites them).\n" \
    "known_foreground: None, or K entries, each None or a uint8 H x W mask.")

#define FM_DOC_APPLY_CAMERAS PyDoc_STR( \
    "apply_cameras(subtractors, frames, /, learning_rate=-1.0, *, stream,\n" \
    "              fgmasks=None, known_foreground=None, timer=None)\n--\n\n" \
    "Updates N subtractors, each with its own frame, in one kernel launch (up\n" \
    "to 64 cameras per launch), and returns their N masks as a tuple: exactly\n" \
    "what N apply() calls return. Frames may differ in size, channels and dtype\n" \
    "and are taken as they are (no copy to stack them).\n\n" \
    "subtractors: N distinct BackgroundSubtractorMOG2 on the stream's device.\n" \
    "frames: N frames, each anything apply() takes. learning_rate: one value\n" \
    "for all, or N values. fgmasks: N GpuMats to write, or None (each\n" \
    "subtractor's reused mask). known_foreground: None, or N entries, each None\n" \
    "or a uint8 mask.")

#define FM_DOC_MOG2_GET_BACKGROUND_IMAGE PyDoc_STR( \
    "get_background_image($self, /, *, stream, out=None, timer=None)\n--\n\n" \
    "The background image as OpenCV's CPU computes it (the weighted mean of the\n" \
    "background modes), queued on `stream`: uint8 for uint8 frames, float32 for\n" \
    "float32 frames, with the frames' channels. Written into `out` if given.\n" \
    "It is the model as it stands: after n_mixtures changes, the old model's\n" \
    "background until the next apply() restarts the model.")

#define FM_DOC_MOG2_MODE_COUNTS PyDoc_STR( \
    "mode_counts($self, /)\n--\n\n" \
    "A read-only H x W uint8 GpuMat view of the number of modes each pixel's\n" \
    "model uses now (a view of the model, not a copy: it changes with apply()).")

#define FM_DOC_MOG2_SNAPSHOT PyDoc_STR( \
    "snapshot($self, /, *, stream)\n--\n\n" \
    "The whole model state as a dict of format \"fastmog.mog2\", version 1, copied\n" \
    "to the host after the work queued on the model (on any stream) is done:\n" \
    "every parameter, the geometry it was built for, frames_seen and the modes\n" \
    "(weight, variance, mean, mode_count arrays), as fastmog.cpu's snapshot():\n" \
    "either restores either. Returns once the copy is complete. ValueError when\n" \
    "there is no model yet.")

#define FM_DOC_MOG2_RESTORE PyDoc_STR( \
    "restore(snapshot, /, *, stream)\n--\n\n" \
    "Class method: a new subtractor on the stream's device whose model is the\n" \
    "snapshot's (from either subtractor), uploaded on `stream` before it\n" \
    "returns; applying the next frames gives exactly the masks the snapshotted\n" \
    "one would have. A snapshot of another format or version, or damaged, is\n" \
    "refused with TypeError or ValueError before anything is allocated.")

#define FM_DOC_MOG2 PyDoc_STR( \
    "Zivkovic's adaptive Gaussian mixture background subtractor, computing\n" \
    "exactly what OpenCV's CPU cv2.BackgroundSubtractorMOG2 computes, on the GPU.\n" \
    "Every parameter is a property; a new value takes effect at the next apply().\n" \
    "Model state: n_mixtures * (2 + channels) floats + 1 byte per pixel, as in\n" \
    "OpenCV (101 bytes per pixel for BGR with 5 modes).")

/* ---- what both subtractors share (mog2_base.c) --------------------------- */

#define FM_DOC_BASE_RESET PyDoc_STR( \
    "reset($self, /)\n--\n\n" \
    "Forgets the model: the next apply() starts a new one (no GPU work now).")

#define FM_DOC_BASE_CLOSE PyDoc_STR( \
    "close($self, /)\n--\n\n" \
    "Releases the model and buffers (on the GPU, once the work queued on them is\n" \
    "done). A mask returned earlier stays valid while you hold it. Idempotent.")

/* ---- fastmog._mog2_parameters (mog2_params.c) ---------------------------- */

#define FM_DOC_MOG2_PARAMETERS PyDoc_STR( \
    "_mog2_parameters($module, /)\n--\n\n" \
    "The MOG2 parameters in constructor order: a tuple of dicts with name, type\n" \
    "(int, bool or float), default, min, max, opencv (the CamelCase name),\n" \
    "positional and doc. The main job builds its options from it.")

/* ---- fastmog.cpu.BackgroundSubtractorMOG2, cpu.apply_cameras (mog2_cpu.c) ------ */

#define FM_DOC_MOG2CPU_APPLY PyDoc_STR( \
    "apply($self, frame, /, learning_rate=-1.0, *, fgmask=None, known_foreground=None,\n" \
    "      timer=None)\n--\n\n" \
    "Updates the model with a numpy frame and returns the uint8 mask (a new\n" \
    "array, or `fgmask`). Same semantics as fastmog.BackgroundSubtractorMOG2.apply,\n" \
    "without a stream: the work is done when the call returns.")

#define FM_DOC_MOG2CPU_APPLY_BATCH PyDoc_STR( \
    "apply_batch($self, frames, /, learning_rate=-1.0, *, fgmasks=None,\n" \
    "            known_foreground=None, timer=None)\n--\n\n" \
    "Updates the model with K consecutive frames (a K x H x W[ x C] array or a\n" \
    "sequence of K arrays of one shape and dtype) in one pass over the model and\n" \
    "returns the K masks as a new K x H x W uint8 array, or fills `fgmasks` (K\n" \
    "writable masks, e.g. a K x H x W array). Exactly what K apply() calls give.\n" \
    "known_foreground: None, or K entries, each None or a uint8 H x W mask.")

#define FM_DOC_CPU_APPLY_CAMERAS PyDoc_STR( \
    "_cpu_apply_cameras(subtractors, frames, /, learning_rate=-1.0, *, fgmasks=None,\n" \
    "                   known_foreground=None)\n--\n\n" \
    "fastmog.cpu.apply_cameras: N host subtractors, each with its own frame;\n" \
    "returns the list of N masks, exactly what N apply() calls return.")

#define FM_DOC_MOG2CPU_GET_BACKGROUND_IMAGE PyDoc_STR( \
    "get_background_image($self, /, out=None)\n--\n\n" \
    "The background image (uint8 for uint8 frames, float32 for float32 frames)\n" \
    "of the model as it stands: after n_mixtures changes, the old model's\n" \
    "background until the next apply() restarts the model.")

#define FM_DOC_MOG2CPU_MODE_COUNTS PyDoc_STR( \
    "mode_counts($self, /)\n--\n\n" \
    "A new H x W uint8 array: the number of modes each pixel's model uses now\n" \
    "(a copy, unlike the GPU subtractor's view).")

#define FM_DOC_MOG2CPU_STATE PyDoc_STR( \
    "_state($self, /)\n--\n\n" \
    "Private: the arrays of snapshot() alone, weight and variance (M, H, W)\n" \
    "float32, mean (M, C, H, W) float32, mode_count (H, W) uint8 (M = n_mixtures,\n" \
    "C = channels); modes at or beyond a pixel's mode_count hold stale values.")

#define FM_DOC_MOG2CPU_SNAPSHOT PyDoc_STR( \
    "snapshot($self, /)\n--\n\n" \
    "The whole model state as a dict of format \"fastmog.mog2\", version 1:\n" \
    "every parameter, the geometry it was built for, frames_seen and the modes\n" \
    "(weight, variance, mean, mode_count arrays). The GPU subtractor's snapshot\n" \
    "is the same: either restores either. fastmog.save_snapshot writes it to a\n" \
    "file. ValueError when there is no model yet.")

#define FM_DOC_MOG2CPU_RESTORE PyDoc_STR( \
    "restore(snapshot, /)\n--\n\n" \
    "Class method: a new subtractor whose model is the snapshot's (from either\n" \
    "subtractor); applying the next frames gives exactly the masks the\n" \
    "snapshotted one would have. A snapshot of another format or version, or\n" \
    "damaged (a missing or extra key, arrays of the wrong dtype or shape, mode\n" \
    "counts beyond its modes, parameters out of range), is refused with\n" \
    "TypeError or ValueError.")

#define FM_DOC_MOG2CPU PyDoc_STR( \
    "MOG2 on the host from the same per-pixel code as the GPU kernel: numpy in,\n" \
    "numpy out, the same results as OpenCV's CPU implementation.")

/* ---- fastmog.nv12_to_bgr, nv21_to_bgr (nv12.c) --------------------------- */

#define FM_DOC_NV12_TO_BGR PyDoc_STR( \
    "nv12_to_bgr($module, y, uv=None, /, *, stream, out=None, rgb=False, matrix='bt601',\n" \
    "            timer=None)\n--\n\n" \
    "NV12 to BGR on the GPU, queued on `stream`, equal bit for bit to\n" \
    "cv2.cvtColor(frame, cv2.COLOR_YUV2BGR_NV12). `y` is the luma plane (H x W or\n" \
    "H x W x 1) and `uv` the interleaved chroma plane ((H/2, W/2, 2) or (H/2, W));\n" \
    "or `y` is one (H*3/2) x W frame and `uv` is None. Each may be a GpuMat, a\n" \
    "numpy array or any producer's device memory (a decoder's planes: no copy).\n" \
    "Returns `out` (a writable H x W x 3 uint8 GpuMat) or a new GpuMat.\n" \
    "rgb=True gives RGB order. matrix: 'bt601' (video range), OpenCV's.")

#define FM_DOC_NV21_TO_BGR PyDoc_STR( \
    "nv21_to_bgr($module, y, uv=None, /, *, stream, out=None, rgb=False, matrix='bt601',\n" \
    "            timer=None)\n--\n\n" \
    "As nv12_to_bgr for NV21 (chroma stored V, U): cv2.COLOR_YUV2BGR_NV21.")

/* ---- the host NV12 conversion (nv12_cpu.c) ------------------------------- */

#define FM_DOC_CPU_NV12_TO_BGR PyDoc_STR( \
    "_cpu_nv12_to_bgr($module, y, uv=None, /, *, out=None, rgb=False, matrix='bt601')\n--\n\n" \
    "NV12 to BGR on the host, equal bit for bit to cv2.cvtColor(frame,\n" \
    "cv2.COLOR_YUV2BGR_NV12) (COLOR_YUV2RGB_NV12 with rgb=True).\n\n" \
    "y is the (H*3/2) x W uint8 frame cv2 takes when uv is None; otherwise the\n" \
    "H x W luma plane, and uv the chroma plane, (H/2) x (W/2) x 2 or (H/2) x W\n" \
    "interleaved U, V. Rows may be padded. H and W must be even. Returns a new\n" \
    "H x W x 3 uint8 array, or writes `out`. matrix: 'bt601' (video range).")

#define FM_DOC_CPU_NV21_TO_BGR PyDoc_STR( \
    "_cpu_nv21_to_bgr($module, y, uv=None, /, *, out=None, rgb=False, matrix='bt601')\n--\n\n" \
    "As _cpu_nv12_to_bgr for NV21 (chroma pairs stored V, U): equal to\n" \
    "cv2.cvtColor(frame, cv2.COLOR_YUV2BGR_NV21) (COLOR_YUV2RGB_NV21 with rgb=True).")

/* ---- the motion step (morphology.c; on the host morphology_cpu.c, components_cpu.c) */

#define FM_DOC_CPU_MORPHOLOGY PyDoc_STR( \
    "_cpu_morphology($module, mask, element, op, iterations, /, *, out=None)\n--\n\n" \
    "Erosion (op 0), dilation (1), opening (2) or closing (3) of an H x W uint8\n" \
    "mask by `element` (a C-contiguous uint8 array of at most 31 x 31, nonzero =\n" \
    "in, anchored at its centre), `iterations` times, equal bit for bit to\n" \
    "cv2.morphologyEx with its default anchor and border. Returns a new array, or\n" \
    "writes `out` (which may be the mask itself). fastmog.cpu.morphology builds\n" \
    "the element and checks the names.")

#define FM_DOC_MORPHOLOGY PyDoc_STR( \
    "_morphology($module, mask, element, op, iterations, /, *, stream, out=None,\n" \
    "            foreground=-1, timer=None)\n--\n\n" \
    "As _cpu_morphology on the GPU, queued on `stream`: the mask is a GpuMat, any\n" \
    "producer's device memory or a numpy array (uploaded); returns a new GpuMat,\n" \
    "or writes `out` (a GpuMat, which may be the mask itself). fastmog.morphology\n" \
    "builds the element and checks the names.")

#define FM_DOC_MORPHOLOGY_IMAGES PyDoc_STR( \
    "_morphology_images($module, masks, element, op, iterations, /, *, stream,\n" \
    "                   out=None, foreground=-1, timer=None)\n--\n\n" \
    "As _morphology on n masks of one H x W shape (one-channel uint8 GpuMats, as\n" \
    "apply_cameras gives them) at once, one launch per pass (per 32 masks): mask k\n" \
    "fills rows k H to (k + 1) H of the (n H) x W stack it returns, or of `out`,\n" \
    "which must overlap no mask. Each mask is its own image: its borders are\n" \
    "OpenCV's, never a neighbour's rows.")

#define FM_DOC_CONNECTED_COMPONENTS PyDoc_STR( \
    "_connected_components($module, mask, connectivity, min_area, foreground, /, *,\n" \
    "                      stream, zone=None, timer=None, rows=-1, count=False,\n" \
    "                      labels=False, images=1, opening=-1)\n--\n\n" \
    "As _cpu_connected_components on the GPU, queued on `stream` (the mask a GpuMat,\n" \
    "any producer's device memory or a numpy array, uploaded), of the pixels also\n" \
    "nonzero in `zone` if given: (stats, centroids, pixels of every region, the\n" \
    "label image or None). labels: True for a new int32 GpuMat, or one to fill. Waits\n" \
    "for the regions' rows only. rows: how many rows to read with the header before\n" \
    "their count is known, at most 1024 (-1: 40, or as many as the last call that\n" \
    "gave none found). count=True: only the foreground pixels are counted,\n" \
    "(None, None, pixels, None). images > 1: the mask is that many images (of an\n" \
    "even number of rows each) stacked, labelled apart in one pass: (stats and\n" \
    "centroids in each image's own coordinates, image by image, each image's\n" \
    "foreground count, the index of each image's first row and the end). opening 0\n" \
    "(1): the regions of the mask's 3x3 opening (closing) of the pixels equal to\n" \
    "foreground, as fastmog.morphology(mask, 'open', 3, foreground=foreground)\n" \
    "gives, made in the labelling's first pass without writing the opened mask\n" \
    "(connectivity 8, no zone, one image).")

#define FM_DOC_CPU_CONNECTED_COMPONENTS PyDoc_STR( \
    "_cpu_connected_components($module, mask, connectivity, min_area, foreground,\n" \
    "                          labels, /)\n--\n\n" \
    "The regions of the pixels of `mask` equal to `foreground`, as\n" \
    "cv2.connectedComponentsWithStats numbers them, less its background row and\n" \
    "those smaller than min_area: (stats N x 5 int32 (x, y, width, height, area),\n" \
    "centroids N x 2 float64, the H x W int32 labels or None).")

/* ---- pinned host arrays (pinned.c) --------------------------------------- */

#define FM_DOC_PINNED_EMPTY PyDoc_STR( \
    "pinned_empty($module, /, shape, dtype=numpy.uint8)\n--\n\n" \
    "An uninitialised numpy array in page-locked host memory, from fastmog's\n" \
    "pool. The memory stays valid while any view of the array exists and goes\n" \
    "back to the pool (not to the OS) after the last one.")

#define FM_DOC_PINNED_ZEROS PyDoc_STR( \
    "pinned_zeros($module, /, shape, dtype=numpy.uint8)\n--\n\n" \
    "Like pinned_empty, filled with zeros.")

#define FM_DOC_PINNED_LIKE PyDoc_STR( \
    "pinned_like($module, array, /)\n--\n\n" \
    "An uninitialised pinned array with the shape and dtype of `array` (as\n" \
    "numpy.empty_like).")

#define FM_DOC_IS_PINNED PyDoc_STR( \
    "is_pinned($module, array, /)\n--\n\n" \
    "True if the numpy array's memory is page-locked (fastmog's, CuPy's,\n" \
    "PyTorch's or registered with cudaHostRegister). False without a GPU.")

/* ---- fastmog.Stream (stream.c) ------------------------------------------- */

#define FM_DOC_STREAM_NULL PyDoc_STR( \
    "null($cls, /, *, device=None)\n--\n\n" \
    "The legacy default stream of `device`. It synchronizes with every blocking\n" \
    "stream of the device; fastmog uses it only when asked for by name.")

#define FM_DOC_STREAM_WRAP PyDoc_STR( \
    "wrap($cls, obj, /, *, device=None)\n--\n\n" \
    "Wraps a foreign CUDA stream without taking it over: `obj` is any object\n" \
    "that names its stream through the __cuda_stream__ protocol (cuda.core,\n" \
    "CuPy, a fastmog.Stream), PyTorch's .cuda_stream, or a raw handle (an int).\n" \
    "A raw handle is trusted as it is, as CuPy does: no CUDA API can validate\n" \
    "one, and a wrong one crashes inside the driver; pass the owning object\n" \
    "where you have it. The wrapper keeps `obj` alive; closing it never\n" \
    "destroys the stream.")

#define FM_DOC_STREAM_SYNCHRONIZE PyDoc_STR( \
    "synchronize($self, /, *, timer=None)\n--\n\n" \
    "Waits until all work queued on this stream is done. The GIL is released\n" \
    "while waiting and Ctrl-C interrupts the wait.")

#define FM_DOC_STREAM_QUERY PyDoc_STR( \
    "query($self, /)\n--\n\n" \
    "True if all work queued on this stream is done; never waits.")

#define FM_DOC_STREAM_WAIT PyDoc_STR( \
    "wait($self, event, /, *, timer=None)\n--\n\n" \
    "Makes work queued on this stream from now on wait for `event` (on the GPU;\n" \
    "the host does not wait).")

#define FM_DOC_STREAM_RECORD PyDoc_STR( \
    "record($self, /, event=None)\n--\n\n" \
    "Records `event` (a new timing Event if None) at this point of the stream\n" \
    "and returns it.")

#define FM_DOC_STREAM_CLOSE PyDoc_STR( \
    "close($self, /)\n--\n\n" \
    "Waits for the work queued on this stream, then releases it (a wrapped\n" \
    "stream is only let go of, never destroyed). Idempotent: a close() begun\n" \
    "in another thread is waited for. ValueError while another call holds the\n" \
    "stream (a wait, a staging copy, a subtractor's lock); a closing stream is\n" \
    "refused by every call, as a closed one is.")

#define FM_DOC_STREAM_CUDA_STREAM PyDoc_STR( \
    "__cuda_stream__($self, /)\n--\n\n" \
    "The CUDA stream protocol: (0, handle).")

#define FM_DOC_STREAM PyDoc_STR( \
    "Stream(*, device=None, priority=0, non_blocking=True)\n--\n\n" \
    "An owned CUDA stream. Every GPU operation of fastmog takes one as its\n" \
    "keyword-only `stream=`; fastmog never creates a stream on its own.\n" \
    "Stream.null() gives the legacy default stream; Stream.wrap(obj) wraps a\n" \
    "CuPy, PyTorch or raw stream. Use as a context manager or close() it.")

/* ---- the timer's C base (timer.c) ---------------------------------------- */

#define FM_DOC_TIMER_RECORDS PyDoc_STR( \
    "_raw_records($self, /)\n--\n\n" \
    "Every call so far as tuples (name, activity, stream, device, height, width,\n" \
    "channels, parent, host_start_ns, host_ns, waited_ns, gpu_ms, gpu_start_ns,\n" \
    "causes, n_causes, queued_ns, behind, behind_stream, session, wait_start_ns,\n" \
    "bytes_read, bytes_written); gpu_ms is None for calls without GPU work;\n" \
    "gpu_start_ns and queued_ns (before the waits the call inserted, or None)\n" \
    "place the GPU work on the host clock (aligned at the first timed call).\n" \
    "Reading waits for GPU work that is still pending, and only for that.")

#define FM_DOC_TIMER_RESET PyDoc_STR( \
    "reset($self, /)\n--\n\n" \
    "Forgets every record.")

#define FM_DOC_TIMER_HOST_CALL PyDoc_STR( \
    "_host_call($self, name, start_ns, host_ns, shape, /)\n--\n\n" \
    "Records a host-only call made in Python (a decoder's frame), inside the\n" \
    "innermost open call: start and duration in perf_counter_ns() nanoseconds,\n" \
    "shape (H, W, C).")

/* ---- fastmog.asgpumat (front_door.c) ------------------------------------- */

#define FM_DOC_ASGPUMAT PyDoc_STR( \
    "asgpumat($module, obj, /, *, stream)\n--\n\n" \
    "Views device memory as a GpuMat without copying, keeping its owner alive:\n" \
    "a CUDA Array Interface (v2 or v3) or DLPack object (CuPy, PyTorch, Numba,\n" \
    "PyNvVideoCodec planes, ...), an object whose cuda() gives one (or a list\n" \
    "of planes: the first is taken), or a fastmog.DevicePointer. `stream` is\n" \
    "made to wait (on the GPU) for the producer's pending work as the producer\n" \
    "declares it (a CUDA Array Interface `stream` is a raw handle, trusted as it\n" \
    "is). The producer's shape and strides must lie inside the one device\n" \
    "allocation its pointer is in (ValueError otherwise).")

#endif
