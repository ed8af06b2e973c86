"""Recording, replay and reporting: what a guard saw, read back and judged again.

The trace format a guard records (``record_to=``) and its readers (:mod:`._trace`,
:mod:`._sources`; which files to read, in which format: :mod:`._files`), a LangSmith export
read as detector events (:mod:`._langsmith`), labelled real runs (:mod:`._trajectories`,
:mod:`._labels`), the replay of any of them through a detector (:mod:`._replay`), its report as
text, JSON or one HTML page (:mod:`._report`, its look :mod:`._report_style`, what it reads of
a report :mod:`._report_drawn`), and the
calibration of a configuration on the user's verdicts (:mod:`._calibrate`).

May import: the standard library and :mod:`langchain_loop_guard._core` (no LangChain, no
LangGraph: a trace is replayed where no agent runs).
"""
