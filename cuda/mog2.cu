// MOG2 kernels: one thread per pixel, the per-pixel maths from mog2_pixel.h
// (shared with the host reference). Built with --fmad=false so that both
// produce the same floats as OpenCV's CPU code.
#include "launch.h"
#include "grid.h"
#include "mog2_pixel.h"

#include <stdint.h>

#include <type_traits>

namespace {

// A pixel's modes, held in registers (every index below is a constant once
// the loops unroll) while one or more frames update them. Memory is touched
// where the algorithm needs it, read where that saves a round trip or an
// instruction: every weight (read for every slot, see load_pixel; written
// for the modes in use), the variance and means of the modes an update may
// read (one frame: mode 0, and the others where the sample misses it or the
// shadow test may walk them, see load_visited; a pass over several frames:
// every slot, at its start) and of the modes it changed (written once at
// the end). On a real scene most pixels fit their first mode, so the other
// modes' means never move.
// M: the most modes a pixel can have here (n_mixtures or more); the
// per-pixel code's cost grows with its square, so the default of 5 modes
// has kernels of its own.
template <int C, int M>
struct Pixel {
    float weight[M];
    float variance[M];
    float mean[M * C];
    unsigned changed;  // slots whose variance and means must be stored
    int stored;        // the mode count in memory
    int nmodes;        // the mode count now
};

// Where one pixel's modes are in the model (mog2_params.h): its weights and
// its slots' variance and means. Every field is at a constant offset from
// one of the two once the loops unroll, so no load or store of a mode
// computes an address.
template <int C>
struct ModesAt {
    float *weights;
    float *slots;
    __device__ float &weight(int k) const { return weights[k * FM_MOG2_TILE]; }
    __device__ float &variance(int k) const
    {
        return slots[k * FM_MOG2_TILE * FM_MOG2_SLOT_FLOATS(C)];
    }
    __device__ float &mean(int k, int c) const
    {
        return slots[k * FM_MOG2_TILE * FM_MOG2_SLOT_FLOATS(C) + 1 + c];
    }
};

template <int C>
__device__ __forceinline__ ModesAt<C> modes_at(const fm_mog2_model &model, size_t i)
{
    const size_t k = (size_t)model.n_mixtures;
    float *tile = model.modes + i / FM_MOG2_TILE * FM_MOG2_TILE_FLOATS(k, C);
    const int l = (int)(i % FM_MOG2_TILE);
    return {tile + l, tile + k * FM_MOG2_TILE + l * FM_MOG2_SLOT_FLOATS(C)};
}

// A slot's variance and means move in one access of 8 or 16 bytes for grey
// and BGR: they are consecutive, and every term of their offset
// (mog2_params.h) is a multiple of that size, from a model aligned to 16
// bytes (valid_model; CUDA's allocations are aligned to 256).
template <int C>
struct SlotAccess {
    static constexpr bool kOne = false;
};
template <>
struct SlotAccess<1> {
    static constexpr bool kOne = true;
    using Vector = float2;
    __device__ static Vector pack(float v, const float *m) { return {v, m[0]}; }
    __device__ static void unpack(Vector s, float &v, float *m)
    {
        v = s.x;
        m[0] = s.y;
    }
};
template <>
struct SlotAccess<3> {
    static constexpr bool kOne = true;
    using Vector = float4;
    __device__ static Vector pack(float v, const float *m) { return {v, m[0], m[1], m[2]}; }
    __device__ static void unpack(Vector s, float &v, float *m)
    {
        v = s.x;
        m[0] = s.y;
        m[1] = s.z;
        m[2] = s.w;
    }
};

template <int C, int M>
__device__ __forceinline__ void load_mode(const ModesAt<C> &at, int k, Pixel<C, M> &px)
{
    if constexpr (SlotAccess<C>::kOne) {
        using A = SlotAccess<C>;
        A::unpack(*reinterpret_cast<const typename A::Vector *>(&at.variance(k)),
                  px.variance[k], &px.mean[k * C]);
    }
    else {
        px.variance[k] = at.variance(k);
#pragma unroll
        for (int c = 0; c < C; ++c)
            px.mean[k * C + c] = at.mean(k, c);
    }
}

template <int C, int M>
__device__ __forceinline__ void store_mode(const ModesAt<C> &at, int k, const Pixel<C, M> &px)
{
    if constexpr (SlotAccess<C>::kOne) {
        using A = SlotAccess<C>;
        *reinterpret_cast<typename A::Vector *>(&at.variance(k))
            = A::pack(px.variance[k], &px.mean[k * C]);
    }
    else {
        at.variance(k) = px.variance[k];
#pragma unroll
        for (int c = 0; c < C; ++c)
            at.mean(k, c) = px.mean[k * C + c];
    }
}

// Mode 0 is read before the mode count arrives: almost every pixel uses it
// (the model is zeroed when made), and it saves most pixels one dependent
// round trip to memory, which is what bounds scenes with few modes. So are
// the other weights, of every slot the model has rather than of the modes in
// use: waiting for the count before asking for them cost a second round trip
// (a few bytes more per pixel, 2-3 % faster; cuda/MOG2_NOTES.md, v11); what
// slots past the count hold is never used.
// kPass (a pass over several frames): every slot's variance and means are
// read too (32 bytes a grey pixel and 64 a BGR one more than v14 read, once
// per pass), so that its updates find every mode in registers. v14 read a
// mode when an update first visited it, so every frame walked the modes to
// learn which to read, in a pass whose issue slots were 84 % busy: without
// the walk a K=16 pass issues 18 % (grey) and 24 % (BGR) fewer instructions
// and takes 22 % less time (H200, cuda/MOG2_NOTES.md, v15).
// The count is device state anyone holding the model's address can write:
// it is clamped to n_mixtures (a no-op for valid state), so no value can
// drive the kernel outside the model; a damaged count is rewritten.
template <int C, int M, bool kPass>
__device__ __forceinline__ void load_pixel(const fm_mog2_model &model, int n_mixtures, size_t i,
                                           const ModesAt<C> &at, Pixel<C, M> &px)
{
    px.changed = 0;
    px.weight[0] = at.weight(0);
    load_mode(at, 0, px);
    px.stored = model.mode_count[i];
    px.nmodes = min(px.stored, n_mixtures);
#pragma unroll
    for (int k = 1; k < M; ++k) {
        if (k < model.n_mixtures) {
            px.weight[k] = at.weight(k);
            if (kPass)
                load_mode(at, k, px);
        }
    }
}

// One frame: loads the other modes in use where the update of sample x or
// the shadow test after it may read them. A sample that misses mode 0 visits
// further modes, and unless it fits one of them it is not background and
// the shadow test walks them all: their loads are issued together, so the
// warp waits on memory once, not once per mode visited (Nsight Compute: the
// kernel waits on these loads; cuda/MOG2_NOTES.md, v9). A sample that fits
// mode 0 and is background there (the update's own tests at mode 0, where
// the weight summed before it is 0) reads no other mode; one that fits mode
// 0 without being background there (a fit threshold above the background
// one) reads them only for the shadow test.
template <int C, int M>
__device__ __forceinline__ void load_visited(const fm_mog2_params &p, const float *x,
                                             const ModesAt<C> &at, Pixel<C, M> &px)
{
    if (px.nmodes == 0)
        return;
    float dist2 = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
        float d = px.mean[c] - x[c];
        dist2 += d * d;
    }
    if (dist2 < p.var_threshold_gen * px.variance[0]
        && ((0.0f < p.background_ratio && dist2 < p.var_threshold * px.variance[0])
            || !p.detect_shadows))
        return;
#pragma unroll
    for (int m = 1; m < M; ++m)
        if (m < px.nmodes)
            load_mode(at, m, px);
}

