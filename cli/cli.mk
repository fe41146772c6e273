# The ncclguard command. It links the shim's policy and audit sources, compiled
# a second time for it (default visibility, no constructor of the library).
include shim/policy/policy.mk

CLI_SRCS := cli/main.c
CLI_SRCS += cli/envcheck.c
CLI_SRCS += cli/run.c
CLI_SRCS += cli/dump.c
CLI_SRCS += cli/diagnose.c
CLI_SRCS += cli/trace.c
# jansson reads JSON for the CLI only; the preloaded library stays libc-only.
JANSSON_CFLAGS := $(shell pkg-config --cflags jansson 2>/dev/null)
JANSSON_LIBS := $(or $(shell pkg-config --libs jansson 2>/dev/null),-ljansson)
$(CLI_SRCS:%.c=$(B)/%.o): CFLAGS += $(JANSSON_CFLAGS)
CLI_SHIM_SRCS := $(SHIM_POLICY_SRCS) $(wildcard shim/base/*.c)
CLI_OBJS := $(CLI_SRCS:%.c=$(B)/%.o) $(CLI_SHIM_SRCS:%.c=$(B)/cli/obj/%.o)

$(B)/cli/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(B)/ncclguard: $(CLI_OBJS)
	$(CC) -o $@ $(CLI_OBJS) $(LDFLAGS) -ldl $(JANSSON_LIBS)

ALL += $(B)/ncclguard

-include bench/policy.mk
