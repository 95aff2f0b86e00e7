"""``bench/bench_idle.py`` names each JVM thread of its by-thread table by what it runs, read from a
``jcmd <pid> Thread.print`` dump: the idle target's measured limit is the Debezium loops this
shows."""

from __future__ import annotations

import subprocess
from types import ModuleType

import pytest
from support.bench_modules import load_bench_module

#: A dump in the layout of JDK 17's ``Thread.print`` (threads and frames made up for the test).
DUMP = """\
2026-12-03 17:00:00
Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6 mixed mode, sharing):

"main" #1 prio=5 os_prio=0 nid=0x10 runnable  [0x0]
   java.lang.Thread.State: RUNNABLE

"Thread-4" #25 daemon prio=5 os_prio=0 nid=0x1bc0 waiting on condition  [0x0]
   java.lang.Thread.State: TIMED_WAITING (parking)
\tat jdk.internal.misc.Unsafe.park(java.base@17.0.15/Native Method)
\t- parking to wait for  <0x00000000ebe18c48> (a java.util.concurrent.locks.ReentrantLock)
\tat java.util.concurrent.LinkedBlockingQueue.poll(java.base@17.0.15/LinkedBlockingQueue.java:460)
\tat org.example.metrics.Collector$Publisher.run(Collector.java:89)
\tat java.lang.Thread.run(java.base@17.0.15/Thread.java:840)

"stream-loop" #26 prio=5 os_prio=0 nid=0x1bc1 waiting on condition  [0x0]
   java.lang.Thread.State: TIMED_WAITING (sleeping)
\tat java.lang.Thread.sleep(java.base@17.0.15/Native Method)
\tat org.example.util.Delay$$Lambda$697/0x00007f8e7b3191b0.sleepWhen(Unknown Source)
\tat org.example.util.Delay.lambda$constant$1(Delay.java:61)
\tat org.example.source.Streaming.processMessages(Streaming.java:274)
\tat org.example.source.Streaming.execute(Streaming.java:120)

"pool-3-thread-1" #27 prio=5 os_prio=0 nid=0x1bc5 waiting on condition  [0x0]
   java.lang.Thread.State: TIMED_WAITING (parking)
\tat jdk.internal.misc.Unsafe.park(java.base@17.0.15/Native Method)
\tat java.util.concurrent.ThreadPoolExecutor.getTask(java.base@17.0.15/ThreadPoolExecutor.java:1061)

"VM Thread" os_prio=0 nid=0x1b6f runnable

JNI global refs: 20, weak refs: 0
"""


@pytest.fixture
def bench_idle(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench_module("bench_idle", monkeypatch)


def test_each_thread_is_named_by_its_two_topmost_frames_outside_the_jdk(bench_idle: ModuleType) -> None:
    owners = bench_idle.thread_owners(DUMP)
    assert owners == {
        0x10: "main",
        0x1BC0: "Thread-4: Collector$Publisher.run",
        0x1BC1: "stream-loop: Delay.lambda$constant$1 < Streaming.processMessages",
        0x1BC5: "pool-3-thread-1",
        0x1B6F: "VM Thread",
    }


def test_a_process_without_a_jvm_is_not_asked(bench_idle: ModuleType) -> None:
    """jcmd attaches by sending SIGQUIT, which would end a process without a JVM: such a process
    is left alone (still running afterwards) and named by nothing."""
    plain = subprocess.Popen(["sleep", "30"])
    try:
        assert bench_idle._java_thread_owners(plain.pid) == {}
        assert plain.poll() is None
    finally:
        plain.kill()
        plain.wait()
