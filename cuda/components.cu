/* Connected components of a mask on the GPU, with each region's statistics,
 * in OpenCV's numbering. Union-find over slots (pixels with 4-connectivity;
 * with 8, 2x2 blocks, whose pixels always touch, each with its 4 pixels as
 * bits: a quarter of the slots to walk) ordered as regions are numbered
 * (see Ranks), with atomicMin links, the larger root always under the
 * smaller, so a region's root is its least slot; the roots, counted in
 * slot order by a scan, give each region its number; a pass over the pixels
 * gathers boxes, areas and coordinate sums, a warp's run of one region at a
 * time; a second scan drops the regions under min_area and writes the rest
 * as rows. Exact by construction: integers only. See components_launch.h. */
#include <stdint.h>

#include "components_launch.h"
#include "grid.h"

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kThreads = 256;
constexpr int kScanPer = 4;                       /* entries per thread of a scan block */
constexpr int kScanBlock = kThreads * kScanPer;   /* entries per scan block */
constexpr int kTotalsThreads = 1024;
constexpr int kChunk = 8;                         /* pixels per thread when gathering */
constexpr size_t kAlign = 256;
constexpr unsigned kRowsBlocks = 256;             /* the rows kernel's grid: it strides */

/* A region while its pixels are gathered. */
struct Stat {
    int x0, y0, x1, y1, area, unused;
    unsigned long long sum_x, sum_y;
};

/* The slots of the union-find, in the order regions are numbered by. With
 * 8-connectivity OpenCV's scan meets the image in 2x2 blocks, in raster
 * order of blocks, and a region takes its number at its first block (two
 * 8-connected regions never share a block): a slot is a block, its index
 * the block's raster index, and bits[slot] its foreground pixels (bit
 * (y & 1) * 2 + (x & 1)). With 4-connectivity OpenCV numbers regions by
 * their first pixel: a slot is a pixel, its raster index. */
struct Ranks {
    int width, height, eight, blocks_w;
    int band;                       /* rows of one image of a stack (even), or height */
    const unsigned char *bits;      /* 8-connectivity only */

    __device__ int slot(int x, int y) const
    {
        return eight ? (y >> 1) * blocks_w + (x >> 1) : y * width + x;
    }

    /* What pixel (x, y)'s slot holds (its root once flattened), or -1
     * where the pixel is background. */
    __device__ int root(const int *parent, int x, int y) const
    {
        const int s = slot(x, y);
        if (eight && !((bits[s] >> (((y & 1) << 1) | (x & 1))) & 1u))
            return -1;
        return parent[s];
    }

    /* A pixel of slot s's region: a block's first foreground pixel. */
    __device__ void at(int s, int *x, int *y) const
    {
        if (eight) {
            const unsigned b = bits[s];
            *x = (s % blocks_w) * 2 + ((b & 1u) ? 0 : (b & 2u) ? 1 : (b & 4u) ? 0 : 1);
            *y = (s / blocks_w) * 2 + ((b & 3u) ? 0 : 1);
        }
        else {
            *x = s % width;
            *y = s / width;
        }
    }
};

struct Layout {
    size_t slots, bits, regions, slot_blocks, region_blocks;
};

Layout layout_of(int width, int height, int connectivity)
{
    Layout l;
    const size_t bw = ((size_t)width + 1) / 2, bh = ((size_t)height + 1) / 2;
    l.slots = connectivity == 8 ? bw * bh : (size_t)width * height;
    l.bits = connectivity == 8 ? l.slots : 0;
    l.regions = connectivity == 8 ? bw * bh : ((size_t)width * height + 1) / 2;
    l.slot_blocks = (l.slots + kScanBlock - 1) / kScanBlock;
    l.region_blocks = (l.regions + kScanBlock - 1) / kScanBlock;
    return l;
}

size_t aligned(size_t n)
{
    return (n + kAlign - 1) / kAlign * kAlign;
}

/* The scratch, carved in this order. */
struct Work {
    int *parent, *ids, *slot_totals;
    Stat *stats;
    int *keep_ids, *region_totals;
    unsigned char *bits;
};

