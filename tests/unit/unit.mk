# Check suites of the shim's own modules. They link the shim's objects
# directly (hidden visibility does not matter inside one executable).
$(B)/tests/unit/test_shim_%: tests/unit/test_shim_%.c tests/unit/check_main.h $(SHIM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -o $@ $< $(SHIM_OBJS) $(LDFLAGS) $(CHECK_LIBS) -ldl

UNIT_TESTS += $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(wildcard tests/unit/test_shim_*.c))

# test_shim_stacks calls the stack table from a library of its own (stack_sites.c).
$(B)/tests/unit/libstacksites.so: tests/unit/stack_sites.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fno-optimize-sibling-calls -shared -o $@ $< $(LDFLAGS)
# libstackdl1.so and libstackdl2.so: one call site with frames of two sizes (stack_dl.c),
# its call at the same address in both: built without the sanitizers, whose code differs
# with the frame.
STACKDL_FLAGS = $(filter-out $(SANFLAGS),$(CFLAGS)) -fno-optimize-sibling-calls -shared
$(B)/tests/unit/libstackdl1.so: tests/unit/stack_dl.c
	@mkdir -p $(dir $@)
	$(CC) $(STACKDL_FLAGS) -DPAD=40 -o $@ $< $(filter-out $(SANFLAGS),$(LDFLAGS))
$(B)/tests/unit/libstackdl2.so: tests/unit/stack_dl.c
	@mkdir -p $(dir $@)
	$(CC) $(STACKDL_FLAGS) -DPAD=72 -o $@ $< $(filter-out $(SANFLAGS),$(LDFLAGS))
$(B)/tests/unit/test_shim_stacks: $(B)/tests/unit/libstacksites.so $(B)/tests/unit/libstackdl1.so \
    $(B)/tests/unit/libstackdl2.so
$(B)/tests/unit/test_shim_stacks: CFLAGS += -DSTACKDL_DIR='"$(abspath $(B)/tests/unit)"'
$(B)/tests/unit/test_shim_stacks: LDFLAGS += -L$(B)/tests/unit -lstacksites \
    -Wl,-rpath,$(abspath $(B)/tests/unit)

# test_shim_symbolize names addresses of a library of its own (sym_sites.c: its
# functions in the order of the source), and of a copy of it without .symtab.
$(B)/tests/unit/libsymsites.so: tests/unit/sym_sites.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fno-toplevel-reorder -shared -o $@ $< $(LDFLAGS)
$(B)/tests/unit/libsymsites-stripped.so: $(B)/tests/unit/libsymsites.so
	strip --strip-all -o $@ $<
$(B)/tests/unit/test_shim_symbolize: $(B)/tests/unit/libsymsites.so \
    $(B)/tests/unit/libsymsites-stripped.so

# test_shim_observer drives the observer with the fake driver's streams and
# events (and its test entry points), test_shim_markers the marker pools:
# linked to it, found at run time by rpath.
$(B)/tests/unit/test_shim_observer $(B)/tests/unit/test_shim_markers: $(B)/fakes/libcuda.so.1
$(B)/tests/unit/test_shim_observer $(B)/tests/unit/test_shim_markers: LDFLAGS += \
    -L$(B)/fakes -l:libcuda.so.1 -Wl,-rpath,$(abspath $(B)/fakes)

# Check suites of the analyzer's rules (test_analyze_*.c): small dumps written by the
# test, read through the real reader; linked with the command's objects but its main
# (CLI_OBJS comes later, from cli/cli.mk: the recipe expands it, and the command is
# the prerequisite that builds them).
$(B)/tests/unit/test_analyze_%: tests/unit/test_analyze_%.c tests/unit/check_main.h \
        tests/unit/analyze_dumps.h $(B)/ncclguard $(wildcard cli/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) $(JSON_CFLAGS) -Icli -c $< -o $@.o
	$(CXX) -o $@ $@.o $(filter-out $(B)/cli/main.o,$(CLI_OBJS)) $(LDFLAGS) $(CHECK_LIBS) \
	    -ldl $(JSON_LIBS) $(DW_LIBS) -lm

UNIT_TESTS += $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(wildcard tests/unit/test_analyze_*.c))

# test_shim_python fakes an interpreter: its _PyRuntime and type objects must be
# in the dynamic symbol table, where the shim looks for them with dlsym.
$(B)/tests/unit/test_shim_python: LDFLAGS += -rdynamic
