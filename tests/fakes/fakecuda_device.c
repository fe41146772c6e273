/*
 * fakecuda_device.c: the fake devices. FAKECUDA_DEVICES of them (default 8), all alike:
 * "Fake GPU (ncclguard harness)", compute capability 9.0, FAKECUDA_MEM_MB of memory,
 * PCI bus id 0000:<0x10 + ordinal>:00.0 and a UUID that spells the ordinal.
 * Thread safe: the configuration is fixed once cuInit has succeeded.
 */
#include "fakecuda_internal.h"

#include <stdio.h>
#include <string.h>

#define FC_DEVICE_NAME "Fake GPU (ncclguard harness)"
#define FC_PCI_BUS_BASE 0x10

bool fc_device_valid(CUdevice dev)
{
    return dev >= 0 && dev < fc_cfg.devices;
}

static CUresult check_device(CUdevice dev, const char *call)
{
    if (fc_device_valid(dev)) return CUDA_SUCCESS;
    fc_complain(call, "device %d does not exist (FAKECUDA_DEVICES=%d)", dev, fc_cfg.devices);
    return CUDA_ERROR_INVALID_DEVICE;
}

FC_API CUresult cuDeviceGetCount(int *count)
{
    FC_TRY(fc_enter("cuDeviceGetCount"));
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = fc_cfg.devices;
    return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    FC_TRY(fc_enter("cuDeviceGet"));
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    FC_TRY(check_device(ordinal, "cuDeviceGet"));
    *device = ordinal;
    return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    FC_TRY(fc_enter("cuDeviceGetName"));
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    FC_TRY(check_device(dev, "cuDeviceGetName"));
    snprintf(name, (size_t)len, "%s", FC_DEVICE_NAME);
    return CUDA_SUCCESS;
}

/* Values of the attributes a framework or NCCL commonly asks for; others read as 0. */
static int attribute_value(CUdevice_attribute a, CUdevice dev)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return FC_PCI_BUS_BASE + dev;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 2;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    default: return 0;
    }
}

FC_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    FC_TRY(fc_enter("cuDeviceGetAttribute"));
    if (!pi || (int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) {
        fc_complain("cuDeviceGetAttribute", "invalid attribute %d", (int)attrib);
        return CUDA_ERROR_INVALID_VALUE;
    }
    FC_TRY(check_device(dev, "cuDeviceGetAttribute"));
    *pi = attribute_value(attrib, dev);
    return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    FC_TRY(fc_enter("cuDeviceTotalMem"));
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    FC_TRY(check_device(dev, "cuDeviceTotalMem"));
    *bytes = fc_cfg.mem_bytes;
    return CUDA_SUCCESS;
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev, const char *call)
{
    FC_TRY(fc_enter(call));
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    FC_TRY(check_device(dev, call));
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    memcpy(uuid->bytes, "FAKEGPU-", 8);
    uuid->bytes[15] = (char)dev;
    return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return get_uuid(uuid, dev, "cuDeviceGetUuid");
}

FC_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return get_uuid(uuid, dev, "cuDeviceGetUuid_v2");
}

FC_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    FC_TRY(fc_enter("cuDeviceGetPCIBusId"));
    if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    FC_TRY(check_device(dev, "cuDeviceGetPCIBusId"));
    snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", FC_PCI_BUS_BASE + dev);
    return CUDA_SUCCESS;
}

FC_API CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    FC_TRY(fc_enter("cuDeviceGetByPCIBusId"));
    if (!dev || !pciBusId) return CUDA_ERROR_INVALID_VALUE;
    unsigned domain = 0, bus = 0, device = 0, function = 0;
    if (sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &function) == 4 && domain == 0 &&
        device == 0 && function == 0 && bus >= FC_PCI_BUS_BASE &&
        fc_device_valid((CUdevice)(bus - FC_PCI_BUS_BASE))) {
        *dev = (CUdevice)(bus - FC_PCI_BUS_BASE);
        return CUDA_SUCCESS;
    }
    fc_complain("cuDeviceGetByPCIBusId", "no device has PCI bus id '%s'", pciBusId);
    return CUDA_ERROR_INVALID_DEVICE;
}
