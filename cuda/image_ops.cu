// Elementwise image operations that have no cudaMemset/cudaMemcpy form.
#include "launch.h"
#include "grid.h"

namespace {

// One thread per byte of a row: the pattern repeats every pixel_bytes bytes,
// which keeps every dtype and channel count on one path and one kernel.
__global__ void fill_pattern_kernel(unsigned char *data, size_t pitch,
                                    unsigned int row_bytes, unsigned int height,
                                    fm_fill_pattern pattern,
                                    unsigned int pixel_bytes)
{
    const unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= row_bytes)
        return;
    const unsigned char value = pattern.bytes[x % pixel_bytes];
    for (unsigned int y = blockIdx.y; y < height; y += gridDim.y)
        data[(size_t)y * pitch + x] = value;
}

}  // namespace

extern "C" cudaError_t fm_launch_fill(fm_image dst, fm_fill_pattern pattern,
                                      cudaStream_t stream)
{
    const unsigned int pixel_bytes = (unsigned int)(dst.channels * dst.elem_size);
    if (pixel_bytes == 0 || pixel_bytes > FM_FILL_PATTERN_MAX)
        return cudaErrorInvalidValue;
    if (dst.width <= 0 || dst.height <= 0)
        return cudaSuccess;
    const unsigned int row_bytes = (unsigned int)dst.width * pixel_bytes;
    const unsigned int threads = 256;
    // grid.y is capped by the hardware; the kernel strides over the rest.
    const unsigned int grid_rows = dst.height < 65535 ? (unsigned int)dst.height : 65535u;
    const dim3 grid(fm_div_up(row_bytes, threads), grid_rows);
    fill_pattern_kernel<<<grid, threads, 0, stream>>>(
        (unsigned char *)dst.data, dst.pitch, row_bytes,
        (unsigned int)dst.height, pattern, pixel_bytes);
    return cudaGetLastError();
}
