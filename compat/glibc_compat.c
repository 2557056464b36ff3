/* Binds the module's calls into glibc to symbol versions that glibc 2.28
 * already had, so the wheel can be tagged manylinux_2_28 while it is built on
 * a newer glibc (Debian 12 has 2.36).
 *
 * glibc 2.34 merged libpthread, libdl and librt into libc and gave their
 * functions a new version, GLIBC_2.34; libc keeps the old versions for
 * programs linked before. Linking on a new glibc binds every such call
 * (most from the static CUDA runtime, libcudart_static.a) to GLIBC_2.34.
 * setup.py passes -Wl,--wrap=NAME for each name listed in
 * compat/glibc_compat.h, so every undefined reference to NAME, in our objects
 * and in the archive alike, goes to __wrap_NAME below: a jump to NAME at its
 * old version. setup.py also adds libpthread.so.0, libdl.so.2 and librt.so.1
 * as needed libraries: before 2.34 the old versions live there, after 2.34
 * they are empty stubs.
 *
 * x86-64 only (the jump is x86-64 assembly); setup.py compiles this file only
 * where FASTMOG_GLIBC_COMPAT=1. */
#include <features.h> /* __GLIBC__ */

#if !defined(__x86_64__) || !defined(__GLIBC__)
#error "compat/glibc_compat.c is for x86-64 glibc builds only"
#endif

/* A tail jump keeps every argument register as the caller left it, so one
 * trampoline serves any signature. */
#define FM_OLD_VERSION(name, version)                                             \
    __asm__(".pushsection .text\n"                                                \
            ".symver fm_glibc_old_" #name ", " #name "@" version "\n"             \
            ".globl __wrap_" #name "\n"                                           \
            ".hidden __wrap_" #name "\n"                                          \
            ".type __wrap_" #name ", @function\n"                                 \
            "__wrap_" #name ":\n"                                                 \
            "\tjmp fm_glibc_old_" #name "@PLT\n"                                  \
            ".size __wrap_" #name ", .-__wrap_" #name "\n"                        \
            ".popsection\n");

#define FM_GLIBC_COMPAT_SYMBOL(name, version) FM_OLD_VERSION(name, version)
#include "glibc_compat.h"
