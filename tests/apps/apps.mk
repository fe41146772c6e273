# Test programs (tests/apps): `launch` starts N rank processes the way torchrun
# does; `trainloop` plays one data-parallel training job with NCCL on one rank.
# trainloop links the CPU harness (fake libnccl.so.2 and libcuda.so.1) without
# an rpath: tests put $(B)/fakes on LD_LIBRARY_PATH, and on a GPU machine the
# same binary runs against the real libraries.

APPS_TRAINLOOP_OBJ := $(patsubst %.c,$(B)/%.o,$(sort $(wildcard tests/apps/trainloop*.c)))
APPS_LAUNCH_OBJ    := $(B)/tests/apps/launch.o
APPS_FAKE_LIBS     := $(B)/fakes/libnccl.so.2 $(B)/fakes/libcuda.so.1

$(B)/apps/launch: $(APPS_LAUNCH_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(APPS_LAUNCH_OBJ) $(LDFLAGS) -o $@

# Depends on the fakes so that they are built first; linked by soname only.
$(B)/apps/trainloop: $(APPS_TRAINLOOP_OBJ) $(APPS_FAKE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(APPS_TRAINLOOP_OBJ) $(LDFLAGS) -L$(B)/fakes -Wl,-rpath-link,$(B)/fakes \
	    -l:libnccl.so.2 -l:libcuda.so.1 -lm -o $@

ALL += $(B)/apps/launch $(B)/apps/trainloop

# trainloop_static: the same program with the fake NCCL linked in (as conda's PyTorch links
# NCCL statically): its calls bind inside the executable, never to a preloaded library, so
# only NCCL's profiler plugin sees them (tests/e2e/plugin.sh).
$(B)/apps/trainloop_static: $(APPS_TRAINLOOP_OBJ) $(FAKENCCL_OBJS) $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(APPS_TRAINLOOP_OBJ) $(FAKENCCL_OBJS) $(LDFLAGS) -L$(B)/fakes \
	    -Wl,-rpath-link,$(B)/fakes -l:libcuda.so.1 -lm -lrt -o $@

ALL += $(B)/apps/trainloop_static