template <int C, typename T>
__device__ __forceinline__ void read_sample(const fm_mog2_frame_io &io, int x, int y,
                                            float (&sample)[C])
{
    const T *row = reinterpret_cast<const T *>(static_cast<const char *>(io.frame)
                                               + (size_t)y * io.frame_pitch);
#pragma unroll
    for (int c = 0; c < C; ++c)
        sample[c] = (float)row[(size_t)x * C + c];  // exact for uint8
}

// Whether sample x fits mode 0 and is background there: fm_mog2_update_pixel's
// two tests at mode 0 (where the weight summed before it is 0), same floats.
// Mode 0 is always in registers: load_pixel reads it and updates keep it.
template <int C, int M>
__device__ __forceinline__ bool fits_first(const fm_mog2_params &p, const float (&x)[C],
                                           const Pixel<C, M> &px)
{
    if (px.nmodes == 0)
        return false;
    float dist2 = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) {
        float d = px.mean[c] - x[c];
        dist2 += d * d;
    }
    return 0.0f < p.background_ratio && dist2 < p.var_threshold * px.variance[0]
           && dist2 < p.var_threshold_gen * px.variance[0];
}

// The update of a sample that fits_first: the short path, no other mode read.
template <int C, int M>
__device__ __forceinline__ unsigned char update_first(const fm_mog2_params &p,
                                                      const fm_mog2_rates &r,
                                                      const float (&x)[C], Pixel<C, M> &px)
{
    unsigned char nmodes = (unsigned char)px.nmodes;
    unsigned char out = fm_mog2_update_pixel(&p, &r, x, C, 0, px.weight, px.variance, px.mean,
                                             1, &nmodes, &px.changed, M, 1);
    px.nmodes = nmodes;
    return out;
}

