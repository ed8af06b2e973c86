"""The pure core: the loop detector and what it is made of.

Events in, verdicts out (SPEC §1-§4), with the clock injected: :mod:`._detector` digests each
event and gives it to its judge (:mod:`._judge`), which feeds it to the run's view
(:mod:`._view`, with what the run has seen, :mod:`._novelty`, and its replies,
:mod:`._replies`) and asks the rules (:mod:`._rules`); what a run remembers of its
verdicts is :mod:`._reporting`'s, its events and their replay :mod:`._detector_events`', its
state's versions :mod:`._detector_state`'s. The canonical form, masks and digests of calls,
results and replies (:mod:`._canonical`, :mod:`._masks`, :mod:`._signature`), the configuration
and its sources, the verdicts' wording and the gettext catalogs (:mod:`._messages`), the scope
and the remedy a stop suggests, and the status and inspection values the guards return.

May import: the standard library, ``pydantic`` (the configuration) and ``babel`` (nothing
else: no LangChain, no LangGraph, no other room of this package).
"""
