// SPDX-License-Identifier: MIT
/*
 * cluster_fit.cu: how many thread-block clusters of each size this GPU keeps resident at
 * once, for a CTA shaped like the decode kernel's (256 threads; 100 KB of dynamic shared
 * memory, two CTAs an SM, or 200 KB, one). The first question for a cluster (DSMEM)
 * reduction of a KV head's splits: at batch 1 the decode runs 8 KV heads x 16 splits =
 * 128 CTAs in one wave, and a cluster must fit a GPC's free SMs whole, so fewer CTAs may
 * be resident as clusters than as single CTAs (perf-notes run 118). The answers come from
 * cudaOccupancyMaxActiveClusters (non-portable sizes above 8 allowed); the kernel itself is
 * only the launch's subject.
 *
 * Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a bench/micro/cluster_fit.cu -o cluster_fit
 * Run:   ./cluster_fit
 */
#include <cuda_runtime.h>
#include <stdio.h>

__global__ void subject(int *out)
{
    extern __shared__ int s[];
    s[threadIdx.x] = threadIdx.x;
    __syncthreads();
    if (threadIdx.x == 0 && out) out[blockIdx.x] = s[0];
}

int main(void)
{
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "cluster_fit: no CUDA device\n");
        return 1;
    }
    printf("%s: %d SMs, %zu bytes of shared memory a CTA at most\n", prop.name, prop.multiProcessorCount,
           prop.sharedMemPerBlockOptin);
    cudaFuncSetAttribute(subject, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    const int smem_kb[] = {100, 200}, sizes[] = {1, 2, 4, 8, 16};
    for (int i = 0; i < 2; i++) {
        const int smem = smem_kb[i] * 1024;
        cudaFuncSetAttribute(subject, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        for (int j = 0; j < 5; j++) {
            const int cs = sizes[j];
            cudaLaunchAttribute attr;
            attr.id = cudaLaunchAttributeClusterDimension;
            attr.val.clusterDim.x = cs, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(cs * 8, 1, 1);
            cfg.blockDim = dim3(256, 1, 1);
            cfg.dynamicSmemBytes = smem;
            cfg.attrs = &attr, cfg.numAttrs = 1;
            int n = -1;
            const cudaError_t e = cudaOccupancyMaxActiveClusters(&n, subject, &cfg);
            if (e != cudaSuccess) {
                printf("%3d KB, clusters of %2d: %s\n", smem_kb[i], cs, cudaGetErrorString(e));
                cudaGetLastError();
                continue;
            }
            printf("%3d KB, clusters of %2d: %3d resident at once (%3d CTAs)\n", smem_kb[i], cs, n, n * cs);
        }
    }
    return 0;
}
