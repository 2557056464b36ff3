/* The one plain image view shared by src/ (C11) and cuda/ (CUDA C): what every
 * launcher takes, and nothing else, so a launch header needs no other. */
#ifndef FASTMOG_CUDA_IMAGE_H
#define FASTMOG_CUDA_IMAGE_H

#include <stddef.h>

/* A pitched 2-D image in device memory: rows are `pitch` bytes apart. */
typedef struct fm_image {
    void *data;
    size_t pitch;     /* bytes between the starts of two rows */
    int width;        /* pixels */
    int height;       /* rows */
    int channels;     /* values per pixel */
    int elem_size;    /* bytes per value */
} fm_image;

#endif
