# Site policy: configuration sources, the environment policy applied in the
# constructor, and the NCCL environment audit. Included by shim/shim.mk, which
# links SHIM_POLICY_SRCS into the library; also builds their unit tests, the
# policy probe used by tests/e2e/policy.sh, and the fuzz smoke run. Policy code
# needs nothing of the shim but base/ (the unit tests replace base/log.c with a
# stub that records messages).
ifndef NG_POLICY_MK
NG_POLICY_MK := 1

SHIM_POLICY_SRCS := $(wildcard shim/policy/*.c)
POLICY_OBJS = $(SHIM_POLICY_SRCS:%.c=$(B)/%.o)
# what the policy code needs from the rest of the shim: base/, but the log
POLICY_BASE_SRCS = $(filter-out shim/base/log.c,$(wildcard shim/base/*.c))
POLICY_DEPS = $(POLICY_BASE_SRCS:%.c=$(B)/%.o)
POLICY_TEST_DEPS = $(POLICY_DEPS)

# --- unit tests (Check): the real objects, with a log stub that records messages ---
POLICY_UNIT := $(B)/tests/unit/test_config $(B)/tests/unit/test_config_policy \
    $(B)/tests/unit/test_envaudit

$(POLICY_UNIT): $(B)/tests/unit/%: tests/unit/%.c tests/unit/log_capture.c \
        tests/unit/log_capture.h tests/unit/check_main.h $(POLICY_OBJS) $(POLICY_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -o $@ $< tests/unit/log_capture.c $(POLICY_OBJS) \
	    $(POLICY_TEST_DEPS) $(LDFLAGS) $(CHECK_LIBS) -ldl

UNIT_TESTS += $(POLICY_UNIT)

# --- the probe of tests/e2e/policy.sh: applies the policy in its constructor ---
$(B)/tests/e2e/policy_probe: tests/e2e/policy_probe.c $(POLICY_OBJS) $(POLICY_DEPS) \
        $(B)/shim/base/log.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(POLICY_OBJS) $(POLICY_DEPS) $(B)/shim/base/log.o \
	    $(LDFLAGS) -ldl

ALL += $(B)/tests/e2e/policy_probe

# --- libFuzzer smoke run of the config parser (clang), `make fuzz-smoke` ---
FUZZ_CC ?= clang
FUZZ_TIME ?= 20
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Ishim -isystem $(NCCL_INC) \
    -isystem $(CUDA_INC) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_SRCS := tests/fuzz/config_fuzz.c tests/fuzz/log_null.c $(POLICY_BASE_SRCS) $(SHIM_POLICY_SRCS)

$(B)/fuzz/config_fuzz: $(FUZZ_SRCS) $(wildcard shim/*/*.h) shim/policy/settings.def
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $(FUZZ_SRCS) -ldl

.PHONY: fuzz-smoke
fuzz-smoke: $(B)/fuzz/config_fuzz
	@rm -rf $(B)/fuzz/work && mkdir -p $(B)/fuzz/work
	$(B)/fuzz/config_fuzz -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=16384 -dict=tests/fuzz/config.dict -print_final_stats=1 \
	    $(B)/fuzz/work tests/fuzz/corpus/config

endif
