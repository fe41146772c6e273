# The ncclguard command. It links the shim's policy and audit sources, compiled
# a second time for it (default visibility, no constructor of the library), and
# reads dumps with simdjson (cli/jsonread_simdjson.cc, the only C++) or jansson.
include shim/policy/policy.mk

JSON_CFLAGS := $(shell pkg-config --cflags jansson simdjson 2>/dev/null)
JSON_LIBS   := $(shell pkg-config --libs jansson simdjson 2>/dev/null || echo -ljansson -lsimdjson)

# The dump reader, shared by the subcommands that read dumps (and the tests).
DUMPREAD_SRCS := cli/jsonread.c cli/jsonread_jansson.c cli/dumpread.c cli/dumpread_map.c \
    cli/dumpread_scalar.c cli/dumpread_stack.c cli/dumpdir.c
DUMPREAD_OBJS := $(DUMPREAD_SRCS:%.c=$(B)/%.o) $(B)/cli/jsonread_simdjson.o

ANALYZE_SRCS := cli/intern.c cli/analyze.c cli/analyze_collect.c cli/analyze_fold.c \
    cli/analyze_read.c cli/analyze_where.c cli/analyze_rank.c cli/analyze_hang.c \
    cli/analyze_p2p.c cli/analyze_cmp.c cli/analyze_verdict.c cli/analyze_launcher.c \
    cli/analyze_format.c cli/analyze_summary.c cli/analyze_text.c cli/analyze_json.c \
    cli/report.c

CLI_SRCS := cli/main.c cli/envcheck.c $(ANALYZE_SRCS)
CLI_SHIM_SRCS := $(SHIM_POLICY_SRCS) $(wildcard shim/base/*.c)
CLI_OBJS := $(CLI_SRCS:%.c=$(B)/%.o) $(DUMPREAD_OBJS) $(CLI_SHIM_SRCS:%.c=$(B)/cli/obj/%.o)

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
	$(CXX) -o $@ $(CLI_OBJS) $(LDFLAGS) -ldl $(JSON_LIBS)

ALL += $(B)/ncclguard

-include bench/policy.mk

# The reader's round-trip tool (tests/unit/check_dumpread.py runs it).
$(B)/tests/unit/dumpread_echo: tests/unit/dumpread_echo.c $(DUMPREAD_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icli -o $(B)/tests/unit/dumpread_echo.o -c $<
	$(CXX) -o $@ $(B)/tests/unit/dumpread_echo.o $(DUMPREAD_OBJS) $(LDFLAGS) $(JSON_LIBS)

ALL += $(B)/tests/unit/dumpread_echo