// kUniform: a sample that fits_first takes the short path only when every
// pixel of its warp does (a pass over several frames, where each pixel's
// state stays in its thread): a warp of mixed pixels would run both paths.
template <int C, int M, typename T, bool kPass, bool kUniform>
__device__ __forceinline__ void update_pixel(const fm_mog2_params &p, const fm_mog2_frame_io &io,
                                             const ModesAt<C> &at, int x, int y, Pixel<C, M> &px)
{
    // The sample is read before the known-foreground test: a load is not
    // moved above a branch, and after it the frame's round trip to memory
    // would start only once the model's had ended.
    float sample[C];
    read_sample<C, T>(io, x, y, sample);
    unsigned char *mask = io.mask + (size_t)y * io.mask_pitch + x;
    if (io.restart)
        px.nmodes = 0;
    if (io.known != NULL && io.known[(size_t)y * io.known_pitch + x] != 0) {
        *mask = 255;  // foreground, and the model is left as it is
        return;
    }
    if (kUniform && __all_sync(__activemask(), fits_first(p, sample, px))) {
        *mask = update_first(p, io.rates, sample, px);
        return;
    }
    if (!kPass)
        load_visited(p, sample, at, px);
    unsigned char nmodes = (unsigned char)px.nmodes;
    *mask = fm_mog2_update_pixel(&p, &io.rates, sample, C, 0, px.weight, px.variance, px.mean,
                                 1, &nmodes, &px.changed, M, 0);
    px.nmodes = nmodes;
}

// uint8 BGR frames, up to 5 modes, one frame, on Hopper: each thread, once its
// own loads are issued (asked before them, BGR gained less), asks L2 for what
// the first round trip of the pixel some rows below it will read (its
// weights, mode 0, count and sample), so that the block which takes that
// pixel, started a little later, finds them there rather than in DRAM. The
// rows are about 2/5 of the blocks the GPU holds at once (kBlocks a
// multiprocessor, times %nsmid, which PTX allows to exceed the SMs present):
// a nearer block is already running, and a farther one gained less. The BGR
// road scene took 0.259 ms a 4K frame against 0.272, 64 BGR cameras 0.655 ms
// a set against 0.666, noise the same. Grey gained at most 3 % on the road
// scene and lost 4-10 % on noise in every variant, so it does not ask (H200,
// cuda/MOG2_NOTES.md, v16). Only what was timed asks: Hopper builds, uint8
// frames.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
constexpr bool kHopper = true;
#else
constexpr bool kHopper = false;
#endif
template <int C, int M, typename T, int kBlocks>
constexpr bool kPrefetchBelow = kHopper && C == 3 && M <= 5 && sizeof(T) == 1 && kBlocks > 0;

template <int C, int M, typename T, int kBlocks>
__device__ __forceinline__ void prefetch_below(const fm_mog2_model &model,
                                               const fm_mog2_frame_io &io, int x, int y)
{
    unsigned sms;
    asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
    const unsigned across = ((unsigned)model.width + FM_MOG2_TILE - 1) / FM_MOG2_TILE;
    const unsigned blocks = kBlocks * sms * 2 / 5;
    const int below = y + (int)max(1u, (blocks + across / 2) / across) * FM_MOG2_BLOCK_ROWS;
    if (below >= model.height)
        return;
    const auto ask = [](const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); };
    const size_t j = (size_t)below * model.width + x;
    const ModesAt<C> at = modes_at<C>(model, j);
