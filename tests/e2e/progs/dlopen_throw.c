/* dlopen_throw LIB: dlopens a C++ library and calls throw_and_catch(1). */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) return 64;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen_throw: %s\n", dlerror());
        return 2;
    }
    int (*fn)(int) = (int (*)(int))dlsym(h, "throw_and_catch");
    if (!fn || fn(1) != 1) return 3;
    printf("dlopen_throw: caught\n");
    return 0;
}
