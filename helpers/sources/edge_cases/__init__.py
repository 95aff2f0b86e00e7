"""The CDC edge cases, each scripted once: what is done to a source table on purpose.

Every script of ``docs/cdc-edge-cases.md`` that is a change at the source lives here, one function
per case and engine (:mod:`.postgres`, :mod:`.mariadb`), listed in :data:`.catalogue.EDGE_CASES`.
A script works through an :class:`~.session.EditSession`: it opens connections, marks the points
where what it did so far may be ingested (``sync``), and records which keys it changed and deleted.
Two sessions implement it:

- :class:`~.session.RecordingSession` (``./workbook changes run NAME``, the tests): the changes
  and the statements that made them, nothing more;
- the conformance harness's ``ScenarioContext`` (:mod:`helpers.checks.conformance`), which ingests
  at each sync point into every Silver variant and checks the recorded keys against the source.

The cases that are faults of delivery rather than changes at the source (redelivered or shuffled
Bronze files, a snapshot hand-over, a re-snapshot, a table added to capture) are scripted in the
conformance package, which drives Bronze and capture as well.
"""