#pragma unroll
    for (int k = 0; k < M; ++k)
        if (k < model.n_mixtures)
            ask(&at.weight(k));
    ask(&at.variance(0));
    ask(&model.mode_count[j]);
    ask(static_cast<const char *>(io.frame) + (size_t)below * io.frame_pitch
        + (size_t)x * C * sizeof(T));
}

template <int C, int M>
__device__ __forceinline__ void store_pixel(const fm_mog2_model &model, size_t i,
                                            const ModesAt<C> &at, const Pixel<C, M> &px)
{
#pragma unroll
    for (int k = 0; k < M; ++k) {
        if (k < px.nmodes) {
            at.weight(k) = px.weight[k];
            if (px.changed >> k & 1u)
                store_mode(at, k, px);
        }
    }
    if (px.nmodes != px.stored)
        model.mode_count[i] = (unsigned char)px.nmodes;
}

// One pixel through `count` consecutive frames: its state is read once,
// updated once per frame in registers, and written once. kPass: `count` may
// be more than one (load_pixel reads every mode). kBlocks: the calling
// kernel's blocks a multiprocessor (its launch bounds); 0 asks no prefetch.
template <int C, int M, typename T, int kBlocks, bool kPass = false, bool kUniform = false>
__device__ __forceinline__ void run_pixel(const fm_mog2_params &p, const fm_mog2_model &model,
                                          const fm_mog2_frame_io *frames, int count, int x, int y)
{
    const size_t i = (size_t)y * model.width + x;
    const ModesAt<C> at = modes_at<C>(model, i);
    Pixel<C, M> px;
    load_pixel<C, M, kPass>(model, min(p.n_mixtures, model.n_mixtures), i, at, px);
    if constexpr (!kPass && kPrefetchBelow<C, M, T, kBlocks>)
        prefetch_below<C, M, T, kBlocks>(model, frames[0], x, y);
    for (int f = 0; f < count; ++f)
        update_pixel<C, M, T, kPass, kUniform>(p, frames[f], at, x, y, px);
    store_pixel(model, i, at, px);
}

// Blocks of 32x4 pixels (FM_MOG2_BLOCK_ROWS), four warps (which pixels each
// takes: column_in_block and row_in_block below): a block's resources are
// freed only when its slowest warp ends, and warps of background pixels end
// early, so smaller blocks keep more warps at work (32x8 -> 32x4: 2-5 %
// faster on the H200, 32x2 no faster again; cuda/MOG2_NOTES.md, v11).
constexpr unsigned kBlockX = 32, kBlockY = FM_MOG2_BLOCK_ROWS;
constexpr int kThreads = kBlockX * kBlockY;
const dim3 kBlock(kBlockX, kBlockY);

// Blocks per SM asked of the register allocator, in threads. The kernel is
// bound by the latency of its model loads (Nsight Compute: half of all stall
// cycles wait on L1TEX), so more warps in flight beat a few spilled
// registers: on an H100, grey at 1536 threads (then 40 registers, 36 bytes
// spilled) and BGR at 1024 (63, none) were 5-12 % faster per frame than at
// 1024 and 768 (47 and 66 registers); 2048 and 1280 were slower
// (cuda/MOG2_NOTES.md, v8). With v13's layout BGR of up to 5 modes fits 56
// registers without a spill, and at 1152 threads it was 3-4 % faster than at
// 1024 (H200); with 8 modes it would spill 404 bytes there, 172 at 1024.
// Grey with 8 modes spills 208 bytes at 1536 threads and none at 1024 (54
// registers), where the 4K road scene took 0.229 ms a frame against 0.291 and
// noise 0.399 against 0.574 (H200, cuda/MOG2_NOTES.md, v16); timed there
// only, it holds for every build from sm_80 (ptxas for sm_100 and sm_120:
// 116 bytes spilled at 1536, none at 1024).
// Turing holds at most 1024 threads per SM, later GPUs 1536 or 2048; ptxas
// ignores a request beyond what the SM holds, so each is capped at it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr int kMostThreads = 1024;
#else
constexpr int kMostThreads = 1536;
#endif
constexpr int blocks_for(int threads)
{
    return (threads < kMostThreads ? threads : kMostThreads) / kThreads;
}
template <int C, int M>
constexpr int kMinBlocks =
    blocks_for(C == 1 ? (M <= 5 ? 1536 : 1024) : (C == 3 ? (M <= 5 ? 1152 : 1024) : 512));
