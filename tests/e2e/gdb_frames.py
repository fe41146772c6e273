# gdb -batch -nx -p PID -x gdb_frames.py: one line per thread, "frames TID pc:name ...",
# innermost first, one entry per frame on the stack: inlined frames (which share their
# caller's pc) and the tail-call frames gdb infers from call-site debug info (a
# function that jumped on, whose frame is gone) are left out. The reference of
# tests/e2e/blocked.sh.
import gdb

for thread in gdb.selected_inferior().threads():
    thread.switch()
    frames = []
    frame = gdb.newest_frame()
    while frame is not None:
        if frame.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            frames.append("%x:%s" % (frame.pc(), frame.name() or "?"))
        frame = frame.older()
    print("frames %d %s" % (thread.ptid[1], " ".join(frames)))
