/*
 * test_shim_reported: which record NCCL's profiler plugin takes for a communicator it
 * announces (track/reported.h), from a thread that creates none through the wrappers (a
 * group's or a nonblocking creation's own thread): the wrappers' oldest record of that
 * rank and size not announced yet, whatever the order of the announcements; else one of
 * its own, with NCCL's hash as its id.
 */
#include "check_main.h"
#include "track/comm.h"
#include "track/reported.h"

/* Two records of the wrappers, ranks 0 and 1 of 2 (a process that creates both in a group),
 * announced rank 1 first: each announcement finds its own rank's record. */
NG_TEST(announced_out_of_order)
{
    struct ng_comm *r0 = ncclguard_comm_new(0x1234, 0, 2, 0, NULL);
    struct ng_comm *r1 = ncclguard_comm_new(0x1234, 1, 2, 0, NULL);
    ck_assert(r0 && r1);
    int wrapped = 0;
    ck_assert_ptr_eq(ncclguard_reported_comm(0xabc, 1, 2, NULL, &wrapped), r1);
    ck_assert_int_eq(wrapped, 1);
    ck_assert_ptr_eq(ncclguard_reported_comm(0xabc, 0, 2, NULL, &wrapped), r0);
    ck_assert_int_eq(wrapped, 1);
    ck_assert_int_eq(ng_atomic_load_relaxed(&r0->seen), NG_SEEN_WRAPPERS | NG_SEEN_PLUGIN);
}
END_TEST

/* Another size, or a record already announced: not the wrappers'; a record of its own. */
NG_TEST(no_match_gets_its_own_record)
{
    struct ng_comm *w = ncclguard_comm_new(0x1234, 0, 4, 0, NULL);
    int wrapped = 1;
    struct ng_comm *c = ncclguard_reported_comm(0xabc, 0, 2, NULL, &wrapped);
    ck_assert(c && c != w);
    ck_assert_int_eq(wrapped, 0);
    ck_assert_uint_eq(c->id, 0xabc);
    ck_assert_int_eq(ng_atomic_load_relaxed(&c->seen), NG_SEEN_PLUGIN);
    ck_assert_int_eq(ng_comm_state(c), NG_COMM_READY);
    ck_assert_ptr_eq(ncclguard_reported_comm(0xdef, 0, 4, NULL, &wrapped), w);
    ck_assert_ptr_ne(ncclguard_reported_comm(0xdef, 0, 4, NULL, &wrapped), w); /* announced */
}
END_TEST

int main(void)
{
    return ng_check_run(ng_check_suite("reported", "comms", 30, ng_check_tests(), NULL));
}