size_t carve(const Layout &l, char *base, Work *w)
{
    size_t at = 0;
    auto take = [&](size_t bytes) {
        char *p = base != nullptr ? base + at : nullptr;
        at += aligned(bytes);
        return p;
    };
    w->parent = (int *)take(l.slots * sizeof(int));
    w->ids = (int *)take(l.slots * sizeof(int));
    w->slot_totals = (int *)take(l.slot_blocks * sizeof(int));
    w->stats = (Stat *)take(l.regions * sizeof(Stat));
    w->keep_ids = (int *)take(l.regions * sizeof(int));
    w->region_totals = (int *)take(l.region_blocks * sizeof(int));
    w->bits = (unsigned char *)take(l.bits);
    return at;
}

/* The root of r's tree, read only: what the flattening pass takes, where a
 * halving store could land after another thread's final one. */
__device__ int find_root(const int *parent, int r)
{
    int up = parent[r];
    while (up != r) {
        r = up;
        up = parent[r];
    }
    return r;
}

/* The root of r's tree, during the unions; each slot passed is pointed at
 * its grandparent (path halving, as ECL-CC does): a plain store of an ancestor, so a link another
 * thread makes meanwhile may be undone only for a slot whose own path still
 * leads to that link's root (unite retries from the value atomicMin saw). */
__device__ int find_halving(int *parent, int r)
{
    int up = parent[r];
    while (up != r) {
        const int next = parent[up];
        if (next != up)
            parent[r] = next;
        r = up;
        up = next;
    }
    return r;
}

/* Joins the trees of a and b: the larger root goes under the smaller; a
 * link another thread changed first is followed and tried again. */
__device__ void unite(int *parent, int a, int b)
{
    for (;;) {
        a = find_halving(parent, a);
        b = find_halving(parent, b);
        if (a == b)
            return;
        if (a < b) {
            const int old = atomicMin(&parent[b], a);
            if (old == b)
                return;
            b = old;
        }
        else {
            const int old = atomicMin(&parent[a], b);
            if (old == a)
                return;
            a = old;
        }
    }
}

/* The lowest lane of this lane's run among `linked` (bit i: lane i joins
 * lane i - 1; lane 0 never does). */
__device__ int run_start(unsigned linked, int lane)
{
    const unsigned upto = lane == 31 ? kFull : (2u << lane) - 1u;
    return 31 - __clz(~linked & upto);
}

/* 4-connectivity: each foreground pixel points at the first pixel of its
 * horizontal run within its warp's 32 pixels, so a run is one tree before
 * any union (a warp per 32 pixels of a row); background is -1. */
/* Whether pixel (x, y), inside the image, is labelled. */
struct Pixels {
    const unsigned char *mask, *zone;
    size_t pitch, zone_pitch;
    unsigned char foreground;
    __device__ bool operator()(int x, int y) const
    {
        return mask[(size_t)y * pitch + (size_t)x] == foreground
               && (zone == nullptr || zone[(size_t)y * zone_pitch + (size_t)x] != 0);
    }
};

__global__ void init4_kernel(Pixels pixels, int width, int height, int *parent)
{
    const int lane = (int)(threadIdx.x & 31);
    const int x = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int y = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (y >= height)
        return;                               /* whole warps leave together */
    const bool fg = x < width && pixels(x, y);
    const unsigned bits = __ballot_sync(kFull, fg);
    const unsigned linked = bits & (bits << 1);
    if (x < width)
        parent[y * width + x] = fg ? y * width + (x - lane) + run_start(linked, lane) : -1;
}

/* 8-connectivity, a thread per 2x2 block, a warp per 32 blocks of a block
 * row: a block's foreground pixels go to bits, and two neighbouring blocks
 * touch when one's right column and the other's left column both hold
 * foreground. Each foreground block points at the first block of its run
 * of touching blocks; background is -1. */