// A pass over several frames reuses each load for K frames, so it gains from
// occupancy even at the cost of spills: grey at 1280 threads (12 bytes
// spilled) was the fastest for K = 16 of those tried (at 1536, 36 bytes
// spilled: 0.092 ms a frame against 0.091; at 1024, none: 0.096), BGR at
// 1024 (no spill: 0.140 against 0.142 at 1152, 12 bytes spilled, and 0.141 at
// 1280), both with warps in squares (H200, MOG2_NOTES v15 and v17); grey of
// 8 modes takes 1280 too, BGRA and BGR of 8 modes 1024.
template <int C, int M, int N>
constexpr int kMinBlocksFor = N == 1 ? kMinBlocks<C, M> : blocks_for(C == 1 ? 1280 : 1024);

template <int N>
struct Pass {
    fm_mog2_frame_io frame[N];
    int count;
};

// Which pixel of its block a thread takes. One frame: warp w (threadIdx.y)
// takes row w, so each of its loads touches one 128-byte line. A pass over
// several frames: warp w takes the w-th column of 8x4 pixels, lane l pixel
// (l % 8, l / 8) of it. A pass's warp takes the short path only when all its
// pixels fit_first, and the pixels that do not gather where something moves:
// on the road scene 61 % of 8x4 squares of pixels fit_first throughout
// against 50 % of rows of 32 (benchmarks/warp_shapes.py, frames 200-215 of
// the traffic clip), and K=16 passes took 0.091 ms a 4K frame (grey) and
// 0.141 (BGR) against 0.102 and 0.156. One frame in squares was 9-16 %
// slower (0.200 ms grey, 0.302 BGR): its loads touch four lines a warp
// (H200, cuda/MOG2_NOTES.md, v17).
constexpr unsigned kSquare = 8;
static_assert(kBlockX / kSquare == kBlockY && kSquare * kBlockY == 32,
              "a block of 32x4 is four warps of 8x4");
template <bool kPass>
__device__ __forceinline__ unsigned column_in_block()
{
    return kPass ? threadIdx.y * kSquare + threadIdx.x % kSquare : threadIdx.x;
}
template <bool kPass>
__device__ __forceinline__ unsigned row_in_block()
{
    return kPass ? threadIdx.x / kSquare : threadIdx.y;
}

// __grid_constant__: the tables are read where the launch put them (indexed
// by frame or camera at run time) instead of being copied per thread.
template <int C, int M, typename T, int N>
__global__ void __launch_bounds__(kThreads, kMinBlocksFor<C, M, N>)
mog2_apply_kernel(fm_mog2_params params, fm_mog2_model model, const __grid_constant__ Pass<N> pass)
{
    constexpr bool kPass = N > 1;
    const int x = (int)(blockIdx.x * kBlockX + column_in_block<kPass>());
    const int y = (int)(blockIdx.y * kBlockY + row_in_block<kPass>());
    if (x >= model.width || y >= model.height)
        return;
    // Several frames: every mode read at the start, and grey warps whose
    // pixels all fit_first take the short path (BGR was slower with it:
    // spilling in v11, 0.163 ms a frame against 0.156 in v15, and 0.145
    // against 0.141 in squares in v17; cuda/MOG2_NOTES.md).
    run_pixel<C, M, T, kMinBlocksFor<C, M, N>, kPass, kPass && C == 1>(
        params, model, pass.frame, kPass ? pass.count : 1, x, y);
}

struct CameraTable {
    fm_mog2_camera camera[FM_MOG2_CAMERAS_PER_LAUNCH];
    unsigned first_block[FM_MOG2_CAMERAS_PER_LAUNCH];  // a camera's blocks are consecutive
    int count;
    int one_size;  // every camera of one size: the grid is (across, down, cameras)
};

