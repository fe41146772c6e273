# The preloaded library, one folder per subsystem (docs/architecture.md). Runtime
# dependencies: libc only (NCCL, libcuda and later libunwind are reached with
# dlsym/dlopen at run time). Headers are included by their path under shim/.
include shim/policy/policy.mk

SHIM_BASE_SRCS := $(wildcard shim/base/*.c)
SHIM_SRCS := $(wildcard shim/intercept/*.c shim/track/*.c shim/watch/*.c shim/evidence/*.c) \
    $(SHIM_BASE_SRCS) $(SHIM_POLICY_SRCS)
SHIM_OBJS := $(SHIM_SRCS:%.c=$(B)/%.o)

$(B)/shim/%.o: CFLAGS += -fvisibility=hidden

$(B)/libncclguard.so: $(SHIM_OBJS) shim/ncclguard.map
	$(CC) -shared -o $@ $(SHIM_OBJS) $(LDFLAGS) -Wl,--version-script=shim/ncclguard.map \
	    -Wl,--no-undefined -Wl,--as-needed -ldl
	@extra=$$(readelf -d $@ | grep NEEDED | grep -v -e 'libc\.so' -e 'ld-linux' -e 'libasan' -e 'libubsan' -e 'libtsan' \
	   ); \
	if [ -n "$$extra" ]; then echo "$@ must need only libc, found:"; echo "$$extra"; \
	rm -f $@; exit 1; fi

ALL += $(B)/libncclguard.so