__global__ void init8_kernel(Pixels pixels, Ranks ranks, int blocks_h, int *parent,
                             unsigned char *bits)
{
    const int lane = (int)(threadIdx.x & 31);
    const int bx = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int by = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (by >= blocks_h)
        return;
    auto in = [&](int px, int py) {
        return px < ranks.width && py < ranks.height && pixels(px, py);
    };
    const int x = 2 * bx, y = 2 * by;
    const bool here = bx < ranks.blocks_w;
    const bool p0 = here && in(x, y), p1 = here && in(x + 1, y);
    const bool p2 = here && in(x, y + 1), p3 = here && in(x + 1, y + 1);
    const int b = by * ranks.blocks_w + bx;
    const bool left_prev = __shfl_up_sync(kFull, p1 || p3, 1);
    const unsigned linked = __ballot_sync(kFull, lane > 0 && (p0 || p2) && left_prev);
    const int first = __shfl_sync(kFull, b, run_start(linked, lane));
    if (!here)
        return;
    const unsigned v = (unsigned)p0 | (unsigned)p1 << 1 | (unsigned)p2 << 2 | (unsigned)p3 << 3;
    bits[b] = (unsigned char)v;
    parent[b] = v != 0 ? first : -1;
}

/* Block bits: a block's columns and rows. */
constexpr unsigned kLeftColumn = 0x5, kRightColumn = 0xa, kTopRow = 0x3, kBottomRow = 0xc;

/* 8-connectivity: each foreground block joins the earlier blocks it
 * touches that may lie in another tree: the block row above (up, up-left
 * through its bottom-right pixel, up-right through its bottom-left one)
 * and the left block across a 32-block boundary (the runs' ends). */
__global__ void merge8_kernel(Ranks ranks, int blocks_h, int *parent)
{
    const int bx = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int by = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (bx >= ranks.blocks_w || by >= blocks_h)
        return;
    const int b = by * ranks.blocks_w + bx;
    const unsigned here = ranks.bits[b];
    if (here == 0)
        return;
    if (bx > 0 && (bx & 31) == 0 && (here & kLeftColumn)
        && (ranks.bits[b - 1] & kRightColumn))
        unite(parent, b, b - 1);
    if ((2 * by) % ranks.band == 0)
        return;                             /* an image's first rows: never across images */
    const int u = b - ranks.blocks_w;
    if ((here & kTopRow) && (ranks.bits[u] & kBottomRow))
        unite(parent, b, u);
    if (bx > 0 && (here & 1u) && (ranks.bits[u - 1] & 8u))
        unite(parent, b, u - 1);
    if (bx + 1 < ranks.blocks_w && (here & 2u) && (ranks.bits[u + 1] & 4u))
        unite(parent, b, u + 1);
}

/* 4-connectivity: each foreground pixel joins the earlier neighbours that
 * may lie in another tree: up, and left at a warp's first pixel. Up is
 * left out when it is reached through left and up-left. A slot once
 * foreground stays >= 0. */
__global__ void merge4_kernel(Ranks ranks, int *parent)
{
    const int x = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int y = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x >= ranks.width || y >= ranks.height)
        return;
    const int r = ranks.slot(x, y);
    if (parent[r] < 0)
        return;
    auto fg = [&](int px, int py) { return parent[ranks.slot(px, py)] >= 0; };
    const bool left = x > 0 && fg(x - 1, y);
    const bool up = y % ranks.band != 0 && fg(x, y - 1);     /* never across images */
    if (left && (x & 31) == 0)
        unite(parent, r, r - 1);
    if (up && !(left && fg(x - 1, y - 1)))
        unite(parent, r, r - ranks.width);
}

/* Exclusive prefix sum of v over the block (blockDim.x a multiple of 32);
 * *total gets the block's sum. Every thread must call it. */
__device__ int block_exclusive_sum(int v, int *total)
{
    __shared__ int warp_sums[32];
    __shared__ int block_sum;
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
    const int warps = (int)(blockDim.x >> 5);
    int inclusive = v;
    for (int off = 1; off < 32; off <<= 1) {
        const int n = __shfl_up_sync(kFull, inclusive, off);
        if (lane >= off)
            inclusive += n;
    }
    if (lane == 31)
        warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        const int w = lane < warps ? warp_sums[lane] : 0;
        int scanned = w;
        for (int off = 1; off < 32; off <<= 1) {
            const int n = __shfl_up_sync(kFull, scanned, off);
            if (lane >= off)
                scanned += n;
        }
        if (lane < warps)
            warp_sums[lane] = scanned - w;
        if (lane == warps - 1)
            block_sum = scanned;
    }
    __syncthreads();
    const int out = warp_sums[warp] + inclusive - v;
    *total = block_sum;
    __syncthreads();                        /* warp_sums is reused by the next call */
    return out;
}