// The camera whose blocks include block b, where the launch's cameras are of
// several sizes: a binary search over where each camera's blocks start (its
// tile there is then found by a division). Where they are all of one size
// (the usual case) the grid says both. The search's chain of dependent loads
// and the divisions delay every block's start: 64 grey cameras of 640x480
// took 0.461-0.464 ms a set with a division in place of the search and
// 0.446-0.448 with the grid, beside it (the search alone took 0.476 in v14's
// runs; H200, cuda/MOG2_NOTES.md, v14 and v16).
__device__ __forceinline__ int camera_of(const CameraTable &table, unsigned b)
{
    int lo = 0, hi = table.count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (table.first_block[mid] <= b)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

// Each block belongs to one camera and covers a 32x4 tile of it. C == 0: the
// cameras are of several kinds and each block branches to its camera's (the
// branch is uniform over the block). The block first copies its camera's
// entry into shared memory, a word a thread, and every thread reads it there:
// read from the table at a run-time index, the parameters, pointers and sizes
// were held in registers through the whole update (grey needed 59, so 1024
// threads per SM; at apply's 1536 it spilled 158 bytes). From shared memory
// grey fits 48 registers at 1280 threads (4 bytes spilled) and BGR spilled
// 20 bytes at 1024 where it spilled 88 (8 on Hopper since v16): 64 cameras of
// 640x480 took 0.455 ms a set where they took 0.516 (grey) and 0.678 where
// 0.730 (BGR); BGR at 1152 threads took 0.692 (H200, cuda/MOG2_NOTES.md, v14).
// Grey with 8 modes keeps 1024 (at 1280 it would spill 144 bytes, at 1024
// none), BGRA 512.
template <int C, int M>
constexpr int kCameraBlocks =
    blocks_for(C == 1 ? (M <= 5 ? 1280 : 1024) : C == 3 ? 1024 : 512);

template <int C, int M, typename T>
__global__ void __launch_bounds__(kThreads, kCameraBlocks<C, M>)
mog2_cameras_kernel(const __grid_constant__ CameraTable table)
{
    constexpr int kWords = sizeof(fm_mog2_camera) / sizeof(unsigned);
    static_assert(std::is_trivially_copyable_v<fm_mog2_camera>
                      && sizeof(fm_mog2_camera) % sizeof(unsigned) == 0 && kWords <= kThreads,
                  "the camera's entry is copied a word a thread");
    __shared__ fm_mog2_camera cam;
    const int k = table.one_size ? (int)blockIdx.z : camera_of(table, blockIdx.x);
    const int t = threadIdx.y * kBlockX + threadIdx.x;
    if (t < kWords)
        reinterpret_cast<unsigned *>(&cam)[t] =
            reinterpret_cast<const unsigned *>(&table.camera[k])[t];
    __syncthreads();
    unsigned tile_x = blockIdx.x, tile_y = blockIdx.y;
    if (!table.one_size) {
        const unsigned tile = blockIdx.x - table.first_block[k];
        const unsigned across = ((unsigned)cam.model.width + kBlockX - 1) / kBlockX;
        tile_x = tile % across;
        tile_y = tile / across;
    }
    const int x = (int)(tile_x * kBlockX + threadIdx.x);
    const int y = (int)(tile_y * kBlockY + threadIdx.y);
    if (x >= cam.model.width || y >= cam.model.height)
        return;
    // The kernel of several kinds was not timed with prefetch_below: 0 asks none.
    constexpr int kBlocks = C == 0 ? 0 : kCameraBlocks<C, M>;
    if constexpr (C != 0) {
        run_pixel<C, M, T, kBlocks>(cam.params, cam.model, &cam.io, 1, x, y);
    }
    else {
        const fm_mog2_params &p = cam.params;
        const fm_mog2_model &m = cam.model;
        switch (cam.model.channels * 2 + cam.is_float) {
        case 2: run_pixel<1, M, unsigned char, kBlocks>(p, m, &cam.io, 1, x, y); break;
        case 3: run_pixel<1, M, float, kBlocks>(p, m, &cam.io, 1, x, y); break;
        case 6: run_pixel<3, M, unsigned char, kBlocks>(p, m, &cam.io, 1, x, y); break;
        case 7: run_pixel<3, M, float, kBlocks>(p, m, &cam.io, 1, x, y); break;
        case 8: run_pixel<4, M, unsigned char, kBlocks>(p, m, &cam.io, 1, x, y); break;
        default: run_pixel<4, M, float, kBlocks>(p, m, &cam.io, 1, x, y); break;
        }
    }
}

template <int C, typename T>
__global__ void mog2_background_kernel(fm_mog2_params params, fm_mog2_model model,
                                       fm_image out)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= model.width || y >= model.height)
        return;
    const size_t i = (size_t)y * model.width + x;
    const ModesAt<C> at = modes_at<C>(model, i);
    const int nmodes = min((int)model.mode_count[i], model.n_mixtures);
    float weight[FM_MOG2_MAX_MIXTURES], mean[FM_MOG2_MAX_MIXTURES * C], value[C];
