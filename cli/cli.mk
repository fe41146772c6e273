# The ncclguard command. It links the shim's policy and audit sources, compiled
# a second time for it (default visibility, no constructor of the library).
include shim/policy/policy.mk

CLI_SRCS := cli/main.c cli/envcheck.c
CLI_SHIM_SRCS := $(SHIM_POLICY_SRCS) $(wildcard shim/base/*.c)
CLI_OBJS := $(CLI_SRCS:%.c=$(B)/%.o) $(CLI_SHIM_SRCS:%.c=$(B)/cli/obj/%.o)

$(B)/cli/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(B)/ncclguard: $(CLI_OBJS)
	$(CC) -o $@ $(CLI_OBJS) $(LDFLAGS) -ldl

ALL += $(B)/ncclguard

-include bench/policy.mk
