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
$(B)/tests/unit/test_shim_stacks: private CFLAGS += -DSTACKDL_DIR='"$(abspath $(B)/tests/unit)"'
$(B)/tests/unit/test_shim_stacks: private LDFLAGS += -L$(B)/tests/unit -lstacksites \
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
$(B)/tests/unit/test_shim_observer $(B)/tests/unit/test_shim_markers: private LDFLAGS += \
    -L$(B)/fakes -l:libcuda.so.1 -Wl,-rpath,$(abspath $(B)/fakes)

# Check suites of the analyzer's rules (test_analyze_*.c) and of its printers
# (test_render_*.c, the Flight Recorder export's pickle writer and mapping too:
# test_render_pickle, test_render_fr): small dumps written by the test, read
# through the real reader; linked with the command's objects (cli/cli.mk) but its main.
ANALYZE_TEST_OBJS = $(filter-out $(B)/cli/cmd/main.o,$(CLI_OBJS))
define ANALYZE_TEST
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) $(JSON_CFLAGS) -Icli -c $< -o $@.o
	$(CXX) -o $@ $@.o $(ANALYZE_TEST_OBJS) $(LDFLAGS) $(CHECK_LIBS) -ldl $(JSON_LIBS) $(DW_LIBS) -lm
endef
$(B)/tests/unit/test_analyze_%: tests/unit/test_analyze_%.c tests/unit/check_main.h \
        tests/unit/analyze_dumps.h $(ANALYZE_TEST_OBJS) $(wildcard cli/*/*.h)
	$(ANALYZE_TEST)
$(B)/tests/unit/test_render_%: tests/unit/test_render_%.c tests/unit/check_main.h \
        tests/unit/analyze_dumps.h $(ANALYZE_TEST_OBJS) $(wildcard cli/*/*.h)
	$(ANALYZE_TEST)

UNIT_TESTS += $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(wildcard tests/unit/test_analyze_*.c tests/unit/test_render_*.c))

# Check suites of the JSON layer (cli/json/), over both back ends: the reader's objects.
$(B)/tests/unit/test_json_%: tests/unit/test_json_%.c tests/unit/check_main.h $(DUMPREAD_OBJS) \
        $(wildcard cli/json/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -Icli -c $< -o $@.o
	$(CXX) -o $@ $@.o $(DUMPREAD_OBJS) $(LDFLAGS) $(CHECK_LIBS) $(JSON_LIBS) -lm

UNIT_TESTS += $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(wildcard tests/unit/test_json_*.c))

# test_shim_python fakes an interpreter: its _PyRuntime and type objects must be
# in the dynamic symbol table, where the shim looks for them with dlsym.
$(B)/tests/unit/test_shim_python: private LDFLAGS += -rdynamic

# The site policy's suites (shim/policy/): the real objects, with a log stub that records messages
POLICY_UNIT := $(B)/tests/unit/test_config $(B)/tests/unit/test_config_policy \
    $(B)/tests/unit/test_envaudit

$(POLICY_UNIT): $(B)/tests/unit/%: tests/unit/%.c tests/unit/log_capture.c \
        tests/unit/log_capture.h tests/unit/check_main.h $(POLICY_OBJS) $(POLICY_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CHECK_CFLAGS) -o $@ $< tests/unit/log_capture.c $(POLICY_OBJS) \
	    $(POLICY_TEST_DEPS) $(LDFLAGS) $(CHECK_LIBS) -ldl

UNIT_TESTS += $(POLICY_UNIT)

# The reader's round-trip tool (tests/unit/check_dumpread.py runs it).
$(B)/tests/unit/dumpread_echo: tests/unit/dumpread_echo.c $(DUMPREAD_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icli -o $(B)/tests/unit/dumpread_echo.o -c $<
	$(CXX) -o $@ $(B)/tests/unit/dumpread_echo.o $(DUMPREAD_OBJS) $(LDFLAGS) $(JSON_LIBS)

ALL += $(B)/tests/unit/dumpread_echo
