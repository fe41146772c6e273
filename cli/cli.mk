# The ncclguard command, one folder per concern (cli/README.md); headers are
# included by their path under cli/ (and the shim's under shim/). It links the
# shim's policy and audit sources, compiled a second time for it (default
# visibility, no constructor of the library), and reads dumps with simdjson
# (cli/json/simdjson.cc, the only C++) or jansson.
include shim/policy/policy.mk

JSON_CFLAGS := $(shell pkg-config --cflags jansson simdjson 2>/dev/null)
JSON_LIBS   := $(shell pkg-config --libs jansson simdjson 2>/dev/null || echo -ljansson -lsimdjson)
# Offline symbolization of the dumps' frames (cli/dump/symres.c): elfutils, the command only.
DW_LIBS := $(shell pkg-config --libs libdw 2>/dev/null || echo -ldw -lelf)

# The dump reader (json/ and dump/), shared by the subcommands that read dumps
# (and the tests); its files are opened by shim/base/infile.c, which the shim uses too.
DUMPREAD_SRCS := $(filter-out cli/dump/symres.c,$(wildcard cli/json/*.c cli/dump/*.c))
DUMPREAD_BASE_SRCS := shim/base/infile.c shim/base/outfile.c
DUMPREAD_OBJS := $(DUMPREAD_SRCS:%.c=$(B)/%.o) $(B)/cli/json/simdjson.o \
    $(DUMPREAD_BASE_SRCS:%.c=$(B)/cli/obj/%.o)
# The model and its detectors, and the printers (the Flight Recorder export too).
ANALYZE_SRCS := $(wildcard cli/analyze/*.c cli/render/*.c)
CLI_SRCS := $(wildcard cli/cmd/*.c) $(ANALYZE_SRCS) cli/dump/symres.c

$(CLI_SRCS:%.c=$(B)/%.o) $(DUMPREAD_SRCS:%.c=$(B)/%.o): CFLAGS += -Icli $(JSON_CFLAGS)
CLI_SHIM_SRCS := $(SHIM_POLICY_SRCS) $(wildcard shim/base/*.c)
CLI_OBJS := $(sort $(CLI_SRCS:%.c=$(B)/%.o) $(DUMPREAD_OBJS) $(CLI_SHIM_SRCS:%.c=$(B)/cli/obj/%.o))

$(B)/cli/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# simdjson's On-Demand code is inlined where it is used: -O2 whatever CFLAGS says
# (it is an order of magnitude slower at -O0); no exceptions cross into C.
$(B)/cli/json/simdjson.o: cli/json/simdjson.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g $(WARN) -fPIC -fno-exceptions $(SANFLAGS) -Icli $(JSON_CFLAGS) -MMD -MP \
	    -c $< -o $@

$(B)/ncclguard: $(CLI_OBJS)
	$(CXX) -o $@ $(CLI_OBJS) $(LDFLAGS) -ldl $(JSON_LIBS) $(DW_LIBS)

ALL += $(B)/ncclguard

include bench/policy.mk
