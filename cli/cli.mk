# The ncclguard command. It links the shim's policy and audit sources, compiled
# a second time for it (default visibility, no constructor of the library), and
# reads dumps with simdjson (cli/jsonread_simdjson.cc, the only C++) or jansson.
include shim/policy/policy.mk

CLI_SRCS := cli/main.c
CLI_SRCS += cli/envcheck.c
CLI_SRCS += cli/run.c
CLI_SRCS += cli/dump.c
CLI_SRCS += cli/diagnose.c
CLI_SRCS += cli/trace.c
JSON_CFLAGS := $(shell pkg-config --cflags jansson simdjson 2>/dev/null)
# Offline symbolization of the dumps' frames (cli/symres.c): elfutils, the command only.
CLI_SRCS += cli/symres.c
DW_LIBS := $(shell pkg-config --libs libdw 2>/dev/null || echo -ldw -lelf)
JSON_LIBS   := $(shell pkg-config --libs jansson simdjson 2>/dev/null || echo -ljansson -lsimdjson)

# The dump reader, shared by the subcommands that read dumps (and the tests).
DUMPREAD_SRCS := cli/jsonread.c cli/jsonread_jansson.c cli/dumpread.c cli/dumpread_map.c \
    cli/dumpread_scalar.c cli/dumpread_stack.c cli/dumpdir.c cli/pickle.c cli/frread.c
# (its files are opened by shim/base/infile.c, which the shim uses too)
DUMPREAD_BASE_SRCS := shim/base/infile.c shim/base/outfile.c
DUMPREAD_OBJS := $(DUMPREAD_SRCS:%.c=$(B)/%.o) $(B)/cli/jsonread_simdjson.o \
    $(DUMPREAD_BASE_SRCS:%.c=$(B)/cli/obj/%.o)

ANALYZE_SRCS := cli/intern.c cli/analyze.c cli/analyze_collect.c cli/analyze_fold.c \
    cli/analyze_read.c cli/analyze_where.c cli/analyze_rank.c cli/analyze_hang.c \
    cli/analyze_p2p.c cli/analyze_cmp.c cli/analyze_verdict.c cli/analyze_launcher.c \
    cli/analyze_format.c cli/analyze_summary.c cli/analyze_text.c cli/analyze_json.c \
    cli/report.c cli/report_svg.c cli/report_html.c

CLI_SRCS += $(ANALYZE_SRCS)
# the subcommands that read JSON: jansson (trace) and the dump reader
$(CLI_SRCS:%.c=$(B)/%.o) $(DUMPREAD_SRCS:%.c=$(B)/%.o): CFLAGS += $(JSON_CFLAGS)
CLI_SHIM_SRCS := $(SHIM_POLICY_SRCS) $(wildcard shim/base/*.c)
CLI_OBJS := $(sort $(CLI_SRCS:%.c=$(B)/%.o) $(DUMPREAD_OBJS) $(CLI_SHIM_SRCS:%.c=$(B)/cli/obj/%.o))

$(B)/cli/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# simdjson's On-Demand code is inlined where it is used: -O2 whatever CFLAGS says
# (it is an order of magnitude slower at -O0); no exceptions cross into C.
$(B)/cli/jsonread_simdjson.o: cli/jsonread_simdjson.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g $(WARN) -fPIC -fno-exceptions $(SANFLAGS) $(JSON_CFLAGS) -MMD -MP \
	    -c $< -o $@

$(B)/ncclguard: $(CLI_OBJS)
	$(CXX) -o $@ $(CLI_OBJS) $(LDFLAGS) -ldl $(JSON_LIBS) $(DW_LIBS)

ALL += $(B)/ncclguard

include bench/policy.mk

# The reader's round-trip tool (tests/unit/check_dumpread.py runs it).
$(B)/tests/unit/dumpread_echo: tests/unit/dumpread_echo.c $(DUMPREAD_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icli -o $(B)/tests/unit/dumpread_echo.o -c $<
	$(CXX) -o $@ $(B)/tests/unit/dumpread_echo.o $(DUMPREAD_OBJS) $(LDFLAGS) $(JSON_LIBS)

ALL += $(B)/tests/unit/dumpread_echo

# --- libFuzzer smoke run of the dump reader (clang), part of `make fuzz-smoke` ---
DUMPREAD_FUZZ_SRCS := tests/fuzz/dumpread_fuzz.c $(DUMPREAD_SRCS) $(DUMPREAD_BASE_SRCS) \
    $(filter-out cli/analyze.c cli/report%,$(ANALYZE_SRCS))
FUZZ_CXX ?= clang++
$(B)/fuzz/jsonread_simdjson.o: cli/jsonread_simdjson.cc cli/jsonread.h cli/jsonread_impl.h \
        cli/jsonread_record.h
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) -std=c++17 -g -O1 -fPIC -fno-exceptions -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr,function \
	    -fno-sanitize-recover=undefined -c $< -o $@
$(B)/fuzz/dumpread_fuzz: $(DUMPREAD_FUZZ_SRCS) $(B)/fuzz/jsonread_simdjson.o $(wildcard cli/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(filter-out -std=c11,$(FUZZ_FLAGS)) -std=c11 -Icli -o $@ $(DUMPREAD_FUZZ_SRCS) \
	    $(B)/fuzz/jsonread_simdjson.o -lstdc++ $(JSON_LIBS) -lpthread -lm

.PHONY: fuzz-smoke-dumpread
fuzz-smoke: fuzz-smoke-dumpread
fuzz-smoke-dumpread: $(B)/fuzz/dumpread_fuzz
	@rm -rf $(B)/fuzz/work-dumpread && mkdir -p $(B)/fuzz/work-dumpread
	$(B)/fuzz/dumpread_fuzz -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 \
	    -max_len=65536 -dict=tests/fuzz/dumpread.dict -print_final_stats=1 \
	    $(B)/fuzz/work-dumpread tests/fuzz/corpus/dumpread
