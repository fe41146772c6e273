# Site policy: configuration sources, the environment policy applied in the
# constructor, and the NCCL environment audit. Included by shim/shim.mk, which
# links SHIM_POLICY_SRCS into the library, and by cli/cli.mk. Policy code needs
# nothing of the shim but base/ (its unit tests, in tests/unit/unit.mk, replace
# base/log.c with a stub that records messages; its probe is in tests/e2e/e2e.mk,
# its fuzzer in tests/fuzz/fuzz.mk).
ifndef NG_POLICY_MK
NG_POLICY_MK := 1

SHIM_POLICY_SRCS := $(wildcard shim/policy/*.c)
POLICY_OBJS = $(SHIM_POLICY_SRCS:%.c=$(B)/%.o)
# what the policy code needs from the rest of the shim: base/, but the log
POLICY_BASE_SRCS = $(filter-out shim/base/log.c,$(wildcard shim/base/*.c))
POLICY_DEPS = $(POLICY_BASE_SRCS:%.c=$(B)/%.o)
POLICY_TEST_DEPS = $(POLICY_DEPS)

endif
