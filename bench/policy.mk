# `make bench-policy`: what the site policy adds to process start-up, without a
# config file and with docs/examples/site.conf, measured in the same run.
$(B)/bench/policy_startup: bench/policy_startup.c $(POLICY_OBJS) $(POLICY_DEPS) $(B)/shim/base/log.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(POLICY_OBJS) $(POLICY_DEPS) $(B)/shim/base/log.o $(LDFLAGS) -ldl

ALL += $(B)/bench/policy_startup

.PHONY: bench-policy
bench-policy: $(B)/bench/policy_startup $(B)/tests/e2e/policy_probe
	$(B)/bench/policy_startup $(B)/tests/e2e/policy_probe docs/examples/site.conf
