# The fuzzers (libFuzzer, clang): `make fuzz-smoke` runs each for FUZZ_TIME seconds
# from its corpus, side by side. They build their sources themselves, with the
# fuzzer's sanitizers.

# The config parser (shim/policy/).
FUZZ_CC ?= clang
FUZZ_TIME ?= 20
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Ishim -isystem $(NCCL_INC) \
    -isystem $(CUDA_INC) -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_SRCS := tests/fuzz/config_fuzz.c tests/fuzz/log_null.c $(POLICY_BASE_SRCS) $(SHIM_POLICY_SRCS)

$(B)/fuzz/config_fuzz: $(FUZZ_SRCS) $(wildcard shim/*/*.h) shim/policy/settings.def
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $(FUZZ_SRCS) -ldl

.PHONY: fuzz-smoke fuzz-smoke-config
fuzz-smoke:
	@$(MAKE) --no-print-directory -j$(JOBS) fuzz-smoke-config fuzz-smoke-dumpread
fuzz-smoke-config: $(B)/fuzz/config_fuzz
	@rm -rf $(B)/fuzz/work && mkdir -p $(B)/fuzz/work
	$(B)/fuzz/config_fuzz -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=16384 -dict=tests/fuzz/config.dict -print_final_stats=1 \
	    $(B)/fuzz/work tests/fuzz/corpus/config

# The dump reader (cli/json/, cli/dump/) and the analysis behind it.
DUMPREAD_FUZZ_SRCS := tests/fuzz/dumpread_fuzz.c $(DUMPREAD_SRCS) $(DUMPREAD_BASE_SRCS) \
    $(filter-out cli/render/page.c cli/render/html.c cli/render/svg.c,$(ANALYZE_SRCS))
FUZZ_CXX ?= clang++
$(B)/fuzz/simdjson.o: cli/json/simdjson.cc $(wildcard cli/json/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) -std=c++17 -g -O1 -fPIC -fno-exceptions -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr,function \
	    -fno-sanitize-recover=undefined -Icli -c $< -o $@
$(B)/fuzz/dumpread_fuzz: $(DUMPREAD_FUZZ_SRCS) $(B)/fuzz/simdjson.o $(wildcard cli/*/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(filter-out -std=c11,$(FUZZ_FLAGS)) -std=c11 -Icli -o $@ $(DUMPREAD_FUZZ_SRCS) \
	    $(B)/fuzz/simdjson.o -lstdc++ $(JSON_LIBS) -lpthread -lm

.PHONY: fuzz-smoke-dumpread
fuzz-smoke-dumpread: $(B)/fuzz/dumpread_fuzz
	@rm -rf $(B)/fuzz/work-dumpread && mkdir -p $(B)/fuzz/work-dumpread
	$(B)/fuzz/dumpread_fuzz -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=65536 -dict=tests/fuzz/dumpread.dict -print_final_stats=1 \
	    $(B)/fuzz/work-dumpread tests/fuzz/corpus/dumpread
