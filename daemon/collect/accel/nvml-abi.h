/* SPDX-License-Identifier: MIT */
/* The part of the NVML ABI that both sides of the dlopen() boundary name: the
 * return codes and the device handle, as NVIDIA's nvml.h has them. nvml.c
 * calls through them; the tests' stand-in library answers with them. The
 * structs stay in nvml.c: the stand-in writes them as bytes at nvml.h's
 * offsets, so that a layout mistake in nvml.c shows in the tests. */
#pragma once

typedef int nvmlReturn_t; /* a C enum in nvml.h: int-sized */
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
        NVML_SUCCESS = 0,
        NVML_ERROR_UNINITIALIZED = 1,
        NVML_ERROR_INVALID_ARGUMENT = 2,
        NVML_ERROR_NOT_SUPPORTED = 3,
        NVML_ERROR_NOT_FOUND = 6,
        NVML_ERROR_INSUFFICIENT_SIZE = 7,
        NVML_ERROR_DRIVER_NOT_LOADED = 9,
        NVML_ERROR_FUNCTION_NOT_FOUND = 13,
        NVML_ERROR_GPU_IS_LOST = 15,
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
};

#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL) /* usedGpuMemory when unknown */
