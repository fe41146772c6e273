# Benchmarks. Each prints figures measured against a baseline in the same run.
$(B)/bench/startup: bench/startup.c bench/timing.h $(SHIM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ bench/startup.c $(SHIM_OBJS) $(LDFLAGS) -ldl

$(B)/bench/noop: bench/noop.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $<

$(B)/bench/libempty.so: bench/noop.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-missing-prototypes -shared -Dmain=ng_bench_unused -o $@ $<

BENCH_PROGS := $(B)/bench/startup $(B)/bench/noop $(B)/bench/libempty.so $(B)/bench/overhead \
    $(B)/bench/stacks $(B)/bench/gendumps
ALL += $(BENCH_PROGS)

# The last two lines printed are overhead's `added_ns_per_call=...` and
# `added_instr_per_call=...` of bench/instructions (with valgrind), repeated last.
bench: deps
	@$(MAKE) --no-print-directory all
	@bench/instructions $(B) | tee $(B)/bench-instructions.txt
	@$(B)/bench/startup $(B)/libncclguard.so $(B)/bench/libempty.so $(B)/bench/noop
	@$(B)/bench/policy_startup $(B)/tests/e2e/policy_probe docs/examples/site.conf
	@bench/incident.sh $(B)
	@bench/stacks.sh $(B)
	@LD_LIBRARY_PATH=$(B)/fakes $(B)/bench/overhead $(abspath $(B)/libncclguard.so)
	@bench/analyze.sh $(B) $(ANALYZE_RANKS)
	@bench/torch_startup.sh $(B)
	@bench/straggler.sh $(B) $(STRAGGLER_RUNS)
	@grep '^added_instr_per_call=' $(B)/bench-instructions.txt || true

$(B)/bench/overhead: bench/overhead.c bench/timing.h $(B)/fakes/libnccl.so.2 $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -L$(B)/fakes -l:libnccl.so.2 -l:libcuda.so.1

$(B)/bench/stacks: bench/stacks.c bench/timing.h $(B)/fakes/libnccl.so.2 $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fno-optimize-sibling-calls -o $@ $< $(LDFLAGS) -L$(B)/fakes -l:libnccl.so.2 -l:libcuda.so.1

include bench/watchdog.mk

# tests/gpu: built with the rest, run only on a GPU machine (tests/gpu/run.sh).
$(B)/tests/gpu/events_bench: tests/gpu/events_bench.c bench/timing.h $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -L$(B)/fakes -l:libcuda.so.1
ALL += $(B)/tests/gpu/events_bench

# Synthetic dumps with a planted culprit, for `ncclguard analyze` at scale (bench/analyze.sh).
$(B)/bench/gendumps: bench/gendumps.c bench/gen_dump.c bench/gendumps.h shim/evidence/dump_format.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ bench/gendumps.c bench/gen_dump.c $(LDFLAGS)

# bench/analyze.sh's job size: 512 ranks of 4096 records (1 GB); the target is stated
# for ANALYZE_RANKS=4096 (8 GB).
ANALYZE_RANKS ?= 512
# bench/straggler.sh's seeded repeats of each job
STRAGGLER_RUNS ?= 20
