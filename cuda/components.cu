/* Connected components of a mask on the GPU, with each region's statistics,
 * in OpenCV's numbering. The mask is cut into cells (2x2 blocks with
 * 8-connectivity, whose pixels always touch, kept as 4 bits; pixels with
 * 4). Union-find over the cells, in the order regions are numbered by,
 * with atomicMin links, the larger root always under the smaller, so a
 * region's root is its least cell (OpenCV numbers regions in raster order
 * of their first cell). The runs', the unions' and the statistics'
 * passes take 4 cells a thread (one word of the cells' bits), so that the
 * background, most of a frame, costs a load a thread; the runs' pass can
 * also make the mask's 3x3 opening first (morphology_bits.h), so that the
 * opened mask is never written. The statistics are summed in tiles of 16
 * rows of 32 cells: a warp's cells of one region at once, a tile's in
 * shared memory where the tile holds one region, and added to the
 * region's root, and each tile row's roots are counted (a 32-bit mask)
 * into its block of the rows pass; that pass scans its block's masks,
 * which, with the blocks' counts before it, give every kept region its
 * row, and the first rows go straight into the host's page-locked
 * memory. Exact by construction: integers only. See components_launch.h. */
#include <stdint.h>

#include "components_launch.h"
#include "grid.h"
#include "morphology_bits.h"

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kThreads = 256;                   /* also the rows pass's entries a block */
constexpr size_t kAlign = 256;
/* A tile of the statistics' pass: kTileRows rows of kTileCols cells. */
constexpr int kTileCols = 32;
constexpr int kTileRows = 16;
constexpr int kTileCells = kTileCols * kTileRows;
/* Cells a thread, a byte each of one 32-bit word: in the runs' pass a
 * warp's cells of a row are a segment (32 * kPer of them; 30 * kPer when
 * the pass also opens the mask, morphology_bits.h's band), which a run
 * never leaves before the unions. */
constexpr int kPer = 4;
constexpr int kSegment = 32 * kPer;
constexpr int kOpenedSegment = kBitWarpCols / 2;
static_assert(kOpenedSegment % kPer == 0, "a segment starts at a thread's first cell");

/* Cell bits with 8-connectivity: pixel (x & 1, y & 1) of a block is bit
 * (y & 1) * 2 + (x & 1). A block's columns and rows. With 4-connectivity a
 * cell is 1 where its pixel is foreground. */
constexpr unsigned kLeftColumn = 0x5, kRightColumn = 0xa, kTopRow = 0x3, kBottomRow = 0xc;

/* A region's statistics while the tiles add to them, all by atomic max or
 * add, so that zero is every field's start: the least x and y as 65535
 * minus them (a mask side is at most 65535), the greatest plus one. */
struct Tally {
    unsigned left_inv, top_inv, right1, bottom1, area;
    int row;                /* the region's row, -1 if not kept: set last, for the labels */
    unsigned long long sum_x, sum_y;
};

/* The mask's cells and tiles; `band` is the cell rows of one image of a
 * stack (its pixel rows are even), or all of them: no region crosses from
 * one image to the next. */
struct Cells {
    int width, height;      /* pixels */
    int cols, rows;         /* cells */
    int band;
    int tile_cols;          /* tiles across */
    int bits_pitch;         /* cells a row of the bits: cols rounded up to kPer, the rest 0 */
    int segment;            /* cells of the runs' segments: kSegment or kOpenedSegment */

    /* Whether cell row cy starts an image: its cells join nothing above.
     * One image needs no division. */
    __device__ bool starts_image(int cy) const
    {
        return band == rows ? cy == 0 : cy % band == 0;
    }
    /* A tile row's entry: its 32 cells' mask of roots, its kept regions' offset. */
    __device__ int entry(int cy, int tile_x) const { return cy * tile_cols + tile_x; }
    /* Cell (cx, cy)'s place in the bits. */
    __device__ int bit(int cx, int cy) const { return cy * bits_pitch + cx; }
};

struct Layout {
    size_t cells, regions, entries, entry_blocks;   /* entry_blocks: the rows pass's */
    size_t bits_pitch, bits;
};

Layout layout_of(int width, int height, int connectivity)
{
    Layout l;
    const bool eight = connectivity == 8;
    const size_t cols = eight ? ((size_t)width + 1) / 2 : (size_t)width;
    const size_t rows = eight ? ((size_t)height + 1) / 2 : (size_t)height;
    l.cells = cols * rows;
    l.regions = eight ? l.cells : ((size_t)width * height + 1) / 2;
    l.entries = rows * ((cols + kTileCols - 1) / kTileCols);
    l.entry_blocks = (l.entries + kThreads - 1) / kThreads;
    l.bits_pitch = (cols + kPer - 1) / kPer * kPer;
    l.bits = rows * l.bits_pitch;
    return l;
}

size_t aligned(size_t n)
{
    return (n + kAlign - 1) / kAlign * kAlign;
}

/* The scratch, carved in this order. Per cell: its parent (foreground
 * cells only), its bits (rows of bits_pitch) and its region's tally (roots
 * only: indexed by the root's cell). Per tile row (an entry): the roots'
 * mask; per block of the rows pass, its entries' kept regions. */
struct Work {
    int *parent;
    unsigned char *bits;
    Tally *tallies;
    unsigned *root_masks;
    int *totals;
};

size_t carve(const Layout &l, char *base, Work *w)
{
    size_t at = 0;
    auto take = [&](size_t bytes) {
        char *p = base != nullptr ? base + at : nullptr;
        at += aligned(bytes);
        return p;
    };
    w->parent = (int *)take(l.cells * sizeof(int));
    w->bits = (unsigned char *)take(l.bits);
    w->tallies = (Tally *)take(l.cells * sizeof(Tally));
    w->root_masks = (unsigned *)take(l.entries * sizeof(unsigned));
    w->totals = (int *)take(l.entry_blocks * sizeof(int));
    return at;
}

/* The root of r's tree, read only: what the passes after the unions take. */
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
 * its grandparent (path halving, as ECL-CC does): a plain store of an
 * ancestor, so a link another thread makes meanwhile may be undone only for
 * a slot whose own path still leads to that link's root (unite retries
 * from the value atomicMin saw). */
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

/* The root of r's tree after the unions, each slot passed pointed at its
 * grandparent and r at the root: the trees no longer change, so every
 * store is an ancestor, and a long chain that many threads walk at once
 * (a region that winds across the frame) is halved under them instead of
 * walked whole by each. */
