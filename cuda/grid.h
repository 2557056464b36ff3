/* Launch-geometry helpers shared by the .cu files (device side only). */
#ifndef FASTMOG_CUDA_GRID_H
#define FASTMOG_CUDA_GRID_H

static inline unsigned int fm_div_up(unsigned int n, unsigned int d)
{
    return (n + d - 1) / d;
}

#endif
