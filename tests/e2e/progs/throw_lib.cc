// A C++ library that throws and catches, loaded with dlopen by dlopen_throw.c.
// Under LD_DEBUG=bindings, the binding of _Unwind_RaiseException shows which
// unwinder C++ exceptions use in a process with the shim preloaded.
#include <stdexcept>

extern "C" int throw_and_catch(int n)
{
    try {
        if (n > 0) throw std::runtime_error("expected");
    } catch (const std::exception &) {
        return 1;
    }
    return 0;
}
