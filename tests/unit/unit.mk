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
$(B)/tests/unit/test_shim_stacks: $(B)/tests/unit/libstacksites.so
$(B)/tests/unit/test_shim_stacks: LDFLAGS += -L$(B)/tests/unit -lstacksites \
    -Wl,-rpath,$(abspath $(B)/tests/unit)

# test_shim_observer drives the observer with the fake driver's streams and
# events (and its test entry points), test_shim_markers the marker pools:
# linked to it, found at run time by rpath.
$(B)/tests/unit/test_shim_observer $(B)/tests/unit/test_shim_markers: $(B)/fakes/libcuda.so.1
$(B)/tests/unit/test_shim_observer $(B)/tests/unit/test_shim_markers: LDFLAGS += \
    -L$(B)/fakes -l:libcuda.so.1 -Wl,-rpath,$(abspath $(B)/fakes)

# test_shim_python fakes an interpreter: its _PyRuntime and type objects must be
# in the dynamic symbol table, where the shim looks for them with dlsym.
$(B)/tests/unit/test_shim_python: LDFLAGS += -rdynamic