/* Whether slot i is a root; any other foreground slot is pointed at its
 * root on the way (the flattening, in the same pass: a root never changes,
 * and what another thread stores meanwhile is an ancestor, so every walk
 * still ends at the root). */
struct RootFlag {
    int *parent;
    __device__ int operator()(int i) const
    {
        const int up = parent[i];
        if (up == i)
            return 1;
        if (up >= 0)
            parent[i] = find_root(parent, up);
        return 0;
    }
};

struct KeepFlag {
    const Stat *stats;
    const int *regions;
    long long min_area;
    __device__ int operator()(int i) const
    {
        return i < *regions && (long long)stats[i].area >= min_area;
    }
};

/* Each flagged entry's place among the flagged ones of its scan block; the
 * block's count to totals. */
template <class Flag>
__global__ void scan_blocks_kernel(Flag flag, int n, int *local, int *totals)
{
    const int base = (int)blockIdx.x * kScanBlock + (int)threadIdx.x * kScanPer;
    int f[kScanPer], sum = 0;
    for (int k = 0; k < kScanPer; ++k) {
        f[k] = base + k < n ? flag(base + k) : 0;
        sum += f[k];
    }
    int total;
    int at = block_exclusive_sum(sum, &total);
    for (int k = 0; k < kScanPer; ++k) {
        if (f[k])
            local[base + k] = at;
        at += f[k];
    }
    if (threadIdx.x == 0)
        totals[blockIdx.x] = total;
}

/* The block counts to their exclusive prefix sums, in place; *count gets
 * the sum of all. One block. */
__global__ void scan_totals_kernel(int *totals, int n, int *count,
                                   unsigned long long *zeroed)
{
    if (zeroed != nullptr && threadIdx.x == 0)
        *zeroed = 0;
    int carry = 0;
    for (int start = 0; start < n; start += (int)blockDim.x) {
        const int i = start + (int)threadIdx.x;
        const int v = i < n ? totals[i] : 0;
        int total;
        const int at = block_exclusive_sum(v, &total);
        if (i < n)
            totals[i] = carry + at;
        carry += total;
    }
    if (threadIdx.x == 0)
        *count = carry;
}

/* Each root's number, and its region's statistics started at the root. A
 * scan block that holds no root (its offset is the next one's) is not
 * read: most of a frame is background. */
__global__ void roots_kernel(Ranks ranks, int slots, const int *parent, int *ids,
                             const int *totals, int scan_blocks, const int *regions,
                             Stat *stats)
{
    const int r = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (r >= slots)
        return;
    const int block = r / kScanBlock;
    if ((block + 1 < scan_blocks ? totals[block + 1] : *regions) == totals[block]
        || parent[r] != r)
        return;
    const int id = ids[r] + totals[r / kScanBlock];
    ids[r] = id;
    int x, y;
    ranks.at(r, &x, &y);
    stats[id] = Stat{x, y, x, y, 0, 0, 0ull, 0ull};
}

/* Each thread takes kChunk pixels of a row, as runs of one region; a warp
 * (32 chunks of one row) adds up each region's runs across its lanes and
 * one lane per region adds them to the region: a large region costs a few
 * atomics per warp, not one per pixel. */
