# tests/fakes/fakes.mk: the CPU harness stand-ins for the GPU libraries, built against the
# real cuda.h and nccl.h (docs/harness.md):
#   $(B)/fakes/libcuda.so.1   fake CUDA driver (tests/fakes/fakecuda*.c)
#   $(B)/fakes/libnccl.so.2   fake NCCL        (tests/fakes/fakenccl*.c)
# and the Check suites that prove each fake's fidelity rules without the shim.

# --- fake libcuda.so.1 (owned by fakecuda) ---
FAKECUDA_SRCS  := $(wildcard tests/fakes/fakecuda*.c)
FAKECUDA_OBJS  := $(FAKECUDA_SRCS:%.c=$(B)/%.o)
FAKECUDA_LIB   := $(B)/fakes/libcuda.so.1
FAKECUDA_TESTS := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,\
                    $(wildcard tests/unit/test_fakecuda*.c))

# Only the CUDA driver API and the fakecuda_* test API are exported.
$(FAKECUDA_OBJS): CFLAGS += -fvisibility=hidden

$(FAKECUDA_LIB): $(FAKECUDA_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,--no-undefined $(LDFLAGS) $^ -o $@
	ln -sf libcuda.so.1 $(dir $@)libcuda.so

$(FAKECUDA_TESTS:%=%.o): CFLAGS += $(CHECK_CFLAGS) -Itests/fakes

# Test programs find the fake through a relative run path, so a moved build dir still works.
$(FAKECUDA_TESTS): $(B)/tests/unit/%: $(B)/tests/unit/%.o $(FAKECUDA_LIB)
	$(CC) $(LDFLAGS) $< -o $@ $(FAKECUDA_LIB) -Wl,-rpath,'$$ORIGIN/../../fakes' $(CHECK_LIBS)

ALL        += $(FAKECUDA_LIB)
UNIT_TESTS += $(FAKECUDA_TESTS)

# --- fake libnccl.so.2 (owned by fakenccl) ---
# The whole NCCL 2.28 API over POSIX shared memory; every op runs on the caller's stream
# through the fake driver's cuLaunchHostFunc (docs/harness.md, "Fake libnccl.so.2").
FAKENCCL_SRCS  := $(wildcard tests/fakes/fakenccl*.c)
FAKENCCL_OBJS  := $(FAKENCCL_SRCS:%.c=$(B)/%.o)
FAKENCCL_LIB   := $(B)/fakes/libnccl.so.2
FAKENCCL_TESTS := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,\
                    $(filter-out tests/unit/test_fakenccl_util.c,\
                      $(wildcard tests/unit/test_fakenccl*.c)))
FAKENCCL_TEST_UTIL := $(B)/tests/unit/test_fakenccl_util.o

$(FAKENCCL_OBJS): CFLAGS += -fvisibility=hidden

# It finds libcuda.so.1 next to itself (the fake), like the real NCCL finds the driver.
$(FAKENCCL_LIB): $(FAKENCCL_OBJS) tests/fakes/fakenccl.map $(FAKECUDA_LIB)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libnccl.so.2 -Wl,--no-undefined \
	    -Wl,--version-script=tests/fakes/fakenccl.map $(LDFLAGS) $(FAKENCCL_OBJS) -o $@ \
	    -L$(B)/fakes -l:libcuda.so.1 -Wl,-rpath,'$$ORIGIN' -lm -lrt
	ln -sf libnccl.so.2 $(dir $@)libnccl.so

$(FAKENCCL_TESTS:%=%.o) $(FAKENCCL_TEST_UTIL): CFLAGS += $(CHECK_CFLAGS) -Itests/fakes

$(FAKENCCL_TESTS): $(B)/tests/unit/%: $(B)/tests/unit/%.o $(FAKENCCL_TEST_UTIL) \
                                      $(FAKENCCL_LIB) $(FAKECUDA_LIB)
	$(CC) $(LDFLAGS) $< $(FAKENCCL_TEST_UTIL) -o $@ $(FAKENCCL_LIB) $(FAKECUDA_LIB) \
	    -Wl,-rpath,'$$ORIGIN/../../fakes' $(CHECK_LIBS)

ALL        += $(FAKENCCL_LIB)
UNIT_TESTS += $(FAKENCCL_TESTS)

# --- countprof: a counting profiler plugin (tests/fakes/countprof.c), one per API version ---
COUNTPROF_LIBS := $(B)/fakes/libnccl-profiler-count.so $(B)/fakes/libnccl-profiler-count6.so \
                  $(B)/fakes/libnccl-profiler-count4.so
$(B)/fakes/libnccl-profiler-count.so: tests/fakes/countprof.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fvisibility=hidden -DCOUNTPROF_V=5 -shared -Wl,-soname,$(notdir $@) \
	    $(LDFLAGS) $< -o $@
$(B)/fakes/libnccl-profiler-count%.so: tests/fakes/countprof.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fvisibility=hidden -DCOUNTPROF_V=$* -shared -Wl,-soname,$(notdir $@) \
	    $(LDFLAGS) $< -o $@
# envplug: an env plugin (tests/fakes/envplug.c)
ENVPLUG_LIB := $(B)/fakes/libnccl-env-test.so
$(ENVPLUG_LIB): tests/fakes/envplug.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fvisibility=hidden -shared -Wl,-soname,$(notdir $@) $(LDFLAGS) $< -o $@
ALL += $(COUNTPROF_LIBS) $(ENVPLUG_LIB)
$(FAKENCCL_TESTS): | $(COUNTPROF_LIBS) $(ENVPLUG_LIB)