#pragma unroll
    for (int k = 0; k < FM_MOG2_MAX_MIXTURES; ++k) {
        if (k < nmodes) {
            weight[k] = at.weight(k);
#pragma unroll
            for (int c = 0; c < C; ++c)
                mean[k * C + c] = at.mean(k, c);
        }
    }
    fm_mog2_background_pixel(&params, C, weight, mean, 1, nmodes, value);
    T *row = reinterpret_cast<T *>(static_cast<char *>(out.data) + (size_t)y * out.pitch);
#pragma unroll
    for (int c = 0; c < C; ++c) {
        if constexpr (sizeof(T) == 1)
            row[(size_t)x * C + c] = fm_mog2_saturate_u8(value[c]);
        else
            row[(size_t)x * C + c] = value[c];
    }
}

dim3 grid_for(const fm_mog2_model &model)
{
    return dim3(fm_div_up((unsigned)model.width, kBlock.x),
                fm_div_up((unsigned)model.height, kBlock.y));
}

template <int N>
using ApplyKernel = void (*)(fm_mog2_params, fm_mog2_model, const Pass<N>);
using CamerasKernel = void (*)(const CameraTable);
using BackgroundKernel = void (*)(fm_mog2_params, fm_mog2_model, fm_image);

// Mode bounds with kernels of their own: OpenCV's default of 5 modes, and
// the most fastmog allows. Indexed [bound][is_float][channels - 1] below.
constexpr int kBounds[2] = {5, FM_MOG2_MAX_MIXTURES};

int bound_index(const fm_mog2_params &params)
{
    return params.n_mixtures <= kBounds[0] ? 0 : 1;
}

// 2 channels have no kernel.
template <int N, int M>
constexpr ApplyKernel<N> kApplyFor[2][4] = {
    {mog2_apply_kernel<1, M, unsigned char, N>, nullptr, mog2_apply_kernel<3, M, unsigned char, N>,
     mog2_apply_kernel<4, M, unsigned char, N>},
    {mog2_apply_kernel<1, M, float, N>, nullptr, mog2_apply_kernel<3, M, float, N>,
     mog2_apply_kernel<4, M, float, N>},
};

template <int M>
constexpr CamerasKernel kCamerasFor[3][4] = {
    {mog2_cameras_kernel<1, M, unsigned char>, nullptr, mog2_cameras_kernel<3, M, unsigned char>,
     mog2_cameras_kernel<4, M, unsigned char>},
    {mog2_cameras_kernel<1, M, float>, nullptr, mog2_cameras_kernel<3, M, float>,
     mog2_cameras_kernel<4, M, float>},
    {mog2_cameras_kernel<0, M, unsigned char>},  // cameras of several kinds
};

template <int N>
ApplyKernel<N> apply_kernel(const fm_mog2_params &params, int is_float, int channels)
{
    return bound_index(params) == 0 ? kApplyFor<N, kBounds[0]>[is_float != 0][channels - 1]
                                    : kApplyFor<N, kBounds[1]>[is_float != 0][channels - 1];
}

// kind: is_float * 4 + channels - 1, or 8 for a launch of several kinds
CamerasKernel cameras_kernel(int bound, int kind)
{
    return bound == 0 ? kCamerasFor<kBounds[0]>[kind / 4][kind % 4]
                      : kCamerasFor<kBounds[1]>[kind / 4][kind % 4];
}

const BackgroundKernel kBackground[2][4] = {
    {mog2_background_kernel<1, unsigned char>, nullptr,
     mog2_background_kernel<3, unsigned char>, mog2_background_kernel<4, unsigned char>},
    {mog2_background_kernel<1, float>, nullptr, mog2_background_kernel<3, float>,
     mog2_background_kernel<4, float>},
};