__global__ void gather_kernel(Ranks ranks, const int *parent, const int *ids, Stat *stats)
{
    const int y = (int)blockIdx.y;
    const int lane = (int)(threadIdx.x & 31);
    int x = ((int)blockIdx.x * kThreads + (int)threadIdx.x) * kChunk;
    const int end = min(x + kChunk, ranks.width);
    bool more = x < end;
    while (__any_sync(kFull, more)) {
        /* this lane's next run: one region's consecutive pixels */
        int id = -2 - lane, x0 = 0, x1 = 0, area = 0;
        unsigned long long sx = 0;
        while (more && x < end) {
            const int root = ranks.root(parent, x, y);
            if (root >= 0) {
                id = ids[root];
                x0 = x;
                while (x < end) {
                    const int next = ranks.root(parent, x, y);
                    if (next < 0 || ids[next] != id)
                        break;
                    x1 = x;
                    ++area;
                    sx += (unsigned long long)x;
                    ++x;
                }
                break;
            }
            ++x;
        }
        more = x < end;
        /* lanes in a row holding one region add up, within runs of lanes */
        const int next_id = __shfl_down_sync(kFull, id, 1);
        const unsigned edges = __ballot_sync(kFull, lane == 31 || next_id != id);
        const int last = lane + __ffs(edges >> lane) - 1;   /* the run's last lane */
        for (int off = 1; off < 32; off <<= 1) {
            const int o_x1 = __shfl_down_sync(kFull, x1, off);
            const int o_area = __shfl_down_sync(kFull, area, off);
            const unsigned long long o_sx = __shfl_down_sync(kFull, sx, off);
            if (lane + off <= last) {
                x1 = max(x1, o_x1);
                area += o_area;
                sx += o_sx;
            }
        }
        const bool head = lane == 0 || ((edges >> (lane - 1)) & 1u);
        if (head && id >= 0) {
            Stat *s = &stats[id];
            atomicMin(&s->x0, x0);
            atomicMax(&s->x1, x1);
            atomicMin(&s->y0, y);
            atomicMax(&s->y1, y);
            atomicAdd(&s->area, area);
            atomicAdd(&s->sum_x, sx);
            atomicAdd(&s->sum_y, (unsigned long long)area * (unsigned long long)y);
        }
    }
}

/* A coordinate sum in a row's three half-words, low first. */
__device__ void put48(uint16_t *dst, unsigned long long v)
{
    dst[0] = (uint16_t)v;
    dst[1] = (uint16_t)(v >> 16);
    dst[2] = (uint16_t)(v >> 32);
}

/* The kept regions as rows; every region's pixels summed, a warp at a time.
 * The rows after the kept ones up to `read_rows`, and the header's spare
 * words, are zeroed: the host's first copy reads them before it knows the
 * count, and copies nothing left uninitialised. A fixed grid strides over
 * the regions found (known only here), not over the most a mask can hold. */
__global__ void rows_kernel(const Stat *stats, fm_cc_header *header, long long min_area,
                            const int *keep_ids, const int *totals, int cap, int read_rows,
                            fm_cc_row *rows)
{
    const int lane = (int)(threadIdx.x & 31);
    const int regions = min(header->regions, cap), kept = header->kept;
    const int end = max(regions, read_rows);
    unsigned long long *pixels = reinterpret_cast<unsigned long long *>(&header->pixels);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        header->unused[0] = header->unused[1] = 0;
    const int stride = (int)(gridDim.x * blockDim.x);
    /* whole warps go round together: the sum below takes every lane */
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i - lane < end; i += stride) {
        if (i < read_rows && i >= kept)
            rows[i] = fm_cc_row{};
        const bool real = i < regions;
        const Stat s = real ? stats[i] : Stat{0, 0, 0, 0, 0, 0, 0ull, 0ull};
        unsigned long long area = (unsigned long long)s.area;
        for (int off = 16; off > 0; off >>= 1)
            area += __shfl_down_sync(kFull, area, off);
        if (lane == 0 && area != 0)
            atomicAdd(pixels, area);
        if (!real || (long long)s.area < min_area)
            continue;
        const int k = keep_ids[i] + totals[i / kScanBlock];
        fm_cc_row row;
        row.x = (uint16_t)s.x0;
        row.y = (uint16_t)s.y0;
        row.width = (uint16_t)(s.x1 - s.x0 + 1);
        row.height = (uint16_t)(s.y1 - s.y0 + 1);
        row.area = (uint32_t)s.area;
        put48(row.sum_x, s.sum_x);
        put48(row.sum_y, s.sum_y);
        rows[k] = row;
    }
}

/* Pixels counted a row segment per block: kCountPer pixels a thread, the
 * block's sum added once, to the count of the image of the stack its row
 * lies in (totals[y / band]). */
constexpr int kCountPer = 16;

__global__ void count_kernel(Pixels pixels, int width, int band, unsigned long long *totals)
{
    __shared__ unsigned warp_sums[kThreads / 32];
    const int y = (int)blockIdx.y;
    const int x0 = ((int)blockIdx.x * kThreads + (int)threadIdx.x) * kCountPer;
    unsigned n = 0;
    for (int x = x0; x < x0 + kCountPer && x < width; x++)
        n += pixels(x, y) ? 1u : 0u;
    for (int off = 16; off > 0; off >>= 1)
        n += __shfl_down_sync(kFull, n, off);
    if ((threadIdx.x & 31) == 0)
        warp_sums[threadIdx.x / 32] = n;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long sum = 0;
        for (int k = 0; k < kThreads / 32; k++)
            sum += warp_sums[k];
        if (sum != 0)
            atomicAdd(&totals[y / band], sum);
    }
}

