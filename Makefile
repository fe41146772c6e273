# ncclguard build. `make` builds the preloaded library, the ncclguard command,
# the CPU harness (fake libcuda.so.1 and libnccl.so.2) and the test programs.
# `make check` runs every test, `make demo` a 4-rank job under the shim,
# `make bench` the benchmarks, `make mutate` the mutation check.
# SANITIZE=1 builds everything with ASan+UBSan.

CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda /opt/cuda))
NCCL_HOME ?= $(CUDA_HOME)
PREFIX    ?= /usr/local
B         ?= build
# Jobs of the builds that check, demo and tsan start (a -j of your own is
# overridden there).
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)

CUDA_INC := $(firstword $(foreach d,$(CUDA_HOME)/include $(CUDA_HOME)/targets/x86_64-linux/include,\
                $(if $(wildcard $(d)/cuda.h),$(d))))
NCCL_INC := $(firstword $(foreach d,$(NCCL_HOME)/include $(CUDA_INC) /usr/include,\
                $(if $(wildcard $(d)/nccl.h),$(d))))

ifeq ($(filter deps clean format-check,$(MAKECMDGOALS)),)
ifeq ($(CUDA_INC),)
$(error cuda.h not found: set CUDA_HOME to the CUDA install prefix (tried '$(CUDA_HOME)'))
endif
ifeq ($(NCCL_INC),)
$(error nccl.h not found: set NCCL_HOME to the NCCL install prefix (tried '$(NCCL_HOME)' and $(CUDA_INC)))
endif
endif

CC  ?= gcc
CXX ?= g++
WARN     := -Wall -Wextra -Wshadow -Werror
CFLAGS   ?= -O2 -g
# The CUDA and NCCL headers are the system's: their warnings are not ours.
CFLAGS   += -std=c11 -D_GNU_SOURCE $(WARN) -Wmissing-prototypes -fPIC -pthread -Ishim \
            -isystem $(NCCL_INC) -isystem $(CUDA_INC)
LDFLAGS  += -pthread
ifeq ($(SANITIZE),1)
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
ifeq ($(SANITIZE),thread)
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer -Wno-tsan
endif
CFLAGS   += $(SANFLAGS)
LDFLAGS  += $(SANFLAGS)
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

.PHONY: all deps check demo bench install clean tsan mutate format-check
all:

# Every component adds its targets to ALL and its unit-test programs to UNIT_TESTS.
ALL        :=
UNIT_TESTS :=
include shim/shim.mk
include cli/cli.mk
include tests/fakes/fakes.mk
include tests/apps/apps.mk
include tests/unit/unit.mk
include tests/e2e/e2e.mk
include tests/fuzz/fuzz.mk
include bench/bench.mk

all: $(ALL) $(UNIT_TESTS)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

deps:
	@scripts/install-deps

check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@B=$(B) SANITIZE=$(SANITIZE) tests/run

# ThreadSanitizer on the threaded parts: the flight recorder's unit test, and
# jobs with the watchdog polling, in a -fsanitize=thread build of what those run.
tsan: deps
	@$(MAKE) --no-print-directory -j$(JOBS) tsan-targets B=build-tsan SANITIZE=thread
	@B=build-tsan SANITIZE=thread tests/run tsan

# What tests/e2e/tsan.sh runs, and nothing else (it fails on a program missing here).
TSAN_TARGETS = $(B)/libncclguard.so $(APPS_FAKE_LIBS) $(B)/apps/launch $(B)/apps/trainloop \
    $(B)/apps/trainloop_static \
    $(addprefix $(B)/tests/unit/test_shim_,flight observer markers stacks threads output) \
    $(addprefix $(E2E_BIN)/,ring_wrap dump_stall libslowfs.so idle_wakes)
.PHONY: tsan-targets
tsan-targets: $(TSAN_TARGETS)

# The mutation check (tests/mutations/README.md): long, not part of check or CI.
mutate: deps
	@scripts/mutate

# The sources against .clang-format (clang-format 14): lists the files that
# differ and fails when there is one; scripts/format rewrites them.
format-check:
	@scripts/format --check

demo: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@B=$(B) scripts/demo

install: $(B)/libncclguard.so $(B)/ncclguard
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/share/doc/ncclguard/examples
	install -m 0755 $(B)/libncclguard.so $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(B)/ncclguard $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 README.md LICENSE $(wildcard docs/*.md) $(DESTDIR)$(PREFIX)/share/doc/ncclguard/
	install -m 0644 $(wildcard docs/examples/*) $(DESTDIR)$(PREFIX)/share/doc/ncclguard/examples/
	install -d $(DESTDIR)$(PREFIX)/share/ncclguard
	install -m 0755 scripts/deploy/slurm-taskprolog $(DESTDIR)$(PREFIX)/share/ncclguard/
	install -m 0644 scripts/deploy/k8s-pod.yaml $(DESTDIR)$(PREFIX)/share/ncclguard/

clean:
	rm -rf $(B)

-include $(shell find $(B) -name '*.d' 2>/dev/null)