__device__ int find_flattening(int *parent, int r)
{
    const int root = find_halving(parent, r);
    if (parent[r] != root)
        parent[r] = root;
    return root;
}

/* The roots of *a's and *b's trees, each found as find_halving finds it,
 * the two walks a step at a time together: their loads are issued at
 * once, so a join waits for the longer path, not for both one after the
 * other. (A finished walk's load is not used.) */
__device__ void find_both(int *parent, int *a, int *b)
{
    int ra = *a, rb = *b;
    int ua = parent[ra], ub = parent[rb];
    while (ua != ra || ub != rb) {
        const int na = parent[ua], nb = parent[ub];
        if (ua != ra) {
            if (na != ua)
                parent[ra] = na;
            ra = ua;
            ua = na;
        }
        if (ub != rb) {
            if (nb != ub)
                parent[rb] = nb;
            rb = ub;
            ub = nb;
        }
    }
    *a = ra;
    *b = rb;
}

/* Joins the trees of a and b: the larger root goes under the smaller; a
 * link another thread changed first is followed and tried again. */
__device__ void unite(int *parent, int a, int b)
{
    for (;;) {
        find_both(parent, &a, &b);
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

/* Which of a word's 4 bytes equal `value`, as bits 0 to 3. */
__device__ unsigned matches(unsigned word, unsigned char value)
{
    unsigned b = 0;
    for (int k = 0; k < 4; k++)
        b |= (unsigned)((word >> 8 * k & 0xffu) == value) << k;
    return b;
}

/* Whether pixel (x, y), inside the image, is labelled. `vectors`: every
 * row of the mask, and of the zone, starts at an address a thread's pixels
 * are one load from (8 bytes with 8-connectivity, 4 with 4). */
struct Pixels {
    const unsigned char *mask, *zone;
    size_t pitch, zone_pitch;
    unsigned char foreground;
    bool vectors;
    __device__ bool operator()(int x, int y) const
    {
        return mask[(size_t)y * pitch + (size_t)x] == foreground
               && (zone == nullptr || zone[(size_t)y * zone_pitch + (size_t)x] != 0);
    }
    /* Pixels x to x + 3 of row y as bits 0 to 3; x a multiple of 4. */
    __device__ unsigned four(int x, int y) const
    {
        const unsigned m = *reinterpret_cast<const unsigned *>(mask + (size_t)y * pitch + x);
        unsigned b = matches(m, foreground);
        if (zone != nullptr)
            b &= ~matches(*reinterpret_cast<const unsigned *>(zone + (size_t)y * zone_pitch + x),
                          0) & 0xfu;
        return b;
    }
    /* Pixels x to x + 7 of row y as bits 0 to 7; x a multiple of 8. */
    __device__ unsigned eight(int x, int y) const
    {
        const uint2 m = *reinterpret_cast<const uint2 *>(mask + (size_t)y * pitch + x);
        unsigned b = matches(m.x, foreground) | matches(m.y, foreground) << 4;
        if (zone != nullptr) {
            const uint2 z = *reinterpret_cast<const uint2 *>(zone + (size_t)y * zone_pitch + x);
            b &= ~(matches(z.x, 0) | matches(z.y, 0) << 4) & 0xffu;
        }
        return b;
    }
};

/* Cell (cx, cy)'s bits, inside the cells, a pixel at a time. */
template <bool Eight>
__device__ unsigned cell_bits(const Pixels &pixels, const Cells &cells, int cx, int cy)
{
    if (!Eight)
        return pixels(cx, cy) ? 1u : 0u;
    const int x = 2 * cx, y = 2 * cy;
    const bool right = x + 1 < cells.width, below = y + 1 < cells.height;
    return (unsigned)pixels(x, y) | (unsigned)(right && pixels(x + 1, y)) << 1
           | (unsigned)(below && pixels(x, y + 1)) << 2
           | (unsigned)(right && below && pixels(x + 1, y + 1)) << 3;
}

/* Cell k of a thread's word of kPer cells. */
__device__ unsigned cell(unsigned word, int k)
{
    return word >> 8 * k & 0xffu;
}

/* The word of cells cx0 to cx0 + kPer - 1 of row cy, 0 past the row's end:
 * one load a pixel row where the rows allow it, else a pixel at a time. */
template <bool Eight>
__device__ unsigned cells_word(const Pixels &pixels, const Cells &cells, int cx0, int cy)
{
    unsigned word = 0;
    if (Eight) {
        const int x = 2 * cx0, y = 2 * cy;
        if (pixels.vectors && x + 2 * kPer <= cells.width && y + 1 < cells.height) {
            const unsigned top = pixels.eight(x, y), bottom = pixels.eight(x, y + 1);
            for (int k = 0; k < kPer; k++)
                word |= ((top >> 2 * k & 3u) | (bottom >> 2 * k & 3u) << 2) << 8 * k;
            return word;
        }
    }
    else if (pixels.vectors && cx0 + kPer <= cells.width) {
        const unsigned row = pixels.four(cx0, cy);
        for (int k = 0; k < kPer; k++)
            word |= (row >> k & 1u) << 8 * k;
        return word;
    }
    for (int k = 0; k < kPer && cx0 + k < cells.cols; k++)
        word |= cell_bits<Eight>(pixels, cells, cx0 + k, cy) << 8 * k;
    return word;
}

/* The bits' word of cells cx0 to cx0 + kPer - 1 of row cy. */
__device__ unsigned bits_word(const unsigned char *bits, const Cells &cells, int cx0, int cy)
{
    return *reinterpret_cast<const unsigned *>(bits + cells.bit(cx0, cy));
}

/* Whether a cell touches the cell on its left (bits `left`). */
template <bool Eight>
__device__ bool touches_left(unsigned here, unsigned left)
{
    return Eight ? (here & kLeftColumn) && (left & kRightColumn) : here && left;
}

/* Bit k: cell k of the word is not 0. A cell is below 0x80, so adding
 * 0x7f sets its byte's top bit exactly where it is not 0, and no carry
 * leaves the byte; times 1 + 2^7 + 2^14 + 2^21 then puts byte k's top bit
 * at bit 21 + k, no two partial products sharing a bit. */
__device__ unsigned nonzero_cells(unsigned word)
{
    const unsigned tops = (word + 0x7f7f7f7fu) & 0x80808080u;
    return (tops >> 7) * 0x00204081u >> 21 & 0xfu;
}

/* Bit k: the word's cell k touches the cell on its left (cell k - 1, or
 * `left` for cell 0), touches_left for the 4 cells at once. */
template <bool Eight>
__device__ unsigned links(unsigned word, unsigned left)
{
    const unsigned lefts = word << 8 | left;
    if (!Eight)
        return nonzero_cells(word) & nonzero_cells(lefts);
    return nonzero_cells(word & kLeftColumn * 0x01010101u)
           & nonzero_cells(lefts & kRightColumn * 0x01010101u);
}

/* Whether bits from + 1 to to of `linked` are all set (from at least -1):
 * the cells between from and to are one run. */
__device__ bool all_linked(unsigned linked, int from, int to)
{
    const unsigned span = (2u << to) - (1u << (from + 1));
    return (linked & span) == span;
}

/* Each foreground cell of a warp's segments of `Rows` rows points at the
 * first cell of its run of touching cells within its segment, so that a
 * run is one tree before any union. `words[r]` is this lane's kPer cells
 * of row r, that segment's cells (lane - lead) * kPer on; lanes before
 * `lead` hold none (their words 0), nor do lanes past the segment's
 * `length` cells. Row r's segment starts at cell base + r * stride, and
 * `limit` cells are left in its row. A run's first cell is the only one
 * that can end as a root: its tally is zeroed. The run's first cell is
 * the thread's last start up to the cell, or else the segment's last
 * before the thread: a max scan over the lanes, of a byte a row (a start
 * plus 1, below 256), so that the rows share its shuffles. A background
 * cell's parent is never read, so it is not written. Every lane calls it. */
template <bool Eight, int Rows>
__device__ void plant_runs(const unsigned (&words)[Rows], int lane, int lead, int length, int base,
                           int stride, int limit, int *parent, Tally *tallies)
{
    static_assert(Rows <= 4 && 32 * kPer < 256, "a row's start is a byte of a word");
    unsigned any = 0, ends = 0;             /* ends: byte r, this lane's last cell of row r */
#pragma unroll
    for (int r = 0; r < Rows; r++) {
        any |= words[r];
        ends |= cell(words[r], kPer - 1) << 8 * r;
    }
    if (!__any_sync(kFull, any != 0))
        return;                             /* segments of background, most of a frame */
    const int at = (lane - lead) * kPer;
    const unsigned from_left = __shfl_up_sync(kFull, ends, 1);
    const unsigned lefts = lane > lead ? from_left : 0u;
    unsigned starts[Rows];                  /* foreground cells joining none on their left */
    unsigned last = 0;                      /* byte r: row r's last start up to here, plus 1 */
#pragma unroll
    for (int r = 0; r < Rows; r++) {
        starts[r] = nonzero_cells(words[r]) & ~links<Eight>(words[r], lefts >> 8 * r & 0xffu);
        last |= starts[r] ? (unsigned)(at + 32 - __clz((int)starts[r])) << 8 * r : 0u;
    }
    for (int off = 1; off < 32; off <<= 1) {
        const unsigned n = __shfl_up_sync(kFull, last, off);
        if (lane >= off)
            last = __vmaxu4(last, n);
    }
    /* a cell linked on its left has a lane before it */
    const unsigned before = __shfl_up_sync(kFull, last, 1);
#pragma unroll
    for (int r = 0; r < Rows; r++) {
        if (words[r] == 0)
            continue;
        const int row = base + r * stride;
        int run = (int)(before >> 8 * r & 0xffu) - 1;
#pragma unroll
        for (int k = 0; k < kPer; k++) {
            const int x = at + k;
            if (starts[r] >> k & 1u)
                run = x;
            if (cell(words[r], k) == 0 || x >= length || x >= limit)
                continue;
            parent[row + x] = row + run;
            if (run == x)
                tallies[row + x] = Tally{};
        }
    }
}

/* The rows pass's totals zeroed by a runs' pass, which has more threads
 * than there are totals, before the gather adds its roots to them. */
__device__ void zero_totals(int *totals, int blocks)
{
    const int threads = (int)(gridDim.x * gridDim.y * blockDim.x * blockDim.y);
    int t = (int)(((blockIdx.y * gridDim.x + blockIdx.x) * blockDim.y + threadIdx.y) * blockDim.x
                  + threadIdx.x);
    for (; t < blocks; t += threads)
        totals[t] = 0;
}

/* The runs' pass over the mask: a thread's kPer cells from the mask
 * (cells_word), their bits to `bits`, then plant_runs. The first thread
 * zeroes the header's regions and pixels, which the gather adds to (the
 * rows pass copies them, with the kept count, to the host's header), and
 * every thread its share of the rows pass's totals. */
template <bool Eight>
__global__ void init_kernel(Pixels pixels, Cells cells, int *parent, unsigned char *bits,
                            Tally *tallies, fm_cc_header *header, int *totals, int blocks)
{
    zero_totals(totals, blocks);
    const int lane = (int)(threadIdx.x & 31);
    const int cx0 = (int)(blockIdx.x * blockDim.x + threadIdx.x) * kPer;
    const int cy = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (cy >= cells.rows)
        return;                             /* whole warps leave together */
    const bool here = cx0 < cells.cols;
    const unsigned word = here ? cells_word<Eight>(pixels, cells, cx0, cy) : 0u;
    if (here)
        *reinterpret_cast<unsigned *>(bits + cells.bit(cx0, cy)) = word;
    if (cx0 == 0 && cy == 0) {
        header->regions = 0;                /* counted by the gather */
        header->pixels = 0;
    }
    const int segment = cx0 - lane * kPer;
    const unsigned words[1] = {word};
    plant_runs<Eight, 1>(words, lane, 0, kSegment, cy * cells.cols + segment, cells.cols,
                         cells.cols - segment, parent, tallies);
}

/* Bits 2k and 2k + 1 of `row` (8 bits) to bits 0 and 1 of byte k: a
 * cell's two pixels of a row. */
__device__ __forceinline__ unsigned pairs_to_bytes(unsigned row)
{
    row = (row | row << 12) & 0x000f000fu;  /* pairs 0 and 1 at bits 0, pairs 2 and 3 at 16 */
    return (row | row << 6) & 0x03030303u;  /* pair 1 to bit 8, pair 3 to bit 24 */
}

/* init_kernel for the 3x3 opening (DilateFirst false) or closing of the
 * mask, with 8-connectivity: the opening's warp holds its band's result
 * in bits (pair3_bits), 8 pixels of 8 rows a lane, which are exactly the
 * kPer cells of 4 cell rows, so the cells come from registers and neither
 * the opened mask nor a second read of the mask is made. A segment is a
 * band's 30 lanes, kOpenedSegment cells; lanes 0 and 31 (the halo) hold
 * no cell. */
template <bool DilateFirst>
__global__ void __launch_bounds__(32 * kBitWarps)
opened_init_kernel(Pixels pixels, Cells cells, int *parent, unsigned char *bits,
                   Tally *tallies, fm_cc_header *header, int *totals, int blocks)
{
    zero_totals(totals, blocks);
    const int lane = (int)(threadIdx.x & 31);
    const int warp_x = (int)(blockIdx.x * kBitWarps + (threadIdx.x >> 5));
    if (warp_x * kBitWarpCols >= cells.width)
        return;                             /* the whole warp */
    const int x0 = warp_x * kBitWarpCols - 8 + 8 * lane, y0 = (int)blockIdx.y * kBitRows;
    uint32_t opened[kBitRows / 4];
    pair3_bits<DilateFirst>(pixels.mask, pixels.pitch, cells.width, cells.height,
                            pixels.foreground, x0, y0, pixels.vectors, opened);
    /* the lane's pixels of the band inside the image (x0 >= 0 for lanes 1 on) */
    const bool own = lane > 0 && lane < 31 && x0 < cells.width;
    const uint32_t inside = own ? 0xffu >> (8 - min(cells.width - x0, 8)) : 0u;
    const int cx0 = x0 / 2, segment = warp_x * kOpenedSegment;
    if (warp_x == 0 && y0 == 0 && lane == 1) {
        header->regions = 0;                /* counted by the gather */
        header->pixels = 0;
    }
    unsigned words[kBitRows / 2];           /* the band's cell rows, 0 past the last */
#pragma unroll
    for (int r = 0; r < kBitRows / 2; r++) {
        const int cy = y0 / 2 + r;
        const uint32_t top = band_row(opened, 2 * r) & inside;
        const uint32_t bottom =
            y0 + 2 * r + 1 < cells.height ? band_row(opened, 2 * r + 1) & inside : 0u;
        words[r] = cy < cells.rows ? pairs_to_bytes(top) | pairs_to_bytes(bottom) << 2 : 0u;
        if (own && cy < cells.rows)
            *reinterpret_cast<unsigned *>(bits + cells.bit(cx0, cy)) = words[r];
    }
    plant_runs<true>(words, lane, 1, kOpenedSegment, y0 / 2 * cells.cols + segment, cells.cols,
                     cells.cols - segment, parent, tallies);
}

/* Whether a cell (bits v) touches the cell above it at column offset d
 * (-1, 0 or 1; with 4-connectivity only 0), whose bits are `up`. */
template <bool Eight>
__device__ bool touches_up(unsigned v, unsigned up, int d)
{
    if (!Eight)
        return d == 0 && v && up;
    if (d == 0)
        return (v & kTopRow) && (up & kBottomRow);
    return d < 0 ? (v & 1u) && (up & 8u) : (v & 2u) && (up & 4u);
}

/* Each foreground cell joins the earlier cells it touches that may lie in
 * another tree: the cell on its left across a runs' segment's start (a
 * multiple of cells.segment), and the row
 * above (with 8-connectivity up-left and up-right too, through the corner
 * pixels). A thread kPer cells, its neighbours' bits from the lanes beside
 * it, every load issued before any is used. A join is left out where it is
 * implied: the thread's last join was made by a cell of this cell's run to
 * a cell of the same run above (the region is the same whichever joins
 * make it, and its root its least cell), so a run under a run is mostly
 * one join a thread. The joins are listed first and made after, so that
 * the lanes of a warp make theirs together. */
template <bool Eight>
__global__ void merge_kernel(Cells cells, const unsigned char *bits, int *parent)
{
    constexpr int kSegmentJoin = 3 * kPer;  /* the join's bit, after cell k's 3k to 3k + 2 */
    const int lane = (int)(threadIdx.x & 31);
    const int cx0 = (int)(blockIdx.x * blockDim.x + threadIdx.x) * kPer;
    const int cy = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (cy >= cells.rows)
        return;                             /* whole warps leave together */
    const bool here = cx0 < cells.cols, above = !cells.starts_image(cy);
    /* lane 0's cells on the left, lane 31's above on the right */
    const bool first = here && lane == 0 && cx0 > 0;
    const bool last = here && lane == 31 && cx0 + kPer < cells.cols;
    const unsigned word = here ? bits_word(bits, cells, cx0, cy) : 0u;
    const unsigned up = here && above ? bits_word(bits, cells, cx0, cy - 1) : 0u;
    const unsigned side = first ? bits[cells.bit(cx0 - 1, cy)] : 0u;
    const unsigned side_up =
        above && (first || last) ? bits[cells.bit(first ? cx0 - 1 : cx0 + kPer, cy - 1)] : 0u;
    if (!__any_sync(kFull, word != 0))
        return;
    /* every lane shuffles; lanes 0 and 31 then take their own loads */
    const unsigned beside = __shfl_up_sync(kFull, cell(word, kPer - 1), 1);
    const unsigned beside_up = __shfl_up_sync(kFull, cell(up, kPer - 1), 1);
    const unsigned after_up = __shfl_down_sync(kFull, cell(up, 0), 1);
    const unsigned left = lane == 0 ? side : beside;
    const unsigned up_left = lane == 0 ? side_up : beside_up;
    const unsigned up_right = lane == 31 ? side_up : after_up;
    if (word == 0)
        return;
    /* the cells above, from up-left of cell 0 to up-right of the last: j + 1 for cell j */
    const unsigned long long ups = (unsigned long long)up_left | (unsigned long long)up << 8
                                   | (unsigned long long)up_right << (8 * (kPer + 1));
    auto above_cell = [&](int j) { return (unsigned)(ups >> 8 * (j + 1)) & 0xffu; };
    unsigned up_linked = 0;                 /* bit j + 1: cell j above touches j - 1 */
    for (int j = 0; j <= kPer; j++)
        up_linked |= (unsigned)touches_left<Eight>(above_cell(j), above_cell(j - 1)) << (j + 1);
    const unsigned linked = links<Eight>(word, left);
    unsigned joins = cx0 % cells.segment == 0 && (linked & 1u) ? 1u << kSegmentJoin : 0u;
    int joined = -1, to = 0;                /* the last join: its cell and the cell above */
    for (int k = 0; k < kPer && above; k++) {
        const unsigned v = cell(word, k);
        if (v == 0)
            continue;
        if (joined >= 0 && !all_linked(linked, joined, k))
            joined = -1;
        for (int d = -1; d <= 1; d++) {
            const int j = k + d;
            if (!touches_up<Eight>(v, above_cell(j), d))
                continue;
            if (joined < 0 || !all_linked(up_linked, min(to, j) + 1, max(to, j) + 1))
                joins |= 1u << (3 * k + d + 1);
            joined = k;
            to = j;
        }
    }
    const int c0 = cy * cells.cols + cx0, u0 = c0 - cells.cols;
    for (; joins != 0; joins &= joins - 1) {
        const int i = __ffs((int)joins) - 1;
        if (i == kSegmentJoin)
            unite(parent, c0, c0 - 1);
        else
            unite(parent, c0 + i / 3, u0 + i / 3 + i % 3 - 1);
    }
}

/* One cell's part of its region's statistics (Tally's encoding). */
struct Part {
    unsigned left_inv, top_inv, right1, bottom1, area, sum_x, sum_y;
};

template <bool Eight>
__device__ Part part_of(unsigned v, int cx, int cy)
{
    if (!Eight)
        return Part{65535u - cx, 65535u - cy, (unsigned)cx + 1, (unsigned)cy + 1, 1u,
                    (unsigned)cx, (unsigned)cy};
    const unsigned x = 2u * cx, y = 2u * cy;
    return Part{65535u - (x + ((v & kLeftColumn) ? 0u : 1u)),
                65535u - (y + ((v & kTopRow) ? 0u : 1u)),
                x + ((v & kRightColumn) ? 2u : 1u),
                y + ((v & kBottomRow) ? 2u : 1u),
                (unsigned)__popc(v),
                __popc(v & kLeftColumn) * x + __popc(v & kRightColumn) * (x + 1),
                __popc(v & kTopRow) * y + __popc(v & kBottomRow) * (y + 1)};
}

/* A part added to a region's tally. */
__device__ void add_to(Tally *t, const Part &p)
{
    atomicMax(&t->left_inv, p.left_inv);
    atomicMax(&t->top_inv, p.top_inv);
    atomicMax(&t->right1, p.right1);
    atomicMax(&t->bottom1, p.bottom1);
    atomicAdd(&t->area, p.area);
    atomicAdd(&t->sum_x, (unsigned long long)p.sum_x);
    atomicAdd(&t->sum_y, (unsigned long long)p.sum_y);
}

/* The sum of v over the warp, in every lane. */
__device__ unsigned warp_total(unsigned v)
{
#if __CUDA_ARCH__ >= 800
    return __reduce_add_sync(kFull, v);
#else
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(kFull, v, off);
    return v;
#endif
}

/* Sums the parts of this warp's cells that share this lane's region
 * (`key`: its root) into one of their lanes, and says whether this lane is it. Zero
 * is every field's start, so a background lane's zero part changes
 * nothing. Most warps hold one region or none: from Ampere on, redux sums
 * any group of lanes in one instruction; before it, a warp of one region
 * is summed by shuffles and in a warp of several each cell adds its own. */
__device__ bool warp_sum(Part *p, unsigned v, int key)
{
    const int lane = (int)(threadIdx.x & 31);
    const unsigned fg = __ballot_sync(kFull, v != 0);
    if (fg == 0)
        return false;
    const int lead = __shfl_sync(kFull, key, __ffs((int)fg) - 1);
    const bool one = __all_sync(kFull, v == 0 || key == lead);
#if __CUDA_ARCH__ >= 800
    const unsigned group = one ? fg : __match_any_sync(kFull, key);
    if (v == 0)
        return false;
    p->left_inv = __reduce_max_sync(group, p->left_inv);
    p->top_inv = __reduce_max_sync(group, p->top_inv);
    p->right1 = __reduce_max_sync(group, p->right1);
    p->bottom1 = __reduce_max_sync(group, p->bottom1);
    p->area = __reduce_add_sync(group, p->area);
    p->sum_x = __reduce_add_sync(group, p->sum_x);
    p->sum_y = __reduce_add_sync(group, p->sum_y);
    return lane == __ffs((int)group) - 1;
#else
    if (!one)
        return v != 0;
    for (int off = 16; off > 0; off >>= 1) {
        p->left_inv = max(p->left_inv, __shfl_xor_sync(kFull, p->left_inv, off));
        p->top_inv = max(p->top_inv, __shfl_xor_sync(kFull, p->top_inv, off));
        p->right1 = max(p->right1, __shfl_xor_sync(kFull, p->right1, off));
        p->bottom1 = max(p->bottom1, __shfl_xor_sync(kFull, p->bottom1, off));
        p->area += __shfl_xor_sync(kFull, p->area, off);
        p->sum_x += __shfl_xor_sync(kFull, p->sum_x, off);
        p->sum_y += __shfl_xor_sync(kFull, p->sum_y, off);
    }
    return lane == __ffs((int)fg) - 1;
#endif
}

/* Part p added into `into` (both in Tally's encoding). */
__device__ void combine(Part *into, const Part &p)
{
    into->left_inv = max(into->left_inv, p.left_inv);
    into->top_inv = max(into->top_inv, p.top_inv);
    into->right1 = max(into->right1, p.right1);
    into->bottom1 = max(into->bottom1, p.bottom1);
    into->area += p.area;
    into->sum_x += p.sum_x;
    into->sum_y += p.sum_y;
}

/* A tile's statistics, after the unions. A thread takes kPer cells of a
 * row (kTileCols / kPer threads a row, so an empty tile, most of a frame,
 * costs one load a thread and one barrier): each foreground cell finds its
 * region's root (find_flattening; a cell touching the one on its left
 * shares its root), the thread sums the parts of its first cell's region
 * and adds any other region's cell itself; the threads' sums are summed per
 * region a warp at a time (warp_sum) and added to the root's tally. Where
 * every foreground cell of the tile has one root (a large region), the
 * warps' sums meet in shared memory first, so the root takes one add per
 * tile, not one per warp. Each tile row's mask of roots goes to
 * root_masks; the header gets the regions and pixels counted; with
 * `count_roots` (every region kept: min_area at most 1), each tile row's
 * roots are added to the total of its block of the rows pass. A tile's
 * sums fit 32 bits: at most 2048 pixels of x below 65536. */
constexpr int kTileThreads = kTileCells / kPer;

template <bool Eight>
__global__ void __launch_bounds__(kTileThreads)
tile_gather_kernel(Cells cells, const unsigned char *bits, int *parent, Tally *tallies,
                   unsigned *root_masks, fm_cc_header *header, int *totals, bool count_roots)
{
    constexpr int kRowThreads = kTileCols / kPer;
    __shared__ Part s_sum;
    __shared__ int s_root;
    __shared__ unsigned s_roots, s_pixels;
    const int l = (int)threadIdx.x, tx = l % kRowThreads;
    const int cx0 = (int)blockIdx.x * kTileCols + tx * kPer;
    const int cy = (int)blockIdx.y * kTileRows + l / kRowThreads;
    const bool inside = cx0 < cells.cols && cy < cells.rows;
    const unsigned word = inside ? bits_word(bits, cells, cx0, cy) : 0u;
    if (!__syncthreads_or(word != 0)) {
        if (tx == 0 && cy < cells.rows)
            root_masks[cells.entry(cy, (int)blockIdx.x)] = 0;
        return;
    }
    if (l == 0) {
        s_sum = Part{};
        s_roots = s_pixels = 0;
    }
    const int c0 = cy * cells.cols + cx0;
    const unsigned linked = links<Eight>(word, 0u);
    int roots[kPer];
    for (int k = 0; k < kPer; k++) {
        if (cell(word, k) == 0)
            roots[k] = -1;
        else
            roots[k] = k > 0 && (linked >> k & 1u) ? roots[k - 1] : find_flattening(parent, c0 + k);
    }
    /* the thread's first region: the root of its first foreground cell */
    int key = -1;
    for (int k = kPer - 1; k >= 0; k--)
        key = roots[k] >= 0 ? roots[k] : key;
    __syncthreads();                        /* s_sum, s_roots and s_pixels are set */
    if (key >= 0)
        atomicExch(&s_root, key);           /* any foreground cell's root: the test below */
    bool single = true;                     /* the thread's foreground cells all in key's region */
    for (int k = 0; k < kPer; k++)
        single = single && (roots[k] < 0 || roots[k] == key);
    __syncthreads();
    const bool one = __syncthreads_and(key < 0 || (single && key == s_root));
    Part p{};
    unsigned own = 0;                       /* bit k: cell k is its region's root */
    for (int k = 0; k < kPer; k++) {
        if (roots[k] < 0)
            continue;
        own |= (unsigned)(roots[k] == c0 + k) << k;
        const Part q = part_of<Eight>(cell(word, k), cx0 + k, cy);
        if (roots[k] == key)
            combine(&p, q);
        else
            add_to(&tallies[roots[k]], q);  /* never when one */
    }
    if (warp_sum(&p, key >= 0 ? 1u : 0u, key)) {
        if (one) {
            atomicMax(&s_sum.left_inv, p.left_inv);
            atomicMax(&s_sum.top_inv, p.top_inv);
            atomicMax(&s_sum.right1, p.right1);
            atomicMax(&s_sum.bottom1, p.bottom1);
            atomicAdd(&s_sum.area, p.area);
            atomicAdd(&s_sum.sum_x, p.sum_x);
            atomicAdd(&s_sum.sum_y, p.sum_y);
        }
        else {
            add_to(&tallies[key], p);
        }
    }
    /* the row's 32 cells' roots, from its kRowThreads neighbouring lanes */
    unsigned row_roots = own << (kPer * tx);
    for (int off = 1; off < kRowThreads; off <<= 1)
        row_roots |= __shfl_xor_sync(kFull, row_roots, off);
    const unsigned pixels = warp_total((unsigned)__popc(word));
    if (tx == 0) {
        const int entry = cells.entry(cy, (int)blockIdx.x);
        if (cy < cells.rows)
            root_masks[entry] = row_roots;
        if (row_roots) {
            atomicAdd(&s_roots, (unsigned)__popc(row_roots));
            if (count_roots)
                atomicAdd(&totals[entry / kThreads], __popc(row_roots));
        }
    }
    if ((l & 31) == 0)
        atomicAdd(&s_pixels, pixels);
    __syncthreads();
    if (l == 0) {
        if (one)
            add_to(&tallies[s_root], s_sum);
        if (s_roots)
            atomicAdd(&header->regions, (int)s_roots);
        atomicAdd(reinterpret_cast<unsigned long long *>(&header->pixels),
                  (unsigned long long)s_pixels);
    }
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

/* A tile row's roots of at least min_area pixels, in cell order (bit k is
 * the row's cell k of the tile): every region has a pixel, so with
 * min_area at most 1 each root is kept. */
struct KeptRoots {
    const unsigned *masks;
    const Tally *tallies;
    Cells cells;
    long long min_area;

    __device__ int first_cell(int entry) const
    {
        const int cy = entry / cells.tile_cols;
        return cy * cells.cols + (entry - cy * cells.tile_cols) * kTileCols;
    }
    __device__ bool kept(int cell) const
    {
        return (long long)tallies[cell].area >= min_area;
    }
    /* How many there are: what the scan adds up. */
    __device__ int operator()(int entry) const
    {
        unsigned m = masks[entry];
        if (m == 0 || min_area <= 1)
            return __popc(m);
        const int first = first_cell(entry);
        int n = 0;
        for (; m != 0; m &= m - 1)
            n += kept(first + __ffs((int)m) - 1);
        return n;
    }
};

/* Each block of the rows pass's kept regions, where min_area drops some
 * (else the gather counts them): a thread an entry, as the rows pass. */
__global__ void __launch_bounds__(kThreads)
kept_totals_kernel(KeptRoots roots, int entries, int *totals)
{
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const unsigned n = warp_total(i < entries ? (unsigned)roots(i) : 0u);
    __shared__ int s_total;
    if (threadIdx.x == 0)
        s_total = 0;
    __syncthreads();
    if ((threadIdx.x & 31) == 0 && n != 0)
        atomicAdd(&s_total, (int)n);
    __syncthreads();
    if (threadIdx.x == 0)
        totals[blockIdx.x] = s_total;
}

/* A coordinate sum in a row's three half-words, low first. */
__device__ void put48(uint16_t *dst, unsigned long long v)
{
    dst[0] = (uint16_t)v;
    dst[1] = (uint16_t)(v >> 16);
    dst[2] = (uint16_t)(v >> 32);
}

/* The kept regions as rows, a thread an entry (a tile row): its kept
 * roots in cell order, from its offset on; each root's row number (or -1,
 * not kept) to its tally, for the label image. A block with nothing to
 * write leaves first; the others sum the blocks' totals, those before
 * their own for their offset and all of them for the kept count, and scan
 * their own entries' counts. The
 * first `read_rows` rows go straight to the host's page-locked memory
 * (`host_rows`), after the header and the `count_words` words of the
 * stack's counts (`host`), so that no copy waits behind this pass; later
 * rows go to `rows`, for a second copy. The rows after the kept ones up
 * to `read_rows`, and the header's spare words, are zeroed: the host reads
 * them before it knows the count, and finds nothing left uninitialised. */
__global__ void __launch_bounds__(kThreads)
rows_kernel(KeptRoots roots, const int *totals, int blocks, int entries, int read_rows,
            Tally *tallies, const fm_cc_header *header, fm_cc_row *rows, fm_cc_header *host,
            int count_words, fm_cc_row *host_rows)
{
    __shared__ int s_before, s_kept;
    const int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int stride = (int)(gridDim.x * blockDim.x);
    const int start = (int)(blockIdx.x * blockDim.x);
    const unsigned found = i < entries ? roots.masks[i] : 0u;
    /* the first total this thread sums, loaded beside the mask */
    const unsigned total0 = (int)threadIdx.x < blocks ? (unsigned)totals[threadIdx.x] : 0u;
    if (threadIdx.x == 0)
        s_before = s_kept = 0;
    /* only a block with roots, rows to zero or the header to write needs the totals */
    if (!__syncthreads_or(found != 0) && start >= read_rows && blockIdx.x != 0)
        return;
    unsigned before = threadIdx.x < blockIdx.x ? total0 : 0u, all = total0;
    for (int b = (int)(threadIdx.x + blockDim.x); b < blocks; b += (int)blockDim.x) {
        const unsigned t = (unsigned)totals[b];
        all += t;
        before += b < (int)blockIdx.x ? t : 0u;
    }
    before = warp_total(before);
    all = warp_total(all);
    if ((threadIdx.x & 31) == 0 && all != 0) {
        atomicAdd(&s_before, (int)before);
        atomicAdd(&s_kept, (int)all);
    }
    int unused;
    const int local = block_exclusive_sum(found != 0 ? roots(i) : 0, &unused);
    const int kept = s_kept;                /* block_exclusive_sum's barrier came first */
    if (blockIdx.x == 0) {
        if (threadIdx.x == 0)
            *host = fm_cc_header{header->regions, kept, header->pixels, {0, 0}};
        const auto *counts = reinterpret_cast<const unsigned long long *>(header + 1);
        for (int w = (int)threadIdx.x; w < count_words; w += (int)blockDim.x)
            reinterpret_cast<unsigned long long *>(host + 1)[w] = counts[w];
    }
    for (int r = kept + i; r < read_rows; r += stride)
        host_rows[r] = fm_cc_row{};
    unsigned m = found;
    if (m == 0)
        return;
    const int first = roots.first_cell(i);
    int at = -1;                                    /* the offset: written if one is kept */
    for (; m != 0; m &= m - 1) {
        const int cell = first + __ffs((int)m) - 1;
        if (!roots.kept(cell)) {
            tallies[cell].row = -1;
            continue;
        }
        if (at < 0)
            at = local + s_before;
        const Tally t = tallies[cell];
        const unsigned x0 = 65535u - t.left_inv, y0 = 65535u - t.top_inv;
        fm_cc_row row;
        row.x = (uint16_t)x0;
        row.y = (uint16_t)y0;
        row.width = (uint16_t)(t.right1 - x0);
        row.height = (uint16_t)(t.bottom1 - y0);
        row.area = t.area;
        put48(row.sum_x, t.sum_x);
        put48(row.sum_y, t.sum_y);
        (at < read_rows ? host_rows : rows)[at] = row;
        tallies[cell].row = at++;
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
template <bool Eight>
__global__ void labels_kernel(Cells cells, const unsigned char *bits, const int *parent,
                              const Tally *tallies, char *labels, size_t pitch)
{
    const int x = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    const int y = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x >= cells.width || y >= cells.height)
        return;
    const int cx = Eight ? x >> 1 : x, cy = Eight ? y >> 1 : y, c = cy * cells.cols + cx;
    const unsigned bit = Eight ? 1u << (((y & 1) << 1) | (x & 1)) : 1u;
    const int label = (bits[cells.bit(cx, cy)] & bit) ? tallies[find_root(parent, c)].row + 1 : 0;
    reinterpret_cast<int *>(labels + (size_t)y * pitch)[x] = label;
}

unsigned blocks_for(size_t n)
{
    return (unsigned)((n + kThreads - 1) / kThreads);
}

/* Queues the labelling after the checks: the runs (of the mask, or with
 * `opening` 0 or 1 of its 3x3 opening or closing, cells.segment
 * kOpenedSegment), their unions, the tiles' statistics (which count the
 * roots, or where min_area drops some, a pass of its own counts the kept
 * ones), the rows. A pass is queued only if every one
 * before it was: none reads scratch that a failed launch left unwritten
 * (the rows pass writes into host memory). */
template <bool Eight>
cudaError_t launch_cells(const Pixels &pixels, const Cells &cells, int opening, const Layout &l,
                         const Work &w, long long min_area, fm_cc_header *header,
                         fm_cc_row *rows, int images, void *host, size_t read_rows,
                         const fm_image &labels, cudaStream_t stream)
{
    const dim3 warps(32, 8);
    const int blocks = (int)l.entry_blocks;
    const dim3 grid(fm_div_up(fm_div_up((unsigned)cells.cols, kPer), warps.x),
                    fm_div_up((unsigned)cells.rows, warps.y));
    if (opening < 0)
        init_kernel<Eight><<<grid, warps, 0, stream>>>(pixels, cells, w.parent, w.bits,
                                                       w.tallies, header, w.totals, blocks);
    else {
        const dim3 bands(fm_div_up((unsigned)cells.width, kBitWarps * kBitWarpCols),
                         fm_div_up((unsigned)cells.height, kBitRows));
        auto kernel = opening ? opened_init_kernel<true> : opened_init_kernel<false>;
        kernel<<<bands, 32 * kBitWarps, 0, stream>>>(pixels, cells, w.parent, w.bits, w.tallies,
                                                     header, w.totals, blocks);
    }
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;
    merge_kernel<Eight><<<grid, warps, 0, stream>>>(cells, w.bits, w.parent);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;
    const dim3 tiles((unsigned)cells.tile_cols, fm_div_up((unsigned)cells.rows, kTileRows));
    tile_gather_kernel<Eight><<<tiles, kTileThreads, 0, stream>>>(
        cells, w.bits, w.parent, w.tallies, w.root_masks, header, w.totals, min_area <= 1);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;
    const KeptRoots roots{w.root_masks, w.tallies, cells, min_area};
    const int entries = (int)l.entries;
    if (min_area > 1) {
        kept_totals_kernel<<<(unsigned)blocks, kThreads, 0, stream>>>(roots, entries, w.totals);
        if ((err = cudaGetLastError()) != cudaSuccess)
            return err;
    }
    const int read = (int)(read_rows < l.regions ? read_rows : l.regions);
    fm_cc_header *host_head = static_cast<fm_cc_header *>(host);
    const size_t count_slots = fm_cc_count_slots(images);
    rows_kernel<<<blocks_for((size_t)(entries > read ? entries : read)), kThreads, 0, stream>>>(
        roots, w.totals, blocks, entries, read, w.tallies, header,
        rows, host_head, (int)(count_slots * sizeof(fm_cc_row) / 8),
        reinterpret_cast<fm_cc_row *>(host_head + 1) + count_slots);
    if ((err = cudaGetLastError()) != cudaSuccess)
        return err;
    if (labels.data != nullptr) {
        const dim3 block(32, 8);
        labels_kernel<Eight><<<dim3(fm_div_up((unsigned)cells.width, block.x),
                                    fm_div_up((unsigned)cells.height, block.y)), block, 0,
                               stream>>>(cells, w.bits, w.parent, w.tallies,
                                         static_cast<char *>(labels.data), labels.pitch);
    }
    return cudaGetLastError();
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

namespace {

/* Whether every row of `image` starts at a multiple of `bytes`. */
bool rows_aligned(const fm_image &image, size_t bytes)
{
    return reinterpret_cast<uintptr_t>(image.data) % bytes == 0 && image.pitch % bytes == 0;
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

}  // namespace

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
                        foreground, false};
    const dim3 grid(fm_div_up((unsigned)mask.width, (unsigned)(kThreads * kCountPer)),
                    (unsigned)mask.height);
    count_kernel<<<grid, kThreads, 0, stream>>>(
        pixels, mask.width, mask.height, reinterpret_cast<unsigned long long *>(&header->pixels));
    return cudaGetLastError();
}

namespace {

/* What both labelling entries queue, after their checks: the cells and
 * the scratch laid out, the stack's counts, then launch_cells. */
cudaError_t queue_components(const fm_image &mask, unsigned char foreground, const fm_image &zone,
                             int connectivity, int opening, long long min_area, int images,
                             void *work, void *out, void *host, size_t read_rows,
                             const fm_image &labels, cudaStream_t stream)
{
    const bool eight = connectivity == 8;
    const Layout l = layout_of(mask.width, mask.height, connectivity);
    Work w;
    carve(l, static_cast<char *>(work), &w);
    fm_cc_header *header = static_cast<fm_cc_header *>(out);
    const size_t count_slots = fm_cc_count_slots(images);
    fm_cc_row *rows = reinterpret_cast<fm_cc_row *>(header + 1) + count_slots;
    Cells cells;
    cells.width = mask.width;
    cells.height = mask.height;
    cells.cols = eight ? (mask.width + 1) / 2 : mask.width;
    cells.rows = eight ? (mask.height + 1) / 2 : mask.height;
    cells.band = cells.rows / images;
    cells.tile_cols = (int)fm_div_up((unsigned)cells.cols, kTileCols);
    cells.bits_pitch = (int)l.bits_pitch;
    cells.segment = opening < 0 ? kSegment : kOpenedSegment;
    /* a thread's pixels of a row: 2 * kPer bytes with 8-connectivity, kPer
     * with 4; the opening's lanes take 8 */
    const size_t load = eight || opening >= 0 ? 2 * kPer : kPer;
    const Pixels pixels{static_cast<const unsigned char *>(mask.data),
                        static_cast<const unsigned char *>(zone.data), mask.pitch, zone.pitch,
                        foreground,
                        rows_aligned(mask, load)
                            && (zone.data == nullptr || rows_aligned(zone, load))};
    if (images > 1) {
        /* each image's foreground count, after the header */
        unsigned long long *counts = reinterpret_cast<unsigned long long *>(header + 1);
        cudaError_t err = cudaMemsetAsync(counts, 0, count_slots * sizeof(fm_cc_row), stream);
        if (err != cudaSuccess)
            return err;
        count_kernel<<<dim3(fm_div_up((unsigned)mask.width, (unsigned)(kThreads * kCountPer)),
                            (unsigned)mask.height), kThreads, 0, stream>>>(
            pixels, mask.width, mask.height / images, counts);
    }
    return eight ? launch_cells<true>(pixels, cells, opening, l, w, min_area, header, rows,
                                      images, host, read_rows, labels, stream)
                 : launch_cells<false>(pixels, cells, opening, l, w, min_area, header, rows,
                                       images, host, read_rows, labels, stream);
}

/* The checks both labelling entries share: the mask, the labels and the
 * mask's size. */
bool valid_labelling(const fm_image &mask, const fm_image &zone, const void *work,
                     const void *out, const void *host, const fm_image &labels)
{
    return valid_inputs(mask, zone) && work != nullptr && out != nullptr && host != nullptr
           && (labels.data == nullptr
               || (labels.width == mask.width && labels.height == mask.height
                   && labels.channels == 1 && labels.elem_size == 4
                   && (size_t)labels.width * 4 <= labels.pitch))
           && (long long)(mask.width + 1LL) * (mask.height + 1LL) < (1LL << 30);
}

}  // namespace

extern "C" cudaError_t fm_launch_components(fm_image mask, unsigned char foreground,
                                            fm_image zone, int connectivity,
                                            long long min_area, int images, void *work,
                                            void *out, void *host, size_t read_rows,
                                            fm_image labels, cudaStream_t stream)
{
    if (!valid_labelling(mask, zone, work, out, host, labels) || images < 1
        || mask.height % images != 0
        || (images > 1 && ((mask.height / images) % 2 != 0 || labels.data != nullptr))
        || (connectivity != 4 && connectivity != 8))
        return cudaErrorInvalidValue;
    return queue_components(mask, foreground, zone, connectivity, -1, min_area, images, work,
                            out, host, read_rows, labels, stream);
}

extern "C" cudaError_t fm_launch_components_opened(fm_image mask, unsigned char foreground,
                                                   int close, long long min_area, void *work,
                                                   void *out, void *host, size_t read_rows,
                                                   fm_image labels, cudaStream_t stream)
{
    const fm_image no_zone = {};
    if (!valid_labelling(mask, no_zone, work, out, host, labels))
        return cudaErrorInvalidValue;
    return queue_components(mask, foreground, no_zone, 8, close ? 1 : 0, min_area, 1, work, out,
                            host, read_rows, labels, stream);
}