/* Each pixel's label: its kept region's number from 1, 0 for background and
 * the regions under min_area (OpenCV's label image, renumbered as the rows
 * are). */
__global__ void labels_kernel(Ranks ranks, const int *parent, const int *ids, const Stat *stats,
                              long long min_area, const int *keep_ids, const int *totals,
                              char *labels, size_t pitch)
{
    const int x = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int y = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x >= ranks.width || y >= ranks.height)
        return;
    int label = 0;
    const int root = ranks.root(parent, x, y);
    if (root >= 0) {
        const int id = ids[root];
        if ((long long)stats[id].area >= min_area)
            label = keep_ids[id] + totals[id / kScanBlock] + 1;
    }
    reinterpret_cast<int *>(labels + (size_t)y * pitch)[x] = label;
}

unsigned blocks_for(size_t n)
{
    return (unsigned)((n + kThreads - 1) / kThreads);
}

}  // namespace

extern "C" size_t fm_cc_max_regions(int width, int height, int connectivity)
{
    return layout_of(width, height, connectivity).regions;
}

extern "C" size_t fm_cc_work_bytes(int width, int height, int connectivity)
{
    Work w;
    return carve(layout_of(width, height, connectivity), nullptr, &w);
}

/* The launchers' shared check of a mask and its zone. */
bool valid_inputs(const fm_image &mask, const fm_image &zone)
{
    return mask.data != nullptr && mask.channels == 1 && mask.elem_size == 1 && mask.width > 0
           && mask.height > 0 && (size_t)mask.width <= mask.pitch
           && mask.width <= FM_CC_MAX_SIDE && mask.height <= FM_CC_MAX_SIDE
           && (zone.data == nullptr
               || (zone.width == mask.width && zone.height == mask.height
                   && zone.channels == 1 && zone.elem_size == 1
                   && (size_t)zone.width <= zone.pitch));
}

extern "C" cudaError_t fm_launch_count_foreground(fm_image mask, unsigned char foreground,
                                                  fm_image zone, void *out,
                                                  cudaStream_t stream)
{
    if (!valid_inputs(mask, zone) || out == nullptr)
        return cudaErrorInvalidValue;
    fm_cc_header *header = static_cast<fm_cc_header *>(out);
    cudaError_t err = cudaMemsetAsync(header, 0, sizeof *header, stream);
    if (err != cudaSuccess)
        return err;
    const Pixels pixels{static_cast<const unsigned char *>(mask.data),
                        static_cast<const unsigned char *>(zone.data), mask.pitch, zone.pitch,
                        foreground};
    const dim3 grid(fm_div_up((unsigned)mask.width, (unsigned)(kThreads * kCountPer)),
                    (unsigned)mask.height);
    count_kernel<<<grid, kThreads, 0, stream>>>(
        pixels, mask.width, mask.height, reinterpret_cast<unsigned long long *>(&header->pixels));
    return cudaGetLastError();
}

