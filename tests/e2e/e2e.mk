# Small programs used by the end-to-end scripts of tests/e2e.
E2E_BIN := $(B)/tests/e2e
FAKE_LIBS = -L$(B)/fakes -l:libnccl.so.2 -l:libcuda.so.1

# two_streams and two_threads also call the fake driver's test API (fakecuda_test_spin)
$(E2E_BIN)/two_streams $(E2E_BIN)/two_threads: $(E2E_BIN)/%: tests/e2e/progs/%.c \
        tests/e2e/progs/one_rank.h \
        $(B)/fakes/libnccl.so.2 $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) $(FAKE_LIBS)

$(E2E_BIN)/nccl_probe: tests/e2e/progs/nccl_probe.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -L$(NCCL_HOME)/lib -l:libnccl.so.2

$(E2E_BIN)/call_each $(E2E_BIN)/fork_in_call $(E2E_BIN)/fence $(E2E_BIN)/ring_wrap $(E2E_BIN)/paths \
        $(E2E_BIN)/stuck_init $(E2E_BIN)/group_sim $(E2E_BIN)/capture_implicit \
        $(E2E_BIN)/capture_destroy $(E2E_BIN)/group_hang $(E2E_BIN)/ctx_cycle \
        $(E2E_BIN)/crash_mid_job $(E2E_BIN)/term_job $(E2E_BIN)/dump_stall \
        $(E2E_BIN)/idle_wakes $(E2E_BIN)/comm_thread $(E2E_BIN)/blocked_calls \
        $(E2E_BIN)/env_after_start $(E2E_BIN)/init_all: $(E2E_BIN)/%: tests/e2e/progs/%.c \
        tests/e2e/progs/one_rank.h $(B)/fakes/libnccl.so.2 $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) $(FAKE_LIBS)

# frames in static functions (tests/e2e/symbols.sh): functions in the order of the
# source, the exported ones in .dynsym; and a copy without .symtab
$(E2E_BIN)/static_frames: tests/e2e/progs/static_frames.c tests/e2e/progs/one_rank.h \
        $(B)/fakes/libnccl.so.2 \
        $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O2 -g -fno-toplevel-reorder -rdynamic -o $@ $< $(LDFLAGS) $(FAKE_LIBS)

$(E2E_BIN)/static_frames_stripped: $(E2E_BIN)/static_frames
	strip --strip-all -o $@ $<

# a slow file system for the dump (fsync of its temp file held or delayed)
$(E2E_BIN)/libslowfs.so: tests/e2e/progs/slowfs.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -o $@ $< -ldl

$(E2E_BIN)/libthrow.so: tests/e2e/progs/throw_lib.cc
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -fPIC -shared $(filter -fsanitize%,$(CFLAGS)) -o $@ $<

$(E2E_BIN)/dlopen_throw: tests/e2e/progs/dlopen_throw.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -ldl

# missing_sym runs against old_nccl alone: it must not need libcuda.so.1
$(E2E_BIN)/missing_sym: tests/e2e/progs/missing_sym.c $(B)/fakes/libnccl.so.2
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -L$(B)/fakes -Wl,--as-needed -l:libnccl.so.2 \
	    -Wl,--allow-shlib-undefined

# an NCCL that lacks most entry points, as an old release would
$(E2E_BIN)/oldnccl/libnccl.so.2: tests/e2e/progs/old_nccl.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libnccl.so.2 -o $@ $<

ALL += $(addprefix $(E2E_BIN)/,nccl_probe call_each fork_in_call fence ring_wrap paths missing_sym stuck_init \
    group_sim capture_implicit capture_destroy group_hang ctx_cycle two_streams crash_mid_job term_job \
    oldnccl/libnccl.so.2 libthrow.so dlopen_throw dump_stall libslowfs.so idle_wakes comm_thread blocked_calls two_threads env_after_start private_handle \
    static_frames static_frames_stripped init_all)

# private_handle: links no NCCL; it dlopens libnccl.so.2 and dlsyms on that handle (pynccl)
$(E2E_BIN)/private_handle: tests/e2e/progs/private_handle.c $(B)/fakes/libnccl.so.2 $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -L$(B)/fakes -l:libcuda.so.1 -ldl

# The probe of tests/e2e/policy.sh: applies the site policy in its constructor.
$(B)/tests/e2e/policy_probe: tests/e2e/policy_probe.c $(POLICY_OBJS) $(POLICY_DEPS) \
        $(B)/shim/base/log.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(POLICY_OBJS) $(POLICY_DEPS) $(B)/shim/base/log.o \
	    $(LDFLAGS) -ldl

ALL += $(B)/tests/e2e/policy_probe
