// MOG2 kernels: one thread per pixel, the per-pixel maths from mog2_pixel.h
// (shared with the host reference). Built with --fmad=false so that both
// produce the same floats as OpenCV's CPU code.
#include "launch.h"
#include "grid.h"
#include "mog2_pixel.h"

namespace {

// One thread per pixel. The pixel's modes in use are loaded once into a
// thread-private copy (laid out with stride 1), updated there by the shared
// per-pixel code, and stored once: device memory sees each byte of the model
// state in use read once and written once, coalesced across the warp, and the
// mode reordering happens in L1. Modes beyond the count are never touched.
// Blocks per SM asked of the register allocator: as many as fit without
// spilling, since occupancy is what keeps enough loads in flight.
template <int C>
constexpr int kMinBlocks = C == 1 ? 4 : (C == 3 ? 3 : 2);

template <int C, typename T>
__global__ void __launch_bounds__(256, kMinBlocks<C>)
mog2_apply_kernel(fm_mog2_params params, fm_mog2_rates rates, fm_image frame,
                  fm_image known_foreground, fm_image mask, fm_mog2_model model)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= model.width || y >= model.height)
        return;

    unsigned char *mask_row = static_cast<unsigned char *>(mask.data) + (size_t)y * mask.pitch;
    if (known_foreground.data != NULL
        && static_cast<const unsigned char *>(known_foreground.data)
                   [(size_t)y * known_foreground.pitch + x] != 0) {
        mask_row[x] = 255;  // foreground, and the model is left as it is
        return;
    }

    const T *row = reinterpret_cast<const T *>(
        static_cast<const char *>(frame.data) + (size_t)y * frame.pitch);
    float sample[C];
#pragma unroll
    for (int c = 0; c < C; ++c)
        sample[c] = (float)row[(size_t)x * C + c];  // exact for uint8

    const size_t i = (size_t)y * model.width + x;
    const size_t P = model.stride;
    unsigned char nmodes = model.mode_count[i];
    float weight[FM_MOG2_MAX_MIXTURES];
    float variance[FM_MOG2_MAX_MIXTURES];
    float mean[FM_MOG2_MAX_MIXTURES * C];
    // Mode 0 is read without waiting for the mode count (almost every pixel
    // uses it, and the model is zeroed when made): one round trip to memory
    // fewer for most pixels, which is what bounds scenes with few modes.
    weight[0] = model.weight[i];
    variance[0] = model.variance[i];
#pragma unroll
    for (int c = 0; c < C; ++c)
        mean[c] = model.mean[c * P + i];
#pragma unroll
    for (int k = 1; k < FM_MOG2_MAX_MIXTURES; ++k) {
        if (k < nmodes) {
            weight[k] = model.weight[k * P + i];
            variance[k] = model.variance[k * P + i];
#pragma unroll
            for (int c = 0; c < C; ++c)
                mean[k * C + c] = model.mean[(k * C + c) * P + i];
        }
    }

    mask_row[x] = fm_mog2_update_pixel(&params, &rates, sample, C, 0, weight, variance, mean,
                                       1, &nmodes);

#pragma unroll
    for (int k = 0; k < FM_MOG2_MAX_MIXTURES; ++k) {
        if (k < nmodes) {
            model.weight[k * P + i] = weight[k];
            model.variance[k * P + i] = variance[k];
#pragma unroll
            for (int c = 0; c < C; ++c)
                model.mean[(k * C + c) * P + i] = mean[k * C + c];
        }
    }
    model.mode_count[i] = nmodes;
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
    float value[C];
    fm_mog2_background_pixel(&params, C, model.weight + i, model.mean + i,
                             model.stride, model.mode_count[i], value);
    T *row = reinterpret_cast<T *>(static_cast<char *>(out.data) + (size_t)y * out.pitch);
#pragma unroll
    for (int c = 0; c < C; ++c) {
        if constexpr (sizeof(T) == 1)
            row[(size_t)x * C + c] = fm_mog2_saturate_u8(value[c]);
        else
            row[(size_t)x * C + c] = value[c];
    }
}

const dim3 kBlock(32, 8);

dim3 grid_for(const fm_mog2_model &model)
{
    return dim3(fm_div_up((unsigned)model.width, kBlock.x),
                fm_div_up((unsigned)model.height, kBlock.y));
}

using ApplyKernel = void (*)(fm_mog2_params, fm_mog2_rates, fm_image, fm_image,
                             fm_image, fm_mog2_model);
using BackgroundKernel = void (*)(fm_mog2_params, fm_mog2_model, fm_image);

// Indexed by [is_float][channels - 1]; 2 channels have no kernel.
const ApplyKernel kApply[2][4] = {
    {mog2_apply_kernel<1, unsigned char>, nullptr, mog2_apply_kernel<3, unsigned char>,
     mog2_apply_kernel<4, unsigned char>},
    {mog2_apply_kernel<1, float>, nullptr, mog2_apply_kernel<3, float>,
     mog2_apply_kernel<4, float>},
};

const BackgroundKernel kBackground[2][4] = {
    {mog2_background_kernel<1, unsigned char>, nullptr,
     mog2_background_kernel<3, unsigned char>, mog2_background_kernel<4, unsigned char>},
    {mog2_background_kernel<1, float>, nullptr, mog2_background_kernel<3, float>,
     mog2_background_kernel<4, float>},
};

bool valid_shape(const fm_mog2_model &model, int channels, int elem_size)
{
    return model.width > 0 && model.height > 0 && channels >= 1 && channels <= 4
           && model.channels == channels && (elem_size == 1 || elem_size == 4);
}

}  // namespace

extern "C" cudaError_t fm_launch_mog2_apply(fm_mog2_params params, fm_mog2_rates rates,
                                            fm_image frame, fm_image known_foreground,
                                            fm_image mask, fm_mog2_model model,
                                            cudaStream_t stream)
{
    if (!valid_shape(model, frame.channels, frame.elem_size)
        || params.n_mixtures < 1 || params.n_mixtures > FM_MOG2_MAX_MIXTURES)
        return cudaErrorInvalidValue;
    ApplyKernel kernel = kApply[frame.elem_size == 4][frame.channels - 1];
    if (kernel == nullptr)
        return cudaErrorInvalidValue;
    kernel<<<grid_for(model), kBlock, 0, stream>>>(params, rates, frame, known_foreground,
                                                   mask, model);
    return cudaGetLastError();
}

extern "C" cudaError_t fm_launch_mog2_background(fm_mog2_params params, fm_mog2_model model,
                                                 fm_image out, cudaStream_t stream)
{
    if (!valid_shape(model, out.channels, out.elem_size))
        return cudaErrorInvalidValue;
    BackgroundKernel kernel = kBackground[out.elem_size == 4][out.channels - 1];
    if (kernel == nullptr)
        return cudaErrorInvalidValue;
    kernel<<<grid_for(model), kBlock, 0, stream>>>(params, model, out);
    return cudaGetLastError();
}
