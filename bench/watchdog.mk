# The watchdog's cost with ops in flight and at rest (communicators, no ops),
# the dump's duration, polling during a slow dump, the start of a dump asked
# for by signal with the periods far away. `make bench-watchdog
# BASELINE=/path/to/old/libncclguard.so` adds the same figures for an older
# build, measured in the same run, with the ratios, and the dump's instructions
# (bench/dump_instructions.sh, with valgrind). An older build of main, for
# instance: git archive main | tar -x -C /tmp/base && make -C /tmp/base
# build/libncclguard.so, then BASELINE=/tmp/base/build/libncclguard.so.
$(B)/bench/watchdog: bench/watchdog.c bench/timing.h $(B)/fakes/libnccl.so.2 $(B)/fakes/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -L$(B)/fakes -l:libnccl.so.2 -l:libcuda.so.1

ALL += $(B)/bench/watchdog

bench-watchdog: deps
	@$(MAKE) --no-print-directory all
	@LD_LIBRARY_PATH=$(B)/fakes $(B)/bench/watchdog $(abspath $(B)/libncclguard.so) \
	    $(if $(BASELINE),$(abspath $(BASELINE))) $(abspath $(B)/tests/e2e/libslowfs.so)
	@bench/dump_instructions.sh $(B) $(abspath $(B)/libncclguard.so) $(if $(BASELINE),$(abspath $(BASELINE)))
.PHONY: bench-watchdog