extern "C" cudaError_t fm_launch_components(fm_image mask, unsigned char foreground,
                                            fm_image zone, int connectivity,
                                            long long min_area, int images, void *work,
                                            void *out, size_t read_rows, fm_image labels,
                                            cudaStream_t stream)
{
    if (!valid_inputs(mask, zone) || work == nullptr || out == nullptr || images < 1
        || mask.height % images != 0
        || (images > 1 && ((mask.height / images) % 2 != 0 || labels.data != nullptr))
        || (labels.data != nullptr
            && (labels.width != mask.width || labels.height != mask.height
                || labels.channels != 1 || labels.elem_size != 4
                || (size_t)labels.width * 4 > labels.pitch))
        || (connectivity != 4 && connectivity != 8)
        || (long long)(mask.width + 1LL) * (mask.height + 1LL) >= (1LL << 30))
        return cudaErrorInvalidValue;
    const Layout l = layout_of(mask.width, mask.height, connectivity);
    Work w;
    carve(l, static_cast<char *>(work), &w);
    fm_cc_header *header = static_cast<fm_cc_header *>(out);
    const size_t count_slots = fm_cc_count_slots(images);
    fm_cc_row *rows = reinterpret_cast<fm_cc_row *>(header + 1) + count_slots;
    unsigned long long *pixels_sum = reinterpret_cast<unsigned long long *>(&header->pixels);
    const int band = mask.height / images;
    const Ranks ranks{mask.width, mask.height, connectivity == 8, (mask.width + 1) / 2, band,
                      w.bits};
    const int slots = (int)l.slots, regions = (int)l.regions;
    cudaError_t err;

    const dim3 tile(32, 8);
    const Pixels pixels{static_cast<const unsigned char *>(mask.data),
                        static_cast<const unsigned char *>(zone.data), mask.pitch, zone.pitch,
                        foreground};
    if (images > 1) {
        /* each image's foreground count, after the header */
        unsigned long long *counts = reinterpret_cast<unsigned long long *>(header + 1);
        if ((err = cudaMemsetAsync(counts, 0, count_slots * sizeof(fm_cc_row), stream))
            != cudaSuccess)
            return err;
        count_kernel<<<dim3(fm_div_up((unsigned)mask.width, (unsigned)(kThreads * kCountPer)),
                            (unsigned)mask.height), kThreads, 0, stream>>>(
            pixels, mask.width, band, counts);
    }
    if (connectivity == 8) {
        const int blocks_h = (mask.height + 1) / 2;
        const dim3 grid(fm_div_up((unsigned)ranks.blocks_w, tile.x),
                        fm_div_up((unsigned)blocks_h, tile.y));
        init8_kernel<<<grid, tile, 0, stream>>>(pixels, ranks, blocks_h, w.parent, w.bits);
        merge8_kernel<<<grid, tile, 0, stream>>>(ranks, blocks_h, w.parent);
    }
    else {
        const dim3 grid(fm_div_up((unsigned)mask.width, tile.x),
                        fm_div_up((unsigned)mask.height, tile.y));
        init4_kernel<<<grid, tile, 0, stream>>>(pixels, mask.width, mask.height, w.parent);
        merge4_kernel<<<grid, tile, 0, stream>>>(ranks, w.parent);
    }
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;

    /* the regions numbered in slot order; the trees flattened on the way */
    scan_blocks_kernel<<<(unsigned)l.slot_blocks, kThreads, 0, stream>>>(
        RootFlag{w.parent}, slots, w.ids, w.slot_totals);
    scan_totals_kernel<<<1, kTotalsThreads, 0, stream>>>(w.slot_totals, (int)l.slot_blocks,
                                                         &header->regions, pixels_sum);
    roots_kernel<<<blocks_for(l.slots), kThreads, 0, stream>>>(
        ranks, slots, w.parent, w.ids, w.slot_totals, (int)l.slot_blocks, &header->regions,
        w.stats);
    gather_kernel<<<dim3(fm_div_up((unsigned)mask.width, kThreads * kChunk),
                         (unsigned)mask.height), kThreads, 0, stream>>>(
        ranks, w.parent, w.ids, w.stats);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;

    /* the kept ones renumbered in that order, as rows */
    scan_blocks_kernel<<<(unsigned)l.region_blocks, kThreads, 0, stream>>>(
        KeepFlag{w.stats, &header->regions, min_area}, regions, w.keep_ids, w.region_totals);
    scan_totals_kernel<<<1, kTotalsThreads, 0, stream>>>(w.region_totals, (int)l.region_blocks,
                                                         &header->kept, nullptr);
    rows_kernel<<<min(blocks_for(l.regions), kRowsBlocks), kThreads, 0, stream>>>(
        w.stats, header, min_area, w.keep_ids, w.region_totals, regions,
        (int)(read_rows < l.regions ? read_rows : l.regions), rows);
    if (labels.data != nullptr)
        labels_kernel<<<dim3(fm_div_up((unsigned)mask.width, tile.x),
                             fm_div_up((unsigned)mask.height, tile.y)), tile, 0, stream>>>(
            ranks, w.parent, w.ids, w.stats, min_area, w.keep_ids, w.region_totals,
            static_cast<char *>(labels.data), labels.pitch);
    return cudaGetLastError();
}
