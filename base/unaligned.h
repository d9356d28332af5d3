/* base/unaligned.h - loads of typed elements from byte buffers that need not
 * be aligned (mmap'd safetensors data: the format allows any tensor offset,
 * so a float may start at an odd address).
 *
 * A cast `((const float *)p)[i]` on such an address is undefined behaviour
 * (UBSan: misaligned load); memcpy into a local is defined for any address
 * and compiles to the same single load on x86-64 and AArch64, so the values
 * and the speed are unchanged. Element i is read from byte offset i*size;
 * native byte order (the project only targets little-endian machines).
 */
#ifndef DSV4Q_BASE_UNALIGNED_H
#define DSV4Q_BASE_UNALIGNED_H
#include <stdint.h>
#include <string.h>

static inline float dsv4q_ld_f32(const void *p, int64_t i)
{
    float v;
    memcpy(&v, (const unsigned char *)p + i * 4, 4);
    return v;
}

static inline double dsv4q_ld_f64(const void *p, int64_t i)
{
    double v;
    memcpy(&v, (const unsigned char *)p + i * 8, 8);
    return v;
}

static inline uint16_t dsv4q_ld_u16(const void *p, int64_t i)
{
    uint16_t v;
    memcpy(&v, (const unsigned char *)p + i * 2, 2);
    return v;
}

#endif