bool valid_model(const fm_mog2_params &params, const fm_mog2_model &model)
{
    return model.width > 0 && model.height > 0 && model.channels >= 1 && model.channels <= 4
           && model.channels != 2 && params.n_mixtures >= 1
           && params.n_mixtures <= FM_MOG2_MAX_MIXTURES && (uintptr_t)model.modes % 16 == 0;
}

template <int N>
cudaError_t launch_pass(const fm_mog2_params &params, const fm_mog2_model &model, int is_float,
                        const fm_mog2_frame_io *frames, int count, cudaStream_t stream)
{
    Pass<N> pass;
    for (int f = 0; f < count; ++f)
        pass.frame[f] = frames[f];
    pass.count = count;
    apply_kernel<N>(params, is_float, model.channels)<<<grid_for(model), kBlock, 0, stream>>>(
        params, model, pass);
    return cudaGetLastError();
}

}  // namespace

extern "C" cudaError_t fm_launch_mog2_apply(fm_mog2_params params, fm_mog2_model model,
                                            int is_float, const fm_mog2_frame_io *frames,
                                            int count, cudaStream_t stream)
{
    if (!valid_model(params, model) || frames == NULL || count < 1)
        return cudaErrorInvalidValue;
    if (count == 1)
        return launch_pass<1>(params, model, is_float, frames, 1, stream);
    for (int start = 0; start < count; start += FM_MOG2_MAX_PASS) {
        int n = count - start < FM_MOG2_MAX_PASS ? count - start : FM_MOG2_MAX_PASS;
        cudaError_t err = launch_pass<FM_MOG2_MAX_PASS>(params, model, is_float, frames + start,
                                                        n, stream);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

extern "C" cudaError_t fm_launch_mog2_cameras(const fm_mog2_camera *cameras, int count,
                                              cudaStream_t stream)
{
    if (cameras == NULL || count < 0)
        return cudaErrorInvalidValue;
    for (int k = 0; k < count; ++k)
        if (!valid_model(cameras[k].params, cameras[k].model))
            return cudaErrorInvalidValue;
    for (int start = 0; start < count; start += FM_MOG2_CAMERAS_PER_LAUNCH) {
        int n = count - start < FM_MOG2_CAMERAS_PER_LAUNCH ? count - start
                                                          : FM_MOG2_CAMERAS_PER_LAUNCH;
        CameraTable table;  // 9 KB, copied into the launch
        unsigned long long blocks = 0;
        int kind = -1, bound = 0;
        table.one_size = 1;
        for (int k = 0; k < n; ++k) {
            const fm_mog2_camera &cam = cameras[start + k];
            if (cam.model.width != cameras[start].model.width
                || cam.model.height != cameras[start].model.height)
                table.one_size = 0;
            table.camera[k] = cam;
            table.first_block[k] = (unsigned)blocks;
            blocks += (unsigned long long)grid_for(cam.model).x * grid_for(cam.model).y;
            int its_kind = (cam.is_float != 0) * 4 + cam.model.channels - 1;
            kind = kind < 0 || kind == its_kind ? its_kind : 8;
            bound = bound_index(cam.params) > bound ? bound_index(cam.params) : bound;
        }
        if (blocks > 0x7fffffffull)
            return cudaErrorInvalidConfiguration;
        table.count = n;
        const dim3 one = grid_for(cameras[start].model);
        const dim3 grid = table.one_size ? dim3(one.x, one.y, (unsigned)n) : dim3((unsigned)blocks);
        cameras_kernel(bound, kind)<<<grid, kBlock, 0, stream>>>(table);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

extern "C" cudaError_t fm_launch_mog2_background(fm_mog2_params params, fm_mog2_model model,
                                                 fm_image out, cudaStream_t stream)
{
    if (!valid_model(params, model) || out.channels != model.channels
        || (out.elem_size != 1 && out.elem_size != 4))
        return cudaErrorInvalidValue;
    BackgroundKernel kernel = kBackground[out.elem_size == 4][out.channels - 1];
    kernel<<<grid_for(model), kBlock, 0, stream>>>(params, model, out);
    return cudaGetLastError();
}
