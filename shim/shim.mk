# The preloaded library. Runtime dependencies: libc only (NCCL, libcuda and
# later libunwind are reached with dlsym/dlopen at run time).
SHIM_SRCS := shim/interpose.c shim/track.c shim/lifecycle.c shim/comm.c shim/init.c shim/log.c shim/identity.c \
    shim/flight.c shim/groups.c shim/gpu.c shim/watchdog.c shim/stats.c shim/events.c \
    shim/json.c shim/dump.c shim/dump_body.c shim/ladder.c
-include shim/policy.mk
SHIM_SRCS += $(SHIM_POLICY_SRCS)
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
