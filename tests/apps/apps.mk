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
